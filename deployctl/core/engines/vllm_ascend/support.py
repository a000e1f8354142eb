"""vLLM-Ascend's support matrix (support.yaml) and the layout rules of its launch shapes, with sources."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, cast

from deployctl.core.engine_spec.protocol import Finding, MemoryInputs, read_data
from deployctl.core.models.engine_settings.vllm_ascend import VllmAscendSettings

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Degrees, Instance, Plan


@cache
def matrix() -> dict:
    return read_data(__package__, "support.yaml")


@cache
def perf_deratings() -> dict:
    """perf.yaml's consts (k_hbm, k_compute, k_prefill, k_fixed, host_ms, host_draft_ms)."""
    return dict(read_data(__package__, "perf.yaml")["consts"])


def perf_fit_record() -> dict:
    """perf.yaml's largest error on its fit points (written by tests/core/sizing/fit_engine.py) and the file itself."""
    doc = read_data(__package__, "perf.yaml")
    return {"max_error_on_points": doc["max_error_on_fit_points"], "graph_mode": doc.get("graph_mode", ""),
            "graph_mode_evidence": doc.get("graph_mode_evidence", ""),
            "source": "deployctl/core/engines/vllm_ascend/perf.yaml (tests/core/sizing/fit_engine.py)"}


def perf_deratings_source() -> str:
    """Where perf.yaml's deratings come from, as the estimate's assumptions say it."""
    return (f"deratings fitted on vLLM-Ascend's own published points ({read_data(__package__, 'perf.yaml')['fitted_on']}"
            "; docs/performance-model.md \"Per-engine deratings\", where the check-set errors are)")


def feature(name: str, version: str | None) -> dict:
    from deployctl.core.engines.vllm_ascend.catalog import known

    return matrix()["features"][name].get(known(version), {})


def is_moe(plan: Plan) -> bool:
    from deployctl.core import catalog

    return catalog.served_model(plan.inventory).routed_experts > 0


@cache
def presets() -> dict:
    return read_data(__package__, "env.yaml", words_for_booleans=False)


def preset_env(hardware: str, role: str, model: str, user_env: dict | None = None) -> dict[str, str]:
    from deployctl.core.render.env import env_value

    p = presets()
    out: dict[str, str] = {}
    for layer in (p["common"], p["hardware"].get(hardware, {}), p["role"].get(role, {}),
                  p.get("models", {}).get(model, {}).get(role, {}), user_env or {}):
        out.update({k: env_value(v) for k, v in layer.items()})
    return out


def memory_inputs(inv: Inventory, role: str, degrees: Degrees) -> MemoryInputs:
    from deployctl.core import catalog
    from deployctl.core.engine_spec.protocol import version_from
    from deployctl.core.engines.vllm_ascend.catalog import known
    from deployctl.core.engines.vllm_ascend.dcp import dcp_of
    from deployctl.core.engines.vllm_ascend.kv_cache import c8_bytes

    env = preset_env(inv.cluster.hardware, role, inv.model.name, inv.engine.env)
    e = cast(VllmAscendSettings, inv.engine)
    model = catalog.model_of(inv)
    kv, idx, c8 = c8_bytes(model, known(version_from(e).version), e.additional_config) if model else (None, None, ())
    dcp = dcp_of(list(e.args))     # inv is the role's view: its own args over the engine block's
    split = (f"decode context parallel {dcp}: each rank keeps 1/{dcp} of every token's cache (the indexer key "
             "whole)",) if dcp > 1 else ()
    return MemoryInputs(fraction=e.gpu_memory_utilization, fraction_name="--gpu-memory-utilization",
                        comm_buffer_mb=int(float(env.get("HCCL_BUFFSIZE", "200"))),
                        notes=("vLLM sizes its KV cache from --gpu-memory-utilization of each NPU's HBM", *c8, *split),
                        kv_cache_bytes=kv, indexer_cache_bytes=idx, kv_token_split=dcp)


def role_preset(role: str) -> dict | None:
    return matrix()["role_presets"].get(role)


def _path(inst: Instance, key: str) -> str:
    return f"layout.{key}" if inst.role == "mixed" else f"layout.{inst.role}.{key}"


def _layout(plan: Plan, inst: Instance) -> list[Finding]:
    d, per, out = inst.degrees, plan.inventory.devices_per_node, []
    version = plan.engine.version
    if d.cp > 1:
        out.append(Finding("error", _path(inst, "cp"), "deployctl renders no context parallel for vLLM-Ascend",
                           hint="use dp x tp (preset dp-ep)"))
    if d.o_proj_tp or d.lm_head_tp:
        out.append(Finding("note", _path(inst, "lm_head_tp"), "o_proj_tp / lm_head_tp are MindIE keys; vLLM-Ascend "
                           "takes finegrained_tp_config in engine.additional_config (not rendered from the layout)"))
    if d.pp > 1 and plan.inventory.model.name.startswith("deepseek"):
        out.append(Finding("warning", _path(inst, "pp"), "no vLLM-Ascend guide runs DeepSeek with pipeline parallel; "
                           "the 2-node DeepSeek guides use DP2 x TP8 + EP16 (A2) or DP2 x TP16 (A3)",
                           "vllm-project/vllm-ascend@182b75ea docs/source/tutorials/models/DeepSeek-V3.2.md §5.2, "
                           "DeepSeek-V3.1.md §5.2",
                           hint="use preset dp-ep"))
    if d.pp > 1:
        f = feature("multi_node_tp_pp", version)
        if f.get("value") == "no":
            out.append(Finding("error", _path(inst, "pp"), f"pipeline parallel across nodes needs --nnodes/--node-rank/"
                               f"--master-addr, which vLLM-Ascend {version} does not have", f.get("source", ""),
                               hint="use vllm-ascend 0.13 or later, or layout dp-ep"))
        if d.dp > 1:
            out.append(Finding("error", _path(inst, "dp"), "pp with dp > 1 is not rendered for vLLM-Ascend",
                               hint="use pp with dp: 1 (preset tp-pp) or dp without pp (preset dp-ep)"))
        if d.pp != len(inst.nodes) or d.tp != per:
            out.append(Finding("error", _path(inst, "pp"), f"TP/PP across nodes runs one pipeline stage per server: "
                               f"tp must be {per} and pp the {len(inst.nodes)} servers", hint="use preset tp-pp"))
    elif per % d.tp:
        out.append(Finding("error", _path(inst, "tp"), f"tp={d.tp} does not divide the {per} devices of a server",
                           hint=f"use a divisor of {per}"))
    if is_moe(plan) and d.moe_ep > 1 and d.moe_ep != d.dp * d.tp * d.pp and d.pp == 1:
        out.append(Finding("error", _path(inst, "moe_ep"), f"moe_ep={d.moe_ep}: vLLM's expert parallel spans every "
                           f"rank of the instance (dp x tp = {d.dp * d.tp})",
                           "vLLM --enable-expert-parallel: EP size = DP x TP (vllm-project/vllm@00c1c6a2 "
                           "vllm/model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make)",
                           hint=f"set moe_ep: {d.dp * d.tp}"))
    if is_moe(plan) and d.moe_tp > 1 and d.moe_ep > 1:
        out.append(Finding("error", _path(inst, "moe_tp"), "vLLM-Ascend splits experts by EP or by TP, not both",
                           hint="set moe_tp: 1 (expert parallel) or moe_ep: 1"))
    return out


def needs_interfaces(inv: Inventory) -> str | None:
    if len(inv.nodes) == 1:
        return None
    return ("vLLM-Ascend needs GLOO_SOCKET_IFNAME, TP_SOCKET_IFNAME and HCCL_SOCKET_IFNAME on every node of a "
            "multi-node or P/D deployment (VA tests/e2e/nightly/multi_node/scripts/multi_node_config.py DistEnvBuilder: "
            "the NIC carrying the node's IP; every multi-node tutorial)")


def family_entry(inv: Inventory) -> dict:
    """The support matrix's entry of the inventory's model family ({} for a catalog model or an unlisted family)."""
    return _family_entry(matrix(), inv)


def _family_entry(data: dict, inv: Inventory) -> dict:
    """A model described from its checkpoint (model.config_path): its family's entry (support.yaml families)."""
    from deployctl.core import catalog

    info = catalog.model_of(inv)
    return data.get("families", {}).get(info.family if info else "", {})


def check(plan: Plan) -> list[Finding]:
    data = matrix()
    version = plan.engine.version
    out: list[Finding] = []
    if version is None or version not in data["versions"]:
        out.append(Finding("warning", "engine.version", f"vLLM-Ascend version {version or 'unknown'} "
                           f"({plan.engine.version_source}) is not in the support matrix (known: "
                           f"{', '.join(data['versions'])}): flags are checked against the nearest older table; "
                           "unverified", hint="set engine.version"))
    entry = data["models"].get(plan.inventory.model.name) or _family_entry(data, plan.inventory)
    note = entry.get("note", "")
    if "same_as" in entry:
        entry = data["models"][entry["same_as"]]
    if note:
        out.append(Finding("warning", "model.name", note))
    runs = entry.get("versions", {}).get(version)
    if not entry:
        out.append(Finding("warning", "model.name", f"{plan.model_display} is not in vLLM-Ascend's support matrix: "
                           "unverified"))
    elif runs is None:
        out.append(Finding("warning", "model.name", f"{plan.model_display} on vLLM-Ascend {version}: no guide or CI "
                           "config covers it (unverified)"))
    elif runs["value"] == "no":
        out.append(Finding("error", "model.name", f"vLLM-Ascend {version} does not run {plan.model_display}",
                           runs.get("source", "")))
    if entry and plan.inventory.model.quant not in entry.get("quants", {}):
        out.append(Finding("error", "model.quant", f"vLLM-Ascend runs {plan.model_display} in "
                           f"{', '.join(entry['quants'])}, not {plan.inventory.model.quant}",
                           "VA tutorials (modelslim W8A8 with --quantization ascend, or BF16)",
                           hint=f"use quant {next(iter(entry['quants']))}"))
    if plan.preset == "pd-split" and feature("pd_mooncake", version).get("value") != "yes":
        out.append(Finding("error", "layout.preset", f"no Mooncake prefill/decode split in vLLM-Ascend {version}",
                           feature("pd_mooncake", version).get("source", "")))
    spec = plan.inventory.model.speculative
    methods = data["speculative_methods"].get(version, {})
    if spec is not None and methods and spec.method not in methods.get("methods", []):
        out.append(Finding("error", "model.speculative.method", f"vLLM-Ascend {version} has no {spec.method} "
                           f"drafter (its methods: {', '.join(methods['methods'])})", methods.get("source", ""),
                           hint="use a newer image (dflash: vLLM-Ascend 0.23) or another method"))
    moved = data.get("moved_env", {}).get(version, {})
    for key in sorted(set(plan.inventory.engine.env) & set(moved)):
        m = moved[key]
        out.append(Finding("warning", f"engine.env.{key}", f"vLLM-Ascend {version} reads {key} only while "
                           f"--additional-config has no {m['key']!r} (deprecated by PR #9064)",
                           f"VA vllm_ascend/{m['source']}; ascend_config.py@v0.23.0 L354-365",
                           hint=f"set engine.additional_config.{m['key']} instead"))
    from deployctl.core.engines.vllm_ascend.dcp import DSA_CP_SOURCE, SOURCE, asymmetric, dsa_cp_without_sp

    for role in dsa_cp_without_sp(plan.inventory, version or ""):
        where = "engine" if role == "mixed" else f"layout.{role}.engine"
        out.append(Finding("error", f"{where}.additional_config.enable_dsa_cp", "enable_dsa_cp needs sequence "
                           f"parallel on vLLM-Ascend {version}: the engine refuses to start without it",
                           DSA_CP_SOURCE, hint="also set enable_flashcomm1: true in the same additional_config (or "
                           "VLLM_ASCEND_ENABLE_FLASHCOMM1=1 in its env)"))

    dcp = asymmetric(plan)
    if dcp is not None:
        on = "layout.prefill" if dcp[0] > 1 else "layout.decode"
        out.append(Finding("error", f"{on}.engine.args", f"decode context parallel on one role only (prefill DCP "
                           f"{dcp[0]}, decode DCP {dcp[1]}): {plan.model_display} uses sparse attention, whose KV "
                           "cache moves between roles only when both split it the same way", SOURCE,
                           hint="give --decode-context-parallel-size to both roles' engine.args, or to neither"))
    from deployctl.core.engines.vllm_ascend.max_len import max_len_findings

    hardware, name = plan.inventory.cluster.hardware, plan.inventory.model.name
    out += max_len_findings(plan, lambda role, view: preset_env(hardware, role, name, view.engine.env))
    for inst in plan.instances:
        out += _layout(plan, inst)
    return out       # the driver adds the port plan's findings (ports.py) when the layout renders
