"""PNG plots of a benchmark (matplotlib, imported here only, without pyplot: Agg, no display, no global state).

* ttft_vs_input.png, tpot_vs_input.png            - one line per (concurrency, output length) with >= 2 inputs;
* ttft_vs_concurrency.png, tpot_vs_concurrency.png - one line per (input, output length) with >= 2 concurrencies;
* throughput_vs_concurrency.png                    - output tokens/s of the deployment, same lines.

The median is the line, the p90 a lighter band above it, the plan's estimate (when there is one) dashed. A plot
whose x axis has a single value in every group is not drawn (the report says so).
"""

from __future__ import annotations

from pathlib import Path

PLOTS = (
    # file, y key, stat (None: a scalar), x key, group keys, title, y label
    ("ttft_vs_input.png", "ttft_ms", "p50", "input_len", ("concurrency", "output_len"),
     "TTFT vs input length", "time to first token (ms)"),
    ("tpot_vs_input.png", "tpot_ms", "p50", "input_len", ("concurrency", "output_len"),
     "TPOT vs input length", "time per output token (ms)"),
    ("ttft_vs_concurrency.png", "ttft_ms", "p50", "concurrency", ("input_len", "output_len"),
     "TTFT vs concurrency", "time to first token (ms)"),
    ("tpot_vs_concurrency.png", "tpot_ms", "p50", "concurrency", ("input_len", "output_len"),
     "TPOT vs concurrency", "time per output token (ms)"),
    ("throughput_vs_concurrency.png", "output_tokens_per_s", None, "concurrency", ("input_len", "output_len"),
     "Output throughput vs concurrency", "output tokens/s (deployment)"),
)
LABELS = {"concurrency": "concurrency {}", "output_len": "out {}", "input_len": "in {}"}


def _groups(rows: list[dict], x: str, keys: tuple[str, ...]) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    return {g: sorted(rs, key=lambda r: r[x]) for g, rs in groups.items() if len({r[x] for r in rs}) >= 2}


def _y(row: dict, key: str, stat: str | None):
    v = row.get(key)
    if stat is not None:
        v = v.get(stat) if isinstance(v, dict) else None
    return v


def write_plots(rows: list[dict], out_dir: Path, title: str) -> tuple[list[Path], list[str]]:
    """Draw what the measured points allow; (files written, notes on the plots left out).

    `rows`: per point the summary (stats.summarize) plus `comparison` (estimate.compare).

    Drawn with matplotlib's own defaults: a `matplotlibrc` in the working directory (read at import) could
    otherwise make the controller run programs (`text.usetex` runs latex and dvipng from PATH)."""
    import matplotlib

    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        return _draw(rows, out_dir, title)


def _draw(rows: list[dict], out_dir: Path, title: str) -> tuple[list[Path], list[str]]:
    from matplotlib.figure import Figure

    out_dir.mkdir(parents=True, exist_ok=True)
    written, notes = [], []
    ok_rows = [r for r in rows if r.get("ok")]
    for name, key, stat, x, keys, what, ylabel in PLOTS:
        groups = _groups(ok_rows, x, keys)
        if not groups:
            notes.append(f"{name}: not drawn, no {'input length' if x == 'input_len' else 'concurrency'} series "
                         "with two or more values")
            continue
        fig = Figure(figsize=(8, 5), dpi=110)
        ax = fig.subplots()
        for i, (g, rs) in enumerate(sorted(groups.items())):
            label = ", ".join(LABELS[k].format(v) for k, v in zip(keys, g))
            color = f"C{i % 10}"
            xs = [r[x] for r in rs]
            ys = [_y(r, key, stat) for r in rs]
            pts = [(a, b) for a, b in zip(xs, ys) if b is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=color, label=f"{label} (p50)"
                        if stat else label)
                for px, py in pts:
                    ax.annotate(f"{py:,.0f}" if py >= 100 else f"{py:.1f}", (px, py), textcoords="offset points",
                                xytext=(0, 6), ha="center", fontsize=8)
            if stat:
                hi = [(r[x], _y(r, key, "p90")) for r in rs]
                hi = [(a, b) for a, b in hi if b is not None]
                lo = [(a, b) for a, b in pts]
                if len(hi) == len(lo) and hi:
                    ax.fill_between([p[0] for p in lo], [p[1] for p in lo], [p[1] for p in hi], color=color,
                                    alpha=0.15, label=f"{label} (p50..p90)")
            est = [(r[x], ((r.get("comparison") or {}).get(key) or {}).get("estimated")) for r in rs]
            est = [(a, b) for a, b in est if b is not None]
            if est:
                ax.plot([p[0] for p in est], [p[1] for p in est], linestyle="--", marker="x", color=color,
                        label=f"{label} (estimate)")
        ax.set_title(f"{title}: {what}")
        ax.set_xlabel("input tokens" if x == "input_len" else "concurrent requests")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out_dir / name
        fig.savefig(path, format="png")
        written.append(path)
    if not written and ok_rows:
        notes = ["no plots: every series has a single input length and a single concurrency (a plot needs two "
                 "or more values on its x axis)"]
    return written, notes
