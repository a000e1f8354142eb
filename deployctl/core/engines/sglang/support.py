"""SGLang's support matrix (support.yaml), env presets (env.yaml), memory semantics and layout rules, with sources."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, cast

from deployctl.core.engine_spec.protocol import Finding, MemoryInputs, read_data
from deployctl.core.models.engine_settings.sglang import SglangSettings

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Degrees, Instance, Plan

# --mem-fraction-static is a share of the memory free before the weights load (measured after distributed init:
# sglang 0.5.23 srt/distributed/bootstrap.py L193-212), holding weights and KV pool: the pool is what is free after
# the weights less (1 - fraction) x that first measurement (srt/mem_cache/kv_cache_configurator.py L2990-3061)
MEMORY_SOURCE = ("sglang 0.5.23 srt/distributed/bootstrap.py L193-212, srt/mem_cache/kv_cache_configurator.py "
                 "L2990-3061")


@cache
def matrix() -> dict:
    return read_data(__package__, "support.yaml")


@cache
def presets() -> dict:
    return read_data(__package__, "env.yaml", words_for_booleans=False)


def entry(inv: Inventory) -> tuple[dict, str]:
    """(the model's support entry, its note): the catalog model's, else its checkpoint family's; {} when unlisted."""
    from deployctl.core import catalog

    data = matrix()
    found = data["models"].get(inv.model.name)
    if found is None:
        info = catalog.model_of(inv)
        found = data["families"].get(info.family if info else "", {})
    note = found.get("note", "")
    while "same_as" in found:
        found = data["models"][found["same_as"]]
        note = note or found.get("note", "")
    return found, note


def family(inv: Inventory) -> str:
    from deployctl.core import catalog

    info = catalog.served_model(inv)
    return info.family or ""


def preset_env(inv: Inventory, role: str) -> dict[str, str]:
    from deployctl.core.render.env import env_value

    p = presets()
    out: dict[str, str] = {}
    for layer in (p["common"], p["hardware"].get(inv.cluster.hardware, {}), p["role"].get(role, {}),
                  p["families"].get(family(inv), {})):
        out.update({k: env_value(v) for k, v in layer.items()})
    return out


def is_moe(inv: Inventory) -> bool:
    from deployctl.core import catalog

    return catalog.served_model(inv).routed_experts > 0


def memory_inputs(inv: Inventory, role: str, degrees: Degrees) -> MemoryInputs:
    """The role's --mem-fraction-static, of the memory free before the weights load (MEMORY_SOURCE), and the HCCL
    buffer the DeepEP / HCCL groups take (DEEPEP_HCCL_BUFFSIZE, else HCCL_BUFFSIZE, else 200 MB: sglang 0.5.23
    srt/distributed/parallel_state.py L108-118)."""
    from deployctl.core.render.env import user_env

    e = cast(SglangSettings, inv.engine)
    env = {**preset_env(inv, role), **user_env(inv, role)}
    buff = env.get("DEEPEP_HCCL_BUFFSIZE") or env.get("HCCL_BUFFSIZE") or "200"
    # a pool shorter than --context-length is no refusal: a request is capped at min(context, pool) - 1 tokens
    # (sglang 0.5.23 srt/managers/tp_worker.py L421-425; only an empty pool stops it)
    return MemoryInputs(fraction=e.mem_fraction_static, fraction_name="--mem-fraction-static",
                        comm_buffer_mb=int(float(buff)), fraction_of_free=True, starts_with_short_cache=True,
                        kv_spread_over_cp=False,      # each CP rank keeps whole sequences (CP_KV_SOURCE)
                        notes=("SGLang's --mem-fraction-static is a share of the memory free before the weights "
                               f"load; weights and KV cache live in it, activations and graphs outside "
                               f"({MEMORY_SOURCE})",))


def needs_interfaces(inv: Inventory) -> str | None:
    if len(inv.nodes) == 1:
        return None
    return ("SGLang's multi-node and P/D guides set HCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME to the NIC of the "
            "node's IP on every node (sgl-project/sglang@40946a20 docs/docs/hardware-platforms/ascend-npus/"
            "model-deployment/best-practices/deepseek_r1.mdx L410-411, L459-460)")


def _path(inst: Instance, key: str) -> str:
    return f"layout.{key}" if inst.role == "mixed" else f"layout.{inst.role}.{key}"


# SGLang's attention context parallel: --tp-size is the server's world and --attn-cp-size splits each attention group
# over that many ranks, the attention TP being tp-size / attention DP / attn-cp-size ("The tp_size is the world size,
# not the real tensor parallel size": sglang 0.5.16 srt/server_args.py L5554-5561, L4635-4638); a CP strategy is bound
# only with --enable-prefill-cp and --cp-strategy (srt/layers/cp/base.py L213-224; server_args.py L5535-5538). The
# published run: one DeepSeek-V3.2 prefill server over 2 x A3 with `--tp 32 --enable-prefill-cp --cp-strategy zigzag
# --attn-cp-size 32`.
CP_SOURCE = ("SG@042de61b BP/deepseek_v3_2.mdx L101-134; sglang 0.5.16 srt/server_args.py L4635-4638, L5554-5561, "
             "srt/layers/cp/base.py L213-224")
# ...and each CP rank keeps the whole KV cache of the sequence: the prefill all-gathers every rank's K/V into each
# rank's pool (sglang 0.5.16 srt/layers/utils/cp_utils.py L395-425 cp_allgather_and_save_kv_cache)
CP_KV_SOURCE = "sglang 0.5.16 srt/layers/utils/cp_utils.py L395-425"
CP_ENABLE = ("--enable-prefill-cp", "--enable-prefill-context-parallel", "--enable-nsa-prefill-context-parallel",
             "--enable-dsa-prefill-context-parallel")


def layout_findings(plan: Plan, inst: Instance) -> list[Finding]:
    """What deployctl renders for SGLang: attention TP inside DP-attention groups (--tp-size = tp x dp), on a P/D
    prefill server also inside context-parallel groups (--tp-size = tp x dp x cp, --attn-cp-size cp: CP_SOURCE),
    experts by DeepEP over every rank (--moe-a2a-backend deepep makes ep = tp-size: sglang 0.5.23
    arg_groups/overrides.py L1611-1620) or by TP; no pipeline parallel."""
    d, out = inst.degrees, []
    world = d.tp * d.dp * d.cp
    ranks = "tp x dp x cp" if d.cp > 1 else "tp x dp"
    if d.pp > 1:
        out.append(Finding("error", _path(inst, "pp"), "deployctl renders no pipeline parallel for SGLang",
                           hint="use tp x dp (attention DP) with experts over every rank"))
    if d.cp > 1 and (inst.role != "prefill" or (d.dp > 1 and not is_moe(plan.inventory))):
        out.append(Finding("error", _path(inst, "cp"), "deployctl renders SGLang's context parallel (--attn-cp-size)"
                           " on the prefill servers of a pd-split only, as SGLang's guides run it"
                           + ("" if inst.role == "prefill" else f", not on {inst.role} servers"), CP_SOURCE,
                           hint="keep cp 1 here"))
    if is_moe(plan.inventory) and d.moe_ep > 1 and d.moe_ep != world:
        out.append(Finding("error", _path(inst, "moe_ep"), f"moe_ep={d.moe_ep}: SGLang's DeepEP spans every rank "
                           f"of the server ({ranks} = {world})", "sglang 0.5.23 arg_groups/overrides.py L1611-1620",
                           hint=f"set moe_ep: {world}"))
    if is_moe(plan.inventory) and d.moe_tp > 1 and d.moe_tp != world:
        out.append(Finding("error", _path(inst, "moe_tp"), f"moe_tp={d.moe_tp}: without expert parallel SGLang "
                           f"splits every expert over the whole server ({ranks} = {world})",
                           hint=f"set moe_tp: {world}, or moe_ep: {world}"))
    return out


def check(plan: Plan) -> list[Finding]:
    from deployctl.core.engines.sglang.catalog import RELEASES

    data = matrix()
    inv = plan.inventory
    version = plan.engine.version
    out: list[Finding] = []
    if version not in data["versions"]:
        out.append(Finding("warning", "engine.version", f"SGLang {version or 'unknown'} ({plan.engine.version_source})"
                           f" is not in deployctl's tables (known: {', '.join(RELEASES)}): flags are checked against "
                           "the nearest older release; unverified", hint="set engine.version"))
    found, note = entry(inv)
    if note:
        out.append(Finding("warning", "model.name", note))
    if not found:
        out.append(Finding("warning", "model.name", f"{plan.model_display} is not in SGLang's Ascend support list: "
                           "unverified"))
    else:
        validated = found.get("validated", {})
        if version not in validated:
            seen = "; ".join(f"{v}: {s}" for v, s in validated.items()) or "no published deployment read"
            out.append(Finding("warning", "engine.version", f"{plan.model_display} on SGLang {version}: no published "
                               f"Ascend deployment validates this release (unverified); validated: {seen}"))
        if inv.model.quant not in found.get("quants", []):
            out.append(Finding("error", "model.quant", f"SGLang on Ascend runs {plan.model_display} in "
                               f"{', '.join(found.get('quants', []))}, not {inv.model.quant}",
                               "; ".join(validated.values()) or "SGLang's Ascend model list",
                               hint=f"use quant {found['quants'][0]}" if found.get("quants") else ""))
    spec = inv.model.speculative
    if spec is not None and spec.method not in data["speculative"]:
        out.append(Finding("error", "model.speculative.method", f"deployctl renders no SGLang drafter for "
                           f"{spec.method} (it renders {', '.join(data['speculative'])})",
                           "support.yaml speculative (SGLang's SpeculativeAlgorithm)", hint="use mtp or eagle3"))
    for inst in plan.instances:
        out += layout_findings(plan, inst)
    out += deprecated_findings(plan)
    out += context_findings(plan)
    out += cp_findings(plan)
    if plan.preset == "pd-split":
        prefill, decode = plan.role("prefill"), plan.role("decode")
        if not prefill or not decode:
            out.append(Finding("error", "layout.preset", "a P/D split needs at least one prefill and one decode "
                               "server behind the router", data["pd"]["source"]))
    return out


def deprecated_findings(plan: Plan) -> list[Finding]:
    """A flag of engine.args (or a role's) that the release deprecates still parses (SGLang logs a warning, and a
    later release drops it: flags/*.json `deprecated`, the replacement its Deprecated*Action names)."""
    from deployctl.core.engines.sglang.catalog import deprecated, groups, known
    from deployctl.core.input.roles import ROLES, role_block

    release = known(plan.engine.version)
    blocks = [("engine.args", list(cast(SglangSettings, plan.inventory.engine).args))]
    for role in ROLES:
        block = role_block(plan.inventory, role)
        if block is not None and isinstance((block.engine or {}).get("args"), list):
            blocks.append((f"layout.{role}.engine.args", list(block.engine["args"])))
    out = []
    for path, args in blocks:
        for canon, group in groups(release, args):
            instead = deprecated(release, group[0].partition("=")[0]) if canon else None
            if instead:
                out.append(Finding("warning", path, f"{group[0]} is deprecated in SGLang {release} (it still "
                                   "parses, with a warning; a later release may drop it)",
                                   f"flags/sglang-{release}.json", hint=f"use {instead}"))
    return out


def cp_findings(plan: Plan) -> list[Finding]:
    """Context parallel is the layout's cp (deployctl sizes attention and weights by it), its strategy the role's
    engine.args (CP_SOURCE); each CP rank holds whole sequences' KV cache (CP_KV_SOURCE), which deployctl's memory
    fit counts spread over the cp ranks."""
    from deployctl.core.engines.sglang.catalog import groups, known
    from deployctl.core.input.roles import ROLES, role_block

    release = known(plan.engine.version)
    base = list(cast(SglangSettings, plan.inventory.engine).args)
    own: dict[str, list[str]] = {}
    for role in ROLES:
        block = role_block(plan.inventory, role)
        args = (block.engine or {}).get("args") if block is not None else None
        own[role] = list(args) if isinstance(args, list) else []
    out = []
    for inst in plan.instances:
        if inst.degrees.cp <= 1 or inst.role != "prefill":
            continue
        if not {c for c, _ in groups(release, base + own["prefill"])} & set(CP_ENABLE):
            out.append(Finding("warning", _path(inst, "cp"), f"cp={inst.degrees.cp} renders --attn-cp-size "
                               f"{inst.degrees.cp}, but SGLang binds a context-parallel strategy only with "
                               "--enable-prefill-cp and --cp-strategy", CP_SOURCE, hint="add --enable-prefill-cp, "
                               "--cp-strategy, zigzag (or interleave) to layout.prefill.engine.args"))
        out.append(Finding("note", _path(inst, "cp"), "SGLang's prefill context parallel keeps every sequence's "
                           f"whole KV cache on each of the {inst.degrees.cp} CP ranks: the memory fit counts what one "
                           "rank holds, and cp splits the prefill's work, not its cache", CP_KV_SOURCE))
    return list(dict.fromkeys(out))


CONTEXT_SOURCE = ("sglang 0.5.23 srt/configs/model_config.py L1291-1318 (_derive_context_length), srt/environ.py "
                  "L320; the length from srt/utils/hf_transformers/common.py L668-694")


def context_findings(plan: Plan) -> list[Finding]:
    """--context-length above the length SGLang derives from config.json (its first length key, times the rope
    factor: context_length.py first_key_length) makes SGLang refuse to start, unless
    SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set (CONTEXT_SOURCE); --json-model-override-args may change the
    config it reads. No config.json (a catalog model without checkpoint files): no check."""
    from deployctl.core import catalog
    from deployctl.core.checkpoint.context import json_arg, with_overrides
    from deployctl.core.engines.sglang.context_length import first_key_length
    from deployctl.core.input.roles import for_role
    from deployctl.core.render.env import user_env

    inv = plan.inventory
    model = catalog.model_of(inv)
    if model is None or model.context is None:
        return []
    out = []
    for role in (("prefill", "decode") if plan.preset == "pd-split" else ("mixed",)):
        view = for_role(inv, role) if role != "mixed" else inv
        overrides = json_arg(list(cast(SglangSettings, view.engine).args), "--json-model-override-args")
        derived = first_key_length(with_overrides(model.context, overrides) if overrides else model.context)
        env = {**preset_env(inv, role), **user_env(inv, role)}
        allowed = str(env.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "")).strip().lower() in ("1", "true")
        if view.model.max_seq_len > derived and not allowed:
            out.append(Finding("error", "model.max_seq_len", f"--context-length {view.model.max_seq_len:,} is more "
                               f"than the {derived:,} tokens SGLang derives from the checkpoint's config.json"
                               + ("" if role == "mixed" else f" ({role} servers)") + ": it refuses to start",
                               CONTEXT_SOURCE, hint=f"lower model.max_seq_len to {derived:,}, extend the rope with "
                               "--json-model-override-args in engine.args, or set "
                               "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 in engine.env (SGLang warns that outputs "
                               "past the derived length may be wrong)"))
    return out
