"""The vLLM-Ascend engine spec (engine.kind: vllm-ascend): `vllm serve` per node (internal DP), per DP rank
(external DP, prefill/decode with Mooncake) or across nodes (--nnodes), and the P/D proxy.

Every value comes from vLLM-Ascend's guides, CI configs or its own parser tables (flags/), named next to it
(vllm-project/vllm-ascend at the tags support.yaml names; HEAD = 182b75ea). Submodules are imported when a method
needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from deployctl.core.engine_spec.protocol import EngineSpecBase
from deployctl.core.models.engine_settings import kind_of
from deployctl.core.models.engine_settings.vllm_ascend import VllmAscendSettings as VllmAscendSettingsModel

if TYPE_CHECKING:
    from deployctl.core.engine_spec.protocol import (
        Chart, EngineVersion, Finding, InferProbe, MemoryInputs, MetricNames, MetricsTarget, NodeProcesses,
    )
    from deployctl.core.engine_spec.router import RouterControl, RouterRemote
    from deployctl.core.errors import Problem
    from deployctl.core.input.raw import RawInventory
    from deployctl.core.models.artifact import Artifact
    from deployctl.core.models.engine import EngineBase
    from deployctl.core.models.engine_settings.vllm_ascend import VllmAscendSettings
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Degrees, Plan, PlanNode


class VllmAscendSpec(EngineSpecBase):
    kind = kind_of(VllmAscendSettingsModel)     # named once, by the settings model
    display = "vLLM-Ascend"
    max_servers: int | None = None     # no rank table: no server-count limit of its own
    # engine keys a pd-split role may set over the engine block (layout.<role>.engine): what vLLM-Ascend's PD CI
    # configs set per role (tests/e2e/nightly/multi_node/config/*.yaml: --enforce-eager on prefill,
    # --compilation-config on decode, different additional-config and memory utilisation); netloader: loading
    # weights from a running peer per role, as MindIE-Motor's D2D switch is per role (motor_engine_<role>_config)
    role_keys: tuple[str, ...] = ("args", "additional_config", "gpu_memory_utilization", "netloader")
    needs_device_ips = False   # HCCL builds its communicators from the DP/master address, not a rank table
    # vllm-ascend's compatibility matrix pairs each release with a CANN and a torch_npu (pairing.yaml); Motor 3.1
    # runs vLLM-Ascend instances too
    image_packages = ("torch_npu", "torch", "vllm", "vllm_ascend", "mindie_motor")

    @property
    def perf_deratings(self) -> dict:
        """The step model's deratings for this engine (perf.yaml: fitted on vLLM-Ascend's own published points,
        tests/core/sizing/fit_engine.py), read by deployctl.core.sizing.calibration.fitted_for."""
        from deployctl.core.engines.vllm_ascend.support import perf_deratings

        return perf_deratings()

    @property
    def perf_deratings_source(self) -> str:
        from deployctl.core.engines.vllm_ascend.support import perf_deratings_source

        return perf_deratings_source()

    @property
    def perf_fit_record(self) -> dict:
        """max_error_on_points and source of perf_deratings, for the estimate's `calibration`."""
        from deployctl.core.engines.vllm_ascend.support import perf_fit_record

        return perf_fit_record()

    @property
    def settings(self) -> type[VllmAscendSettings]:
        from deployctl.core.models.engine_settings.vllm_ascend import VllmAscendSettings

        return VllmAscendSettings

    def version(self, inv: Inventory) -> EngineVersion:
        from deployctl.core.engine_spec.protocol import version_from

        return version_from(inv.engine)

    def validate(self, inv: Inventory, raw: RawInventory) -> list[Problem]:
        from deployctl.core.engines.vllm_ascend.validate import engine_problems

        return engine_problems(inv, raw)

    def role_preset(self, inv: Inventory, preset: str, role: str) -> dict | None:
        from deployctl.core.engines.vllm_ascend.support import role_preset

        return role_preset(role) if preset == "pd-split" else None

    def chunked_prefill(self, inv: Inventory) -> bool:
        """vLLM's V1 engine chunks prompts longer than --max-num-batched-tokens: SchedulerConfig.enable_chunked_prefill
        defaults to True and only without it must max_num_batched_tokens cover max_model_len (vllm-project/vllm
        @01230b40 vllm/config/scheduler.py, enable_chunked_prefill / verify_max_model_len; the same in the 0.11 and
        0.13 configs, line numbers there unverified). vllm-ascend's CI runs --max-num-batched-tokens 2048 with
        --max-model-len 40960 (Qwen3-235B-A22B-A2.yaml @182b75ea L31-L32). Off when the args say
        --no-enable-chunked-prefill (engine.args or a role's), and with 0.11's Ascend scheduler unless its own
        enable_chunked_prefill is on (v0.11.0 vllm_ascend/core/schedule_config.py L48, L65-L69)."""
        from deployctl.core.input.roles import ROLES, role_block

        e = cast("VllmAscendSettings", inv.engine)
        blocks: list[dict[str, Any]] = [{"args": e.args, "additional_config": e.additional_config}]
        blocks += [b.engine for b in (role_block(inv, r) for r in ROLES) if b is not None]
        for block in blocks:
            sched = (block.get("additional_config") or {}).get("ascend_scheduler_config") or {}
            if "--no-enable-chunked-prefill" in (block.get("args") or []) or (
                    isinstance(sched, dict) and sched.get("enabled") and not sched.get("enable_chunked_prefill")):
                return False
        return True

    def graph_mode(self, inv: Inventory) -> str:
        """How a role's decode steps run (pass the role's view, roles.for_role): "eager" with --enforce-eager,
        else the --compilation-config's cudagraph_mode in lower case ("full_decode_only", "piecewise", ...), else
        vLLM's default "full_and_piecewise" (CompilationConfig.cudagraph_mode; vllm-ascend's ACLGraph runs it:
        VA docs, unverified line)."""
        import json

        from deployctl.core.engine_spec.args import last_value

        e = cast("VllmAscendSettings", inv.engine)
        if "--enforce-eager" in [str(a) for a in e.args]:
            return "eager"
        try:
            mode = json.loads(last_value(e.args, ("--compilation-config", "-O")) or "{}").get("cudagraph_mode")
        except (ValueError, AttributeError):
            mode = None
        return mode.lower() if isinstance(mode, str) and mode else "full_and_piecewise"

    def redundant_experts(self, inv: Inventory) -> tuple[int, str]:
        """EPLB's redundant expert slots per MoE layer in the (role's) settings: Model Runner V1's
        additional_config.eplb_config.num_redundant_experts, counted when its dynamic_eplb is on
        (vllm-project/vllm-ascend@182b75ea vllm_ascend/ascend_config.py L343, L990-1008), 0.11's flat
        init_redundancy_expert (v0.11.0 ascend_config.py L54-66), or Model Runner V2's upstream flags
        --enable-eplb with --eplb-config {"num_redundant_experts": N} / --eplb-config.num_redundant_experts N
        (docs/source/user_guide/feature_guide/expert_parallelism_load_balancer.md L78-100 there)."""
        from deployctl.core.engines.vllm_ascend.eplb import redundant_experts

        e = cast("VllmAscendSettings", inv.engine)
        return redundant_experts(e.additional_config or {}, [str(a) for a in e.args])

    def prefix_caching(self, inv: Inventory) -> tuple[bool, str]:
        """vLLM's V1 engine caches prompt prefixes by default (CacheConfig.enable_prefix_caching, None -> True for
        the V1 engine: vllm-project/vllm@01230b40 vllm/config/cache.py, line unverified); off with
        --no-enable-prefix-caching in engine.args or a role's."""
        from deployctl.core.input.roles import ROLES, role_block

        e = cast("VllmAscendSettings", inv.engine)
        blocks = [e.args] + [(b.engine or {}).get("args") for b in (role_block(inv, r) for r in ROLES) if b]
        if any("--no-enable-prefix-caching" in (args or []) for args in blocks):
            return False, "--no-enable-prefix-caching in the engine args"
        return True, "vLLM's V1 engine caches prompt prefixes by default (enable_prefix_caching)"

    def microbatch_overlap(self, engine: EngineBase, env: dict | None = None) -> tuple[int, str]:
        """(decode token threshold, where it is set) when the settings turn on two-microbatch overlap, else (0, "")."""
        from deployctl.core.engines.vllm_ascend.overlap import overlap_of

        return overlap_of(engine, env)

    def needs_interfaces(self, inv: Inventory) -> str | None:
        from deployctl.core.engines.vllm_ascend.support import needs_interfaces

        return needs_interfaces(inv)

    def check(self, plan: Plan) -> list[Finding]:
        from deployctl.core.engines.vllm_ascend.netloader import findings as netloader_findings
        from deployctl.core.engines.vllm_ascend.ports import port_findings
        from deployctl.core.engines.vllm_ascend.support import check

        out = check(plan) + netloader_findings(plan)
        if not any(f.level == "error" for f in out):     # the port plan needs a layout that renders
            out += port_findings(plan)
        return out

    def accept(self, plan: Plan) -> list[Finding]:
        return []       # vLLM's own argument checks are not encoded yet

    def memory(self, inv: Inventory, role: str, degrees: Degrees) -> MemoryInputs:
        import dataclasses

        from deployctl.core.engines.vllm_ascend.netloader import memory_notes
        from deployctl.core.engines.vllm_ascend.support import memory_inputs

        mem = memory_inputs(inv, role, degrees)
        return dataclasses.replace(mem, notes=mem.notes + memory_notes(inv))   # engine.netloader's HCCL buffer

    def render(self, plan: Plan) -> list[Artifact]:
        from deployctl.core.engines.vllm_ascend.render import render

        return render(plan)

    def processes(self, plan: Plan, node: PlanNode) -> NodeProcesses:
        from deployctl.core.engines.vllm_ascend.processes import node_processes

        return node_processes(plan, node)

    def router_control(self, plan: Plan, remote: RouterRemote) -> RouterControl | None:
        """Rolling updates of xPyD: the P/D proxy's /instances/remove and /add (None before 0.13)."""
        from deployctl.core.engines.vllm_ascend.control import router_control

        return router_control(plan, remote)

    def router_control_gap(self, plan: Plan) -> str | None:
        """Why no router control (a pd-split on a version whose proxy cannot remove safely), for `watch`."""
        from deployctl.core.engines.vllm_ascend.control import router_control_gap

        return router_control_gap(plan)

    def infer_probe(self, plan: Plan, instance: str) -> InferProbe | str:
        """`watch`'s one-token completion to an idle instance (every role but a layer-wise fed decode)."""
        from deployctl.core.engines.vllm_ascend.probe import infer_probe

        return infer_probe(plan, instance)

    @property
    def metric_names(self) -> MetricNames:
        from deployctl.core.engines.vllm_ascend.processes import METRIC_NAMES

        return METRIC_NAMES

    def metrics_targets(self, plan: Plan) -> list[MetricsTarget]:
        from deployctl.core.engines.vllm_ascend.processes import metrics_targets

        return metrics_targets(plan)

    def host_ports(self, inv: Inventory) -> dict[str, int]:
        from deployctl.core.engines.vllm_ascend.processes import host_ports

        return host_ports(inv)

    def support_rows(self) -> list[dict]:
        from deployctl.core.engines.vllm_ascend.table import support_rows

        return support_rows()

    def support_table(self) -> str:
        from deployctl.core.engines.vllm_ascend.table import markdown_table

        return markdown_table()

    @property
    def chart(self) -> Chart:
        from deployctl.core.engine_spec.protocol import Chart
        from deployctl.core.engines.vllm_ascend.chart import OWNED_VALUES, VllmValues, chart_values

        return Chart(kind=self.kind, block="vllm", block_model=VllmValues, owned_values=OWNED_VALUES, values=chart_values,
                     image="quay.io/ascend/vllm-ascend:v0.13.0")


SPEC = VllmAscendSpec()
