"""The parallel-layout rules MindIE's runtimes apply, each with its source (support.yaml `features`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from deployctl.core.engine_spec.protocol import Finding

if TYPE_CHECKING:
    from deployctl.core.models.plan import Instance, Plan


def _feature(name: str, runtime: str) -> dict:
    from deployctl.core.engines.mindie.support import matrix

    return matrix()["features"].get(name, {}).get(runtime, {})


def _path(inst: Instance, key: str) -> str:
    return f"layout.{key}" if inst.role == "mixed" else f"layout.{inst.role}.{key}"


def _alternative(plan: Plan, inst: Instance) -> str:
    """A layout the torch runtime runs on the same servers: attention DP x TP, experts over every device."""
    n, per = len(inst.nodes), plan.inventory.devices_per_node
    return (f"use layout dp-ep (DP{n}xTP{per}, EP{n * per}) on these {n} servers"
            if inst.role == "mixed" else f"set layout.{inst.role}.pp: 1 and moe_ep: {n * per}")


def _torch(plan: Plan, inst: Instance) -> list[Finding]:
    d, out = inst.degrees, []
    if d.pp > 1:
        f = _feature("pp", "torch")
        out.append(Finding("error", _path(inst, "pp"), f"{plan.model_display} runs on MindIE's torch runtime, which has no "
                           f"pipeline parallel: pp={d.pp} would not be applied", f["source"],
                           hint=_alternative(plan, inst)))
    if d.moe_tp * d.moe_ep != inst.world_size:
        f = _feature("moe_world", "torch")
        out.append(Finding("error", _path(inst, "moe_ep"), f"moe_tp x moe_ep = {d.moe_tp}x{d.moe_ep} = "
                           f"{d.moe_tp * d.moe_ep}, but the torch runtime needs the world size "
                           f"{inst.world_size}", f["source"], hint=_alternative(plan, inst)))
    if d.o_proj_tp or d.lm_head_tp:
        f = _feature("local_tp", "torch")
        out.append(Finding("note", _path(inst, "lm_head_tp" if d.lm_head_tp else "o_proj_tp"),
                           "o_proj_tp / lm_head_tp have no effect on the torch runtime (not rendered)", f["source"]))
    return out


def _atb(plan: Plan, inst: Instance) -> list[Finding]:
    d, out = inst.degrees, []
    if d.pp > 1 and d.dp > 1:
        out.append(Finding("error", _path(inst, "dp"), f"pp={d.pp} with dp={d.dp}: the atb runtime refuses pipeline "
                           "and data parallel together", _feature("pp_with_dp", "atb")["source"],
                           hint="use pp with dp: 1 (preset tp-pp) or dp without pp (preset dp-ep)"))
    cp = _feature("cp", "atb")
    if d.cp > cp.get("max", d.cp):
        out.append(Finding("error", _path(inst, "cp"), f"cp={d.cp}: MindIE's atb runtime runs context parallel "
                           f"of at most {cp['max']}", cp["source"], hint="use dp x tp for prefill (preset dp-ep)"))
    if d.lm_head_tp and d.tp > 1:
        out.append(Finding("error", _path(inst, "lm_head_tp"), f"lm_head_tp={d.lm_head_tp} with tp={d.tp}: lm_head "
                           "local TP needs attention tp 1", _feature("lm_head_local_tp_needs_attention_tp1",
                                                                     "atb")["source"],
                           hint="set tp: 1 for this role or drop lm_head_tp"))
    return out


def _partition_up(plan: Plan, inst: Instance) -> list[Finding]:
    """lm_head local TP on a decode needs DP_PARTITION_UP_ENABLE=1 (rendered by the decode preset)."""
    from deployctl.core.engines.mindie.presets import preset_env

    from deployctl.core.render.env import user_env

    if not inst.degrees.lm_head_tp:
        return []
    user = user_env(plan.inventory, inst.role)      # engine.env, then layout.<role>.env
    env = preset_env(plan.hardware, inst.role, user, model=plan.inventory.model.name)
    if env.get("DP_PARTITION_UP_ENABLE") == "1":
        return []
    own = inst.role != "mixed" and "DP_PARTITION_UP_ENABLE" in getattr(plan.inventory.layout, inst.role).env
    return [Finding("error", f"layout.{inst.role}.env.DP_PARTITION_UP_ENABLE" if own else
                    "engine.env.DP_PARTITION_UP_ENABLE" if "DP_PARTITION_UP_ENABLE" in user else
                    _path(inst, "lm_head_tp"),
                    f"lm_head_tp={inst.degrees.lm_head_tp} without DP_PARTITION_UP_ENABLE=1: the atb DeepSeek model "
                    "raises at load", _feature("lm_head_local_tp_needs_dp_partition_up", "atb")["source"],
                    hint="remove DP_PARTITION_UP_ENABLE from engine.env (the decode preset sets it) or drop lm_head_tp")]


def _validated_world(plan: Plan, inst: Instance, entry: dict) -> list[Finding]:
    valid = entry.get("validated_world", {})
    want = valid.get(plan.hardware)
    at_least = valid.get("at_least") == "yes"
    if want is None or plan.preset == "pd-split" or inst.world_size == want or (at_least and inst.world_size > want):
        return []
    size = f"at world size {want} and more" if at_least else f"at world size {want} only"
    return [Finding("warning", _path(inst, "preset") if inst.role == "mixed" else _path(inst, "nodes"),
                    f"{plan.model_display} on {len(inst.nodes)} {plan.hardware.upper()} server(s) (world size "
                    f"{inst.world_size}): upstream validates it {size} (not proven broken either)",
                    valid.get("source", ""))]


def _pd(plan: Plan) -> list[Finding]:
    from deployctl.core.engines.mindie.support import matrix

    pd = matrix()["pd_split"]
    out = []
    if plan.inventory.model.name not in pd["models"]["value"]:
        out.append(Finding("error", "layout.preset", f"MindIE's prefill/decode split with distributed decode is "
                           f"for DeepSeek models only, not {plan.model_display}", pd["models"]["source"],
                           hint="use a colocated layout (dp-ep or single)"))
    if plan.inventory.model.quant.endswith("c8"):
        out.append(Finding("error", "model.quant", "MindIE's multi-node prefill/decode split does not run with "
                           "KV-cache int8", pd["kv_int8"]["source"], hint="use quant w8a8"))
    return out


def layout_findings(plan: Plan) -> list[Finding]:
    from deployctl.core.engines.mindie.support import backend, model_entry

    entry, _ = model_entry(plan.inventory)
    runtime = backend(plan.inventory)
    out = _pd(plan) if plan.preset == "pd-split" else []
    for inst in plan.instances:
        out += _torch(plan, inst) if runtime == "torch" else _atb(plan, inst)
        if runtime == "atb":
            out += _partition_up(plan, inst)
        out += _validated_world(plan, inst, entry)
        if inst.degrees.cp > 1 and inst.degrees.dp > 1:
            out.append(Finding("error", _path(inst, "cp"), f"cp={inst.degrees.cp} with dp={inst.degrees.dp}: MindIE "
                               "refuses context and data parallel together", _feature("cp_with_dp", runtime)["source"],
                               hint="use cp with dp: 1"))
    return out
