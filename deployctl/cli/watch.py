"""`deployctl watch`: the loop in the foreground (docs/watch.md says why, and how to run it as a systemd
unit): a live table (rich Live) of every instance and node, or one JSON line per event (--output json)."""

from __future__ import annotations

from pathlib import Path

import typer

from deployctl.cli._output import echo_json, esc
from deployctl.cli._output import run_console as _console
from deployctl.app.context import open_context


def _row_npu(o) -> str:
    bad = {d: h for d, h in o.npu.items() if h != "OK"}
    return "OK" if o.npu and not bad else ", ".join(f"{d}:{h}" for d, h in bad.items()) or "-"


def table(w, last: list[dict]):
    from rich.console import Group
    from rich.table import Table

    states = w.states()
    inst = Table(title=f"deployctl watch - round {w.rounds} ({w.round_s:.1f} s)")
    for col in ("instance", "nodes", "state"):
        inst.add_column(col)
    for i in w.plan.instances:
        s = states[i.name]
        style = "green" if s == "serving" else "yellow" if s in ("starting", "draining", "restarting") else "red"
        inst.add_row(esc(i.name), esc(", ".join(i.nodes)), f"[{style}]{esc(s)}[/]")
    nodes = Table()
    for col in ("node", "instance", "containers", "ready", "NPU", "links down", "fault"):
        nodes.add_column(col)
    for n in w.plan.nodes:
        o = w.observed.get(n.name)
        if o is None:
            continue
        faults = "; ".join(f.cause for f in o.faults())
        nodes.add_row(*(esc(v) for v in (
            n.name, n.instance, ", ".join(f"{c} {s}" for c, s in o.containers.items()) or o.error[:60],
            {True: "yes", False: "no", None: "-"}[o.ready], _row_npu(o),
            ",".join(map(str, o.links_down)) or "-", faults[:120])))
    lines = [esc(f"{e['event']} {e['instance']} {e['node']} {e['cause']}") for e in last[-8:]]
    return Group(inst, nodes, *lines)


def hook_command_of(ctx, operator: str | None, allow: bool) -> tuple[list[str] | None, str]:
    """The hook command the watch runs (the operator's, or the inventory's when the operator opts in) and the
    warning about an inventory command that is not run, naming its file, line and key."""
    from deployctl.features.watch.hooks import INVENTORY_KEY, command_allowed, hook_command

    line = ctx.raw.line_of(("deploy", "recovery", "hooks", "command"))
    where = f"{ctx.path}:{line}: {INVENTORY_KEY}" if line else f"{ctx.path}: {INVENTORY_KEY}"
    return hook_command(ctx.inventory.deploy.recovery.hooks.command, operator, command_allowed(allow), where)


def run_watch(inventory: Path, output: str, run_root: Path, interval: float, once: bool, confirm: int,
              recover: bool | None, *, hook_command: str | None = None, allow_hook_command: bool = False) -> None:
    from deployctl.app.executors import ssh

    ctx = open_context(inventory, "deployed")
    command, warning = hook_command_of(ctx, hook_command, allow_hook_command)
    if warning:
        _console(stderr=True).print(f"[yellow]warning:[/] {esc(warning)}")
    plan = ctx.plan
    last: list[dict] = []

    def on_event(ev: dict) -> None:
        if output == "json":
            echo_json(ev, indent=None, default=str)
        else:
            last.append(ev)
            del last[:-50]

    with ssh() as executor:
        _watch(ctx, plan, executor, run_root, output, once, interval, confirm, recover, command, warning, on_event, last)


def _watch(ctx, plan, executor, run_root, output, once, interval, confirm, recover, command, warning, on_event,
           last) -> None:
    from deployctl.backends.hosts.restarts import history_recorder
    from deployctl.features.watch.loop import Watcher

    w = Watcher(plan, ctx.inventory, ctx.targets, executor, run_root, interval=interval, confirm=confirm,
                on_event=on_event, recover=recover, history=history_recorder(plan, executor, ctx.targets),
                hook_command=command)
    if warning:
        w.note(warning, kind="hooks")          # recorded and sent to the webhook: an alert channel is off
    try:
        if once or output == "json":
            w.run(once=once)
            if once and output == "json":
                echo_json({"event": "round", "states": w.states(), "record": str(w.record.path)}, indent=None)
            elif once:
                _console().print(table(w, last))
        else:
            from rich.live import Live

            con = _console()
            with Live(table(w, last), console=con, refresh_per_second=2, transient=False) as live:
                import threading

                t = threading.Thread(target=w.run, daemon=True)
                t.start()
                while t.is_alive():
                    t.join(0.5)
                    live.update(table(w, last))
    except KeyboardInterrupt:
        w.close()
    raise typer.Exit(0 if not once or w.healthy() else 1)
