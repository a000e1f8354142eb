"""Calibration: the published Ascend points the model's deratings are fitted on, and the fit itself.

The points are published Ascend measurements (keys A1, A1b, A2, A4): CloudMatrix384's, arXiv 2506.12708 Tables 3-5,
and cann-recipes-infer's on A3, deepseek_r1_prefill_optimization.md; each Point names its source. GPU points
(DeepSeek's H800 production, SGLang on H100) are left out: this model does not cover GPUs. Each point is a layout the
model builds from plain parameters (`core.Setup`), never a lookup: `fit()` searches the three deratings that
minimise the RMS relative error over the points and reproduces `FITTED`; `errors()` gives each point's error
(docs/performance-model.md has the table; tests/core/sizing checks both).

Reading of the published numbers (the doc says the same):
* decode context = input + output / 2 (mean KV length over the generated tokens);
* A1b pairs its four batches with its TPOTs in order (throughput = batch / TPOT checks: 128/46.8 ms = 2,735
  tok/s/pkg against 2,733 published); the last two are 4K/256 at the 30 ms and 15 ms SLO batches;
* CloudMatrix's MTP1 at 70 % acceptance applies to every A1/A1b point (1.7 tokens per iteration);
* "per package" numbers are halved to per die (2 dies per 910C package: arXiv 2506.12708 §5.1, "160 Ascend 910C
  NPUs (... 320 NPU dies)").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

from deployctl.core.sizing.step import Consts, Setup, step

if TYPE_CHECKING:
    from deployctl.core.engine_spec.protocol import EngineSpec

# fit() on POINTS gives these (tests/core/sizing/test_calibration.py recomputes them)
FITTED = Consts(k_hbm=1.023, k_compute=1.685, k_prefill=2.018)
# the largest relative error on any point that docs/performance-model.md states (the test keeps it true)
ERROR_BOUND = 0.12



def fitted_for(spec: EngineSpec) -> Consts:
    """The deratings an engine runs with: its spec's own `perf_deratings` (fitted on that engine's published
    points) when it has them, else FITTED (the CloudMatrix384 / cann-recipes fit)."""
    own = spec.perf_deratings
    return Consts(**own) if own else FITTED


def fitted_source(spec: EngineSpec) -> str:
    """Where the deratings fitted_for(spec) gives come from, as the estimate's assumptions say it."""
    own = spec.perf_deratings_source
    return own or (f"deratings fitted on A3 CloudMatrix384 / cann-recipes points (each within {ERROR_BOUND:.0%}, "
                   "docs/performance-model.md); A2 SKUs reuse them")


def fitted_record(spec: EngineSpec) -> dict:
    """What the estimate's `calibration` names as its fit: the largest error on the points the deratings of
    fitted_for(spec) were fitted on and the file that holds them, from the same place as fitted_source (the
    driver's `perf_fit_record`, e.g. vLLM-Ascend's perf.yaml), else the CloudMatrix fit's."""
    own = spec.perf_fit_record
    return dict(own) if own else {"max_error_on_points": ERROR_BOUND, "source": "deployctl/core/sizing/calibration.py"}


CM = "arXiv 2506.12708 (CloudMatrix384)"
_CM_DECODE = dict(model="deepseek-r1", quant="w8a8", sku="910C", dies=320, dies_per_node=16, dp=320, moe_ep=320,
                  super_pod=True, extra_expert_slots=64, shared_in_ep=True, mtp_drafts=1, mtp_accept=0.7)
# EP32 prefill on CM384: 10 experts per rank (8 routed, 1 shared, 1 redundant): 256 + 32 + 32 slots
_CM_PREFILL = dict(model="deepseek-r1", quant="w8a8", sku="910C", dies=32, dies_per_node=16, dp=32, moe_ep=32,
                   super_pod=True, extra_expert_slots=64, shared_in_ep=True, microbatches=2)
_RECIPES_PREFILL = dict(model="deepseek-r1", quant="w8a8", sku="910C", dies=32, dies_per_node=16, dp=32, moe_ep=32,
                        super_pod=True, microbatches=2)


@dataclass(frozen=True)
class Point:
    key: str
    phase: str                 # decode: measured TPOT (ms); prefill: measured prefill tokens/s per die
    setup: dict
    input_len: int
    output_len: int
    per_die: int               # decode: sequences per die; prefill: prompt tokens per die in one batch
    measured: float
    source: str

    def build(self) -> Setup:
        from deployctl.core.sizing.hardware import skus

        return Setup(**{**self.setup, "sku": skus()[self.setup["sku"]]})


POINTS: tuple[Point, ...] = (
    Point("A1", "decode", _CM_DECODE, 4096, 256, 48, 49.4,
          f"{CM} Table 4, §5.1: decode DP320/EP320, 96 per package, TPOT 49.4 ms (1,943 tok/s/pkg)"),
    Point("A1b 1K/1K", "decode", _CM_DECODE, 1024, 1024, 64, 46.8, f"{CM} Table 5: 128 per package, 46.8 ms"),
    Point("A1b 2K/256", "decode", _CM_DECODE, 2048, 256, 56, 47.4, f"{CM} Table 5: 112 per package, 47.4 ms"),
    Point("A1b 4K/256 b24", "decode", _CM_DECODE, 4096, 256, 12, 24.6, f"{CM} Table 5: 24 per package, 24.6 ms"),
    Point("A1b 4K/256 b8", "decode", _CM_DECODE, 4096, 256, 4, 14.9, f"{CM} Table 5: 8 per package, 14.9 ms"),
    Point("A2", "prefill", _CM_PREFILL, 4096, 1, 8192, 5655 / 2,
          f"{CM} Table 3: 16-package EP32 prefill, 16K tokens per package batch, 5,655 tok/s/pkg measured"),
    Point("A4", "prefill", _RECIPES_PREFILL, 4096, 1, 8192, 6522 / 2,
          "cann-recipes-infer deepseek_r1_prefill_optimization.md: MLA-DP32 + MoE-EP32, 2 microbatches, "
          "64 x 4K prompts, 6,522 tok/s/pkg"),
    Point("A4 1 microbatch", "prefill", {**_RECIPES_PREFILL, "microbatches": 1}, 4096, 1, 8192, 5237 / 2,
          "same document: 5,237 tok/s/pkg without microbatching"),
)


def estimate(p: Point, c: Consts) -> float:
    """The model's value of a point, in the unit of `measured`."""
    s = p.build()
    if p.phase == "decode":
        q = 1 + s.mtp_drafts
        st = step(s, "decode", p.per_die * q, p.input_len + p.output_len / 2, c, seqs_group=p.per_die)
        return st.total / (1 + s.accepted) * 1e3
    st = step(s, "prefill", p.per_die, p.input_len, c)
    return p.per_die / st.total


def errors(c: Consts = FITTED) -> list[tuple[Point, float, float]]:
    """(point, estimate, relative error (estimate - measured) / measured) of every point."""
    out = []
    for p in POINTS:
        e = estimate(p, c)
        out.append((p, e, (e - p.measured) / p.measured))
    return out


def _rms(c: Consts, points: list[Point]) -> float:
    errs = [(estimate(p, c) - p.measured) / p.measured for p in points]
    return (sum(e * e for e in errs) / len(errs)) ** 0.5


def _search(f: Callable[[float], float], lo: float, hi: float, steps: int = 40) -> float:
    """argmin of f on [lo, hi]: a grid, then refinements around the best cell (f is not assumed convex)."""
    for _ in range(4):
        grid = [lo + (hi - lo) * i / steps for i in range(steps + 1)]
        best = min(grid, key=f)
        cell = (hi - lo) / steps
        lo, hi = max(lo, best - cell), min(hi, best + cell)
    return best


def fit() -> Consts:
    """The deratings (each >= 1: the η-roofline is already optimistic) minimising the RMS relative error:
    k_hbm and k_compute on the decode points, k_prefill on the prefill points."""
    decode = [p for p in POINTS if p.phase == "decode"]
    prefill = [p for p in POINTS if p.phase == "prefill"]
    base = Consts(k_hbm=1.0, k_compute=1.0, k_prefill=1.0)

    def best_compute(kh: float) -> float:
        return _search(lambda kc: _rms(replace(base, k_hbm=kh, k_compute=kc), decode), 1.0, 4.0, 12)

    kh = _search(lambda kh: _rms(replace(base, k_hbm=kh, k_compute=best_compute(kh)), decode), 1.0, 4.0, 12)
    kc = best_compute(kh)
    kp = _search(lambda k: _rms(replace(base, k_prefill=k), prefill), 1.0, 6.0)
    return Consts(k_hbm=round(kh, 3), k_compute=round(kc, 3), k_prefill=round(kp, 3))


def label(doc: dict) -> str:
    """How a stored calibration is named in an estimate's source (the document as read by the store)."""
    return f"calibrated from {doc['runs']} bench run{'s' if doc['runs'] != 1 else ''} on {doc['date']}"
