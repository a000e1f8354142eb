"""`deployctl bench`: load the deployed endpoint with AIPerf, suite by suite, and compare with the plan's estimate."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import typer

from deployctl.cli._output import echo_json, esc
from deployctl.cli._output import run_console as _console

DEFAULT_WARMUP = 2
DEFAULT_DURATION_LIMIT = 300.0


class BenchReporter:
    """Progress while the points run (stderr with --output json, where stdout is the JSON)."""

    def __init__(self, json_mode: bool):
        self.con = _console(stderr=json_mode)

    def step(self, message: str) -> None:
        self.con.print(esc(message))

    def point(self, row: dict) -> None:
        from deployctl.features.bench.report import fmt

        if row["failure"]:
            self.con.print(f"[red]  ✗ {esc(row['failure'])}[/]")
            return
        mark = "[green]  ✓[/]" if not row["errors"] else "[yellow]  ![/]"
        extra = f", {row['errors']} failed" if row["errors"] else ""
        extra += f", stopped by the duration limit after {row['measured']}" if row["timed_out"] else ""
        self.con.print(mark + esc(f" {row['ok']} ok{extra}: TTFT p50 {fmt(row['ttft_ms']['p50'])} ms, TPOT p50 "
                                  f"{fmt(row['tpot_ms']['p50'])} ms, {fmt(row['output_tokens_per_s'])} tokens/s "
                                  f"({row['elapsed_s']:.0f} s)"))


def _check_url(url: str) -> str:
    from deployctl.core.errors import UsageError

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise UsageError(f"--url {url!r}: expected http(s)://HOST:PORT (the OpenAI API's base, without /v1)",
                         hint="e.g. --url http://10.0.0.1:1025; by default the deployment's entry point is used")
    try:
        parts.port
    except ValueError:
        raise UsageError(f"--url {url!r}: the port is not a number", hint="e.g. --url http://10.0.0.1:1025") from None
    return url.rstrip("/")


def _target(inventory: Path, url: str | None):
    """The endpoint and the plan: the deployment's entry point (instance master, MindIE-MS coordinator or vLLM
    proxy), or --url for another front (a load balancer) of the same deployment."""
    from deployctl.features.bench.run import Target
    from deployctl.app.plan import deployed
    from deployctl.core.render.processes import entry_url
    from deployctl.core.errors import ExecutionError

    ctx = deployed(inventory)
    inv, plan = ctx.inventory, ctx.plan              # a refusal points into the inventory
    target = _check_url(url) if url else entry_url(plan)
    if not target:
        raise ExecutionError(f"{inventory}: the plan names no endpoint clients can use",
                             hint="pass --url http://HOST:PORT")
    dies = len(plan.nodes) * inv.devices_per_node
    desc = (f"{plan.model_display} {inv.model.quant} on {len(plan.nodes)} x {plan.hardware.upper()} ({dies} dies), "
            f"{plan.engine.display} {plan.engine.version or ''}".rstrip() + f", preset {plan.preset}")
    return Target(url=target, model=inv.model.served_name, description=desc, dies=dies, plan=plan)


def run_bench(inventory: Path, output: str = "text", *, suite: str | None = None, inputs: str | None = None,
              output_len: str | None = None, concurrency: str | None = None, requests: int | None = None,
              warmup: int | None = None, duration_limit: float | None = None, url: str | None = None,
              ignore_eos: bool = True, run_root: Path = Path(".deployctl"), request_rate: float | None = None,
              arrival: str | None = None, shared_prefix: int | None = None) -> None:
    """Run the benchmark and print it; exit 0 when every point measured without a failed request, 1 otherwise,
    2 for bad input (inventory, flags, suite file)."""
    from deployctl.features.bench.extra import require

    require()       # the bench extra (AIPerf, plots) before anything else: exit 2 with the command to install it
    from deployctl.features.bench.run import BenchOptions, run_benchmark
    from deployctl.features.bench.suites import resolve
    from deployctl.core.errors import UsageError

    chosen = resolve(suite, inputs, output_len, concurrency, requests, request_rate, arrival, shared_prefix)
    if warmup is not None and warmup < 0:
        raise UsageError(f"--warmup {warmup}: must be 0 or more")
    if duration_limit is not None and duration_limit <= 0:
        raise UsageError(f"--duration-limit {duration_limit}: must be more than 0 seconds")
    target = _target(inventory, url)
    opts = BenchOptions(
        suite=chosen,
        warmup=warmup if warmup is not None else chosen.warmup if chosen.warmup is not None else DEFAULT_WARMUP,
        duration_limit=float(duration_limit or chosen.duration_limit or DEFAULT_DURATION_LIMIT),
        ignore_eos=ignore_eos, run_root=run_root)
    reporter = BenchReporter(output == "json")
    try:
        res = run_benchmark(target, opts, reporter)
    except KeyboardInterrupt:
        reporter.con.print("[yellow]■ bench canceled: what was measured so far is in the run record[/]")
        raise typer.Exit(130) from None
    if output == "json":
        echo_json(dict(res.doc, report=str(res.report), plots=[str(p) for p in res.plots]))
        raise typer.Exit(res.exit_code)
    print_bench(res)
    raise typer.Exit(res.exit_code)


def print_bench(res) -> None:
    from rich.table import Table

    from deployctl.features.bench.report import fmt, load_text, ratio, triple

    doc = res.doc
    con = _console()
    t = Table(title=f"Measured: {doc['target']['model']} at {doc['target']['url']} (p50 / p90 / p99)",
              title_justify="left")
    for col, right in (("point", False), ("conc", True), ("in / out", True), ("ok / err", True),
                       ("TTFT ms", True), ("TPOT ms", True), ("E2E s", True), ("out tok/s", True),
                       ("tok/s/die", True)):
        t.add_column(col, justify="right" if right else "left")
    loads = [load_text(p) for p in doc["points"]]
    if any(loads):
        t.add_column("load")
    for p, load in zip(doc["points"], loads):
        t.add_row(esc(p["point"]), str(p["concurrency"]), f"{p['input_len']} / {p['output_len']}",
                  f"{p['ok']} / {p['errors']}", triple(p["ttft_ms"]), triple(p["tpot_ms"]),
                  triple(p["e2e_ms"], 0.001, 2), fmt(p["output_tokens_per_s"]), fmt(p["per_die_tokens_per_s"], 2),
                  *([esc(load or "closed loop")] if any(loads) else []))
    con.print(t)
    e = Table(title="Against the plan's estimate (ratio = measured / estimated)", title_justify="left")
    for col in ("point", "TTFT p50", "est. TTFT", "ratio", "TPOT p50", "est. TPOT", "ratio", "out tok/s",
                "est. tok/s", "ratio"):
        e.add_column(col, justify="left" if col == "point" else "right")
    for p in doc["points"]:
        c = p["comparison"]
        cells = []
        for k in ("ttft_ms", "tpot_ms", "output_tokens_per_s"):
            cells += [fmt(c[k]["measured"]), fmt(c[k]["estimated"]), ratio(c[k]["ratio"])]
        e.add_row(esc(p["point"]), *cells)
    con.print(e)
    if doc.get("estimate_note"):
        con.print(esc(f"  note: {doc['estimate_note']}"))
    for n in doc.get("notes") or []:
        con.print(esc(f"  note: {n}"))
    for p in doc["points"]:
        if p["failure"]:
            con.print("[red]" + esc(f"✗ {p['point']}: {p['failure']}") + "[/]")
        for k in p["error_kinds"]:
            con.print(esc(f"  {p['point']}: {k['count']} x {k['error']}"))
    if res.plots:
        con.print(esc(f"plots: {', '.join(str(x) for x in res.plots)}"))
    con.print(esc(f"report: {res.report}"))
    line = "✓ measured every point" if doc["status"] == "successful" else f"✗ bench {doc['status']}"
    con.print(("[green]" if doc["status"] == "successful" else "[red]") + esc(f"{line}; record: {doc['run']}") + "[/]")
