"""The plan's estimate for a measured point: `deployctl.core.sizing.estimate.estimate_point(plan, input_len, output_len,
concurrency)` -> {ttft_ms, tpot_ms, output_tokens_per_s, per_die_tokens_per_s}, imported when first needed.
A point with a load of its own (an open loop's request rate and arrival, a shared prefix) is estimated for that
same load: `estimate_plan(plan, Workload(..., request_rate=, arrival=, prefix_hit=from_shared_prefix(shared,
input_len)))`, the plan's estimate inputs made once.

Nothing here fails a benchmark: without the performance model, or when it has no estimate for a point (an engine
or layout it does not model), the comparison shows "-" and says why once.
"""

from __future__ import annotations

import math
from typing import Any

KEYS = ("ttft_ms", "tpot_ms", "output_tokens_per_s", "per_die_tokens_per_s")
# measured summary value compared with each estimate key: latencies at the median, throughput of the whole point
MEASURED = {"ttft_ms": ("ttft_ms", "p50"), "tpot_ms": ("tpot_ms", "p50"),
            "output_tokens_per_s": ("output_tokens_per_s", None),
            "per_die_tokens_per_s": ("per_die_tokens_per_s", None)}


class Estimator:
    def __init__(self, plan, calibration: dict | None = None):
        self.plan = plan
        self.calibration = calibration     # the cluster's own fit (`deployctl calibrate`), read by the caller
        self.note: str | None = None
        self._fn = None
        self._loaded = False
        self._inputs: Any = None           # the plan's EstimateInputs, for the points with a load

    def _load(self):
        if not self._loaded:
            self._loaded = True
            try:
                from deployctl.core.sizing.estimate import estimate_point
            except ImportError as e:
                self.note = f"no estimate: the performance model is not available ({e})"
            except Exception as e:  # noqa: BLE001 - a broken model must not cost the measurements
                self.note = f"no estimate: the performance model failed to load ({type(e).__name__}: {e})"
            else:
                self._fn = estimate_point
        return self._fn

    def point(self, input_len: int, output_len: int, concurrency: int, request_rate: float | None = None,
              arrival: str | None = None, shared_prefix: int = 0) -> dict | None:
        """The estimate's four numbers (None for a key it lacks), or None when there is no estimate.
        `request_rate` (requests/s, an open loop with `concurrency` as its ceiling), `arrival` (poisson | fixed)
        and `shared_prefix` (tokens every prompt starts with): the point's load, estimated as such."""
        fn = self._load()
        if fn is None or self.plan is None:
            if self.plan is None and self.note is None:
                self.note = "no estimate: no plan for this endpoint (--url without an inventory plan)"
            return None
        try:
            extra = {"calibration": self.calibration} if self.calibration is not None else {}
            if request_rate or shared_prefix:
                got = self._with_load(input_len, output_len, concurrency, request_rate, arrival, shared_prefix)
            else:
                got = fn(self.plan, input_len, output_len, concurrency, **extra)
        except Exception as e:  # noqa: BLE001 - an estimate that cannot be made is "-", never a failed benchmark
            self.note = self.note or f"no estimate for some points: {type(e).__name__}: {e}"
            return None
        if not isinstance(got, dict):
            return None
        out = {}
        for k in KEYS:
            v = got.get(k)
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf
            out[k] = float(v) if ok else None
        return out if any(v is not None for v in out.values()) else None

    def _with_load(self, input_len: int, output_len: int, concurrency: int, request_rate: float | None,
                   arrival: str | None, shared_prefix: int) -> dict:
        from deployctl.core.sizing.clients import from_shared_prefix
        from deployctl.core.sizing.estimate import context, estimate_plan
        from deployctl.core.sizing.estimate_types import Workload

        if self._inputs is None:
            self._inputs = context(self.plan, calibration=self.calibration)
        w = Workload(input_len=input_len, output_len=output_len, concurrency=concurrency, request_rate=request_rate,
                     arrival=arrival or "poisson",
                     prefix_hit=from_shared_prefix(shared_prefix, input_len) if shared_prefix else 0.0)
        est = estimate_plan(self.plan, w, ctx=self._inputs)
        return {k: getattr(est, k, None) for k in KEYS}


def compare(summary: dict, est: dict | None) -> dict:
    """{key: {measured, estimated, ratio}} with ratio = measured / estimated (None where either is missing)."""
    out = {}
    for k in KEYS:
        src, stat = MEASURED[k]
        m = summary.get(src)
        if stat is not None:
            m = m.get(stat) if isinstance(m, dict) else None
        e = (est or {}).get(k)
        out[k] = {"measured": m, "estimated": e, "ratio": (m / e) if m is not None and e else None}
    return out
