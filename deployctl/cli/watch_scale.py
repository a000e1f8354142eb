"""`deployctl watch --scale`: the watch, restarted on the deployment as scaled after each change the scaling
rounds make beside it (deployctl.features.watch.scaling)."""

from __future__ import annotations

import threading
from pathlib import Path

import typer

from deployctl.cli._output import echo_json, esc
from deployctl.cli._output import run_console as _console


STOP_S = 90        # s: the longest a reading or router call of the scaling rounds may take to end at exit


def watch_scaling(inventory: Path, ctx, executor, run_root: Path, output: str, interval: float, confirm: int,
                  recover, command, warning, on_event, lines, drain_timeout: int, ready_timeout: int) -> None:
    from deployctl.app.context import open_context
    from deployctl.backends.hosts.restarts import history_recorder
    from deployctl.cli.scale import _applier, _line, capacity_of, policy_of, reader_for, reopener
    from deployctl.features.scale.shadow import Shadow
    from deployctl.features.watch.loop import Watcher
    from deployctl.features.watch.scaling import ScaleDriver
    from deployctl.io.records import RunRecord

    reopen = reopener(inventory, "full", run_root)

    def emit(doc: dict) -> None:
        if output == "json":
            echo_json({**doc, "source": "scale"}, indent=None, default=str)
        elif doc.get("event") != "decision" or doc.get("action") != "hold":
            _console().print(esc(_line(doc) if doc.get("event") in ("decision", "change", "rejoined")
                                 else f"scale: {doc.get('event')}: {doc.get('cause', '')}"))

    lock = threading.Lock()
    current: dict = {"w": None, "ended": threading.Event()}

    def stop_watch() -> None:
        with lock:
            w, ended = current["w"], current["ended"]
        if w is not None:
            w.cancel.set()
            ended.wait(120)

    first = reopen()
    record = RunRecord.create(run_root, "scale")
    record.status("running")
    reader = reader_for(executor)
    shadow = Shadow(first.plan, policy_of(first, None), capacity_of(first.plan, run_root), reader(first), record=record)
    shadow.mode = "apply"
    driver = ScaleDriver(shadow, _applier(output, run_root, executor, record.run_id, inventory, ready_timeout, reopen),
                         reopen, reader, emit, stop_watch, drain_timeout)
    driver.start()
    try:
        while True:
            with lock:
                paused = driver.paused.is_set()
                if not paused:
                    now = open_context(inventory, "deployed", run_root=run_root)
                    w = Watcher(now.plan, now.inventory, now.targets, executor, run_root, interval=interval,
                                confirm=confirm, on_event=on_event, recover=recover,
                                history=history_recorder(now.plan, executor, now.targets), hook_command=command,
                                on_round=lines.round if lines is not None else lambda w: None)
                    current.update(w=w, ended=threading.Event())
            if paused:
                driver.resumed.wait()
                continue
            if warning:
                w.note(warning, kind="hooks")
            try:
                w.run()
            finally:
                current["ended"].set()
            if not driver.paused.is_set():
                break                          # ended for another reason than a change
            driver.resumed.wait()
    except KeyboardInterrupt:
        if current["w"] is not None:
            current["w"].close()
        driver.stop()
        if driver.paused.is_set():
            # a change is under way (an instance starting or being drained): it ends (or is undone) before exiting
            _console(stderr=True).print("waiting for the scaling change under way to end (Ctrl-C again: leave it "
                                        "as it is; `deployctl status` then shows where it stopped)")
            driver.thread.join()
    finally:
        driver.stop()
        # before the connections close under it: its step under way (a reading, a router call) ends first
        driver.thread.join(STOP_S)
        record.finish("successful", 0)
    raise typer.Exit(0)
