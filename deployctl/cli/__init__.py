"""The `deployctl` command line (typer). Commands are thin; heavy imports happen inside them."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from deployctl.cli._options import (AllowExecOpt, DebugOpt, DeployTarget, DeployTargetOpt, Strategy, FactsOpt,
                                   ForceOpt, InventoryOpt, MaxOutputOpt, OutputDirOpt, OutputFormat, OutputOpt, Target,
                                   TargetOpt)

app = typer.Typer(
    name="deployctl",
    help="Plan, render and launch deployments of large MoE models on Ascend A2/A3 clusters (engines: "
         "`deployctl engines` shows each one's supported combinations).\n\n"
         "Start with `deployctl validate -i inventory.yaml`, then `deployctl plan` to see the layout, "
         "ranks and memory fit per die, then `deployctl render -o DIR` for every file the engine needs. "
         "`deployctl preflight` probes the hosts (and discovers their device IPs); `up`, `status`, `diff`, "
         "`history`, `rollback`, `logs`, `down` run the deployment, verified on the hosts. "
         "Kubernetes: `render --target k8s` and `up|status|diff|history|rollback|down --target k8s` "
         "(the engine's Helm chart). Errors and fixes: docs/troubleshooting.md.",
    no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state = {"debug": False}


def _version(value: bool):
    if value:
        from deployctl import __version__

        typer.echo(f"deployctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: DebugOpt = False,
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
    max_output_mb: MaxOutputOpt = None,
):
    _state["debug"] = debug or os.environ.get("DEPLOYCTL_DEBUG") == "1"
    if max_output_mb is not None:       # read by every SSH executor (deployctl.executors.base.limit_bytes)
        from deployctl.executors.base import OUTPUT_ENV

        os.environ[OUTPUT_ENV] = f"{max_output_mb:g}"


@app.command()
def validate(inventory: InventoryOpt, output: OutputOpt = OutputFormat.text, facts: FactsOpt = None):
    """Check an inventory statically (no network): keys, names, devices, IPs, model, layout degrees.

    Every problem is listed with its file, line and key path. Exit 0 when valid, 2 otherwise.
    """
    from deployctl.cli.commands import run_validate

    run_validate(inventory, output.value, facts)


def _duration_ms(value: str | None, flag: str) -> float | None:
    """'50ms', '2s', '0.5s' or a bare number of milliseconds."""
    if value is None:
        return None
    import re

    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s)?\s*", value)
    if not m or float(m.group(1)) <= 0:
        from deployctl.errors import UsageError

        raise UsageError(f"{flag} {value!r} is not a duration", hint=f"e.g. {flag} 50ms or {flag} 2s")
    return float(m.group(1)) * (1000.0 if m.group(2) == "s" else 1.0)


InputLenOpt = Annotated[Optional[int], typer.Option(
    "--input-len", "--input", min=1, metavar="TOKENS", help="Input tokens per request (default: model.max_input_len).")]
OutputLenOpt = Annotated[Optional[int], typer.Option(
    "--output-len", min=1, metavar="TOKENS",
    help="Output tokens per request (default: model.max_seq_len - model.max_input_len).")]
SkuOpt = Annotated[Optional[str], typer.Option(
    "--sku", metavar="SKU", help="NPU SKU for the estimate, e.g. 910B3, 910B4, 800I-A3 (default: cluster.sku, "
                                 "preflight's npu-smi chip name with --facts, else the hardware's default).")]


@app.command()
def plan(inventory: InventoryOpt, output: OutputOpt = OutputFormat.text, facts: FactsOpt = None,
         input_len: InputLenOpt = None, output_len: OutputLenOpt = None,
         concurrency: Annotated[Optional[int], typer.Option(
             "--concurrency", min=1, help="Concurrent requests for the estimate (default: what the KV cache "
                                          "holds).")] = None,
         sku: SkuOpt = None,
         compare: Annotated[bool, typer.Option(
             "--compare", help="Also rank every layout of these servers for this workload (as `recommend`).")]
         = False):
    """Show the layout, node order, rank assignment, memory fit per die for each role, and the estimated
    performance (TPOT floor and calibrated estimate, TTFT, throughput, the binding term).

    Refuses (exit 2) a layout whose KV budget per die is <= 0 or cannot hold one max_seq_len
    sequence, with GB needed vs available. `--output json` prints the whole plan and, under
    "estimate", every term of the estimate. The estimate is a model (docs/performance-model.md),
    labelled "estimated"; `deployctl bench` measures.

    Examples:

    \b
      deployctl plan -i my.yaml
      deployctl plan -i my.yaml --input-len 3500 --output-len 1500 --concurrency 32
      deployctl plan -i my.yaml --compare --output json
    """
    from deployctl.cli.commands import run_plan

    run_plan(inventory, output.value, facts, input_len=input_len, output_len=output_len, concurrency=concurrency,
             sku=sku)
    if compare:
        from deployctl.cli.recommend import run_recommend

        run_recommend(inventory, input_len=input_len, output_len=output_len, output=output.value, sku=sku)


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
    apply_to: Annotated[Optional[Path], typer.Option(
        "--apply", metavar="FILE", help="Write the best layout into FILE: a copy of the inventory with only "
                                        "its layout replaced (never the inventory itself).")] = None,
    sku: SkuOpt = None,
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
                         output=output.value, sku=sku, maximize=maximize)
    if code:
        raise typer.Exit(code)


@app.command()
def render(inventory: InventoryOpt, out: OutputDirOpt, force: ForceOpt = False,
           output: OutputOpt = OutputFormat.text, facts: FactsOpt = None, target: TargetOpt = Target.bare_metal,
           values_only: Annotated[bool, typer.Option(
               "--values-only", help="helm: write values.yaml and the chart, not manifests.yaml (no helm needed).")]
           = False):
    """Write every file the deployment needs under DIR: plan.json and, per node, config.json, env,
    start.sh and ranktable.json (multi-node instances); pd-split adds the MindIE-MS files.

    With --target k8s (or helm): values.yaml for the ascend-llm chart, the chart itself (DIR/chart) and
    DIR/manifests.yaml from `helm template`. The rank tables and config.json in its ConfigMaps are the
    same bytes as the bare-metal files.

    Byte-stable: the same inventory always gives the same bytes. The tree is replaced atomically;
    a non-empty directory not written by deployctl is refused unless --force.
    """
    from deployctl.cli.commands import run_render

    run_render(inventory, out, force, output.value, facts, target.value, values_only)


@app.command()
def preflight(
    inventory: InventoryOpt,
    output: OutputOpt = OutputFormat.text,
    trust_new_hosts: Annotated[bool, typer.Option(
        "--trust-new-hosts", help="Accept and record host keys missing from known_hosts (never changed ones).")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds each host may take per phase.")] = 60.0,
    connect_timeout: Annotated[float, typer.Option(help="Seconds to wait for SSH to answer.")] = 10.0,
    workers: Annotated[int, typer.Option(help="Hosts probed at once.", min=1, max=512)] = 64,
    ping_sample: Annotated[int, typer.Option(help="Peers each node pings over the NPU network.", min=1)] = 16,
    run_dir: Annotated[Path, typer.Option(help="Where runs and facts are recorded.")] = Path(".deployctl"),
):
    """Probe every host read-only over SSH and prove the cluster is ready.

    Checks driver/firmware pairing and sameness, every NPU present and healthy, foreign processes,
    NIC links, net health, TLS switches, device IPs (present, unique, as in the inventory), A3 SDIDs,
    reachability between device IPs, weights, image, free ports, shm and clocks. Exit 0 when nothing
    FAILs (warnings allowed), 1 when something does, 2 when the inventory is invalid. The facts are
    saved so that `plan`/`render --facts FILE` can fill in device IPs and SDIDs.
    """
    from deployctl.cli.preflight import run

    run(inventory, output.value, trust_new_hosts, timeout, connect_timeout, workers, ping_sample, run_dir)


RunDirOpt = Annotated[Path, typer.Option("--run-dir", help="Where run records are written (relative to the "
                                                           "current directory).")]
BreakLockOpt = Annotated[bool, typer.Option(
    "--break-lock", help="Remove a deployment lock left by a killed run (shows its holder and asks first; "
                         "-y skips the question).")]
ReadyTimeoutOpt = Annotated[int, typer.Option(help="Seconds each node may take to become ready.", min=1)]


@app.command()
def up(
    inventory: InventoryOpt,
    output: OutputOpt = OutputFormat.text,
    target: DeployTargetOpt = DeployTarget.hosts,
    allow_kubeconfig_exec: AllowExecOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change and stop.")] = False,
    yes: Annotated[bool, typer.Option("-y", "--yes", help="Do not ask for confirmation.")] = False,
    skip_preflight: Annotated[bool, typer.Option("--skip-preflight", help="Do not probe the hosts (k8s: the Nodes) "
                                                                        "first.")] = False,
    trust_new_hosts: Annotated[bool, typer.Option("--trust-new-hosts", help="Accept unknown host keys.")] = False,
    ready_timeout: ReadyTimeoutOpt = 1800,
    pull: Annotated[bool, typer.Option("--pull", help="docker pull the image on every node first "
                                                      "(default: it must already be there).")] = False,
    facts: FactsOpt = None,
    break_lock: BreakLockOpt = False,
    run_dir: RunDirOpt = Path(".deployctl"),
    strategy: Annotated[Strategy, typer.Option(
        help="Several instances behind a router: rolling = a few instances at a time (drained at the router "
             "first, put back once verified); recreate = every changed instance at once.")] = Strategy.rolling,
    max_unavailable: Annotated[int, typer.Option("--max-unavailable", min=1,
                                                 help="Rolling: instances out of the router at once.")] = 1,
    drain_timeout: Annotated[int, typer.Option("--drain-timeout", min=1, help="Rolling: seconds to wait for the "
                                               "requests in flight on a drained instance.")] = 600,
):
    """Launch the engine on every node: preflight, render, show what changes, lock, apply, verify.

    Pushes each node's files as a new revision (atomically), starts instance masters first, then the
    other nodes, waits for each engine's readiness line and health endpoints (the engine's driver says
    which), and sends one chat completion. Success is read back from the hosts: every node's container must run the new revision
    (the directory it mounts), with its env, and be ready; the smoke request must answer. All-or-nothing:
    if any node fails, what this run started is stopped and what ran before is restarted and checked.
    A lock on every host keeps a second operator out; the run is added to the hosts' history.

    Device IPs the inventory leaves out come from --facts FILE, or from the latest successful
    `deployctl preflight` of this inventory under --run-dir (named in the output).

    Examples:

    \b
      deployctl preflight -i my.yaml && deployctl up -i my.yaml --dry-run
      deployctl up -i my.yaml -y --output json
      deployctl up -i my.yaml --target k8s

    Fleets (layout.replicas, or several prefill/decode instances): by default one instance at a time is
    taken out of the router, allowed to finish its requests, restarted, verified and put back, so the
    service keeps answering (--max-unavailable, --drain-timeout; --strategy recreate: all at once).
    A failed instance is restored and put back; the rollout stops there.

    \b
      deployctl up -i fleet.yaml -y --max-unavailable 2

    With --target k8s: checks the Nodes, holds a Lease in the namespace, `helm upgrade --install`,
    restarts only the instances whose files or env changed (all their pods together), and follows the
    pods until every one is ready; a failure rolls the release back to its previous revision.
    """
    if target == DeployTarget.k8s:
        from deployctl.cli.k8s import run_up_k8s

        run_up_k8s(inventory, output.value, dry_run, yes, skip_preflight, ready_timeout, run_dir,
                   break_lock=break_lock, strategy=strategy.value)
        return
    from deployctl.cli.deploy import run_operation

    run_operation("up", inventory, output.value, run_dir, dry_run=dry_run, yes=yes, skip_preflight=skip_preflight,
                  trust_new_hosts=trust_new_hosts, ready_timeout=ready_timeout, pull=pull, facts=facts,
                  break_lock=break_lock, strategy=strategy.value, max_unavailable=max_unavailable,
                  drain_timeout=drain_timeout)


@app.command()
def rollback(
    inventory: InventoryOpt,
    to: Annotated[Optional[int], typer.Option("--to", metavar="REV", help="The history revision to go back to "
                                              "(default: the last successful one before the live one).")] = None,
    output: OutputOpt = OutputFormat.text,
    target: DeployTargetOpt = DeployTarget.hosts,
    allow_kubeconfig_exec: AllowExecOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change and stop.")] = False,
    yes: Annotated[bool, typer.Option("-y", "--yes", help="Do not ask for confirmation.")] = False,
    ready_timeout: ReadyTimeoutOpt = 1800,
    break_lock: BreakLockOpt = False,
    run_dir: RunDirOpt = Path(".deployctl"),
):
    """Re-activate an earlier revision from the hosts' history, through the same locked, verified,
    all-or-nothing path as `up` (the files are still on the hosts: nothing is rendered).

    Examples:

    \b
      deployctl history -i my.yaml
      deployctl rollback -i my.yaml          # the last successful revision before the live one
      deployctl rollback -i my.yaml --to 3 -y

    With --target k8s: the helm revision (`deployctl history --target k8s` lists them).
    """
    if target == DeployTarget.k8s:
        from deployctl.cli.k8s import run_rollback_k8s

        run_rollback_k8s(inventory, output.value, to, yes, dry_run, ready_timeout, run_dir, break_lock=break_lock)
        return
    from deployctl.cli.deploy import run_operation

    run_operation("rollback", inventory, output.value, run_dir, dry_run=dry_run, yes=yes,
                  ready_timeout=ready_timeout, to=to, break_lock=break_lock)


@app.command()
def history(inventory: InventoryOpt, output: OutputOpt = OutputFormat.text,
            target: DeployTargetOpt = DeployTarget.hosts, allow_kubeconfig_exec: AllowExecOpt = False):
    """List the deployment's revisions: when, who, what, the result, which one is live and what
    changed between consecutive ones (read from the hosts; k8s: the helm release history).

    Example: deployctl history -i my.yaml --output json
    """
    if target == DeployTarget.k8s:
        from deployctl.cli.k8s import run_history_k8s

        run_history_k8s(inventory, output.value)
        return
    from deployctl.cli.history_output import run_history

    run_history(inventory, output.value)


@app.command()
def down(
    inventory: InventoryOpt,
    output: OutputOpt = OutputFormat.text,
    target: DeployTargetOpt = DeployTarget.hosts,
    allow_kubeconfig_exec: AllowExecOpt = False,
    purge: Annotated[bool, typer.Option("--purge", help="Also delete the deployed files (and history) on the "
                                                        "hosts.")] = False,
    break_lock: BreakLockOpt = False,
    yes: Annotated[bool, typer.Option("-y", "--yes", help="With --break-lock: do not ask.")] = False,
    run_dir: RunDirOpt = Path(".deployctl"),
):
    """Stop and remove this deployment's containers on every node (files are kept unless --purge).

    Locked like `up`; success is read back (no engine container left). `status` then says "down"
    (exit 0) instead of "degraded". With --target k8s: `helm uninstall` the release.
    """
    if target == DeployTarget.k8s:
        from deployctl.cli.k8s import run_down_k8s

        run_down_k8s(inventory, output.value, break_lock=break_lock, run_root=run_dir)
        return
    from deployctl.cli.deploy import run_operation

    run_operation("down", inventory, output.value, run_dir, purge=purge, break_lock=break_lock, yes=yes)


@app.command()
def status(inventory: InventoryOpt, output: OutputOpt = OutputFormat.text,
           target: DeployTargetOpt = DeployTarget.hosts, allow_kubeconfig_exec: AllowExecOpt = False,
           expect_up: Annotated[bool, typer.Option("--expect-up", help="Exit 1 when the deployment is down "
                                                                       "(for monitoring).")] = False):
    """What runs, read from the containers: per node and rank range the revision the engine mounts,
    the one `current` records (drift when they differ), container state, env, readiness.

    serving: exit 0. degraded (something is not running, ready or on its recorded revision): exit 1.
    down (after `deployctl down`): exit 0, 1 with --expect-up. unknown (a host unreachable): exit 1.
    A fleet (several instances behind a router) adds a table per instance: the history revision it runs,
    serving / draining / down / degraded, and what the router says of it (HAProxy UP, DOWN, DRAIN).
    With --target k8s: every pod of the release, its node, readiness, restarts and why it is not ready.
    """
    if target == DeployTarget.k8s:
        from deployctl.cli.k8s import run_status_k8s

        run_status_k8s(inventory, output.value)
        return
    from deployctl.cli.deploy import run_status

    run_status(inventory, output.value, expect_up)


@app.command()
def logs(
    inventory: InventoryOpt,
    output: OutputOpt = OutputFormat.text,
    host: Annotated[Optional[list[str]], typer.Option("--host", help="Only this node (repeatable).")] = None,
    since: Annotated[Optional[str], typer.Option(help="Like docker logs --since (e.g. 10m).")] = None,
    tail: Annotated[int, typer.Option(help="Lines per container.", min=1)] = 200,
    run_dir: RunDirOpt = Path(".deployctl"),
    max_log_mb: Annotated[Optional[float], typer.Option(
        "--max-log-mb", min=0.001, metavar="MB", help="Keep at most this much of each container's log (streamed "
        "to the run record; default DEPLOYCTL_MAX_LOG_MB, else 32); a longer log is cut and marked truncated.")]
    = None,
):
    """Collect the engine logs of every node into the run record and show their tail (exit 1 when a
    host could not be read)."""
    from deployctl.cli.deploy import run_logs

    run_logs(inventory, output.value, host or [], since, tail, run_dir, max_log_mb)


@app.command()
def diff(inventory: InventoryOpt, output: OutputOpt = OutputFormat.text,
         target: DeployTargetOpt = DeployTarget.hosts, facts: FactsOpt = None,
         allow_kubeconfig_exec: AllowExecOpt = False,
         run_dir: RunDirOpt = Path(".deployctl")):
    """Show what `up` would change, without changing anything (no lock taken).

    hosts: per node, the rendered files against the deployed revision and, for JSON, env and YAML
    files, the keys that change (`env HCCL_BUFFSIZE: 120 → 1050`); whether its engine would start,
    restart (its whole instance) or stay. k8s: per object of the Helm release, the differing fields.
    """
    if target == DeployTarget.k8s:
        from deployctl.cli.k8s import run_diff

        run_diff(inventory, output.value, "k8s")
        return
    from deployctl.cli.deploy import run_diff_hosts

    run_diff_hosts(inventory, output.value, facts, run_dir)


@app.command()
def bench(
    inventory: InventoryOpt,
    output: OutputOpt = OutputFormat.text,
    suite: Annotated[Optional[str], typer.Option(
        "--suite", metavar="SUITE|FILE",
        help="default (long-context + concurrency), long-context (concurrency 1; 1024, 4096, 8000 tokens in; "
             "128 out), concurrency (10 and 50 at 1024/128), or a YAML suite file (README: Benchmarking).")]
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
    smoke request, then each point of the suite (a warm-up, then the measured requests, streamed). Records
    every request, summary.json, PNG plots and report.md under --run-dir/runs/<id>-bench/. Exit 0 when
    every point measured without a failed request, 1 otherwise, 2 for a bad inventory, flag or suite file.

    Examples:

    \b
      deployctl bench -i my.yaml                                  # the field guide's two suites
      deployctl bench -i my.yaml --suite long-context
      deployctl bench -i my.yaml --input 2048 --output-len 256 --concurrency 1,8,32
      deployctl bench -i my.yaml --suite my-suite.yaml --output json
    """
    from deployctl.cli.bench import run_bench

    run_bench(inventory, output.value, suite=suite, inputs=input_len, output_len=output_len,
              concurrency=concurrency, requests=requests, warmup=warmup, duration_limit=duration_limit,
              url=url, ignore_eos=ignore_eos, run_root=run_dir)


from deployctl.cli.calibrate import calibrate as _calibrate  # noqa: E402 - issue 27

app.command("calibrate")(_calibrate)


@app.command("engines")
def engines_cmd(
    output: OutputOpt = OutputFormat.text,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print the Markdown of the README's "
                                                              "\"Supported combinations\" section.")] = False,
):
    """Show what each engine runs: per model and engine version, the runtime, whether it is supported
    (yes, no, unverified), the quantizations, the servers upstream validated and the source of each entry.

    `no` is refused by plan/render/up (exit 2); a combination no source covers is allowed with a WARN.

    Examples:

    \b
      deployctl engines
      deployctl engines --output json
      deployctl engines --markdown      # the README's "Supported combinations" block
    """
    from deployctl.cli.engines import run_engines

    run_engines(output.value, markdown)


@app.command("schema")
def schema_cmd(
    out: Annotated[Optional[Path], typer.Option("--out", "-o", metavar="FILE", help=(
        "Write to this file instead of standard output."), dir_okay=False)] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help=(
        "The inventory reference (docs/inventory.md) instead of the JSON Schema."))] = False,
):
    """Print the inventory's JSON Schema (draft 7), for editors: with the YAML language server (VS Code's YAML
    extension, Neovim, Helix) an inventory gets key completion, each key's description on hover and an error
    for a typo'd key or a wrong type while it is written.

    Point an inventory at the schema with a first line
    `# yaml-language-server: $schema=inventory.schema.json` (a path relative to the inventory, or a URL);
    the examples in a checkout use ../../deployctl/schema/inventory.schema.json. `deployctl validate` still
    checks what a schema cannot (device counts, unique IPs, layout degrees, the model catalog).

    Examples:

    \b
      deployctl schema -o inventory.schema.json
      deployctl schema --markdown -o docs/inventory.md   # the generated inventory reference
    """
    from deployctl.schema import schema_text
    from deployctl.schema.reference import reference_markdown

    text = reference_markdown() if markdown else schema_text()
    if out is None:
        sys.stdout.write(text)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        from deployctl.errors import UsageError

        raise UsageError(f"cannot write {out}: {exc.strerror or exc}", hint="pass -o with a writable path") from None
    typer.echo(f"wrote {out}", err=True)


def main() -> None:
    """Entry point: run the app and map errors to messages and exit codes (spec §2)."""
    from deployctl.cli._errors import handle

    try:
        app()
    except Exception as exc:  # noqa: BLE001 - the one place errors become exit codes
        sys.exit(handle(exc, _state["debug"]))
