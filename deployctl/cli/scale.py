"""`deployctl scale`: the instance count each role should have from its measured load (shadow mode: it
recommends, changes nothing; --apply: carries it out on spare servers). deployctl.features.scale does the work;
this wires and prints it."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from deployctl.cli._output import echo_json, esc
from deployctl.cli._output import run_console as _console


def _line(doc: dict) -> str:
    if doc["event"] == "rejoined":
        return f"↺ told the router again of {', '.join(doc['instances'])} (it had forgotten them)"
    if doc["event"] == "change":
        mark = "✓" if doc["ok"] else "✗"
        what = "added" if doc["action"] == "up" else "removed"
        if doc["ok"]:
            return f"{mark} {doc['role']}: {what} {doc['instance']} on {', '.join(doc['nodes'])} in {doc['seconds']:g} s"
        return f"{mark} {doc['role']}: not {what}: {doc['detail']}"
    mark = {"up": "▲", "down": "▼"}.get(doc["action"], "·")
    return f"{mark} {doc['role']}: {doc['current']} -> {doc['desired']} ({doc['action']}): {doc['reason']}"


def _applier(output: str, run_root: Path, executor, run_id: str, inventory: Path, ready_timeout: int, reopen):
    """The Applier with the real `up` (the hosts backend, its preflight, the CLI's progress lines)."""
    from deployctl.backends.hosts.up import UpOptions, run_hosts_operation
    from deployctl.cli.deploy import CliReporter
    from deployctl.features.preflight.run import run_preflight
    from deployctl.features.scale.apply import Applier

    def run_up(ctx, opts, confirm):
        return run_hosts_operation("up", ctx.inventory, opts, CliReporter(output == "json", "up"), confirm,
                                   plan=ctx.plan, preflight=run_preflight, executor=executor)

    opts = UpOptions(ready_timeout=ready_timeout, run_root=run_root, inventory_dir=inventory.parent)
    return Applier(reopen, run_up, run_root, executor, opts, run_id)


def policy_of(ctx, interval: float | None):
    """deploy.scaling, with --interval over its interval_s."""
    policy = ctx.inventory.deploy.scaling
    return policy.model_copy(update={"interval_s": interval}) if interval is not None else policy


def capacity_of(plan, run_root: Path) -> dict[str, float]:
    """Tokens per second one instance of each role sustains: the plan's estimate at the model's limits, under
    the cluster's calibration when `deployctl calibrate` stored one in the run directory."""
    from deployctl.core.scaling.capacity import per_instance
    from deployctl.core.sizing.estimate import default_workload, estimate_plan
    from deployctl.io.calibration_store import load

    calibration = load(plan.inventory.cluster.name, run_root)
    return per_instance(estimate_plan(plan, default_workload(plan), calibration=calibration))


def reader_for(executor):
    """The load reader of a context's plan (one SSH round trip per node)."""
    from deployctl.features.scale.read import read_samples

    def reader(c):
        hosts = {t.name: t for t in c.targets}
        return lambda: read_samples(c.plan, executor, hosts, time.monotonic)

    return reader


def reopener(inventory: Path, mode: str, run_root: Path):
    """The deployment as scaled now, read again at every call; the facts of the first read are kept (a scaler runs
    for days: the preflight facts it started with do not expire under it; each add runs preflight on its spares)."""
    from deployctl.app.context import open_context

    facts: list = []

    def reopen():
        ctx = open_context(inventory, mode, run_root=run_root, facts=facts[0] if facts else None)
        if not facts and ctx.facts is not None:
            facts.append(ctx.facts)
        return ctx

    return reopen


def run_scale(inventory: Path, output: str, run_root: Path, interval: float | None, rounds: int, *,
              apply: bool = False, drain_timeout: int = 600, ready_timeout: int = 1800) -> None:
    from deployctl.app.executors import ssh
    from deployctl.features.scale.run import run_rounds
    from deployctl.features.scale.shadow import Shadow
    from deployctl.io.records import RunRecord

    reopen = reopener(inventory, "full" if apply else "deployed", run_root)

    ctx = reopen()
    plan, policy = ctx.plan, policy_of(ctx, interval)
    record = RunRecord.create(run_root, "scale")
    record.status("running")
    con = _console()
    if output != "json":
        con.print(esc(("apply mode: adds and removes instances" if apply else
                       "shadow mode: recommends, changes nothing") +
                      f"; every {policy.interval_s:g} s, record {record.path}/events.jsonl"))
        unscaled = [r for r in dict.fromkeys(i.role for i in plan.instances) if r not in policy.roles]
        if unscaled:
            con.print(esc(f"not scaled (no deploy.scaling.roles bounds): {', '.join(unscaled)}"))
        if apply:
            con.print(esc(f"spare servers: {', '.join(ctx.spares) or 'none'}"))

    def emit(doc: dict) -> None:
        if output == "json":
            echo_json(doc, indent=None, default=str)
        else:
            con.print(esc(_line(doc)))

    failed = 0
    with ssh() as executor:
        reader = reader_for(executor)
        shadow = Shadow(plan, policy, capacity_of(plan, run_root), reader(ctx), record=record)
        applier = None
        if apply:
            shadow.mode = "apply"
            applier = _applier(output, run_root, executor, record.run_id, inventory, ready_timeout, reopen)
        try:
            failed = run_rounds(shadow, rounds, policy.interval_s, emit, applier=applier,
                                reopen=reopen if apply else None, reader=reader, drain_timeout=drain_timeout)
        except KeyboardInterrupt:
            pass
    record.finish("failed" if failed else "successful", 1 if failed else 0)
    raise typer.Exit(1 if failed else 0)
