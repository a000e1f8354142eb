"""From what each engine process reported to one Reading per role (deployctl.core.scaling.decide): gauges summed
per instance and averaged over the role's instances, KV use averaged, tokens per second from the counters' growth
since the previous readings of the same processes (a counter that went down is a restarted engine: no rate)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from deployctl.core.scaling.decide import Reading


@dataclass(frozen=True)
class Sample:
    """One engine process's metrics at one time (an instance may have several: one per API server)."""

    target: str                           # the process's address (host:port), stable between readings
    instance: str
    role: str                             # mixed, prefill or decode
    at: float
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    generated: float | None = None        # counter: tokens generated so far
    prompt: float | None = None           # counter: prompt tokens processed so far
    ttft: tuple[float | None, float | None] = (None, None)   # TTFT histogram: (sum of seconds, count) so far
    tpot: tuple[float | None, float | None] = (None, None)   # TPOT (inter-token latency) histogram, the same
    error: str = ""


def _rate(now: Sample, before: Sample | None, key: str) -> float | None:
    a, b = getattr(now, key), getattr(before, key) if before is not None else None
    if a is None or b is None or now.at <= before.at or a < b:    # type: ignore[union-attr]
        return None
    return (a - b) / (now.at - before.at)                          # type: ignore[union-attr]


def _latency_ms(group: list[Sample], previous: dict[str, Sample], key: str) -> tuple[float, float] | None:
    """(seconds observed, observations) of a histogram between the previous readings and these, over the
    processes of ``group`` that have both (a count that went down is a restarted engine: left out)."""
    total_s = total_n = 0.0
    for s in group:
        before = previous.get(s.target)
        if before is None:
            continue
        (s1, n1), (s0, n0) = getattr(s, key), getattr(before, key)
        if s1 is None or n1 is None or s0 is None or n0 is None or n1 < n0 or s1 < s0:
            continue
        total_s += s1 - s0
        total_n += n1 - n0
    return (total_s, total_n) if total_n > 0 else None


def role_readings(samples: Sequence[Sample], previous: dict[str, Sample]) -> dict[str, Reading]:
    """One Reading per role of the instances that answered; `previous` (target -> its last Sample) gives the
    token rates. Prefill instances are measured by prompt tokens/s, the others by generated tokens/s."""
    per_instance: dict[tuple[str, str], list[Sample]] = {}
    for s in samples:
        if not s.error:
            per_instance.setdefault((s.role, s.instance), []).append(s)
    out: dict[str, Reading] = {}
    for role in sorted({r for r, _ in per_instance}):
        insts = [v for (r, _), v in per_instance.items() if r == role]

        def mean(values: list[float | None]) -> float | None:
            got = [v for v in values if v is not None]
            return sum(got) / len(got) if got else None

        def summed(group: list[Sample], key: str) -> float | None:
            got = [getattr(s, key) for s in group if getattr(s, key) is not None]
            return sum(got) if got else None

        counter = "prompt" if role == "prefill" else "generated"
        rates = []
        for group in insts:
            parts = [_rate(s, previous.get(s.target), counter) for s in group]
            rates.append(sum(p for p in parts if p is not None) if any(p is not None for p in parts) else None)
        latency: dict[str, float | None] = {}
        for key in ("ttft", "tpot"):
            seen = [x for x in (_latency_ms(g, previous, key) for g in insts) if x is not None]
            n = sum(x[1] for x in seen)
            latency[key] = 1000.0 * sum(x[0] for x in seen) / n if n else None
        out[role] = Reading(at=max(s.at for g in insts for s in g), instances=len(insts),
                            ttft_ms=latency["ttft"], tpot_ms=latency["tpot"],
                            waiting=mean([summed(g, "waiting") for g in insts]),
                            running=mean([summed(g, "running") for g in insts]),
                            kv_usage=mean([mean([s.kv_usage for s in g]) for g in insts]),
                            tokens_per_s=mean(rates))
    return out
