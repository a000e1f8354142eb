"""The commands that act on the hosts or the cluster: preflight, up, rollback, history, down, status, logs,
diff, watch (implementations: preflight.py, deploy.py, k8s.py, history_output.py, watch.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from deployctl.cli._app import app
from deployctl.cli._options import (K8S_TARGETS, AllowExecOpt, DeployTarget, DeployTargetOpt, Strategy, FactsOpt,
                                    InventoryOpt, workload_of,
                                    OutputFormat, OutputOpt, RunDirOpt, BreakLockOpt, ReadyTimeoutOpt)
from deployctl.core.docs_url import doc


@app.command()
def preflight(
    inventory: InventoryOpt,
    output: OutputOpt = OutputFormat.text,
    trust_new_hosts: Annotated[bool, typer.Option(
        "--trust-new-hosts", help="Accept and record host keys missing from known_hosts (never changed ones).")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds each host may take per phase.")] = 60.0,
    connect_timeout: Annotated[float, typer.Option(help="Seconds to wait for SSH to answer.")] = 10.0,
    workers: Annotated[Optional[int], typer.Option(
        help="Hosts probed at once (default: `deployctl --fan-out`, DEPLOYCTL_FAN_OUT, else 64).", min=1,
        max=1024)] = None,
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
    other nodes, waits for each engine's readiness line and health endpoints (the engine spec says
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
    if target in K8S_TARGETS:
        from deployctl.cli.k8s import run_up_k8s

        run_up_k8s(inventory, output.value, dry_run, yes, skip_preflight, ready_timeout, run_dir,
                   break_lock=break_lock, strategy=strategy.value, workload=workload_of(target))
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
    if target in K8S_TARGETS:
        from deployctl.cli.k8s import run_rollback_k8s

        run_rollback_k8s(inventory, output.value, to, yes, dry_run, ready_timeout, run_dir, break_lock=break_lock,
                         workload=workload_of(target))
        return
    from deployctl.cli.deploy import run_operation

    run_operation("rollback", inventory, output.value, run_dir, dry_run=dry_run, yes=yes,
                  ready_timeout=ready_timeout, to=to, break_lock=break_lock)


@app.command()
def history(inventory: InventoryOpt, output: OutputOpt = OutputFormat.text,
            target: DeployTargetOpt = DeployTarget.hosts, allow_kubeconfig_exec: AllowExecOpt = False,
            run_dir: RunDirOpt = Path(".deployctl")):
    """List the deployment's revisions: when, who, what, the result, which one is live and what
    changed between consecutive ones (read from the hosts; k8s: the helm release history).

    Example: deployctl history -i my.yaml --output json
    """
    if target in K8S_TARGETS:
        from deployctl.cli.k8s import run_history_k8s

        run_history_k8s(inventory, output.value, workload=workload_of(target))
        return
    from deployctl.cli.history_output import run_history

    run_history(inventory, output.value, run_dir)


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
    if target in K8S_TARGETS:
        from deployctl.cli.k8s import run_down_k8s

        run_down_k8s(inventory, output.value, break_lock=break_lock, run_root=run_dir, workload=workload_of(target))
        return
    from deployctl.cli.deploy import run_operation

    run_operation("down", inventory, output.value, run_dir, purge=purge, break_lock=break_lock, yes=yes)


@app.command()
def status(inventory: InventoryOpt, output: OutputOpt = OutputFormat.text,
           target: DeployTargetOpt = DeployTarget.hosts, allow_kubeconfig_exec: AllowExecOpt = False,
           expect_up: Annotated[bool, typer.Option("--expect-up", help="Exit 1 when the deployment is down "
                                                                       "(for monitoring).")] = False,
           run_dir: RunDirOpt = Path(".deployctl")):
    """What runs, read from the containers: per node and rank range the revision the engine mounts,
    the one `current` records (drift when they differ), container state, env, readiness.

    serving: exit 0. degraded (something is not running, ready or on its recorded revision): exit 1.
    down (after `deployctl down`): exit 0, 1 with --expect-up. unknown (a host unreachable): exit 1.
    A fleet (several instances behind a router) adds a table per instance: the history revision it runs,
    serving / draining / down / degraded, and what the router says of it (HAProxy UP, DOWN, DRAIN).
    With --target k8s: every pod of the release, its node, readiness, restarts and why it is not ready.
    """
    if target in K8S_TARGETS:
        from deployctl.cli.k8s import run_status_k8s

        run_status_k8s(inventory, output.value, workload=workload_of(target))
        return
    from deployctl.cli.deploy import run_status

    run_status(inventory, output.value, expect_up, run_dir)


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
    if target in K8S_TARGETS:
        from deployctl.cli.k8s import run_diff

        run_diff(inventory, output.value, "k8s", workload=workload_of(target))
        return
    from deployctl.cli.deploy import run_diff_hosts

    run_diff_hosts(inventory, output.value, facts, run_dir)


@app.command(epilog=f"Guide (what is watched, the recovery policy, running it as a service): {doc('watch.md')}")
def watch(inventory: InventoryOpt, output: OutputOpt = OutputFormat.text, run_dir: RunDirOpt = Path(".deployctl"),
          interval: Annotated[float, typer.Option(help="Seconds between rounds.", min=0.5, max=600)] = 2.5,
          once: Annotated[bool, typer.Option("--once", help="One round, then exit (1 when an instance is not "
                                                            "serving).")] = False,
          confirm: Annotated[int, typer.Option(help="Rounds in a row before a silent node or engine is a "
                                                    "fault.", min=1, max=100)] = 2,
          recover: Annotated[Optional[bool], typer.Option("--recover/--no-recover", help="Override the "
                                                          "inventory's deploy.recovery.enabled.")] = None,
          hook_command: Annotated[Optional[str], typer.Option(
              "--hook-command", metavar="'CMD ARGS'", help="Run this command (split into words like a shell, "
              "never run by one) for every event, the event as JSON on its stdin; replaces the inventory's "
              "deploy.recovery.hooks.command.")] = None,
          allow_hook_command: Annotated[bool, typer.Option(
              "--allow-hook-command", help="Run the inventory's deploy.recovery.hooks.command (it runs on this "
              "machine as you); not run otherwise. Also DEPLOYCTL_ALLOW_HOOK_COMMAND=1.")] = False,
          scale: Annotated[bool, typer.Option(
              "--scale", help="Also carry out deploy.scaling, as `deployctl scale --apply` does: add an instance on "
              "deploy.scaling.spares under lasting load, drain and remove one scale added when idle; the watch "
              "pauses during each change and then watches the deployment as scaled.")] = False):
    """Watch the deployment in the foreground: every round, per node and instance, containers, health, NPU
    health, device links and fatal engine log lines; every event recorded (runs/<id>-watch/events.jsonl) and
    sent to the webhook of deploy.recovery.hooks and to the hook command you enable (--hook-command,
    --allow-hook-command); with deploy.recovery.enabled a failed instance behind the router is taken out,
    restarted and put back. With --scale it also scales by load (see `deployctl scale`)."""
    from deployctl.cli.watch import run_watch

    run_watch(inventory, output.value, run_dir, interval, once, confirm, recover, hook_command=hook_command,
              allow_hook_command=allow_hook_command, scale=scale)


@app.command(epilog=f"Signals, thresholds and limits: {doc('scaling.md')}")
def scale(inventory: InventoryOpt, output: OutputOpt = OutputFormat.text, run_dir: RunDirOpt = Path(".deployctl"),
          interval: Annotated[Optional[float], typer.Option(
              help="Seconds between readings (default deploy.scaling.interval_s).", min=1, max=3600)] = None,
          rounds: Annotated[int, typer.Option(
              help="Readings to take before exiting (a decision needs its thresholds to last: scale_up.for_s "
                   "/ interval readings at least).", min=1, max=1_000_000)] = 1,
          apply: Annotated[bool, typer.Option(
              "--apply", help="Carry the decisions out: start a new instance on deploy.scaling.spares (preflight, "
                              "start, read back, put behind the router) or drain and remove one scale added; each "
                              "change is a history entry.")] = False,
          drain_timeout: Annotated[int, typer.Option(
              help="--apply: seconds to wait for the requests in flight on an instance being removed.",
              min=1, max=86400)] = 600,
          ready_timeout: Annotated[int, typer.Option(
              help="--apply: seconds a new instance has to load its weights and answer.", min=10,
              max=86400)] = 1800):
    """Recommend each role's instance count from the engines' measured load (shadow mode: nothing is changed),
    or with --apply add and remove instances on spare servers.

    Every interval it reads, on each node, the engines' own metrics (requests waiting and running, KV cache
    use, generated and prompt tokens per second, mean TTFT and TPOT), compares them with deploy.scaling's thresholds and with what
    one instance sustains (the plan's estimate), and says per role: keep, add one or remove one, and why. A
    role is scaled only between the bounds deploy.scaling.roles gives it. Every decision and the readings it used
    go to runs/<id>-scale/events.jsonl.

    --apply adds an instance on the servers listed under deploy.scaling.spares (the rolling path of `up`: only
    the new instance starts) and removes only instances it added (the last one first, drained at the router).
    Every other command (status, watch, up, down) then sees the scaled deployment (run directory state
    scale/<cluster>.json).

    Examples:

    \b
      deployctl scale -i my.yaml                          # one reading
      deployctl scale -i my.yaml --rounds 30 --interval 10 # five minutes of decisions
      deployctl scale -i my.yaml --rounds 60 --output json
      deployctl scale -i my.yaml --apply --rounds 1000000  # scale until Ctrl-C
    """
    from deployctl.cli.scale import run_scale

    run_scale(inventory, output.value, run_dir, interval, rounds, apply=apply, drain_timeout=drain_timeout,
              ready_timeout=ready_timeout)
