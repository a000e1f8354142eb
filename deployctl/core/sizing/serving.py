"""A plan's serving loop: the simulation (deployctl.core.sizing.simulate) fed with the plan's step model and limits.

`simulate_plan(ctx, client)` turns a `deployctl.core.sizing.estimate.EstimateInputs` into one DP scheduler's `Sched` (token budget
max_prefill_tokens, batch limit max_batch_size, KV cache = the memory fit's max_tokens x CP, chunked prefill for
vLLM-Ascend, separate prefill/decode batches for MindIE, MTP), step times from `deployctl.core.sizing.step.step` with
the plan's (or the user's calibrated) deratings, and for pd-split the prefill side and the KV transfer. The
client's load is split evenly over the decoding DP groups (the router balances them, assumed) and the result is
scaled back to the deployment.

Step times are tabulated, not recomputed per step: decode on a grid of batch sizes (exact up to 8, then every
~25 %), affine in the context between the prompt length and prompt + output (the attention terms are linear in
it); prefill on a grid of token counts; values between grid points are interpolated linearly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deployctl.core.sizing.clients import Client, share
from deployctl.core.sizing.step import step
from deployctl.core.sizing.simulate import PrefillSide, Result, Sched, simulate

if TYPE_CHECKING:
    from typing import Protocol

    from deployctl.core.models.plan import Instance
    from deployctl.core.sizing.estimate_types import PlanEstimate, Workload
    from deployctl.core.sizing.perf_context import EstimateInputs
    from deployctl.core.sizing.step import Consts, Setup

    class SteadyState(Protocol):
        """What `apply` reads and replaces of deployctl.core.sizing.estimate.Numbers (not imported from there:
        estimate imports this module)."""

        concurrency: int
        ttft: float
        tpot: float
        throughput: float
        ttft_parts: dict[str, float]


def _grid(x: float) -> tuple[int, int, float]:
    """Grid points around x (exact up to 8, then a 1.25 ratio) and the interpolation weight of the upper one."""
    if x <= 8:
        lo = int(x)
        return lo, lo + 1, x - lo
    e = math.log(x / 8, 1.25)
    lo = int(8 * 1.25 ** int(e))
    hi = max(lo + 1, int(8 * 1.25 ** (int(e) + 1)))
    return lo, hi, (x - lo) / (hi - lo)


class SimSteps:
    """Step times of one DP group (all groups of the instance assumed equally loaded)."""

    def __init__(self, setup: Setup, consts: Consts, input_len: int, output_len: int, groups_active: int) -> None:
        self.su, self.c = setup, consts
        self.L = input_len
        self.ctx0, self.ctx1 = float(input_len), float(input_len + output_len)
        self.ga = max(1, min(setup.dp, groups_active))
        self._dec: dict[int, tuple[float, float]] = {}
        self._pre: dict[int, float] = {}

    def _decode_at(self, b: int) -> tuple[float, float]:
        if b not in self._dec:
            if b == 0:
                self._dec[b] = (0.0, 0.0)
            else:
                q = 1 + self.su.mtp_drafts
                t0 = step(self.su, "decode", b * q, self.ctx0, self.c, seqs_group=b, groups_active=self.ga).total
                t1 = step(self.su, "decode", b * q, self.ctx1, self.c, seqs_group=b, groups_active=self.ga).total
                slope = (t1 - t0) / (self.ctx1 - self.ctx0) if self.ctx1 > self.ctx0 else 0.0
                self._dec[b] = (t0 - slope * self.ctx0, slope)
        return self._dec[b]

    def decode(self, batch: int, ctx: float) -> float:
        if batch <= 0:
            return 0.0
        lo, hi, w = _grid(batch)
        (a0, s0), (a1, s1) = self._decode_at(lo), self._decode_at(hi)
        return (a0 + s0 * ctx) * (1 - w) + (a1 + s1 * ctx) * w

    def _prefill_at(self, t: int) -> float:
        if t not in self._pre:
            tok = max(t, 1)
            self._pre[t] = step(self.su, "prefill", tok, self.L, self.c, seqs_group=tok / self.L,
                                groups_active=self.ga).total
        return self._pre[t]

    def prefill(self, tokens: float) -> float:
        lo, hi, w = _grid(max(tokens, 1.0))
        return self._prefill_at(lo) * (1 - w) + self._prefill_at(hi) * w

    def mixed(self, batch: int, ctx: float, tokens: float) -> float:
        """A decode step with prefill chunks in it: the weights are read once, so the chunks add their prefill
        time beyond a one-token prefill (assumed; the engines overlap nothing else)."""
        return self.decode(batch, ctx) + max(0.0, self.prefill(tokens) - self._prefill_at(1))


@dataclass
class Served:
    """The simulated deployment: distributions in seconds, throughput in output tokens/s of the deployment."""

    client: Client
    ttft: dict[str, float]
    tpot: dict[str, float]
    e2e: dict[str, float]
    throughput: float
    preemptions: int
    groups: int                           # decoding DP groups the load was spread over
    per_group: Client                     # what one simulated scheduler saw
    result: Result

    def as_dict(self) -> dict:
        ms = {k: {q: round(v * 1e3, 3) for q, v in d.items()} for k, d in
              (("ttft_ms", self.ttft), ("tpot_ms", self.tpot), ("e2e_ms", self.e2e))}
        return dict(ms, output_tokens_per_s=round(self.throughput, 2), preemptions=self.preemptions,
                    simulated_requests_per_group=len(self.result.e2e), groups=self.groups,
                    per_group_concurrency=self.per_group.concurrency, steps=self.result.steps)


def _steps(ctx: EstimateInputs, setup: Setup, client: Client, active: int) -> SimSteps:
    """One step table per setup, lengths and active groups, shared by every client of the plan."""
    key = ("steps", setup, client.input_len, client.output_len, min(setup.dp, active), ctx.consts)
    if key not in ctx.cache:
        ctx.cache[key] = SimSteps(setup, ctx.consts, client.input_len, client.output_len, active)
    return ctx.cache[key]


def sched_of(ctx: EstimateInputs, inst: Instance) -> Sched:
    """The limits of one of the instance's DP schedulers: its role's max_prefill_tokens and max_batch_size
    (layout.<role>.model over model), its KV cache, whether the engine mixes prefill chunks into decode steps (its
    driver's chunked_prefill), MTP."""
    from deployctl.core.input.roles import for_role
    from deployctl.core.sizing.limits import max_prefill_tokens

    inv = for_role(ctx.plan.inventory, inst.role)
    su = ctx.setups[inst.name]
    return Sched(token_budget=max_prefill_tokens(inv), max_batch=inv.model.max_batch_size,
                 kv_tokens=float(inst.memory.max_tokens * inst.degrees.cp),
                 chunked=inv.engine_spec.chunked_prefill(inv), drafts=su.mtp_drafts, accepted=su.accepted)


def simulate_plan(ctx: EstimateInputs, client: Client) -> Served:
    """The deployment of `ctx` (deployctl.core.sizing.estimate.context) under `client`, cached per client."""
    key = ("served", client)
    if key in ctx.cache:
        return ctx.cache[key]
    dec = ctx.decoder
    sd = ctx.setups[dec.name]
    groups = ctx.decoders * sd.dp
    load = client.concurrency if client.mode == "concurrency" else client.rate * 1e9
    # a rate client's concurrency ceiling also bounds the groups it keeps busy (1 in flight reaches one group)
    used = int(min(groups, load if client.mode == "concurrency" else client.concurrency or groups))
    used = max(1, used)
    mine = share(client, used)
    per_instance = max(1, math.ceil(used / ctx.decoders))
    steps = _steps(ctx, sd, client, per_instance)
    pside = None
    if dec.role == "decode":
        pside = _prefill_side(ctx, client, used)
    res = simulate(mine, sched_of(ctx, dec), steps, pside)
    scale = used * (client.concurrency / (mine.concurrency * used) if client.mode == "concurrency" else 1.0)
    out = Served(client=client, ttft=res.dist("ttft"), tpot=res.dist("tpot"), e2e=res.dist("e2e"),
                 throughput=res.throughput * scale, preemptions=res.preemptions, groups=used, per_group=mine,
                 result=res)
    ctx.cache[key] = out
    return out


def _prefill_side(ctx: EstimateInputs, client: Client, used: int) -> PrefillSide:
    """pd-split: the prefill groups shared by the `used` decoding groups, the KV transfer as
    deployctl.core.sizing.estimate counts it (link latency + prompt KV bytes over the link between the instances)."""
    from deployctl.core.sizing.step import link_keys
    from deployctl.core.sizing.hardware import efficiency, links

    pre = ctx.prefiller
    sp = ctx.setups[pre.name]
    ln = links()[link_keys(sp)[1]]
    per_token = ctx.kv_token_bytes / (ln.gbps * 1e9 * efficiency()["eta_link"] * pre.degrees.cp)
    busy = sp.dp if client.mode == "rate" else math.ceil(client.concurrency / ctx.prefillers)
    steps = _steps(ctx, sp, client, busy)
    return PrefillSide(steps=steps, sched=sched_of(ctx, pre), servers=ctx.prefillers * sp.dp / used,
                       transfer_s=ln.latency_us * 1e-6, transfer_s_per_token=per_token)


ASSUMPTION = ("TTFT, TPOT and throughput are the p50s and throughput of a simulated serving loop per DP scheduler "
              "(deployctl.core.sizing.simulate) under a closed-loop client at this concurrency, all clients starting "
              "together as the benchmark tools do (or an open loop at --request-rate); the load is spread evenly over the DP groups; the queueing terms "
              "above are replaced by it (distribution.steady_state keeps them)")


def client_of(w: Workload, concurrency: int, ceiling: bool) -> Client:
    """The simulated client of a workload: closed loop at `concurrency`, or its request rate (Poisson or evenly
    spaced) with `concurrency` as a ceiling when the user gave one (`ceiling`)."""
    if w.request_rate:
        return Client(input_len=w.input_len, output_len=w.output_len, mode="rate", rate=w.request_rate,
                      concurrency=concurrency if ceiling else 0, arrival=w.arrival, prefix_hit=w.prefix_hit)
    return Client(input_len=w.input_len, output_len=w.output_len, concurrency=concurrency, prefix_hit=w.prefix_hit)


def apply(ctx: EstimateInputs, n: SteadyState, client: Client) -> dict:
    """Replace the steady-state TTFT, TPOT and throughput of `n` (deployctl.core.sizing.estimate.Numbers) by the simulated
    medians and throughput under the benchmark's client (`client_of`: closed loop at n.concurrency with a
    simultaneous start, or an open loop at the request rate); the TTFT parts keep the analytical prefill /
    transfer / first step and the rest becomes the simulated wait. Returns {"distribution", "client"}."""
    s = simulate_plan(ctx, client)
    if len(s.result.e2e) < s.per_group.total_requests:
        # a request the KV cache cannot hold never completes: keep the steady-state numbers, say why
        return {"distribution": {"note": f"not simulated: {s.per_group.total_requests - len(s.result.e2e)} of "
                                         f"{s.per_group.total_requests} requests never fit the KV cache of a DP "
                                         "group; the numbers are the steady-state formulas'"},
                "client": client.describe()}
    steady = {"ttft_ms": round(n.ttft * 1e3, 3), "tpot_ms": round(n.tpot * 1e3, 3),
              "output_tokens_per_s": round(n.throughput, 2),
              "note": "the steady-state formulas (M/D/1 queueing) the simulation replaces, for comparison"}
    fixed = {k: v for k, v in n.ttft_parts.items() if "queue" not in k and "in flight" not in k}
    base = sum(fixed.values())
    ttft = s.ttft["p50"]
    if ttft >= base:
        n.ttft_parts = dict(fixed, **{"queueing in the serving loop (simulated, p50)": ttft - base})
    else:
        n.ttft_parts = {k: v * ttft / base for k, v in fixed.items()} if base else fixed
    n.ttft = ttft
    if s.tpot["p50"] > 0:
        n.tpot = s.tpot["p50"]
    n.throughput = s.throughput
    dist = s.as_dict()
    dist["steady_state"] = steady
    return {"distribution": dist, "client": client.describe()}


def describe_line(est: PlanEstimate) -> list[str]:
    """`deployctl plan`'s lines for the simulation (p50 / p99 in one line) and a user calibration in use."""
    d, c = est.distribution, est.client
    out = []
    if d and c and "ttft_ms" not in d:
        out.append(str(d.get("note", "")))
    elif d and c:
        who = (f"{c['concurrency']} clients starting together, back to back" if c["mode"] == "concurrency" else
               f"{'Poisson' if c['arrival'] == 'poisson' else 'evenly spaced'} arrivals at {c['rate']:g}/s"
               + (f", at most {c['concurrency']} in flight" if c["concurrency"] else ""))
        if c.get("prefix_hit"):
            who += f", {c['prefix_hit']:.0%} of each prompt from the prefix cache"
        out.append(f"simulated serving loop ({who}, {c['requests']} requests): TTFT p50 {d['ttft_ms']['p50']:,.0f} / "
                   f"mean {d['ttft_ms']['mean']:,.0f} / p99 {d['ttft_ms']['p99']:,.0f} ms, TPOT p50 "
                   f"{d['tpot_ms']['p50']:.1f} / mean {d['tpot_ms']['mean']:.1f} / p99 "
                   f"{d['tpot_ms']['p99']:.1f} ms, E2E p50 {d['e2e_ms']['p50'] / 1e3:,.1f} / p99 "
                   f"{d['e2e_ms']['p99'] / 1e3:,.1f} s" + (f", {d['preemptions']} preemptions (KV cache full)"
                                                          if d["preemptions"] else ""))
    src = str(est.calibration.get("source", ""))
    if src.startswith("calibrated from"):
        out.append(f"deratings {src}")
    return out
