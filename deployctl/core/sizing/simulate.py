"""A deterministic discrete-event simulation of one scheduler's serving loop (docs/performance-model.md).

One DP group of an instance runs its own scheduler (vLLM-Ascend and MindIE both schedule per DP rank); the
router spreads the client's load evenly, so the deployment is that group times the number of groups. The
simulation advances step by step, as the engine does:

* batch formation with a token budget (``max_prefill_tokens``). ``chunked`` (vLLM V1): the running requests
  decode first (1 + MTP drafts tokens each), then prompts are cut into the rest of the budget, first the
  partly prefilled ones, then new ones in arrival order (Sarathi-Serve's stall-free batching as Vidur's
  SarathiReplicaScheduler forms it). Otherwise (MindIE): a step is either a prefill batch of whole prompts up to
  the budget, taken whenever prompts wait and there is room, or a decode batch of every running request;
* KV capacity. ``chunked`` (vLLM V1's scheduler, which vLLM-Ascend runs by default): each step the running
  requests, oldest first, get KV for the tokens they compute in it (a prompt chunk, or 1 + drafts decode tokens);
  when the free KV does not cover one, the newest running request is preempted (its KV dropped, recomputed later
  from the front of the queue) until it does; waiting requests are admitted only in a step without preemption,
  while the batch limit, the token budget and the free KV cover their first chunk (plus the drafts' lookahead).
  A prompt's KV therefore grows chunk by chunk: admission is optimistic and preemption follows under pressure.
  Otherwise (MindIE, and P/D decode admission, where the KV arrives whole): a request is admitted only when its
  whole KV fits (Vidur reserves the prompt's blocks on admission) and a decode step that would not fit preempts
  the last admitted request;
* P/D: prompts queue for the prefill servers, leave them after their prefill plus the KV transfer, and the
  decode scheduler admits them at a step boundary when batch and KV have room; the first token comes with the
  first decode step (as deployctl.core.sizing.estimate counts the TTFT);
* MTP: a decode step emits 1 + accepted drafts tokens per request (the expected acceptance, not a draw).

Step times come from a ``Steps`` object (``SimSteps`` in deployctl.core.sizing.serving wraps the analytical step model
of deployctl.core.sizing.step). It is fast because a stretch of steps where nothing but decoding happens is advanced in
one jump: to the next completion, the next arrival, the next prefill-side event or the step where KV runs out.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol, cast

from deployctl.core.sizing.clients import Client, arrivals, cached, lengths

PERCENTILES = (50, 90, 99)


class Steps(Protocol):
    def decode(self, batch: int, ctx: float) -> float: ...          # one decode step of `batch` requests
    def prefill(self, tokens: float) -> float: ...                  # a prefill-only step of `tokens` tokens
    def mixed(self, batch: int, ctx: float, tokens: float) -> float: ...   # decode + prefill chunks


@dataclass(frozen=True)
class Sched:
    """One scheduler's limits (per DP group)."""

    token_budget: int                     # max_prefill_tokens (vLLM max_num_batched_tokens)
    max_batch: int                        # max_batch_size (max_num_seqs)
    kv_tokens: float                      # KV cache of the group, tokens (plan memory fit max_tokens x CP)
    chunked: bool = True                  # vLLM V1 chunked prefill mixed with decode; False: MindIE
    drafts: int = 0
    accepted: float = 0.0                 # expected accepted drafts per step


@dataclass(frozen=True)
class PrefillSide:
    """P/D: the prefill servers one decode group is fed by, and the KV transfer P -> D."""

    steps: Steps                          # prefill steps on a P group
    sched: Sched                          # its token budget
    servers: float                        # P groups per D group (e.g. 2 P groups for 4 D groups: 0.5)
    transfer_s: float                     # fixed latency of one KV transfer
    transfer_s_per_token: float


@dataclass
class Result:
    ttft: list[float]
    tpot: list[float]
    e2e: list[float]
    throughput: float                     # output tokens/s of this group
    duration: float
    steps: int
    preemptions: int
    first_wave_ttft: list[float] = field(default_factory=list)

    def dist(self, name: str) -> dict[str, float]:
        """p50/p90/p99 and the mean (what most sources publish) of one latency over the requests."""
        xs = getattr(self, name)
        out = {f"p{q}": percentile(xs, q) for q in PERCENTILES}
        out["mean"] = sum(xs) / len(xs) if xs else 0.0
        return out


def percentile(xs: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (deployctl.features.bench.stats does the same on measurements)."""
    s = sorted(xs)
    if not s:
        return 0.0
    k = (len(s) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class _Loop:
    def __init__(self, client: Client, sched: Sched, steps: Steps, pside: PrefillSide | None):
        self.c, self.s, self.st, self.p = client, sched, steps, pside
        rng = self.rng = random.Random(client.seed)
        n = client.total_requests
        self.inp: tuple[int, ...]
        self.out: tuple[int, ...]
        self.inp, self.out = zip(*(lengths(client, rng) for _ in range(n))) if n else ((), ())
        self.n = n
        self.hit = [cached(client, x) for x in self.inp]    # prompt tokens the prefix cache holds: not computed
        self.arr = [math.inf] * n
        if client.mode == "rate":
            self.arr = arrivals(client, n, rng)
        self.issued = 0
        self.finished = 0
        self.first = [math.nan] * n
        self.end = [math.nan] * n
        self.rem = [0.0] * n              # prefill tokens still to run (D side: 0 once admitted in P/D)
        self.gen = [0.0] * n              # tokens emitted
        self.kv = [0.0] * n
        self.kv_used = 0.0
        self.waiting: deque[int] = deque()
        self.active: list[int] = []       # admitted, in admission order
        self.t = 0.0
        self.nsteps = 0
        self.preempt = 0
        self.kv_dropped = 0.0
        self.hold = False
        self.q = 1 + sched.drafts
        self.emit = 1 + sched.accepted
        # P/D
        self.pq: deque[int] = deque()
        self.pfree = [0.0] * max(1, math.ceil(pside.servers)) if pside else []
        self.pstretch = (len(self.pfree) / pside.servers) if pside else 1.0
        self.ready: list[tuple[float, int]] = []     # (time the KV is on D, id), sorted

    # --- clients ---
    def _release(self, now: float, count: int) -> None:
        for _ in range(count):
            if self.issued >= self.n:
                return
            i = self.issued
            self.issued += 1
            if self.c.mode == "concurrency":
                self.arr[i] = now
            self._enqueue(i)

    def _enqueue(self, i: int) -> None:
        if self.p:
            self.pq.append(i)
        else:
            self.rem[i] = self.inp[i] - self.hit[i]
            self.waiting.append(i)

    def _arrive_until(self, now: float) -> None:
        """Rate mode: requests whose arrival time has come join (within the concurrency ceiling)."""
        if self.c.mode != "rate":
            return
        cap = self.c.concurrency or math.inf
        while self.issued < self.n and self.arr[self.issued] <= now and self.issued - self.finished < cap:
            self.arr[self.issued] = now           # a request held by the ceiling is sent when a slot frees
            self._enqueue(self.issued)
            self.issued += 1

    def _next_arrival(self) -> float:
        if self.c.mode != "rate" or self.issued >= self.n or self.issued - self.finished >= (self.c.concurrency
                                                                                              or math.inf):
            return math.inf               # none left, or held by the ceiling until a completion
        return self.arr[self.issued]

    # --- prefill side (P/D) ---
    def _run_prefill(self, until: float) -> None:
        """Start every prefill batch whose start time is <= until (FIFO, whole prompts up to the budget)."""
        p = cast(PrefillSide, self.p)   # run only with a prefill side
        while self.pq:
            k = min(range(len(self.pfree)), key=self.pfree.__getitem__)
            start = max(self.pfree[k], self.arr[self.pq[0]])
            if start > until:
                return
            batch: list[int] = []
            tokens = 0
            while self.pq and self.arr[self.pq[0]] <= start and (
                    not batch or tokens + self.inp[self.pq[0]] - self.hit[self.pq[0]] <= p.sched.token_budget):
                i = self.pq.popleft()
                batch.append(i)
                tokens += self.inp[i] - self.hit[i]        # a cached prefix is not computed; its KV is sent
            took = p.steps.prefill(tokens)
            # a server shared with other decode groups runs their batches of this round too (as many as ours, by
            # symmetry); ours takes a uniformly drawn place among them
            done = start + took * (1 + self.rng.random() * (self.pstretch - 1))
            self.pfree[k] = start + took * self.pstretch
            for i in batch:
                self.ready.append((done + p.transfer_s + p.transfer_s_per_token * self.inp[i], i))
            self.ready.sort()

    def _next_prefill_event(self) -> float:
        nxt = self.ready[0][0] if self.ready else math.inf
        if self.pq:
            nxt = min(nxt, max(min(self.pfree), self.arr[self.pq[0]]))
        return nxt

    def _admit_ready(self) -> None:
        while self.ready and self.ready[0][0] <= self.t:
            _, i = self.ready.pop(0)
            self.rem[i] = 0.0
            self.waiting.append(i)

    # --- the decode / mixed scheduler ---
    def _fits(self, i: int) -> bool:
        if self.hold:
            return False
        need = self.inp[i] + self.gen[i] + (self.q if self.p else 0)
        return len(self.active) < self.s.max_batch and self.kv_used + need <= self.s.kv_tokens

    def _can_admit(self, i: int) -> bool:
        """Whether the next step could admit waiting request i (else decode steps can be jumped over)."""
        if not (self.s.chunked and not self.p):
            return self._fits(i)
        need = min(self.inp[i] + self.gen[i] - self.hit[i], self.s.token_budget) + self.hit[i] + self.s.drafts
        return (len(self.active) < self.s.max_batch and self.kv_used + need <= self.s.kv_tokens
                and self.inp[i] + self.out[i] <= self.s.kv_tokens)

    def _admit(self, i: int) -> None:
        self.waiting.popleft()
        self.active.append(i)
        self.kv[i] = self.inp[i] + self.gen[i]
        self.kv_used += self.kv[i]
        if not self.p:
            # a preempted request recomputes prompt + what it emitted, less the prefix the cache still holds
            self.rem[i] = self.kv[i] - self.hit[i]

    def _preempt(self) -> None:
        i = self.active.pop()
        self.kv_dropped = self.kv[i]
        self.kv_used -= self.kv[i]
        self.kv[i] = 0.0
        self.preempt += 1
        self.hold = True                          # no admission in the step that had to preempt (vLLM V1)
        self.rem[i] = self.inp[i] + self.gen[i]
        if self.p:
            self.rem[i] = 0.0                     # P/D: the decode side recomputes locally (assumed)
        self.waiting.appendleft(i)

    def _form(self) -> tuple[list[int], dict[int, float]]:
        """(decoding requests, {request: prefill tokens this step})."""
        if self.s.chunked and not self.p:
            return self._form_chunked()
        budget: float = self.s.token_budget
        dec = [i for i in self.active if self.rem[i] <= 0]
        chunks: dict[int, float] = {}
        if self.p:
            budget -= len(dec) * self.q
            for i in self.active:
                if self.rem[i] > 0 and budget > 0:
                    chunks[i] = min(self.rem[i], budget)
                    budget -= chunks[i]
            while self.waiting and self._fits(self.waiting[0]) and (budget > 0 or self.p):
                i = self.waiting[0]
                self._admit(i)
                if self.rem[i] > 0:
                    chunks[i] = min(self.rem[i], budget)
                    budget -= chunks[i]
                else:
                    dec.append(i)
            return dec, chunks
        # MindIE: a prefill batch whenever prompts wait and fit, else decode
        while self.waiting and self._fits(self.waiting[0]) and (not chunks or self.rem[self.waiting[0]] <= budget):
            i = self.waiting[0]
            self._admit(i)
            chunks[i] = self.rem[i]
            budget -= chunks[i]
        return ([] if chunks else dec), chunks

    def _form_chunked(self) -> tuple[list[int], dict[int, float]]:
        """vLLM V1's Scheduler.schedule(): running requests first (oldest first), each getting KV for this step's
        tokens, preempting the newest running request while the free KV falls short; then, only if nothing was
        preempted, waiting ones while batch limit, budget and free KV cover their first chunk (in tokens, not
        blocks; vllm/v1/core/sched/scheduler.py, copied at vllm-ascend@182b75ea core/dyntra_lb_scheduler.py:556-670)."""
        budget: float
        budget, free = self.s.token_budget, self.s.kv_tokens - self.kv_used
        dec: list[int] = []
        chunks: dict[int, float] = {}
        preempted, idx = False, 0
        while idx < len(self.active) and budget > 0:
            i = self.active[idx]
            n = self.q if self.rem[i] <= 0 else min(self.rem[i], budget)
            lost = False                          # i preempted itself: it was the newest running request
            while n > free:
                lost = self.active[-1] == i
                self._preempt()
                free += self.kv_dropped
                preempted = True
                if lost:
                    break
            if lost:
                break
            if self.rem[i] <= 0:
                dec.append(i)
            else:
                chunks[i] = n
            budget -= n
            free -= n
            idx += 1
        while not preempted and self.waiting and budget > 0 and len(self.active) < self.s.max_batch:
            i = self.waiting[0]
            hit = self.hit[i]                     # the cached prefix: its KV is taken at once, not computed
            n = min(self.inp[i] + self.gen[i] - hit, budget)
            if n + hit + self.s.drafts > free or self.inp[i] + self.out[i] > self.s.kv_tokens:
                break
            self.waiting.popleft()
            self.active.append(i)
            # a preempted request recomputes prompt + what it emitted (less the prefix the cache still holds)
            self.rem[i] = self.inp[i] + self.gen[i] - hit
            self.kv[i] = hit
            self.kv_used += hit
            chunks[i] = n
            budget -= n
            free -= n + hit + self.s.drafts
        return dec, chunks

    def run(self) -> Result:
        if self.c.mode == "concurrency":
            self._release(0.0, self.c.concurrency)
        while True:
            self._arrive_until(self.t)
            if self.p:
                self._run_prefill(self.t)
                self._admit_ready()
            dec, chunks = self._form()
            if not dec and not chunks:
                nxt = min(self._next_arrival(), self._next_prefill_event() if self.p else math.inf)
                if nxt == math.inf:
                    break
                self.t = max(self.t, nxt)
                continue
            grow = len(dec) * self.emit
            if dec and self.kv_used + grow > self.s.kv_tokens and len(self.active) > 1:
                self._preempt()
                continue
            ctx = sum(self.kv[i] for i in dec) / len(dec) if dec else 0.0
            tokens = sum(chunks.values())
            k = 1
            if not chunks and (not self.waiting or not self._can_admit(self.waiting[0])):
                k = self._jump(dec, ctx)
            if chunks:
                dt = self.st.mixed(len(dec), ctx, tokens) if dec else (
                    self.st.prefill(tokens) if not self.p else self.st.decode(len(dec), ctx))
            else:
                dt = k * self.st.decode(len(dec), ctx + (k - 1) / 2 * self.emit)
            self.t += dt
            self.nsteps += k
            self.hold = False
            self._after(dec, chunks, k)
        return self._result()

    def _jump(self, dec: list[int], ctx: float) -> int:
        """Decode steps until something changes: a completion, KV full, an arrival, a prefill-side event."""
        if any(self.gen[i] == 0 for i in dec):
            return 1                              # P/D: a request's first token comes with its first step
        k = min(math.ceil((self.out[i] - self.gen[i]) / self.emit) for i in dec)
        room = self.s.kv_tokens - self.kv_used
        k = min(k, max(1, int(room // (len(dec) * self.emit))))
        nxt = min(self._next_arrival(), self._next_prefill_event() if self.p else math.inf)
        if nxt < math.inf:
            per = self.st.decode(len(dec), ctx)
            k = min(k, max(1, math.ceil((nxt - self.t) / per)))
        return max(1, k)

    def _after(self, dec: list[int], chunks: dict[int, float], k: int) -> None:
        done = []
        grows = self.s.chunked and not self.p       # vLLM: a prompt's KV grows with the chunks computed
        for i, n in chunks.items():
            self.rem[i] -= n
            if grows:
                self.kv[i] += n
                self.kv_used += n
            if self.rem[i] <= 0 and self.gen[i] == 0:
                self.first[i] = self.t            # the step that finishes a prompt samples its first token
                self.gen[i] = 1.0
                self.kv[i] += 1
                self.kv_used += 1
        for i in dec:
            if self.gen[i] == 0:                  # P/D: the first decode step gives the first token
                self.first[i] = self.t
            self.gen[i] += k * self.emit
            self.kv[i] += k * self.emit
            self.kv_used += k * self.emit
            if self.gen[i] >= self.out[i]:
                done.append(i)
        self.finished += len(done)
        for i in done:
            self.end[i] = self.t
            self.kv_used -= self.kv[i]
            self.kv[i] = 0.0
        if done:
            gone = set(done)
            self.active = [i for i in self.active if i not in gone]
        if self.c.mode == "concurrency" and done:
            self._release(self.t, len(done))

    def _result(self) -> Result:
        ids = [i for i in range(self.n) if not math.isnan(self.end[i])]
        ttft = [self.first[i] - self.arr[i] for i in ids]
        e2e = [self.end[i] - self.arr[i] for i in ids]
        tpot = [(e2e[j] - ttft[j]) / (self.out[i] - 1) for j, i in enumerate(ids) if self.out[i] > 1]
        span = max((self.end[i] for i in ids), default=0.0) - min((self.arr[i] for i in ids), default=0.0)
        toks = sum(self.out[i] for i in ids)
        wave = ttft[:self.c.concurrency] if self.c.mode == "concurrency" else []
        return Result(ttft=ttft, tpot=tpot, e2e=e2e, throughput=toks / span if span > 0 else 0.0, duration=span,
                      steps=self.nsteps, preemptions=self.preempt, first_wave_ttft=wave)


def simulate(client: Client, sched: Sched, steps: Steps, prefill: PrefillSide | None = None) -> Result:
    """Run one scheduler's serving loop for ``client`` (already its share of the deployment's load)."""
    return _Loop(client, sched, steps, prefill).run()
