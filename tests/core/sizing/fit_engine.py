"""Fits an engine's own deratings on its `set: fit` points of tests/core/sizing/points.yaml (never the check set, never
another engine's points) and writes them to deployctl/core/engines/<engine>/perf.yaml:
`.venv/bin/python tests/core/sizing/fit_engine.py [--engine vllm-ascend|sglang] [--write]` (default vllm-ascend).

The objective is the RMS relative error of every published metric of the fit points (throughput for the CI gates),
each point simulated exactly as tests/core/sizing/accuracy.py does: a log grid over the four deratings, then coordinate
refinement (calibrate_user's search). Bounds are wide enough not to bind except k_compute's floor of 1.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from accuracy import client_of, in_set, inventory_of, statistic_of
from accuracy_report import plan_of

from deployctl.features.bench.calibrate import _search
from deployctl.core.sizing.calibration import FITTED
from deployctl.core.sizing.estimate import context
from deployctl.core.sizing.serving import simulate_plan

ENGINES = Path(__file__).resolve().parents[3] / "deployctl" / "core" / "engines"


def perf_yaml(engine: str = "vllm-ascend") -> Path:
    """The engine's perf.yaml (deployctl/core/engines/<kind with _>/perf.yaml)."""
    return ENGINES / engine.replace("-", "_") / "perf.yaml"


PERF_YAML = perf_yaml()
BOUNDS = {"k_hbm": (1.0, 16.0), "k_compute": (1.0, 16.0), "k_prefill": (1.0, 16.0), "k_fixed": (0.5, 32.0),
          "host_ms": (0.5, 256.0), "host_draft_ms": (0.5, 128.0)}
KEYS = {"throughput": "throughput", "tpot_ms": "tpot", "ttft_ms": "ttft"}


def _cases(engine: str = "vllm-ascend"):
    out = []
    for p in in_set("fit", engine):
        plan, why = plan_of(inventory_of(p))
        if why:
            continue
        out.append((plan, client_of(p), p["measured"], statistic_of(p)))
    return out


def errors(consts, cases) -> list[float]:
    errs = []
    for plan, client, measured, stat in cases:
        s = simulate_plan(context(plan, consts=consts), client)
        for key, meas in measured.items():
            est = s.throughput if key == "throughput" else getattr(s, KEYS[key])[stat.get(key, "p50")] * 1e3
            errs.append((est - meas) / meas)
    return errs


def rms(consts, cases) -> float:
    errs = errors(consts, cases)
    return (sum(e * e for e in errs) / len(errs)) ** 0.5


# grid values per constant: SGLang's fit points simulate slowly (832 in flight, 3,328 requests), so its grid has
# three values per constant (729 cells) where vLLM-Ascend's has four (4,096); both are refined the same way
STEPS = {"vllm-ascend": 4, "sglang": 3}


def fit(rounds: int = 3, steps: int | None = None, engine: str = "vllm-ascend"):
    """A coarse log grid over the four deratings and the two host overheads (per step, per draft forward; the
    surface is not convex: simulated queues switch regimes), then coordinate refinement around the best cell."""
    import itertools
    import math

    cases = _cases(engine)
    steps = steps or STEPS[engine]
    axes = {n: [math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * i / (steps - 1)) for i in range(steps)]
            for n, (lo, hi) in BOUNDS.items()}
    best = min((dict(zip(axes, vals)) for vals in itertools.product(*axes.values())),
               key=lambda kw: rms(replace(FITTED, **kw), cases))
    c = refine(replace(FITTED, **best), cases, steps, rounds)
    return c, rms(c, cases)


def refine(c, cases, steps: int, rounds: int = 1):
    """Coordinate refinement: each constant in turn searched within one grid cell of its value."""
    for _ in range(rounds):
        for name, (lo, hi) in BOUNDS.items():
            cell = (hi / lo) ** (1 / (steps - 1))
            v = getattr(c, name)
            pick = _search(lambda x: rms(replace(c, **{name: x}), cases), max(lo, v / cell), min(hi, v * cell),
                           steps=10, rounds=2)
            c = replace(c, **{name: round(pick, 3)})
    return c


if __name__ == "__main__":
    kind = sys.argv[sys.argv.index("--engine") + 1] if "--engine" in sys.argv else "vllm-ascend"
    consts, err = fit(engine=kind)
    worst = max(abs(e) for e in errors(consts, _cases(kind)))
    print(consts, f"rms {err:.3f}, largest {worst:.3f}, points {len(_cases(kind))}")
    if "--write" in sys.argv:
        target = perf_yaml(kind)
        text = target.read_text().split("consts:")[0]
        target.write_text(text + f"consts: {{k_hbm: {consts.k_hbm}, k_compute: {consts.k_compute}, "
                             f"k_prefill: {consts.k_prefill}, k_fixed: {consts.k_fixed}, host_ms: {consts.host_ms}, "
                             f"host_draft_ms: {consts.host_draft_ms}}}\n"
                             f"max_error_on_fit_points: {round(worst, 3)}\n")
