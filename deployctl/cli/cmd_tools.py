"""The tools around a deployment: bench, engines, schema, init."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from deployctl.cli._app import app
from deployctl.cli._options import (Arrival, InventoryOpt, OutputFormat, OutputOpt, RunDirOpt)
from deployctl.core.docs_url import doc


@app.command()
def bench(
    inventory: InventoryOpt,
    output: OutputOpt = OutputFormat.text,
    suite: Annotated[Optional[str], typer.Option(
        "--suite", metavar="SUITE|FILE",
        help="default (long-context + concurrency), long-context (concurrency 1; 1024, 4096, 8000 tokens in; "
             f"128 out), concurrency (10 and 50 at 1024/128), or a YAML suite file ({doc('benchmarking.md')}).")]
    = None,
    input_len: Annotated[Optional[str], typer.Option(
        "--input", metavar="TOKENS", help="Input tokens per request, e.g. 1024 or 1024,4096 (a custom suite: "
                                          "every combination of --input, --output-len, --concurrency).")] = None,
    output_len: Annotated[Optional[str], typer.Option(
        "--output-len", metavar="TOKENS", help="Output tokens per request, e.g. 128 or 128,512.")] = None,
    concurrency: Annotated[Optional[str], typer.Option(
        "--concurrency", metavar="N", help="Concurrent requests, e.g. 1 or 1,10,50.")] = None,
    requests: Annotated[Optional[int], typer.Option(
        "--requests", min=1, help="Requests measured per point (default: max(5, 4 x concurrency)).")] = None,
    warmup: Annotated[Optional[int], typer.Option(
        "--warmup", min=0, help="Warm-up requests per point, not measured (default 2).")] = None,
    duration_limit: Annotated[Optional[float], typer.Option(
        "--duration-limit", metavar="SECONDS", min=1,
        help="Seconds of measurement per point at most: then no new request is sent and those in flight "
             "get 60 s more (default 300).")] = None,
    request_rate: Annotated[Optional[float], typer.Option(
        "--request-rate", metavar="REQ/S", min=0.0001,
        help="An open loop: send REQ/S requests per second whether or not the earlier ones were answered (as users "
             "arrive), with --concurrency as the ceiling on requests in flight; throughput then follows the rate "
             "(about REQ/S x output tokens) until the engine saturates. Default: a closed loop, each of "
             "--concurrency clients sending its next request when its answer is complete.")] = None,
    arrival: Annotated[Optional[Arrival], typer.Option(
        "--arrival", help="With --request-rate: poisson (exponential gaps, bursts as real traffic has; the "
                          "default) or fixed (equal gaps).")] = None,
    shared_prefix: Annotated[Optional[int], typer.Option(
        "--shared-prefix", metavar="TOKENS", min=1,
        help="Every prompt starts with the same TOKENS tokens (a system prompt) and differs after them, so an "
             "engine's prefix cache computes them once: TTFT drops for the cached share (TOKENS / input). "
             "Default: prompts share nothing.")] = None,
    url: Annotated[Optional[str], typer.Option(
        "--url", metavar="URL", help="Measure this http(s)://HOST:PORT instead of the deployment's entry point "
                                     "(e.g. a load balancer in front of it).")] = None,
    ignore_eos: Annotated[bool, typer.Option(
        "--ignore-eos/--no-ignore-eos", help="Ask the engine to generate all the output tokens (ignore_eos).")]
    = True,
    run_dir: RunDirOpt = Path(".deployctl"),
):
    """Measure the deployed endpoint with AIPerf: TTFT, TPOT, end-to-end latency and output throughput per
    point (p50/p90/p99), compared with the plan's estimate.

    Sends to the deployment's entry point (instance master, MindIE-MS coordinator or vLLM proxy) one
    smoke request, then each point of the suite (a warm-up, then the measured requests, streamed). The load
    flags (--request-rate, --arrival, --shared-prefix) apply to every point, and each point's estimate is
    made for the same load (a suite file sets them per point: request_rate, arrival, shared_prefix). Records
    every request, summary.json, PNG plots and report.md under --run-dir/runs/<id>-bench/. Exit 0 when
    every point measured without a failed request, 1 otherwise, 2 for a bad inventory, flag or suite file.

    Needs the bench extra (AIPerf and the plotting libraries, not in the core install); without it, exit 2
    naming it:

    \b
      pip install 'deployctl[bench]'

    Examples:

    \b
      deployctl bench -i my.yaml                                  # the built-in suites: long-context, concurrency
      deployctl bench -i my.yaml --suite long-context
      deployctl bench -i my.yaml --input 2048 --output-len 256 --concurrency 1,8,32
      deployctl bench -i my.yaml --input 2048 --output-len 256 --concurrency 64 --request-rate 2
      deployctl bench -i my.yaml --input 2048 --output-len 256 --concurrency 8 --shared-prefix 1536
      deployctl bench -i my.yaml --suite my-suite.yaml --output json
    """
    from deployctl.cli.bench import run_bench

    run_bench(inventory, output.value, suite=suite, inputs=input_len, output_len=output_len,
              concurrency=concurrency, requests=requests, warmup=warmup, duration_limit=duration_limit,
              url=url, ignore_eos=ignore_eos, run_root=run_dir, request_rate=request_rate,
              arrival=arrival.value if arrival is not None else None, shared_prefix=shared_prefix)


from deployctl.cli.calibrate import calibrate as _calibrate  # noqa: E402 - listed after bench in --help

app.command("calibrate")(_calibrate)

from deployctl.cli.weights import weights_app as _weights  # noqa: E402

app.add_typer(_weights, name="weights")

from deployctl.cli.observe import observe_app as _observe  # noqa: E402 - its command group, after calibrate

app.add_typer(_observe, name="observe")


@app.command("engines")
def engines_cmd(
    output: OutputOpt = OutputFormat.text,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print the support matrix as Markdown tables (the "
                                                              "\"Supported combinations\" section the project "
                                                              "publishes).")] = False,
):
    """Show what each engine runs: per model and engine version, the runtime, whether it is supported
    (yes, no, unverified), the quantizations, the servers upstream validated and the source of each entry.

    `no` is refused by plan/render/up (exit 2); a combination no source covers is allowed with a WARN.

    Examples:

    \b
      deployctl engines
      deployctl engines --output json
      deployctl engines --markdown      # the "Supported combinations" tables, in Markdown
    """
    from deployctl.cli.engines import run_engines

    run_engines(output.value, markdown)


@app.command("schema")
def schema_cmd(
    out: Annotated[Optional[Path], typer.Option("--out", "-o", metavar="FILE", help=(
        "Write to this file instead of standard output."), dir_okay=False)] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help=(
        f"The inventory reference in Markdown (every key, its type, default and meaning; published as "
        f"{doc('inventory.md')}) instead of the JSON Schema."))] = False,
):
    """Print the inventory's JSON Schema (draft 7), for editors: with the YAML language server (VS Code's YAML
    extension, Neovim, Helix) an inventory gets key completion, each key's description on hover and an error
    for a typo'd key or a wrong type while it is written.

    Point an inventory at the schema with a first line
    `# yaml-language-server: $schema=inventory.schema.json` (a path relative to the inventory, or a URL);
    the inventories `deployctl init` writes name the inventory.schema.json it writes beside them.
    `deployctl validate` still checks what a schema cannot (device counts, unique IPs, layout degrees, the
    model catalog).

    Examples:

    \b
      deployctl schema -o inventory.schema.json
      deployctl schema --markdown -o inventory.md        # the inventory reference, every key
    """
    from deployctl.core.schema import schema_text
    from deployctl.core.schema.reference import reference_markdown

    text = reference_markdown() if markdown else schema_text()
    if out is None:
        sys.stdout.write(text)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        from deployctl.core.errors import UsageError

        raise UsageError(f"cannot write {out}: {exc.strerror or exc}", hint="pass -o with a writable path") from None
    typer.echo(f"wrote {out}", err=True)


@app.command("init")
def init_cmd(
    directory: Annotated[Path, typer.Argument(
        metavar="[DIR]", help="Where to write the inventories/ folder (created if missing).", file_okay=False)]
    = Path("."),
    force: Annotated[bool, typer.Option("--force", help="Replace files that exist already (otherwise nothing is "
                                                        "written and each one is named, exit 2).")] = False,
    output: OutputOpt = OutputFormat.text,
):
    """Write a commented sample inventory and the examples to start from, from the installed package:
    DIR/inventories/sample.yaml (every key with what it does and its default), DIR/inventories/examples/ (one
    inventory per layout and engine, with the hccn.conf copies some of them read device IPs from) and
    DIR/inventories/inventory.schema.json (the JSON Schema the inventories' first line names, for editors).

    Needs no network and no checkout. Refuses (exit 2) when a file it would write exists, naming each one,
    unless --force.

    Examples:

    \b
      deployctl init                         # ./inventories/
      deployctl init my-cluster              # my-cluster/inventories/
      deployctl plan -i inventories/sample.yaml
    """
    from deployctl.cli.init import run_init

    run_init(directory, force, output.value)
