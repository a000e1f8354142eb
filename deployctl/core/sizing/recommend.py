"""Rank the layouts of an inventory's servers for an objective (`deployctl recommend`).

Candidates are inventory `layout:` blocks: presets single / tp-pp / dp-ep / pd-split x attention TP x expert TP x
prefill/decode server splits. Each is planned by deployctl's own `plan_layout` (degrees, the engine's support
matrix, memory fit): a candidate that raises there, or whose engine check has an error, is dropped, so nothing the
engine refuses is ever proposed. The rest are estimated (deployctl.core.sizing.estimate) at the largest concurrency that
meets the SLO and ranked by output throughput per die (or of the deployment) within the SLO; when none meets
it, by how close they come.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import Field

from deployctl.core.models.base import Frozen

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Plan
    from deployctl.core.sizing.perf_context import EstimateInputs


class Objective(Frozen):
    input_len: int = Field(gt=0)
    output_len: int = Field(gt=0)
    slo_tpot_ms: float | None = Field(None, gt=0)
    slo_ttft_ms: float | None = Field(None, gt=0)
    maximize: Literal["throughput_per_die", "throughput"] = "throughput_per_die"
    request_rate: float | None = Field(None, gt=0)      # an open-loop load instead of the closed-loop search
    arrival: Literal["poisson", "fixed"] = "poisson"
    prefix_hit: float = Field(0.0, ge=0, lt=1)


class Candidate(Frozen):
    rank: int
    layout: dict[str, Any]                # the inventory `layout:` block to write
    preset: str
    shape: str                            # "dp-ep: attention DP4 x TP8, experts EP32 (4 servers)"
    dies: int
    concurrency: int
    max_concurrency: int                  # sequences of input+output tokens the KV cache holds
    meets_slo: bool
    slo_ratio: float                      # max(TPOT / SLO, TTFT / SLO) at `concurrency`; <= 1 meets
    ttft_ms: float
    tpot_ms: float
    tpot_floor_ms: float
    output_tokens_per_s: float
    per_die_tokens_per_s: float
    binding: str
    top_terms: list[str]                  # the largest terms of the decode step, with their share
    ttft_p90_ms: float | None = None      # the simulated serving loop's p90s (the SLO is judged on them)
    tpot_p90_ms: float | None = None
    engine_warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class Recommendation(Frozen):
    label: Literal["estimated"] = "estimated"
    objective: Objective
    sku: str
    candidates: list[Candidate]
    considered: int
    dropped: dict[str, int]               # why layouts were not proposed -> how many
    notes: list[str] = Field(default_factory=list)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def layouts(inv: Inventory) -> list[dict]:
    """Every layout block worth planning for the inventory's servers (all of them, in inventory order)."""
    from deployctl.core import catalog

    names = [n.name for n in inv.nodes]
    reps = inv.layout.replicas or 1
    if reps > 1:      # a fleet of replicas: the layout of one replica (its share of the servers), kept N times
        names = names[:len(names) // reps]
    n, per = len(names), inv.devices_per_node
    out: list[dict] = []
    if n == 1:
        out.append({"preset": "single"})
    else:
        out.append({"preset": "tp-pp"})
    info = catalog.model_of(inv)
    experts = info.routed_experts if info is not None else 0
    for tp in _divisors(per):
        if not experts and n * per == tp:     # a dense model at DP1 is `single`: the same deployment twice
            continue
        for moe_tp in _divisors(per) if experts else [1]:      # a dense model has no expert split to vary
            lay: dict = {"preset": "dp-ep", "tp": tp}
            if moe_tp > 1:
                lay.update(moe_tp=moe_tp, moe_ep=n * per // moe_tp)
            out.append(lay)

    def expert_tp(servers: int) -> dict:
        """Experts split by TP too when EP over every device would not divide the experts (the smallest such TP)."""
        dev = servers * per
        if not experts or experts % dev == 0:
            return {}
        fit = [t for t in _divisors(per) if dev % t == 0 and experts % (dev // t) == 0]
        return {"moe_tp": fit[0], "moe_ep": dev // fit[0]} if fit else {}

    if reps > 1:
        return [{**lay, "replicas": reps} for lay in out]
    for p in range(1, n):
        for decode_tp in (None, *_divisors(per)):
            decode: dict = {"nodes": names[p:], **expert_tp(n - p)}
            if decode_tp is not None:
                decode["tp"] = decode_tp
            out.append({"preset": "pd-split", "prefill": {"nodes": names[:p], **expert_tp(p)}, "decode": decode})
    return out


def _shape(plan: Plan) -> str:
    """"dp-ep: 1 server: attention DP2 x TP8, experts EP16"; a dense model has no experts: "DP2 x TP4" (two
    copies of the model, TP4 each, data parallel)."""
    from deployctl.core import catalog

    info = catalog.model_of(plan.inventory)
    dense = info is not None and not info.routed_experts
    parts = []
    for inst in plan.instances:
        d = inst.degrees
        attn = " x ".join(f"{k.upper()}{v}" for k, v in (("dp", d.dp), ("tp", d.tp), ("pp", d.pp), ("cp", d.cp))
                          if v > 1) or "TP1"
        who = f"{'' if inst.role == 'mixed' else inst.role + ' '}{len(inst.nodes)} server{'s' if len(inst.nodes) > 1 else ''}"
        if dense:
            copies = f" ({d.dp} copies of the model, TP{d.tp} each)" if d.dp > 1 else ""
            parts.append(f"{who}: {attn}{copies}")
            continue
        moe = " x ".join(f"{k}{v}" for k, v in (("EP", d.moe_ep), ("TP", d.moe_tp)) if v > 1) or "TP1"
        parts.append(f"{who}: attention {attn}, experts {moe}")
    preset = "dp" if dense and plan.preset == "dp-ep" else plan.preset     # no expert parallelism to speak of
    return f"{preset}: " + "; ".join(parts)


@dataclass
class _Scored:
    plan: Any
    layout: dict
    est: Any
    held: int
    meets: bool
    ratio: float
    notes: list[str] = field(default_factory=list)


def _ratio(obj: Objective, ttft: float, tpot: float) -> float:
    r = [tpot * 1e3 / obj.slo_tpot_ms] if obj.slo_tpot_ms else []
    r += [ttft * 1e3 / obj.slo_ttft_ms] if obj.slo_ttft_ms else []
    return max(r, default=0.0)


SLO_PERCENTILE = "p90"      # the SLO holds when the simulated p90 TTFT and p90 TPOT meet it (docs/performance-model.md)


def _operating_point(ctx: EstimateInputs, obj: Objective, cmax: int) -> tuple[int, bool, float]:
    """The largest concurrency <= cmax meeting the SLO (TPOT and TTFT grow with concurrency), else 1; judged on
    the simulated serving loop under the benchmark's closed-loop client (deployctl.core.sizing.serving). With a
    request rate: the rate's open loop with cmax (what the KV cache holds) as its ceiling, judged once."""
    from deployctl.core.sizing.clients import Client
    from deployctl.core.sizing.serving import simulate_plan

    if obj.request_rate:
        s = simulate_plan(ctx, Client(input_len=obj.input_len, output_len=obj.output_len, mode="rate",
                                      rate=obj.request_rate, concurrency=cmax, arrival=obj.arrival,
                                      prefix_hit=obj.prefix_hit))
        # an open loop the layout cannot keep up with has no steady state: its waits grow without bound
        keeps_up = s.throughput >= 0.9 * obj.request_rate * obj.output_len
        r = _ratio(obj, s.ttft[SLO_PERCENTILE], s.tpot[SLO_PERCENTILE])
        return cmax, keeps_up and r <= 1, r if keeps_up else max(r, 1.0 + 1e-9)

    def ratio(c: int) -> float:
        s = simulate_plan(ctx, Client(input_len=obj.input_len, output_len=obj.output_len, concurrency=c,
                                      prefix_hit=obj.prefix_hit))
        return _ratio(obj, s.ttft[SLO_PERCENTILE], s.tpot[SLO_PERCENTILE])

    top = ratio(cmax)
    if top <= 1:
        return cmax, True, top
    low = ratio(1)
    if low > 1:
        return 1, False, low
    lo, hi = 1, cmax          # ratio(lo) <= 1 < ratio(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ratio(mid) <= 1:
            lo = mid
        else:
            hi = mid
    return lo, True, ratio(lo)


def _plan(inv: Inventory, layout: dict) -> tuple[Plan, None] | tuple[None, str]:
    """(plan, None) or (None, why it is dropped)."""
    from deployctl.core.errors import DeployctlError
    from deployctl.core.models.inventory import Layout
    from deployctl.core.sizing.plan import plan_without_hints

    cand = inv.model_copy(update={"layout": Layout.model_validate(layout)})
    try:
        plan = plan_without_hints(cand)
    except DeployctlError as exc:
        text = exc.message.lower()
        why = ("memory" if "memory" in text else "engine refuses" if "does not run" in text else "degrees")
        return None, why
    if any(f.level == "error" for f in cand.engine_spec.check(plan)):
        return None, "engine refuses"
    return plan, None


def recommend_report(inv: Inventory, objective: Objective, sku: str | None = None,
                     calibration: dict | None = None) -> Recommendation:
    from deployctl.core.sizing.estimate import batch_limit, context, estimate_plan, kv_concurrency
    from deployctl.core.sizing.estimate_types import Workload

    dropped: dict[str, int] = {}
    seen: set = set()
    scored: list[_Scored] = []
    the_sku = None
    calibrated = None
    considered = 0
    for layout in layouts(inv):
        considered += 1
        plan, why = _plan(inv, layout)
        if plan is None:
            why = cast(str, why)      # _plan gives its reason with every None plan
            dropped[why] = dropped.get(why, 0) + 1
            continue
        key = tuple((i.role, len(i.nodes), tuple(i.degrees.model_dump().values())) for i in plan.instances)
        if key in seen:
            dropped["same layout as another candidate"] = dropped.get("same layout as another candidate", 0) + 1
            continue
        seen.add(key)
        ctx = context(plan, sku, calibration=calibration)
        the_sku = ctx.sku.key
        calibrated = ctx.calibration.get("source") or calibrated
        held = kv_concurrency(ctx, objective.input_len, objective.output_len)
        if held == 0:
            dropped["KV cache holds no sequence of input+output tokens"] = \
                dropped.get("KV cache holds no sequence of input+output tokens", 0) + 1
            continue
        conc, meets, ratio = _operating_point(ctx, objective, held)
        est = estimate_plan(plan, Workload(input_len=objective.input_len, output_len=objective.output_len,
                                           concurrency=conc, request_rate=objective.request_rate,
                                           arrival=objective.arrival, prefix_hit=objective.prefix_hit), ctx=ctx)
        notes = []
        if conc > batch_limit(ctx):
            dp = plan.instance(ctx.decoder.name).degrees.dp
            notes.append(f"needs model.max_batch_size >= {-(-conc // dp)} ({conc} sequences over {dp} DP groups; "
                         f"the inventory sets {inv.model.max_batch_size})")
        scored.append(_Scored(plan, layout, est, held, meets, ratio, notes))

    metric = (lambda s: s.est.per_die_tokens_per_s) if objective.maximize == "throughput_per_die" else \
        (lambda s: s.est.output_tokens_per_s)
    scored.sort(key=lambda s: (not s.meets, -metric(s) if s.meets else s.ratio, -metric(s)))
    notes = [f"SLO judged on the simulated {SLO_PERCENTILE} of TTFT and TPOT under a closed-loop client "
             "(clients start together, back-to-back requests)" if not objective.request_rate else
             f"SLO judged on the simulated {SLO_PERCENTILE} of TTFT and TPOT at {objective.request_rate:g} "
             f"requests/s ({objective.arrival} arrivals); a layout that cannot sustain the rate misses it"]
    if objective.prefix_hit:
        notes.append(f"{objective.prefix_hit:.0%} of each prompt from the prefix cache (not computed again)")
    if calibrated:
        notes.append(f"deratings {calibrated}")
    if scored and not scored[0].meets:
        notes.append("no layout meets the SLO: ranked by how close each comes (max of TPOT/SLO and TTFT/SLO at "
                     "concurrency 1)")
    if objective.input_len + objective.output_len > inv.model.max_seq_len:
        notes.append(f"input + output = {objective.input_len + objective.output_len} exceeds model.max_seq_len "
                     f"{inv.model.max_seq_len}: the engine refuses such requests")
    cands = [_candidate(i + 1, s) for i, s in enumerate(scored)]
    return Recommendation(objective=objective, sku=the_sku or "", candidates=cands, considered=considered,
                          dropped=dropped, notes=notes)


def _candidate(rank: int, s: _Scored) -> Candidate:
    e = s.est
    dec = next(i for i in e.instances if i.decode is not None)
    top = [f"{t.name} {t.share:.0%}" for t in dec.decode.terms[:3]]
    return Candidate(rank=rank, layout=s.layout, preset=s.plan.preset, shape=_shape(s.plan), dies=e.dies,
                     concurrency=e.workload.concurrency, max_concurrency=s.held, meets_slo=s.meets,
                     slo_ratio=round(s.ratio, 4), ttft_ms=e.ttft_ms, tpot_ms=e.tpot_ms, tpot_floor_ms=e.tpot_floor_ms,
                     output_tokens_per_s=e.output_tokens_per_s, per_die_tokens_per_s=e.per_die_tokens_per_s,
                     binding=e.binding, top_terms=top, engine_warnings=list(s.plan.engine.warnings),
                     ttft_p90_ms=(e.distribution or {}).get("ttft_ms", {}).get("p90"),
                     tpot_p90_ms=(e.distribution or {}).get("tpot_ms", {}).get("p90"),
                     notes=s.notes + e.warnings)


def recommend(inv: Inventory, objective: Objective, sku: str | None = None) -> list[Candidate]:
    """The layouts the engine accepts on these servers, best first (see the module docstring)."""
    return recommend_report(inv, objective, sku).candidates


# --- writing the chosen layout back into the inventory text ---

_TOP_KEY = re.compile(r"^[^\s#-][^:]*:")


def _scalar(v: object) -> str:
    import yaml

    if isinstance(v, str):
        return v if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", v) and yaml.safe_load(v) == v else json.dumps(v)
    return json.dumps(v)


def _flow(v: object) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_flow(x) for x in v) + "]"
    return _scalar(v)


def layout_block(layout: dict, comment: str | None = None) -> str:
    lines = ["layout:"]
    if comment:
        lines += [f"  # {c}" for c in comment.splitlines()]
    lines += [f"  {k}: {_flow(v)}" for k, v in layout.items()]
    return "\n".join(lines) + "\n"


def apply_layout(inventory_text: str, layout: dict, comment: str | None = None) -> str:
    """The inventory text with only its top-level `layout:` block replaced (comments elsewhere kept); the block
    is added before `nodes:` (or at the end) when there is none."""
    import yaml

    lines = inventory_text.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if re.match(r"^layout\s*:", ln)), None)
    block = layout_block(layout, comment)
    if start is None:
        at = next((i for i, ln in enumerate(lines) if re.match(r"^nodes\s*:", ln)), len(lines))
        if at and lines[at - 1].strip():
            block += "\n"
        if lines and not lines[-1].endswith("\n") and at == len(lines):
            lines[-1] += "\n"
        out = "".join(lines[:at] + [block] + lines[at:])
    else:
        end = start + 1
        while end < len(lines) and not _TOP_KEY.match(lines[end]):
            end += 1
        while end - 1 > start and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
            end -= 1       # blank lines and column-0 comments before the next key stay with that key
        out = "".join(lines[:start] + [block] + lines[end:])
    got = yaml.safe_load(out)
    if not isinstance(got, dict) or got.get("layout") != layout:
        raise ValueError("the layout block could not be replaced in this inventory text")
    return out
