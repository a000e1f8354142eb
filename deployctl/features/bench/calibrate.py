"""Calibration from the user's own `deployctl bench` runs (issue 27 item 3; `deployctl calibrate`).

The model's three deratings (deployctl.core.sizing.calibration: k_hbm, k_compute for decode, k_prefill) are fitted to
the measured points of one or more bench runs of this cluster, and stored in
``<run-dir>/calibration/<cluster>.json`` next to the run records (``<run-dir>/runs/<id>-bench/summary.json``).
`plan`, `recommend` and `bench` read it (calibration_store.load, in the command) and pass it to the estimate,
which names it in their output until `deployctl calibrate --remove`.

What is fitted to what:
* k_prefill to the median TTFT of the points at the lowest concurrency of each input length (1 in the default
  suites): there the TTFT is one prefill, without queueing, so it isolates the prefill step;
* k_hbm, k_compute and k_fixed (the per-step fixed kernel costs, 1 in the published fit) to the median TPOT and
  the output throughput of every point.
Points with a load of their own (an open loop's request rate, a shared prompt prefix) are left out, named.

Each estimate is the one `plan` makes (the simulated serving loop under the point's closed-loop client), with
the trial deratings; the fit minimises the RMS relative error by coordinate search (each k in [0.25, 8]).

Each summary.json is read at the run directory's boundary (deployctl/io/localfile.py, BenchSummary in
deployctl/core/models/rundata.py): a regular file, bounded, without NaN, lengths and concurrencies in what `deployctl
bench` accepts. Points longer than the deployment's model.max_seq_len are left out (the engine could not have
served them; the simulated loop would crawl through them), and `calibrate` fits at most MAX_FIT_POINTS points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from deployctl.io.localfile import load_model
from deployctl.core.models.rundata import K_RANGE, MAX_SUMMARY_BYTES, BenchSummary
from deployctl.io.calibration_store import rms
from deployctl.core.sizing.step import Consts

BOUNDS = K_RANGE
SUMMARY_HINT = ("a bench run's summary.json is written by `deployctl bench`; move that run out of RUN_DIR/runs, "
                "or name the runs to fit: `deployctl calibrate -i INV RUN...`")


@dataclass
class Measured:
    run: str                      # run id
    point: str
    input_len: int
    output_len: int
    concurrency: int
    ttft_ms: float | None
    tpot_ms: float | None
    tokens_per_s: float | None
    use_ttft: bool = False


def bench_runs(run_dir: Path, ids: list[str] | None = None) -> list[Path]:
    """summary.json of the named runs (ids or paths), else of every bench run under run_dir/runs."""
    root = Path(run_dir) / "runs"
    if ids:
        out = []
        for r in ids:
            p = Path(r)
            p = p if p.is_dir() else root / r
            out.append(p / "summary.json")
        return out
    return sorted(root.glob("*-bench/summary.json"))


def points(summaries: list[Path], model: str | None = None, dies: int | None = None,
           max_seq_len: int | None = None) -> tuple[list[Measured], list[str]]:
    """The measured points of the runs, and why runs or points were left out (another model or size, failed
    points, points longer than this deployment serves). Each summary is read at the run directory's boundary
    (BenchSummary): one that is not a bench summary is a UsageError naming the file and the key."""
    out: list[Measured] = []
    skipped: list[str] = []
    for s in summaries:
        try:
            doc = load_model(s, BenchSummary, MAX_SUMMARY_BYTES, what="bench summary", hint=SUMMARY_HINT)
        except FileNotFoundError:
            skipped.append(f"{s}: no such file (not a finished bench run)")
            continue
        t = doc.target
        if model and t.model not in (None, model):
            skipped.append(f"{doc.run_id}: model {t.model!r}, not {model!r}")
            continue
        if dies and t.dies and t.dies != dies:
            skipped.append(f"{doc.run_id}: {t.dies} dies, this plan has {dies}")
            continue
        for p in doc.points:
            if not p.ok or p.failure:
                continue
            if p.request_rate or p.shared_prefix:
                skipped.append(f"{doc.run_id} {p.point}: "
                               + ("an open loop (--request-rate)" if p.request_rate else "a shared prompt prefix")
                               + "; the fit takes closed-loop points over unrelated prompts")
                continue
            if max_seq_len and p.input_len + p.output_len > max_seq_len:
                skipped.append(f"{doc.run_id} {p.point}: {p.input_len} + {p.output_len} tokens, more than this "
                               f"deployment's model.max_seq_len {max_seq_len}")
                continue
            out.append(Measured(run=doc.run_id, point=p.point, input_len=p.input_len, output_len=p.output_len,
                                concurrency=p.concurrency, ttft_ms=p.ttft_ms.p50, tpot_ms=p.tpot_ms.p50,
                                tokens_per_s=p.output_tokens_per_s))
    lowest: dict[int, int] = {}
    for m in out:
        lowest[m.input_len] = min(lowest.get(m.input_len, m.concurrency), m.concurrency)
    for m in out:
        m.use_ttft = m.concurrency == lowest[m.input_len]
    return out, skipped


def predict(ctx, consts: Consts, m: Measured) -> dict:
    """The plan's estimate of one point with these deratings (ms, tokens/s)."""
    from deployctl.core.sizing.estimate import evaluate
    from deployctl.core.sizing.clients import Client
    from deployctl.core.sizing.serving import apply

    ctx.consts = consts
    ctx.cache.clear()
    n = evaluate(ctx, m.input_len, m.output_len, m.concurrency)
    apply(ctx, n, Client(input_len=m.input_len, output_len=m.output_len, concurrency=m.concurrency))
    return {"ttft_ms": n.ttft * 1e3, "tpot_ms": n.tpot * 1e3, "tokens_per_s": n.throughput}


def _errors(ctx, consts: Consts, pts: list[Measured]) -> list[float]:
    errs = []
    for m in pts:
        e = predict(ctx, consts, m)
        if m.tpot_ms:
            errs.append((e["tpot_ms"] - m.tpot_ms) / m.tpot_ms)
        if m.tokens_per_s:
            errs.append((e["tokens_per_s"] - m.tokens_per_s) / m.tokens_per_s)
        if m.use_ttft and m.ttft_ms:
            errs.append((e["ttft_ms"] - m.ttft_ms) / m.ttft_ms)
    return errs


def _search(f, lo: float, hi: float, steps: int = 12, rounds: int = 3) -> float:
    """argmin of f on a log grid of [lo, hi], refined around the best cell."""
    import math

    a, b = math.log(lo), math.log(hi)
    best = lo
    for _ in range(rounds):
        grid = [math.exp(a + (b - a) * i / steps) for i in range(steps + 1)]
        best = min(grid, key=f)
        cell = (b - a) / steps
        a, b = max(a, math.log(best) - cell), min(b, math.log(best) + cell)
    return best


def fit(plan, pts: list[Measured], start: Consts | None = None) -> Consts:
    """Deratings minimising the RMS relative error over the points (see the module docstring)."""
    from deployctl.core.sizing.calibration import FITTED
    from deployctl.core.sizing.estimate import context

    ctx = context(plan, consts=FITTED)
    c = start or FITTED
    for _ in range(3):
        for name in ("k_prefill", "k_hbm", "k_compute", "k_fixed"):
            best = _search(lambda v: rms(_errors(ctx, replace(c, **{name: v}), pts)), *BOUNDS)
            c = replace(c, **{name: round(best, 4)})
    return c


def per_run(plan, consts: Consts, pts: list[Measured]) -> list[dict]:
    """Each point's measured and estimated values and relative errors with `consts`."""
    from deployctl.core.sizing.estimate import context

    ctx = context(plan, consts=consts)
    rows = []
    for m in pts:
        e = predict(ctx, consts, m)
        row = {"run": m.run, "point": m.point, "concurrency": m.concurrency, "input_len": m.input_len,
               "output_len": m.output_len}
        for key, meas in (("ttft_ms", m.ttft_ms), ("tpot_ms", m.tpot_ms), ("tokens_per_s", m.tokens_per_s)):
            est = e[key] if math.isfinite(e[key]) else None       # the model's answer, stored only when a number
            row[key] = {"measured": meas, "estimated": round(est, 3) if est is not None else None,
                        "error": round((est - meas) / meas, 4) if meas and est is not None else None,
                        "fitted": key != "ttft_ms" or m.use_ttft}
        rows.append(row)
    return rows


