"""The `deployctl` command line (typer). Commands are thin; heavy imports happen inside them."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from deployctl.cli._options import (DebugOpt, DeployTarget, DeployTargetOpt, FactsOpt, ForceOpt, InventoryOpt,
                                   OutputDirOpt, OutputFormat, OutputOpt, Target, TargetOpt)

app = typer.Typer(
    name="deployctl",
    help="Plan, render and launch MindIE deployments of large MoE models on Ascend A2/A3 clusters.\n\n"
         "Start with `deployctl validate -i inventory.yaml`, then `deployctl plan` to see the layout, "
         "ranks and memory fit per die, then `deployctl render -o DIR` for every file the engine needs. "
         "`deployctl preflight` probes the hosts; `up`, `status`, `diff`, `logs`, `down` run the deployment. "
         "Kubernetes: `render --target helm` and `up|status|diff|down --target k8s` (the mindie Helm chart).",
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
):
    _state["debug"] = debug or os.environ.get("DEPLOYCTL_DEBUG") == "1"


@app.command()
def validate(inventory: InventoryOpt, output: OutputOpt = OutputFormat.text, facts: FactsOpt = None):
    """Check an inventory statically (no network): keys, names, devices, IPs, model, layout degrees.

    Every problem is listed with its file, line and key path. Exit 0 when valid, 2 otherwise.
    """
    from deployctl.cli.commands import run_validate

    run_validate(inventory, output.value, facts)


@app.command()
def plan(inventory: InventoryOpt, output: OutputOpt = OutputFormat.text, facts: FactsOpt = None):
    """Show the layout, node order, rank assignment and memory fit per die for each role.

    Refuses (exit 2) a layout whose KV budget per die is <= 0 or cannot hold one max_seq_len
    sequence, with GB needed vs available. `--output json` prints the whole plan.
    """
    from deployctl.cli.commands import run_plan

    run_plan(inventory, output.value, facts)


@app.command()
def render(inventory: InventoryOpt, out: OutputDirOpt, force: ForceOpt = False,
           output: OutputOpt = OutputFormat.text, facts: FactsOpt = None, target: TargetOpt = Target.bare_metal,
           values_only: Annotated[bool, typer.Option(
               "--values-only", help="helm: write values.yaml and the chart, not manifests.yaml (no helm needed).")]
           = False):
    """Write every file the deployment needs under DIR: plan.json and, per node, config.json, env,
    start.sh and ranktable.json (multi-node instances); pd-split adds the MindIE-MS files.

    With --target helm: values.yaml for the mindie chart, the chart itself (DIR/chart) and
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
    workers: Annotated[int, typer.Option(help="Hosts probed at once.", min=1, max=512)] = 32,
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


RunDirOpt = Annotated[Path, typer.Option("--run-dir", help="Where run records are written.")]


@app.command()
def up(
    inventory: InventoryOpt,
    output: OutputOpt = OutputFormat.text,
    target: DeployTargetOpt = DeployTarget.hosts,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change and stop.")] = False,
    yes: Annotated[bool, typer.Option("-y", "--yes", help="Do not ask for confirmation.")] = False,
    skip_preflight: Annotated[bool, typer.Option("--skip-preflight", help="Do not probe the hosts (k8s: the Nodes) "
                                                                        "first.")] = False,
    trust_new_hosts: Annotated[bool, typer.Option("--trust-new-hosts", help="Accept unknown host keys.")] = False,
    ready_timeout: Annotated[int, typer.Option(help="Seconds each node may take to become ready.")] = 1800,
    pull: Annotated[bool, typer.Option("--pull", help="docker pull the image on every node first "
                                                      "(default: it must already be there).")] = False,
    run_dir: RunDirOpt = Path(".deployctl"),
):
    """Launch the engine on every node: preflight, render, show what changes, apply, verify.

    Pushes each node's files as a new revision (atomically), starts instance masters first, then the
    other nodes, waits for `Daemon start success!` and the health endpoint, and sends one chat
    completion. All-or-nothing: if any node fails, what this run started is stopped and the previous
    revision is restarted where there was one; the failing host and its last log lines are named.
    Re-running with no change does nothing. Everything is recorded under --run-dir.

    With --target k8s: checks the Nodes (names, the IPs the rank table uses, accelerator-type, NPUs),
    shows what changes in the release, runs `helm upgrade --install` with the rendered values,
    restarts only the instances whose files or env changed (all their pods together), and follows the
    pods until every one is ready. A pod that fails (crash loop, image pull, unschedulable) or is not
    ready by --ready-timeout is named with its events, and the release goes back to its previous
    revision (uninstalled if there was none).
    """
    if target == DeployTarget.k8s:
        from deployctl.cli.k8s import run_up_k8s

        run_up_k8s(inventory, output.value, dry_run, yes, skip_preflight, ready_timeout, run_dir)
        return
    from deployctl.cli.deploy import run_up

    run_up(inventory, output.value, dry_run, yes, skip_preflight, trust_new_hosts, ready_timeout, run_dir, pull)


@app.command()
def down(
    inventory: InventoryOpt,
    output: OutputOpt = OutputFormat.text,
    target: DeployTargetOpt = DeployTarget.hosts,
    purge: Annotated[bool, typer.Option("--purge", help="Also delete the deployed files on the hosts.")] = False,
    run_dir: RunDirOpt = Path(".deployctl"),
):
    """Stop and remove this deployment's containers on every node (files are kept unless --purge).

    With --target k8s: `helm uninstall` the release (Ascend Operator's rings-config ConfigMaps stay).
    """
    if target == DeployTarget.k8s:
        from deployctl.cli.k8s import run_down_k8s

        run_down_k8s(inventory, output.value)
        return
    from deployctl.cli.deploy import run_down

    run_down(inventory, output.value, purge, run_dir)


@app.command()
def status(inventory: InventoryOpt, output: OutputOpt = OutputFormat.text,
           target: DeployTargetOpt = DeployTarget.hosts):
    """Per node and rank range: deployed revision, engine container state, readiness (health endpoint).

    Exit 1 when anything is degraded (a container not running or not ready, an unreachable host, nodes
    of one instance on different revisions). With --target k8s: every pod of the release, its node,
    readiness, restarts and why it is not ready (with its warning events).
    """
    if target == DeployTarget.k8s:
        from deployctl.cli.k8s import run_status_k8s

        run_status_k8s(inventory, output.value)
        return
    from deployctl.cli.deploy import run_status

    run_status(inventory, output.value)


@app.command()
def logs(
    inventory: InventoryOpt,
    output: OutputOpt = OutputFormat.text,
    host: Annotated[Optional[list[str]], typer.Option("--host", help="Only this node (repeatable).")] = None,
    since: Annotated[Optional[str], typer.Option(help="Like docker logs --since (e.g. 10m).")] = None,
    tail: Annotated[int, typer.Option(help="Lines per container.", min=1)] = 200,
    run_dir: RunDirOpt = Path(".deployctl"),
):
    """Collect the engine logs of every node into the run record and show their tail."""
    from deployctl.cli.deploy import run_logs

    run_logs(inventory, output.value, host or [], since, tail, run_dir)


@app.command()
def diff(inventory: InventoryOpt, output: OutputOpt = OutputFormat.text,
         target: DeployTargetOpt = DeployTarget.hosts):
    """Show what `up` would change, without changing anything.

    hosts: per node, the rendered files against the deployed revision (new/changed/removed) and whether
    its engine would start, restart (its whole instance) or stay. k8s: per object of the Helm release,
    rendered manifest against the live object (the differing fields), and which instances would restart.
    """
    from deployctl.cli.k8s import run_diff

    run_diff(inventory, output.value, target.value)


def main() -> None:
    """Entry point: run the app and map errors to messages and exit codes (spec §2)."""
    from deployctl.cli._errors import handle

    try:
        app()
    except Exception as exc:  # noqa: BLE001 - the one place errors become exit codes
        sys.exit(handle(exc, _state["debug"]))
