"""`deployctl watch`: the loop in the foreground (docs/watch.md says why, and how to run it as a systemd
unit): a live table (rich Live) of every instance and node on a terminal, lines as things happen when stdout is
not one (a pipe, a file, a service manager's journal: ``Lines``), or one JSON line per event (--output json)."""

from __future__ import annotations

import sys
import threading
import time
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
        style = ("green" if s == "serving" else "yellow" if s in ("starting", "draining", "restarting", "down",
                                                                  "changing") else "red")
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
    if w.stopped is not None:
        lines.insert(0, f"[yellow]{esc(f'deployment {w.stopped.state}: {w.stopped.cause}')}[/]")
    return Group(inst, nodes, *lines)


SUMMARY_S = 60.0          # s between two summary lines when stdout is not a terminal


def _stamp(ts: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if ts is None else ts))


def summary(states: dict[str, str]) -> str:
    """`serving 2/3; failed: mixed-1`: how many instances serve, the others by state (in the plan's order)."""
    by: dict[str, list[str]] = {}
    for name, state in states.items():
        by.setdefault(state, []).append(name)
    parts = [f"serving {len(by.pop('serving', []))}/{len(states)}"]
    for state, names in by.items():
        more = f" and {len(names) - 8} more" if len(names) > 8 else ""
        parts.append(f"{state}: {', '.join(names[:8])}{more}")
    return "; ".join(parts)


class Lines:
    """Text mode when stdout is not a terminal: no screen to redraw, so one line per event and per change of an
    instance's state as they happen, and a summary line after the first round and every ``every`` s; each line
    written at once (flushed), so a pipe, a file or a service manager's journal has it when it happens.

        2026-11-26T05:02:11Z round 1 (0.4 s): serving 3/3
        2026-11-26T05:03:40Z fault mixed-1 node3 deployctl_prod_mindie exited (exit 137)
        2026-11-26T05:03:40Z instance-failed mixed-1 node3 deployctl_prod_mindie exited (exit 137)
        2026-11-26T05:03:40Z state mixed-1 failed (was serving)
    """

    def __init__(self, out=None, every: float = SUMMARY_S, clock=time.monotonic):
        self.out, self.every, self.clock = out or sys.stdout, every, clock
        self.lock = threading.Lock()
        self.states: dict[str, str] | None = None
        self.last: float | None = None

    def _write(self, line: str) -> None:
        with self.lock:
            self.out.write(line + "\n")
            self.out.flush()

    def event(self, ev: dict) -> None:
        """An event (cleaned by the watch already: one printable line)."""
        self._write(" ".join([_stamp(ev.get("ts")), str(ev.get("event")), str(ev.get("instance") or "-"),
                              str(ev.get("node") or "-"), str(ev.get("cause") or "")]).rstrip())

    def round(self, w) -> None:
        """After a round: the instances whose state changed, then the summary when it is due."""
        states = w.states()
        for name, state in states.items():
            was = (self.states or {}).get(name)
            if self.states is not None and was != state:
                self._write(f"{_stamp()} state {name} {state} (was {was})")
        self.states = states
        now = self.clock()
        if self.last is None or now - self.last >= self.every:
            self.last = now
            why = f" ({w.stopped.cause})" if w.stopped is not None else ""
            self._write(f"{_stamp()} round {w.rounds} ({w.round_s:.1f} s): {summary(states)}{why}")


def hook_command_of(ctx, operator: str | None, allow: bool) -> tuple[list[str] | None, str]:
    """The hook command the watch runs (the operator's, or the inventory's when the operator opts in) and the
    warning about an inventory command that is not run, naming its file, line and key."""
    from deployctl.features.watch.hooks import INVENTORY_KEY, command_allowed, hook_command

    line = ctx.raw.line_of(("deploy", "recovery", "hooks", "command"))
    where = f"{ctx.path}:{line}: {INVENTORY_KEY}" if line else f"{ctx.path}: {INVENTORY_KEY}"
    return hook_command(ctx.inventory.deploy.recovery.hooks.command, operator, command_allowed(allow), where)


def run_watch(inventory: Path, output: str, run_root: Path, interval: float, once: bool, confirm: int,
              recover: bool | None, *, hook_command: str | None = None, allow_hook_command: bool = False,
              scale: bool = False, drain_timeout: int = 600, ready_timeout: int = 1800) -> None:
    from deployctl.app.executors import ssh

    ctx = open_context(inventory, "deployed", run_root=run_root)
    command, warning = hook_command_of(ctx, hook_command, allow_hook_command)
    if warning:
        _console(stderr=True).print(f"[yellow]warning:[/] {esc(warning)}")
    plan = ctx.plan
    last: list[dict] = []
    # text mode, running, stdout not a terminal: lines as things happen (a live screen would show only at exit);
    # with --scale always lines (the watched deployment changes under a live screen)
    lines = Lines() if output != "json" and not once and (scale or not sys.stdout.isatty()) else None

    def on_event(ev: dict) -> None:
        if output == "json":
            echo_json(ev, indent=None, default=str)
        elif lines is not None:
            lines.event(ev)
        else:
            last.append(ev)
            del last[:-50]

    with ssh() as executor:
        if scale and not once:
            from deployctl.cli.watch_scale import watch_scaling

            watch_scaling(inventory, ctx, executor, run_root, output, interval, confirm, recover, command, warning,
                          on_event, lines, drain_timeout, ready_timeout)
        _watch(ctx, plan, executor, run_root, output, once, interval, confirm, recover, command, warning, on_event,
               last, lines)


def _watch(ctx, plan, executor, run_root, output, once, interval, confirm, recover, command, warning, on_event,
           last, lines: Lines | None = None) -> None:
    from deployctl.backends.hosts.restarts import history_recorder
    from deployctl.features.watch.loop import Watcher

    w = Watcher(plan, ctx.inventory, ctx.targets, executor, run_root, interval=interval, confirm=confirm,
                on_event=on_event, recover=recover, history=history_recorder(plan, executor, ctx.targets),
                hook_command=command, on_round=lines.round if lines is not None else lambda w: None)
    if warning:
        w.note(warning, kind="hooks")          # recorded and sent to the webhook: an alert channel is off
    try:
        if once or output == "json" or lines is not None:
            w.run(once=once)
            if once and output == "json":
                echo_json({"event": "round", "states": w.states(), "record": str(w.record.path),
                           "not_probed": dict(w.prober.gaps) if w.prober is not None else {}}, indent=None)
            elif once:
                _console().print(table(w, last))
        else:
            from rich.live import Live

            con = _console()
            with Live(table(w, last), console=con, refresh_per_second=2, transient=False) as live:
                t = threading.Thread(target=w.run, daemon=True)
                t.start()
                while t.is_alive():
                    t.join(0.5)
                    live.update(table(w, last))
    except KeyboardInterrupt:
        w.close()
    raise typer.Exit(0 if not once or w.healthy() else 1)
