"""What one plan contributes to every estimate: the `EstimateInputs` (instances as `core.Setup`s, SKU, deratings, MTP),
built once per plan and reused across workloads; the concurrency the KV cache and the batch limit allow.

`deployctl.core.sizing.estimate` combines the steps of a context into an estimate; `serving` simulates its serving loop.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deployctl.core.sizing.step import Consts, Setup
from deployctl.core.sizing.estimate_types import Mtp

if TYPE_CHECKING:
    from deployctl.core.models.engine import EngineBase
    from deployctl.core.models.plan import Instance, Plan
    from deployctl.core.sizing.hardware import Sku


@dataclass
class EstimateInputs:
    """What one plan contributes to every estimate (built once, reused across workloads)."""

    plan: Plan
    sku: Sku
    sku_source: str
    consts: Consts
    mtp: Mtp
    setups: dict[str, Setup]
    dies: int
    prefill_batch_tokens: int
    kv_token_bytes: int                   # one token's KV over all layers (what P sends to D)
    notes: list[str] = field(default_factory=list)
    cache: dict = field(default_factory=dict)
    calibration: dict = field(default_factory=dict)     # the user's calibration in use (deployctl calibrate)
    consts_source: str = ""                              # where `consts` come from, for the assumptions

    @property
    def decoder(self) -> Instance:
        return next(i for i in self.plan.instances if i.role in ("mixed", "decode"))

    @property
    def prefiller(self) -> Instance:
        return next(i for i in self.plan.instances if i.role in ("mixed", "prefill"))

    @property
    def decoders(self) -> int:
        """Instances that decode (mixed replicas or D instances): the fleet's load spreads evenly over them."""
        return sum(1 for i in self.plan.instances if i.role in ("mixed", "decode"))

    @property
    def prefillers(self) -> int:
        return sum(1 for i in self.plan.instances if i.role in ("mixed", "prefill"))


def mtp_of(engine: EngineBase) -> tuple[int, str]:
    """MTP drafts named anywhere in the engine settings (vLLM --speculative-config, MindIE plugin_params):
    a value holding 'mtp' and num_speculative_tokens. model.speculative, when set, is read instead (context)."""
    found: list[tuple[int, str]] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if "num_speculative_tokens" in node and "mtp" in json.dumps(node).lower():
                found.append((int(node["num_speculative_tokens"]), path))
                return
            for k, v in node.items():
                walk(v, f"{path}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")
        elif isinstance(node, str) and "mtp" in node.lower():
            m = re.search(r"num_speculative_tokens\W{0,4}(\d+)", node)
            if m:
                found.append((int(m.group(1)), path))

    walk(engine.model_dump(), "engine")
    return found[0] if found else (0, "")


def _setup(plan: Plan, inst: Instance, sku: Sku, drafts: int, accept: float, passes: int) -> Setup:
    from deployctl.core import catalog
    from deployctl.core.input.roles import for_role
    from deployctl.core.sizing.memory import with_kv_cache

    inv = plan.inventory
    d = inst.degrees
    # how the runtime really splits o_proj/lm_head and the role's own KV cache type, as the memory fit asks it
    mem = inv.engine_spec.memory(for_role(inv, inst.role), inst.role, d)
    pods = {plan.node(n).super_pod_id for n in inst.nodes}
    role = getattr(inv.layout, inst.role, None) if inst.role in ("prefill", "decode") else None
    env = {**inv.engine.model_dump().get("env", {}), **(role.env if role is not None else {})}
    dbo = inv.engine_spec.microbatch_overlap(inv.engine, env)[0]   # the engine's two-microbatch overlap
    info = with_kv_cache(catalog.served_model(inv), inv.model.quant, mem)
    return Setup(model=inv.model.name, info=info, quant=inv.model.quant, sku=sku,
                 dies=inst.world_size, dies_per_node=inv.devices_per_node, tp=d.tp, dp=d.dp, pp=d.pp, cp=d.cp, moe_tp=d.moe_tp,
                 moe_ep=d.moe_ep, o_proj_tp=mem.o_proj_tp, lm_head_tp=mem.lm_head_tp,
                 super_pod=inv.cluster.super_pod and len(pods) <= 1,
                 mtp_drafts=drafts if inst.role != "prefill" else 0, mtp_accept=accept,
                 draft_passes=passes if inst.role != "prefill" else 0,
                 microbatches=2 if dbo else 1, dbo_decode_tokens=dbo,
                 extra_expert_slots=inv.engine_spec.redundant_experts(for_role(inv, inst.role))[0]
                 if info.routed_experts else 0)


def context(plan: Plan, sku: str | None = None, consts: Consts | None = None, calibration: dict | None = None) -> EstimateInputs:
    from deployctl.core.models.plan import Degrees
    from deployctl.core.sizing.calibration import fitted_for, fitted_source
    from deployctl.core.sizing.hardware import default_reason, sku_for
    from deployctl.core.sizing.memory import kv_bytes_per_token
    inv = plan.inventory
    given = sku or inv.cluster.sku
    the_sku = sku_for(plan.hardware, given)
    source = (f"given ({sku})" if sku else f"cluster.sku ({given})" if given else
              f"default for {plan.hardware}: {default_reason(plan.hardware)}")
    from deployctl.core.input.roles import for_role

    decoding = "decode" if any(i.role == "decode" for i in plan.instances) else "mixed"
    spec = for_role(inv, decoding).model.speculative        # pd-split: the decode role's drafts (its own tokens)
    drafts, where = ((spec.tokens, f"model.speculative ({spec.method})") if spec is not None
                     else mtp_of(inv.engine))
    from deployctl.core.sizing.speculative import acceptance

    method = spec.method if spec is not None else "mtp"
    accept, accepted, why = acceptance(method, drafts, spec.acceptance if spec is not None else None)
    mtp = Mtp(drafts=drafts, acceptance=accept if drafts else 0.0, accepted_per_step=accepted,
              source=f"{drafts} draft token(s) from {where}; {why}" if drafts else
              "none: model.speculative is not set and the engine settings name no MTP")
    passes = min(drafts, 1) if method == "dflash" else drafts     # DFlash drafts its whole block in one forward
    setups = {i.name: _setup(plan, i, the_sku, drafts, accept, passes) for i in plan.instances}
    user = {}
    if consts is None and calibration is not None:   # the cluster's own calibration (calibration_store.load,
        from deployctl.core.sizing.calibration import label  # read by the command that asks)

        consts = Consts(**calibration["consts"])
        user = {"source": f"{label(calibration)} ({calibration['file']}; `deployctl calibrate --remove` drops it)",
                "user_rms_error": calibration.get("rms_error", 0.0)}
        from deployctl.core.sizing.accuracy import user_mape

        user.update(user_mape(calibration.get("points") or []))
    where = user.get("source") or ("deratings given by the caller" if consts is not None
                                   else fitted_source(inv.engine_spec))
    consts = consts or fitted_for(inv.engine_spec)     # else the engine's own deratings (or the CloudMatrix fit)
    return EstimateInputs(plan=plan, sku=the_sku, sku_source=source, consts=consts, mtp=mtp, setups=setups,
               dies=sum(i.world_size for i in plan.instances), prefill_batch_tokens=_prefill_batch(plan),
               kv_token_bytes=kv_bytes_per_token(setups[_decoder_name(plan)].model_info, inv.model.quant, Degrees()),
               calibration=user,
               consts_source=where)


def _decoder_name(plan: Plan) -> str:
    """The instance whose KV cache holds the running sequences: the decode role's on pd-split."""
    return next((i.name for i in plan.instances if i.role == "decode"), plan.instances[0].name)


def _prefill_batch(plan: Plan) -> int:
    """The prefilling role's batch in tokens (its own layout.prefill.model.max_prefill_tokens on pd-split)."""
    from deployctl.core.input.roles import for_role
    from deployctl.core.sizing.limits import max_prefill_tokens

    role = next(i.role for i in plan.instances if i.role in ("mixed", "prefill"))
    return max_prefill_tokens(for_role(plan.inventory, role), role)


def batch_limit(ctx: EstimateInputs) -> int:
    """The decoding role's max_batch_size (layout.decode.model's on pd-split) per DP group of the decoding
    instance (assumed: one scheduler per DP rank)."""
    from deployctl.core.input.roles import for_role

    limit = for_role(ctx.plan.inventory, ctx.decoder.role).model.max_batch_size
    return limit * ctx.decoder.degrees.dp * ctx.decoders


def kv_concurrency(ctx: EstimateInputs, input_len: int, output_len: int) -> int:
    """Sequences of input + output tokens the decoding instance's KV cache holds (plan memory fit)."""
    inst = ctx.decoder
    return ctx.decoders * inst.degrees.dp * ((inst.memory.max_tokens * inst.degrees.cp) // (input_len + output_len))
