"""The SGLang engine spec (engine.kind: sglang): `python3 -m sglang.launch_server` per node (one server per
instance, over several nodes with --nnodes/--node-rank/--dist-init-addr), prefill/decode over MemFabric, and
SGLang's router in front of a P/D split.

Every value comes from SGLang's Ascend guides, its CI and its own parser tables (flags/), named next to it
(sgl-project/sglang at the commits support.yaml names; the PyPI wheels of the releases catalog.RELEASES lists).
Submodules are imported when a method needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deployctl.core.engine_spec.protocol import EngineSpecBase
from deployctl.core.models.engine_settings import kind_of
from deployctl.core.models.engine_settings.sglang import SglangSettings as SglangSettingsModel

if TYPE_CHECKING:
    from deployctl.core.engine_spec.protocol import (
        Chart, EngineVersion, Finding, MemoryInputs, MetricNames, MetricsTarget, NodeProcesses,
    )
    from deployctl.core.engine_spec.router import RouterControl, RouterRemote
    from deployctl.core.errors import Problem
    from deployctl.core.input.raw import RawInventory
    from deployctl.core.models.artifact import Artifact
    from deployctl.core.models.engine_settings.sglang import SglangSettings
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Degrees, Plan, PlanNode


class SglangSpec(EngineSpecBase):
    kind = kind_of(SglangSettingsModel)
    display = "SGLang"
    max_servers: int | None = None      # no rank table
    # what SGLang's Ascend P/D guides set per role: extra flags (deepep mode, graph sizes, load balancing), the
    # memory share (prefill 0.81, decode 0.75: BP/deepseek_r1.mdx@40946a20 L423, L475), the HTTP port (prefill
    # 8000, decode 8001: L418, L470)
    role_keys: tuple[str, ...] = ("args", "mem_fraction_static", "ports")
    needs_device_ips = False     # HCCL groups come from --dist-init-addr, KV transfer from MemFabric
    image_packages = ("torch_npu", "torch", "sglang", "sglang_router", "memfabric_hybrid")

    @property
    def settings(self) -> type[SglangSettings]:
        from deployctl.core.models.engine_settings.sglang import SglangSettings

        return SglangSettings

    def version(self, inv: Inventory) -> EngineVersion:
        """engine.version, else the image tag: SGLang's tags carry the patch release (`v0.5.18-cann9.0.0-a3`,
        `cann9.0.0-a3-v0.5.16` on quay.io: the version may come last)."""
        import re

        from deployctl.core.engine_spec.protocol import EngineVersion

        e = inv.engine
        if e.version:
            return EngineVersion(e.version, "engine.version")
        tag = e.image.split("@", 1)[0].rsplit("/", 1)[-1].partition(":")[2]
        m = re.search(r"(?:^|-)v(\d+\.\d+\.\d+)", tag)
        if m:
            return EngineVersion(m.group(1), f"image tag {tag}")
        return EngineVersion(None, f"image tag {tag!r} names no version" if tag else "the image has no tag")

    def validate(self, inv: Inventory, raw: RawInventory) -> list[Problem]:
        from deployctl.core.engines.sglang.validate import engine_problems

        return engine_problems(inv, raw)

    def role_preset(self, inv: Inventory, preset: str, role: str) -> dict | None:
        """A P/D role given only its nodes: SGLang's shape (support.yaml pd.role_presets: plain TP on one node,
        attention DP a group a node over several)."""
        from deployctl.core.engines.sglang.support import matrix

        return matrix()["pd"]["role_presets"].get(role) if preset == "pd-split" else None

    def needs_interfaces(self, inv: Inventory) -> str | None:
        from deployctl.core.engines.sglang.support import needs_interfaces

        return needs_interfaces(inv)

    def redundant_experts(self, inv: Inventory) -> tuple[int, str]:
        """--ep-num-redundant-experts N (supported on A2/A3: sgl-project/sglang@041ddabd
        docs/platforms/ascend/ascend_npu_support_features.md, "Expert parallelism"). Pass a role's view
        (roles.for_role): its flags come after the engine's, so the last one wins."""
        from deployctl.core.engine_spec.args import last_value

        value = last_value(inv.engine.model_dump().get("args", []), ("--ep-num-redundant-experts",))
        return (int(value), "--ep-num-redundant-experts") if value and value.isdigit() and int(value) else (0, "")

    def prefix_caching(self, inv: Inventory) -> tuple[bool, str]:
        """SGLang's radix cache reuses prompt prefixes unless --disable-radix-cache (sgl-project/sglang@001067ff
        python/sglang/srt/server_args.py disable_radix_cache, default False, also on A2/A3; line unverified)."""
        from deployctl.core.input.roles import ROLES, role_block

        blocks: list[list[Any]] = [list(inv.engine.model_dump().get("args", []))]
        blocks += [list((b.engine or {}).get("args", [])) for b in (role_block(inv, r) for r in ROLES) if b]
        if any("--disable-radix-cache" in args for args in blocks):
            return False, "--disable-radix-cache in the engine args"
        return True, "SGLang's radix cache (on unless --disable-radix-cache)"

    def chunked_prefill(self, inv: Inventory) -> bool:
        """SGLang chunks prompts longer than --chunked-prefill-size unless it is -1 (the P/D guides' prefill:
        BP/deepseek_r1.mdx@40946a20 L428)."""
        from deployctl.core.input.roles import ROLES, role_block

        blocks: list[list[Any]] = [list(inv.engine.model_dump().get("args", []))]
        blocks += [list((b.engine or {}).get("args", [])) for b in (role_block(inv, r) for r in ROLES) if b]
        from deployctl.core.engine_spec.args import last_value

        return all(last_value(args, ("--chunked-prefill-size",)) != "-1" for args in blocks)

    def runs_prompt_over_prefill_budget(self, inv: Inventory) -> bool:
        """Always: with chunked prefill a long prompt is split into chunks; without it (--chunked-prefill-size -1)
        SGLang admits the first request of a prefill batch whatever its length, --max-prefill-tokens bounding only
        the requests added after it (sglang 0.5.16 srt/managers/schedule_policy.py L1064-1071, L1105-1113: "if the
        can_run_list is empty, always accept the first prefill request"; 0.5.22 L1530-1535: "Without chunking, allow
        the first request even above the input cap"). SGLang's DeepSeek-V3.2 guide runs
        --max-prefill-tokens 68000 for 131,072-token prompts (sgl-project/sglang@042de61b docs/docs/hardware-
        platforms/ascend-npus/model-deployment/best-practices/deepseek_v3_2.mdx L114-115, L220)."""
        return True

    @property
    def perf_deratings(self) -> dict:
        """The step model's deratings for this engine (perf.yaml: fitted on SGLang's own published points,
        docs/performance-model.md "Per-engine deratings")."""
        from deployctl.core.engines.sglang.perf import perf_deratings

        return perf_deratings()

    @property
    def perf_deratings_source(self) -> str:
        from deployctl.core.engines.sglang.perf import perf_deratings_source

        return perf_deratings_source()

    @property
    def perf_fit_record(self) -> dict:
        """max_error_on_points and source of perf_deratings, for the estimate's `calibration`."""
        from deployctl.core.engines.sglang.perf import perf_fit_record

        return perf_fit_record()

    def check(self, plan: Plan) -> list[Finding]:
        from deployctl.core.engines.sglang.support import check

        return check(plan)

    def accept(self, plan: Plan) -> list[Finding]:
        return []

    def memory(self, inv: Inventory, role: str, degrees: Degrees) -> MemoryInputs:
        from deployctl.core.engines.sglang.support import memory_inputs

        return memory_inputs(inv, role, degrees)

    def render(self, plan: Plan) -> list[Artifact]:
        from deployctl.core.engines.sglang.render import render

        return render(plan)

    def processes(self, plan: Plan, node: PlanNode) -> NodeProcesses:
        from deployctl.core.engines.sglang.processes import node_processes

        return node_processes(plan, node)

    def router_control(self, plan: Plan, remote: RouterRemote) -> RouterControl | None:
        """P/D: the router's worker API (GET/POST /workers, DELETE /workers/<id>) takes a server out and back."""
        from deployctl.core.engines.sglang.control import router_control

        return router_control(plan, remote)

    def infer_probe(self, plan: Plan, instance: str) -> str:
        """SGLang needs no probe of `watch`'s own: its /health is itself a one-token generation (processes.py),
        which the watch's health check asks every round, so an engine that cannot infer fails that check."""
        return ("its /health is itself a one-token generation, which the health check of every round asks: an "
                "engine that cannot infer fails that check")

    @property
    def metric_names(self) -> MetricNames:
        from deployctl.core.engines.sglang.processes import METRIC_NAMES

        return METRIC_NAMES

    def metrics_targets(self, plan: Plan) -> list[MetricsTarget]:
        from deployctl.core.engines.sglang.processes import metrics_targets

        return metrics_targets(plan)

    def host_ports(self, inv: Inventory) -> dict[str, int]:
        from deployctl.core.engines.sglang.processes import host_ports

        return host_ports(inv)

    def support_rows(self) -> list[dict]:
        from deployctl.core.engines.sglang.table import support_rows

        return support_rows()

    def support_table(self) -> str:
        from deployctl.core.engines.sglang.table import markdown_table

        return markdown_table()

    @property
    def chart(self) -> Chart:
        from deployctl.core.engine_spec.protocol import Chart
        from deployctl.core.engines.sglang.chart import OWNED_VALUES, SglangValues, chart_values

        return Chart(kind=self.kind, block="sglang", block_model=SglangValues, owned_values=OWNED_VALUES,
                     values=chart_values, image="lmsysorg/sglang:v0.5.18-cann9.0.0-a3")


SPEC = SglangSpec()
