"""The commands that touch no host: validate, plan, recommend, render (implementations: commands.py,
recommend.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from deployctl.cli._app import app
from deployctl.cli._options import (Arrival, ArrivalOpt, FactsOpt, ForceOpt, InventoryOpt, OutputDirOpt, OutputFormat,
                                    OutputOpt, PrefixHitOpt, RequestRateOpt, SharedPrefixOpt, Target, TargetOpt,
                                    InputLenOpt, OutputLenOpt, RunDirOpt, SkuOpt)
from deployctl.core.docs_url import doc


@app.command()
def validate(inventory: InventoryOpt, output: OutputOpt = OutputFormat.text, facts: FactsOpt = None,
             run_dir: RunDirOpt = Path(".deployctl")):
    """Check an inventory statically (no network): keys, names, devices, IPs, model, layout degrees.

    Every problem is listed with its file, line and key path. Exit 0 when valid, 2 otherwise. Device IPs,
    SDIDs and interfaces may be left out: they come from the latest `deployctl preflight` of this inventory
    (or --facts); until then validate says what preflight still has to tell.
    """
    from deployctl.cli.commands import run_validate

    run_validate(inventory, output.value, facts, run_dir)



def _duration_ms(value: str | None, flag: str) -> float | None:
    """'50ms', '2s', '0.5s' or a bare number of milliseconds."""
    if value is None:
        return None
    import re

    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s)?\s*", value)
    if not m or float(m.group(1)) <= 0:
        from deployctl.core.errors import UsageError

        raise UsageError(f"{flag} {value!r} is not a duration", hint=f"e.g. {flag} 50ms or {flag} 2s")
    return float(m.group(1)) * (1000.0 if m.group(2) == "s" else 1.0)



@app.command(epilog=f"How the estimate is made, and how far off it can be: {doc('performance-model.md')}")
def plan(inventory: InventoryOpt, output: OutputOpt = OutputFormat.text, facts: FactsOpt = None,
         input_len: InputLenOpt = None, output_len: OutputLenOpt = None,
         concurrency: Annotated[Optional[int], typer.Option(
             "--concurrency", min=1, help="Concurrent requests for the estimate (default: what the KV cache "
                                          "holds).")] = None,
         request_rate: RequestRateOpt = None, arrival: ArrivalOpt = Arrival.poisson,
         prefix_hit: PrefixHitOpt = None, shared_prefix: SharedPrefixOpt = None,
         sku: SkuOpt = None,
         compare: Annotated[bool, typer.Option(
             "--compare", help="Also rank every layout of these servers for this workload (as `recommend`).")]
         = False, run_dir: RunDirOpt = Path(".deployctl")):
    """Show the layout, node order, rank assignment, memory fit per die for each role, and the estimated
    performance (TPOT floor and calibrated estimate, TTFT, throughput, the binding term).

    Refuses (exit 2) a layout whose KV budget per die is <= 0 or cannot hold one max_seq_len
    sequence, with GB needed vs available. `--output json` prints the whole plan and, under
    "estimate", every term of the estimate. The estimate is a model, labelled "estimated";
    `deployctl bench` measures. Works before the hosts exist: device IPs are not needed to plan (they come
    from `deployctl preflight`, whose latest run is used when there is one).

    Examples:

    \b
      deployctl plan -i my.yaml
      deployctl plan -i my.yaml --input-len 3500 --output-len 1500 --concurrency 32
      deployctl plan -i my.yaml --request-rate 4 --shared-prefix 2048    # 4 req/s, a 2K system prompt
      deployctl plan -i my.yaml --compare --output json
    """
    from deployctl.cli.commands import run_plan

    load = _load(request_rate, arrival, prefix_hit, shared_prefix)
    run_plan(inventory, output.value, facts, input_len=input_len, output_len=output_len, concurrency=concurrency,
             sku=sku, run_root=run_dir, load=load)
    if compare:
        from deployctl.cli.recommend import run_recommend

        run_recommend(inventory, input_len=input_len, output_len=output_len, output=output.value, sku=sku,
                      facts=facts, run_root=run_dir, notes=False, load=load)


def _load(request_rate: float | None, arrival: Arrival, prefix_hit: float | None,
          shared_prefix: int | None) -> dict:
    """The open-loop and prefix-cache settings of plan and recommend (shared_prefix becomes a hit rate once the
    input length is known)."""
    if prefix_hit is not None and shared_prefix is not None:
        from deployctl.core.errors import UsageError

        raise UsageError("--prefix-hit and --shared-prefix both set the prefix hit rate",
                         hint="give one: --prefix-hit 0.5, or --shared-prefix TOKENS (hit = TOKENS / input length)")
    return {"request_rate": request_rate, "arrival": arrival.value, "prefix_hit": prefix_hit,
            "shared_prefix": shared_prefix}


@app.command()
def recommend(
    inventory: InventoryOpt,
    output: OutputOpt = OutputFormat.text,
    input_len: InputLenOpt = None,
    output_len: OutputLenOpt = None,
    slo_tpot: Annotated[Optional[str], typer.Option(
        "--slo-tpot", metavar="DURATION", help="Largest acceptable time per output token, e.g. 50ms.")] = None,
    slo_ttft: Annotated[Optional[str], typer.Option(
        "--slo-ttft", metavar="DURATION", help="Largest acceptable time to first token, e.g. 2s.")] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="How many layouts to print.")] = 5,
    maximize: Annotated[str, typer.Option(
        "--maximize", help="throughput_per_die (default) or throughput (of the whole deployment).")]
    = "throughput_per_die",
    request_rate: RequestRateOpt = None, arrival: ArrivalOpt = Arrival.poisson,
    prefix_hit: PrefixHitOpt = None, shared_prefix: SharedPrefixOpt = None,
    apply_to: Annotated[Optional[Path], typer.Option(
        "--apply", metavar="FILE", help="Write the best layout into FILE: a copy of the inventory with only "
                                        "its layout replaced (never the inventory itself).")] = None,
    sku: SkuOpt = None,
    facts: FactsOpt = None,
    run_dir: RunDirOpt = Path(".deployctl"),
):
    """Rank the layouts the engine accepts on these servers (presets x degrees x prefill/decode splits) by
    estimated throughput within the SLO, with the term that binds each.

    Every candidate is planned by deployctl and checked against the engine's support matrix: a combination
    the engine refuses is never proposed. Exit 0 when the best layout meets the SLO (or none was given),
    1 when none does, 2 when no layout of these servers plans.

    Examples:

    \b
      deployctl recommend -i my.yaml --input-len 3500 --output-len 1500 --slo-tpot 50ms --slo-ttft 2s
      deployctl recommend -i my.yaml --slo-tpot 100ms --apply my-recommended.yaml
      deployctl recommend -i my.yaml --output json
    """
    from deployctl.cli.recommend import run_recommend

    code = run_recommend(inventory, input_len=input_len, output_len=output_len,
                         slo_tpot_ms=_duration_ms(slo_tpot, "--slo-tpot"),
                         slo_ttft_ms=_duration_ms(slo_ttft, "--slo-ttft"), top=top, apply_to=apply_to,
                         output=output.value, sku=sku, maximize=maximize, facts=facts, run_root=run_dir,
                         load=_load(request_rate, arrival, prefix_hit, shared_prefix))
    if code:
        raise typer.Exit(code)


@app.command()
def render(inventory: InventoryOpt, out: OutputDirOpt, force: ForceOpt = False,
           output: OutputOpt = OutputFormat.text, facts: FactsOpt = None, target: TargetOpt = Target.bare_metal,
           values_only: Annotated[bool, typer.Option(
               "--values-only", help="helm: write values.yaml and the chart, not manifests.yaml (no helm needed).")]
           = False, run_dir: RunDirOpt = Path(".deployctl")):
    """Write every file the deployment needs under DIR: plan.json and, per node, config.json, env,
    start.sh and ranktable.json (multi-node instances); pd-split adds the MindIE-MS files.

    With --target k8s (or helm): values.yaml for the ascend-llm chart, the chart itself (DIR/chart) and
    DIR/manifests.yaml from `helm template`. The rank tables and config.json in its ConfigMaps are the
    same bytes as the bare-metal files. --target lws: the same chart with one LeaderWorkerSet per instance.

    Byte-stable: the same inventory always gives the same bytes. The tree is replaced atomically;
    a non-empty directory not written by deployctl is refused unless --force. Device IPs the inventory
    leaves out come from the latest `deployctl preflight` of this inventory (or --facts).
    """
    from deployctl.cli.commands import run_render

    run_render(inventory, out, force, output.value, facts, target.value, values_only, run_dir)
