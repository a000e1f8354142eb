"""`deployctl calibrate`: fit the performance model's deratings to this cluster's own `deployctl bench` runs
(deployctl.features.bench.calibrate does the work; this prints it). `plan` and `recommend` use the result until
`deployctl calibrate --remove`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from deployctl.cli._options import InventoryOpt, OutputFormat, OutputOpt
from deployctl.cli._output import esc


def calibrate(
    inventory: InventoryOpt,
    runs: Annotated[Optional[list[str]], typer.Argument(
        metavar="RUN", help="Bench runs to fit (ids under --run-dir/runs or directories); default: every "
                                 "bench run there of this model and size.")] = None,
    output: OutputOpt = OutputFormat.text,
    remove: Annotated[bool, typer.Option("--remove", help="Drop this cluster's calibration (plan and recommend "
                                                          "go back to the published fit).")] = False,
    run_dir: Annotated[Path, typer.Option("--run-dir", help="Where run records are (relative to the current "
                                                            "directory); the calibration is stored in "
                                                            "RUN_DIR/calibration/<cluster>.json.")]
    = Path(".deployctl"),
):
    """Fit the performance model's deratings (k_hbm, k_compute, k_prefill, k_fixed) to this cluster's bench runs,
    show each point's error before and after, and store the fit for `plan` and `recommend` (they name it in their
    output).

    k_prefill is fitted to the median TTFT at each input length's lowest concurrency (one prefill, no queueing);
    k_hbm, k_compute and k_fixed (per-step fixed costs) to the median TPOT and the throughput of every point.
    Exit 0 when stored (or removed), 2 when there is nothing to fit or a run's summary.json (or the stored
    calibration) is not one deployctl wrote: the file and the key are named.

    Examples:

    \b
      deployctl bench -i my.yaml --input 2048 --output-len 256 --concurrency 1,8,32
      deployctl calibrate -i my.yaml
      deployctl calibrate -i my.yaml 20260101T120000.000000Z-bench --output json
      deployctl calibrate -i my.yaml --remove
    """
    from deployctl.cli._output import echo_json
    from deployctl.app.plan import deployed
    from deployctl.core.errors import UsageError
    from deployctl.core.models.rundata import MAX_FIT_POINTS
    from deployctl.features.bench import calibrate as cu
    from deployctl.io import calibration_store as store
    from deployctl.core.sizing.calibration import fitted_for

    ctx = deployed(inventory)
    inv = ctx.inventory
    cluster = inv.cluster.name
    if remove:
        gone = store.remove(cluster, run_dir)
        if output.value == "json":
            echo_json({"cluster": cluster, "removed": gone, "file": str(store.path_for(cluster, run_dir))})
        else:
            typer.echo(f"{'removed' if gone else 'no calibration stored for'} {cluster} "
                       f"({store.path_for(cluster, run_dir)})")
        return
    plan = ctx.plan                                  # a refusal points into the inventory
    summaries = cu.bench_runs(run_dir, runs)
    pts, skipped = cu.points(summaries, model=inv.model.served_name,
                             dies=len(plan.nodes) * inv.devices_per_node, max_seq_len=inv.model.max_seq_len)
    if not pts:
        raise UsageError(f"no measured bench point of {inv.model.served_name} on this cluster under {run_dir}/runs"
                         + (f" ({'; '.join(skipped[:3])})" if skipped else ""),
                         hint="run `deployctl bench -i INV` first (several concurrencies), or name the runs")
    if len(pts) > MAX_FIT_POINTS:
        raise UsageError(f"{len(pts)} measured bench points under {run_dir}/runs: calibrate fits at most "
                         f"{MAX_FIT_POINTS} (each costs the fit about a second)",
                         hint="name the runs to fit: `deployctl calibrate -i INV RUN...`")
    consts = cu.fit(plan, pts)
    before = cu.per_run(plan, fitted_for(inv.engine_spec), pts)     # what plan used: the engine's deratings
    rows = cu.per_run(plan, consts, pts)
    ids = sorted({p.run for p in pts})
    where = store.save(cluster, consts, ids, rows, run_dir)
    doc = store.load(cluster, run_dir)
    if output.value == "json":
        echo_json(dict(doc, before=before, skipped=skipped))
        return
    _print(doc, before, rows, skipped, where)


def _print(doc: dict, before: list[dict], rows: list[dict], skipped: list[str], where: Path) -> None:
    from rich.table import Table

    from deployctl.cli._output import run_console

    con = run_console()
    k = doc["consts"]
    con.print(esc(f"✓ {doc['cluster']}: deratings k_hbm {k['k_hbm']:.3f}, k_compute {k['k_compute']:.3f}, "
                  f"k_prefill {k['k_prefill']:.3f}, k_fixed {k.get('k_fixed', 1.0):.3f} {cu_label(doc)}; "
                  f"RMS error {doc['rms_error']:.1%}; stored in {where}"))
    t = Table(title="Fit error per point (estimate - measured) / measured: published fit -> calibrated",
              title_justify="left")
    for col in ("run", "point", "conc", "TTFT p50 ms", "error", "TPOT p50 ms", "error", "out tok/s", "error"):
        t.add_column(col, justify="left" if col in ("run", "point") else "right")
    for b, r in zip(before, rows):
        cells = []
        for key in ("ttft_ms", "tpot_ms", "tokens_per_s"):
            m = r[key]["measured"]
            fitted = "" if r[key]["fitted"] else " (not fitted)"
            cells += [f"{m:,.1f}" if m is not None else "-", (f"{_pct(b[key]['error'])} -> "
                                                               f"{_pct(r[key]['error'])}{fitted}")]
        t.add_row(esc(r["run"][:24]), esc(r["point"]), str(r["concurrency"]), *cells)
    con.print(t)
    for s in skipped:
        con.print(esc(f"  skipped: {s}"))
    con.print(esc("  plan and recommend use it until `deployctl calibrate --remove`"))


def cu_label(doc: dict) -> str:
    from deployctl.core.sizing.calibration import label

    return label(doc)


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.1%}"
