"""The numbers of one point, from its per-request records (the warm-up left out): p50/p90/p99 and mean of TTFT,
TPOT (inter-token latency) and end-to-end latency, output throughput (the deployment's and per die), errors."""

from __future__ import annotations

import math
from collections import Counter

PERCENTILES = (50, 90, 99)


def percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), None for no values."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return None
    if len(xs) == 1:
        return float(xs[0])
    k = (len(xs) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (k - lo))


def distribution(values: list[float]) -> dict:
    xs = [float(v) for v in values if v is not None]
    d = {f"p{q}": percentile(xs, q) for q in PERCENTILES}
    d["mean"] = sum(xs) / len(xs) if xs else None
    d["min"] = min(xs) if xs else None
    d["max"] = max(xs) if xs else None
    d["count"] = len(xs)
    return d


def summarize(point, records: list[dict], aiperf_summary: dict, dies: int) -> dict:
    """Summary of one point. Throughput: AIPerf's (output tokens over its benchmark duration) when it wrote a
    summary, else the same from the records (successful output tokens over first start .. last end)."""
    measured = [r for r in records if r["phase"] == "profiling"]
    ok = [r for r in measured if r["ok"]]
    errors = [r for r in measured if not r["ok"] and not r["cancelled"]]
    cancelled = [r for r in measured if r["cancelled"]]
    out_tokens = sum(r["output_tokens"] or 0 for r in ok)
    throughput = None
    ot = aiperf_summary.get("output_token_throughput") if isinstance(aiperf_summary, dict) else None
    if isinstance(ot, dict) and isinstance(ot.get("avg"), (int, float)) and math.isfinite(ot["avg"]):
        throughput = float(ot["avg"])
    elif ok:
        starts = [r["start_ns"] for r in measured if r["start_ns"]]
        ends = [r["end_ns"] for r in measured if r["end_ns"]]
        span = (max(ends) - min(starts)) / 1e9 if starts and ends else 0
        throughput = out_tokens / span if span > 0 else None
    kinds = Counter((r["error"] or "error")[:200] for r in errors)
    return {
        "point": point.name, "series": point.series, "input_len": point.input_len, "output_len": point.output_len,
        "concurrency": point.concurrency, "requests": point.requests,
        "request_rate": getattr(point, "request_rate", None), "arrival": getattr(point, "arrival", None),
        "shared_prefix": getattr(point, "shared_prefix", 0),
        "measured": len(measured), "ok": len(ok), "errors": len(errors), "cancelled": len(cancelled),
        "error_kinds": [{"error": k, "count": n} for k, n in kinds.most_common(5)],
        "ttft_ms": distribution([r["ttft_ms"] for r in ok]),
        "tpot_ms": distribution([r["tpot_ms"] for r in ok]),
        "e2e_ms": distribution([r["e2e_ms"] for r in ok]),
        "input_tokens": distribution([r["input_tokens"] for r in ok]),
        "output_tokens": distribution([r["output_tokens"] for r in ok]),
        "output_tokens_per_s": throughput,
        "per_die_tokens_per_s": throughput / dies if throughput is not None and dies else None,
        "dies": dies,
    }
