"""The MindIE engine spec (engine.kind: mindie): MindIE Service on every node, MindIE-MS for pd-split.

Every rule this driver applies comes from MindIE's or MindIE-MS's own source or docs (Ascend/MindIE-LLM,
Ascend/MindIE-Motor at the commits support.yaml names), named next to it; the support matrix is data (support.yaml).
MindIE's own acceptance checks (every refusal of MindIE-LLM's config manager, per version) are data too
(acceptance.yaml, evaluated by acceptance.py on every rendered config.json and rank table by ``accept(plan)``;
validate/plan/render refuse what MindIE would refuse, docs/engines-mindie-acceptance.md).
Submodules are imported when a method needs them, so loading an inventory stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deployctl.core.engine_spec.protocol import EngineSpecBase, EngineVersion, MemoryInputs, NodeProcesses
from deployctl.core.models.engine_settings import kind_of
from deployctl.core.models.engine_settings.mindie import MindieSettings as MindieSettingsModel

if TYPE_CHECKING:
    from deployctl.core.engine_spec.protocol import Chart, Finding, MetricNames, MetricsTarget
    from deployctl.core.errors import Problem
    from deployctl.core.input.raw import RawInventory
    from deployctl.core.models.artifact import Artifact
    from deployctl.core.models.engine_settings.mindie import MindieSettings
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Degrees, Plan, PlanNode


class MindieSpec(EngineSpecBase):
    kind = kind_of(MindieSettingsModel)     # named once, by the settings model
    display = "MindIE"
    # engine keys a pd-split role may set over the engine block (layout.<role>.engine): each role's config.json
    # (MindIE-Motor's PD samples set maxPrefillBatchSize, maxLinkNum, dpScheduling per role)
    role_keys: tuple[str, ...] = ("config",)
    needs_device_ips = True   # the rank table names every device's IP
    # MindIE Motor 3.1 publishes its pairing (features/preflight/pairing.yaml); torch_npu pairs with CANN
    image_packages = ("torch_npu", "torch", "mindie_motor", "mindie_llm")
    max_servers: int | None = 60     # rank tables of 2-60 servers (hcomm topoinfo_ranktableConcise.cc,
                                     # ranktable_config.cpp)

    @property
    def settings(self) -> type[MindieSettings]:
        from deployctl.core.models.engine_settings.mindie import MindieSettings

        return MindieSettings

    def version(self, inv: Inventory) -> EngineVersion:
        from deployctl.core.engine_spec.protocol import version_from

        return version_from(inv.engine)

    def validate(self, inv: Inventory, raw: RawInventory) -> list[Problem]:
        from deployctl.core.engines.mindie.validate import engine_problems

        return engine_problems(inv, raw)

    def role_preset(self, inv: Inventory, preset: str, role: str) -> dict | None:
        from deployctl.core.engines.mindie.support import role_preset

        return role_preset(inv, role) if preset == "pd-split" else None

    def needs_interfaces(self, inv: Inventory) -> str | None:
        from deployctl.core.engines.mindie.support import needs_interfaces

        return needs_interfaces(inv)

    def check(self, plan: Plan) -> list[Finding]:
        from dataclasses import replace

        from deployctl.core.engines.mindie.rules import layout_findings
        from deployctl.core.engines.mindie.findings import check
        from deployctl.core.engines.mindie.monitor import findings as monitor_findings
        from deployctl.core.engines.mindie.support import expand_source

        return [replace(f, source=expand_source(f.source))
                for f in check(plan) + layout_findings(plan) + monitor_findings(plan)]

    def accept(self, plan: Plan) -> list[Finding]:
        from deployctl.core.engines.mindie.findings import plan_findings

        return plan_findings(plan)

    def memory(self, inv: Inventory, role: str, degrees: Degrees) -> MemoryInputs:
        from deployctl.core.engines.mindie.support import memory_inputs

        return memory_inputs(inv, role, degrees)

    def prefix_caching(self, inv: Inventory) -> tuple[bool, str]:
        """MindIE caches prefixes only with the prefix_cache plugin (ModelConfig plugin_params
        {"plugin_type": "prefix_cache"}; off by default: MindIE-LLM docs, unverified in source here), which
        deployctl does not render: its plugin_params carry MTP only (config.py)."""
        return False, "MindIE's prefix_cache plugin is off by default and deployctl does not render it"

    def render(self, plan: Plan) -> list[Artifact]:
        from deployctl.core.engines.mindie.config import render_configs
        from deployctl.core.engines.mindie.env import render_envs
        from deployctl.core.engines.mindie.ms import render_ms
        from deployctl.core.engines.mindie.ranktable import render_ranktables
        from deployctl.core.engines.mindie.start import render_starts

        out: list[Artifact] = []
        for render in (render_configs, render_envs, render_starts, render_ranktables, render_ms):
            out += render(plan)
        return out

    def processes(self, plan: Plan, node: PlanNode) -> NodeProcesses:
        from deployctl.core.engines.mindie.processes import node_processes

        return node_processes(plan, node)

    @property
    def metric_names(self) -> MetricNames:
        from deployctl.core.engines.mindie.processes import METRIC_NAMES

        return METRIC_NAMES

    def infer_probe(self, plan: Plan, instance: str) -> str:
        """Not probed yet: MindIE-Motor's virtual inference, which `watch`'s probe follows, is for vLLM only
        (docs/dev/scaling-sources.md), and what a MindIE server (or a P/D server behind MindIE-MS's coordinator)
        does with such a request of the watch's own is unverified."""
        return ("not probed yet: what a MindIE server does with a one-token request of the watch's own is "
                "unverified (the upstream probe is for vLLM only)")

    def metrics_targets(self, plan: Plan) -> list[MetricsTarget]:
        from deployctl.core.engines.mindie.processes import metrics_targets

        return metrics_targets(plan)

    def host_ports(self, inv: Inventory) -> dict[str, int]:
        from deployctl.core.engines.mindie.processes import host_ports

        return host_ports(inv)

    def support_rows(self) -> list[dict]:
        from deployctl.core.engines.mindie.table import support_rows

        return support_rows()

    def support_table(self) -> str:
        from deployctl.core.engines.mindie.table import markdown_table

        return markdown_table()

    @property
    def chart(self) -> Chart:
        from deployctl.core.engine_spec.protocol import Chart
        from deployctl.core.engines.mindie.chart_values import OWNED_VALUES, MindieValues
        from deployctl.core.engines.mindie.helm import chart_values

        return Chart(kind=self.kind, block="mindie", block_model=MindieValues, owned_values=OWNED_VALUES, values=chart_values,
                     image="swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie:2.2.RC1-800I-A2-py311-openeuler24.03-lts")


SPEC = MindieSpec()
