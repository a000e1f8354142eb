"""Plan -> performance estimate: decode TPOT (floor and calibrated), TTFT, throughput, the binding term.

`estimate_plan(plan, workload)` is a thin adapter: it takes the plan's context (`deployctl.core.sizing.perf_context`: each
instance as a `core.Setup` with degrees, dies, SKU, links, MTP) and combines the instances' steps:

* mixed (colocated): the decode step plus the prefills that stall it (new prompts per step x their prefill cost
  at full prefill batches); TTFT = one prompt's prefill on its DP group + half a decode step + M/D/1 queueing;
* pd-split: decode TPOT from the decode instance alone; TTFT = one prompt's prefill + KV transfer P -> D + the
  first decode step (+ queueing on the prefill instance); throughput = min(decode, prefill capacity).

`estimate_point(plan, input_len, output_len, concurrency)` gives the four numbers `deployctl bench` compares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, cast

from deployctl.core.sizing.perf_context import EstimateInputs, batch_limit, context, kv_concurrency, mtp_of  # noqa: F401 (the API)
from deployctl.core.sizing.hardware import Sku
from deployctl.core.sizing.step import LINK_NAMES, Step, link_keys, step
from deployctl.core.sizing.estimate_types import InstanceEstimate, PlanEstimate, StepEstimate, Term, Workload

if TYPE_CHECKING:
    from deployctl.core.engine_spec.protocol import EngineSpec
    from deployctl.core.models.plan import Instance, Plan
    from deployctl.core.sizing.step import Consts

MAX_RHO = 0.95        # queueing formulas stop here (a prefill instance busier than this is the bottleneck)


def _prefill_steps(ctx: EstimateInputs, s_len: int) -> tuple[Step, Step, float]:
    """(one prompt alone on its DP group, a full batch on every group, capacity in prompt tokens/s)."""
    key = ("prefill", s_len)
    if key not in ctx.cache:
        inst = ctx.prefiller
        su = ctx.setups[inst.name]
        n = max(1, ctx.prefill_batch_tokens // s_len)
        one = step(su, "prefill", s_len, s_len, ctx.consts, seqs_group=1, groups_active=1)
        full = step(su, "prefill", n * s_len, s_len, ctx.consts, seqs_group=n)
        ctx.cache[key] = (one, full, su.dp * n * s_len / full.total)
    return ctx.cache[key]


@dataclass
class Numbers:
    concurrency: int
    tpot: float
    tpot_floor: float
    ttft: float
    throughput: float
    limited_by: str
    decode: Step
    stall: float
    prefill_one: Step
    prefill_full: Step
    capacity: float
    ttft_parts: dict[str, float]


def evaluate(ctx: EstimateInputs, s_len: int, out_len: int, conc: int) -> Numbers:
    """The deployment at `conc` concurrent sequences (seconds, tokens/s), spread evenly over its decoding
    instances (the router balances them); prefill capacity adds up over the prefilling instances."""
    dec = ctx.decoder
    sd = ctx.setups[dec.name]
    q, acc = 1 + sd.mtp_drafts, sd.accepted
    per = conc / ctx.decoders             # sequences on one decoding instance
    seqs = per / sd.dp
    st = step(sd, "decode", seqs * q, s_len + out_len / 2, ctx.consts, seqs_group=seqs)
    one, full, cap = _prefill_steps(ctx, s_len)
    if dec.role == "mixed":
        stall = per * (1 + acc) / out_len * s_len / cap       # prompts entering per step x their prefill time
        t_step = st.total + stall
        tpot = t_step / (1 + acc)
        rho = min(stall / t_step, MAX_RHO)
        # a prompt waits for the decode step in flight (when other sequences decode) and for queued prompts
        parts = {"prefill of the prompt": one.total,
                 "decode step in flight": st.total / 2 * max(0.0, per - 1) / max(per, 1.0),
                 "queueing behind other prompts (M/D/1)": rho / (2 * (1 - rho)) * one.total}
        ttft = sum(parts.values())
        thr = conc * out_len / (ttft + out_len * tpot)
        return Numbers(conc, tpot, st.floor / (1 + acc), ttft, thr, "decode", st, stall, one, full, cap, parts)
    _, inter = link_keys(ctx.setups[ctx.prefiller.name])
    from deployctl.core.sizing.hardware import efficiency, links

    ln = links()[inter]
    streams = ctx.prefiller.degrees.cp
    kv = ln.latency_us * 1e-6 + s_len * ctx.kv_token_bytes / (ln.gbps * 1e9 * efficiency()["eta_link"] * streams)
    tpot = st.total / (1 + acc)
    base = one.total + kv + st.total
    cap = cap * ctx.prefillers            # prompt tokens/s over every prefill instance
    ttft, limited, thr = base, "decode", conc * out_len / (base + out_len * tpot)
    wait = 0.0
    for _ in range(3):    # closed loop: the prompt rate depends on TTFT, the queueing on the prompt rate
        rho = thr / out_len * s_len / cap
        if rho >= 1:
            limited, thr = "prefill", cap / s_len * out_len
        wait = min(rho, MAX_RHO) / (2 * (1 - min(rho, MAX_RHO))) * one.total
        ttft = base + wait
        thr = min(conc * out_len / (ttft + out_len * tpot), cap / s_len * out_len)
    parts = {"prefill of the prompt": one.total, f"KV transfer P->D over {LINK_NAMES[inter]}": kv,
             "first decode step": st.total, "queueing on the prefill instance (M/D/1)": wait}
    return Numbers(conc, tpot, st.floor / (1 + acc), ttft, thr, limited, st, 0.0, one, full, cap, parts)


def _terms(st: Step, extra: Sequence[tuple[str, float, str]] = ()) -> tuple[list[Term], float, str]:
    total = st.total + sum(t for _, t, _ in extra)
    parts = {p.name: p for p in st.parts}
    rows = sorted(st.terms() + list(extra), key=lambda t: -t[1])
    out = []
    for name, t, bound in rows:
        p = parts.get(name)
        out.append(Term(name=name, ms=round(t * 1e3, 4), share=round(t / total, 4) if total else 0.0, bound=bound,
                        floor_ms=round(p.floor(cast(Sku, st.sku)) * 1e3, 4) if p else None,
                        bytes=p.bytes if p else st.comm_bytes.get(name), flops=p.flops if p else None))
    top = out[0]
    what = f"{top.name} ({top.bound}-bound)" if top.bound in ("HBM", "compute") else top.name
    return out, total, f"{what} dominates: {top.share:.0%} of the step"


def _step_estimate(st: Step, seqs: float, tokens: float, ctx_len: float,
                   extra: Sequence[tuple[str, float, str]] = ()) -> StepEstimate:
    terms, total, binding = _terms(st, list(extra))
    return StepEstimate(phase=st.phase, sequences_per_die_group=round(seqs, 4), tokens_per_die_group=round(tokens, 4),
                        context=ctx_len, step_ms=round(total * 1e3, 4), floor_ms=round(st.floor * 1e3, 4),
                        terms=terms, binding=binding)


def _assumptions(ctx: EstimateInputs, w: Workload, conc_note: str) -> list[str]:
    inter = {LINK_NAMES[link_keys(s)[1]] for s in ctx.setups.values()}
    moe = any(su.model_info.routed_experts for su in ctx.setups.values())   # a dense model has no expert terms
    out = [
        f"SKU {ctx.sku.key} ({ctx.sku_source})",
        f"concurrency {w.concurrency}: {conc_note}",
        f"decode context = input + output/2 = {w.input_len + w.output_len / 2:g} tokens (mean KV length while "
        "generating)",
        f"MTP: {ctx.mtp.source}",
        *([_routing(ctx) + "; "
           "tokens spread evenly over DP groups; EP groups laid out server by server",
           "EP dispatch/combine as CANN's fused operators, timed on A3 UB (CloudMatrix384 Table 7, DeepEP-Ascend; "
           "HCCS inside an A2 server assumed the same); "
           f"between servers over {'/'.join(sorted(inter))} at 85% of the link; A2 EP over RoCE has no published "
           "Ascend measurement (extrapolated)"] if moe else ["tokens spread evenly over DP groups"]),
        ("two-microbatch overlap (engine settings): communication hidden behind compute in prefill and in decode "
         f"steps above {max(su.dbo_decode_tokens for su in ctx.setups.values())} tokens per DP group"
         if any(su.microbatches > 1 for su in ctx.setups.values()) else
         "no two-microbatch overlap of communication (the engine settings turn none on; docs/performance-model.md "
         "lists the settings that do)"),
        ctx.consts_source,
    ]
    if ctx.plan.preset == "pd-split":
        out.append("pd-split: TTFT = one prompt's prefill + KV transfer P->D + the first decode step, plus M/D/1 "
                   "queueing on the prefill instance; throughput = min(decode, prefill capacity)")
    else:
        out.append(f"colocated prefill stalls decode: new prompts per step x their cost at full batches of "
                   f"{ctx.prefill_batch_tokens} prompt tokens per DP group; TTFT = one prompt alone on its DP group "
                   "+ half a decode step + M/D/1 queueing")
    return out


def _routing(ctx: EstimateInputs) -> str:
    """How the expert terms treat routing: uniform, with the redundant expert slots the engine's EPLB settings add."""
    from deployctl.core.input.roles import for_role

    # the slots each setup already holds (perf_context asked the engine once); the engine names where they are set
    roles = {inst.role: ctx.setups[inst.name].extra_expert_slots for inst in ctx.plan.instances}
    set_ = {role: (n, ctx.plan.engine_spec.redundant_experts(for_role(ctx.plan.inventory, role))[1])
            for role, n in roles.items() if n}
    if not set_:
        return ("routing uniform over the experts, no redundant experts (the engine settings set no EPLB; "
                "docs/performance-model.md names the keys read)")
    which = ", ".join(f"{role} {n} ({where})" for role, (n, where) in sorted(set_.items()))
    return (f"redundant expert slots per MoE layer from the engine's EPLB settings: {which}; they add expert "
            "weights to each die's memory and step, while routing is still taken as uniform (EPLB's rebalancing of "
            "hot experts is not modelled: no published Ascend figure of the imbalance it removes was found)")


def estimate_plan(plan: Plan, workload: Workload, sku: str | None = None, ctx: EstimateInputs | None = None,
                  calibration: dict | None = None) -> PlanEstimate:
    """The estimate of every instance and of the deployment (see the module docstring)."""
    from deployctl.core.sizing.calibration import fitted_for, fitted_record

    ctx = ctx or context(plan, sku, calibration=calibration)
    warnings = list(ctx.notes) + _graph_mode_note(ctx)
    for role in ("mixed", "prefill", "decode"):
        shapes = {(len(i.nodes), i.degrees) for i in plan.role(role)}
        if len(shapes) > 1:
            warnings.append(f"the {role} instances differ in size: the fleet estimate takes the first one's shape "
                            "for all of them (plan each size on its own for its numbers)")
    held, limit = kv_concurrency(ctx, workload.input_len, workload.output_len), batch_limit(ctx)
    if workload.concurrency is not None:
        conc, note = workload.concurrency, "given"
        if conc > held:
            warnings.append(f"concurrency {conc} exceeds the {held} sequences of {workload.input_len}+"
                            f"{workload.output_len} tokens the KV cache holds: the engine would queue or preempt")
    else:
        conc = max(1, min(held, limit))
        note = (f"the KV cache holds {held} sequences of {workload.input_len}+{workload.output_len} tokens "
                f"(plan memory fit), the engine batch limit is {limit} (model.max_batch_size x "
                f"{ctx.decoder.degrees.dp} DP groups{f' x {ctx.decoders} instances' if ctx.decoders > 1 else ''}, assumed "
                "per DP scheduler)")
        if held == 0:
            warnings.append(f"the KV cache holds no sequence of {workload.input_len}+{workload.output_len} tokens; "
                            "estimated at concurrency 1")
    w = workload.model_copy(update={"concurrency": conc})
    n = evaluate(ctx, w.input_len, w.output_len, conc)
    from deployctl.core.sizing.serving import ASSUMPTION as SIM_ASSUMPTION, apply as simulate_serving, client_of

    extra = []
    if w.prefix_hit:
        caches, why = plan.engine_spec.prefix_caching(plan.inventory)
        if caches:
            extra.append(f"prefix cache: {w.prefix_hit:.0%} of each prompt is found cached and not computed again "
                         f"({why}); its KV is still counted per request (shared blocks not deduplicated)")
        else:
            warnings.append(f"a prefix hit rate of {w.prefix_hit:.0%} was given but {plan.engine_spec.display} "
                            f"runs without a prefix cache here ({why}): estimated as if nothing were cached")
            w = w.model_copy(update={"prefix_hit": 0.0})
    if w.request_rate:
        extra.append(f"open loop: {w.request_rate:g} requests/s, {w.arrival} arrivals"
                     + (f", at most {conc} in flight" if workload.concurrency else
                        "; the steady-state terms below are at the concurrency the engine allows"))
    # issue 27: the simulated serving loop
    served = simulate_serving(ctx, n, client_of(w, conc, ceiling=workload.concurrency is not None))
    if n.limited_by == "prefill":
        warnings.append("the prefill instance cannot keep up: throughput is its capacity, TTFT grows with the queue")
    instances = [_instance(ctx, inst, w, n) for inst in plan.instances]
    dec = next(i for i in instances if i.role in ("mixed", "decode"))
    if n.limited_by == "prefill":
        binding = (f"prefill capacity: {n.capacity / w.input_len:.2f} prompts/s of {w.input_len} tokens limit the "
                   f"deployment to {n.throughput:.0f} output tokens/s")
    else:
        binding = cast(StepEstimate, dec.decode).binding   # a mixed or decode instance has its decode step
    c = ctx.consts
    from deployctl.core.sizing.accuracy import accuracy, band

    user = ctx.calibration.get("source")
    error = accuracy(plan.engine_spec.kind if plan.engine_spec.perf_deratings else None, bool(plan.role("prefill")),
                     str(user) if user else None)
    ttft_terms = [Term(name=k, ms=round(v * 1e3, 4), share=round(v / n.ttft, 4) if n.ttft else 0.0,
                       bound="stall" if "queue" in k or "in flight" in k else "link" if "KV" in k else "step")
                  for k, v in n.ttft_parts.items()]
    return PlanEstimate(
        workload=w, sku=ctx.sku.key, sku_source=ctx.sku_source, dies=ctx.dies, ttft_ms=round(n.ttft * 1e3, 3),
        tpot_ms=round(n.tpot * 1e3, 3), tpot_floor_ms=round(n.tpot_floor * 1e3, 3),
        output_tokens_per_s=round(n.throughput, 2), per_die_tokens_per_s=round(n.throughput / ctx.dies, 3),
        ttft_terms=ttft_terms, binding=binding, limited_by=n.limited_by, mtp=ctx.mtp, instances=instances,
        assumptions=_assumptions(ctx, w, note) + [SIM_ASSUMPTION] + extra, warnings=warnings,
        calibration={"k_hbm": c.k_hbm, "k_compute": c.k_compute, "k_prefill": c.k_prefill, "k_fixed": c.k_fixed,
                     "host_ms": c.host_ms, **_fit_record(ctx, fitted_for, fitted_record), **ctx.calibration},
        accuracy=dict(error, band=band(error, {"ttft_ms": n.ttft * 1e3, "tpot_ms": n.tpot * 1e3,
                                              "output_tokens_per_s": n.throughput}, ctx.calibration)), **served)


# the graph modes whose decode steps run as one captured graph (vLLM's FULL_AND_PIECEWISE captures uniform decode
# batches in full, as FULL_DECODE_ONLY does: CUDAGraphMode in vllm/config/compilation.py, line unverified)
FULL_DECODE = {"full_decode", "full_decode_only", "full_and_piecewise", "full"}


def _graph_mode_note(ctx: EstimateInputs) -> list[str]:
    """A warning when the decode role runs another graph mode than the engine's fit points did (no user
    calibration): its host terms were not measured on that mode."""
    from deployctl.core.input.roles import for_role

    spec = ctx.plan.engine_spec
    fitted = str((spec.perf_fit_record or {}).get("graph_mode") or "")
    mode = spec.graph_mode(for_role(ctx.plan.inventory, ctx.decoder.role))
    if not fitted or not mode or ctx.calibration or (mode in FULL_DECODE) == (fitted in FULL_DECODE):
        return []
    seen = str((spec.perf_fit_record or {}).get("graph_mode_evidence") or "")
    return [f"decode runs {mode} here, while {spec.display}'s host-side step costs were fitted on {fitted} runs only "
            "(every published fit point): the per-step cost of this mode is not measured and the estimate is likely "
            f"optimistic{f' ({seen})' if seen else ''}; `deployctl bench` then `deployctl calibrate` measures it"]


def _fit_record(ctx: EstimateInputs, fitted_for: Callable[[EngineSpec], Consts],
                fitted_record: Callable[[EngineSpec], dict]) -> dict:
    """max_error_on_points and source of the deratings in use: the engine's own fit (its engine spec, as
    calibration.fitted_source), or, for deratings the caller gave, only where they came from."""
    spec = ctx.plan.engine_spec
    if ctx.consts == fitted_for(spec):
        return fitted_record(spec)
    return {"source": ctx.consts_source}


def _instance(ctx: EstimateInputs, inst: Instance, w: Workload, n: Numbers) -> InstanceEstimate:
    su = ctx.setups[inst.name]
    intra, inter = link_keys(su)
    base = dict(instance=inst.name, role=inst.role, dies=inst.world_size, link_intra=LINK_NAMES[intra],
                link_inter=LINK_NAMES[inter],
                degrees={k: v for k, v in inst.degrees.model_dump().items() if v is not None})
    if inst.role in ("mixed", "prefill"):
        base["prefill"] = _step_estimate(n.prefill_one, 1, w.input_len, w.input_len)
        base["ttft_ms"] = round(n.prefill_one.total * 1e3, 3)
        base["prefill_tokens_per_s"] = round(n.capacity / (ctx.prefillers if inst.role == "prefill" else 1), 1)
    if inst.role in ("mixed", "decode"):
        seqs = n.concurrency / ctx.decoders / su.dp
        extra = [("colocated prefill stall", n.stall, "stall")] if inst.role == "mixed" else []
        base["decode"] = _step_estimate(n.decode, seqs, seqs * (1 + su.mtp_drafts), w.input_len + w.output_len / 2,
                                        extra)
        base.update(concurrency=n.concurrency, tpot_ms=round(n.tpot * 1e3, 3),
                    tpot_floor_ms=round(n.tpot_floor * 1e3, 3), output_tokens_per_s=round(n.throughput, 2))
        if inst.role == "mixed":
            base["stall_ms_per_step"] = round(n.stall * 1e3, 4)
    return InstanceEstimate(**base)


def default_workload(plan: Plan) -> Workload:
    """The model limits: max_input_len in, max_seq_len - max_input_len out, concurrency from the KV cache."""
    m = plan.inventory.model
    return Workload(input_len=m.max_input_len, output_len=max(1, m.max_seq_len - m.max_input_len))


def estimate_point(plan: Plan, input_len: int, output_len: int, concurrency: int,
                   calibration: dict | None = None, inputs: EstimateInputs | None = None) -> dict:
    """ttft_ms, tpot_ms, output_tokens_per_s (deployment) and per_die_tokens_per_s at one measured point.
    ``inputs``: the plan's EstimateInputs (context(plan, calibration=...)), made once by a caller that asks for
    many points of the same plan (bench), else made here."""
    est = estimate_plan(plan, Workload(input_len=input_len, output_len=output_len, concurrency=concurrency),
                        ctx=inputs if inputs is not None else context(plan, calibration=calibration))
    return {"ttft_ms": est.ttft_ms, "tpot_ms": est.tpot_ms, "output_tokens_per_s": est.output_tokens_per_s,
            "per_die_tokens_per_s": est.per_die_tokens_per_s}


def describe(est: PlanEstimate) -> list[str]:
    """Plain-text lines of an estimate for `deployctl plan` (the caller adds colours); the first says what it is."""
    w = est.workload
    out = [f"estimated (not measured) for {w.input_len} in / {w.output_len} out at concurrency {w.concurrency}, "
           f"SKU {est.sku}: TPOT {est.tpot_ms:.1f} ms (floor {est.tpot_floor_ms:.1f}), TTFT {est.ttft_ms:,.0f} ms, "
           f"{est.output_tokens_per_s:,.0f} output tokens/s ({est.per_die_tokens_per_s:,.1f} per die)",
           f"binding: {est.binding}"]
    from deployctl.core.sizing.serving import describe_line

    out[1:1] = describe_line(est)
    if est.accuracy:
        from deployctl.core.sizing.accuracy import describe as how_far_off

        out[1:1] = how_far_off(est.accuracy)
    alike: dict[tuple, list] = {}        # a fleet's identical instances: one line for all of them
    for inst in est.instances:
        step_ = cast(StepEstimate, inst.decode or inst.prefill)   # every instance has one of them
        alike.setdefault((inst.role, inst.dies, step_.step_ms, tuple(sorted(inst.degrees.items()))), []).append(inst)
    for group in alike.values():
        inst = group[0]
        step_ = cast(StepEstimate, inst.decode or inst.prefill)   # every instance has one of them
        top = ", ".join(f"{t.name} {t.ms:.1f} ms ({t.share:.0%})" for t in step_.terms[:4])
        name = inst.instance if inst.instance == inst.role else f"{inst.instance} ({inst.role})"
        if len(group) > 1:
            listed = ", ".join(i.instance for i in group) if len(group) <= 3 else \
                f"{group[0].instance}, {group[1].instance} .. {group[-1].instance}"
            name = f"{listed} ({len(group)} {inst.role} instances, each)"
        out.append(f"{name} instance, {inst.dies} dies, {inst.link_intra} inside / {inst.link_inter} between servers: "
                   f"{step_.phase} step {step_.step_ms:.1f} ms: {top}")
    out += [f"warning: {x}" for x in est.warnings]
    return out
