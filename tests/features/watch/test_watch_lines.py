"""`deployctl watch` in text mode with stdout not a terminal (a pipe, a file, a service manager's journal): a line
per event and per change of an instance's state as they happen, and a summary line, each flushed, never a live
screen that shows only when the watch ends; on a terminal the live table stays. The CLI runs as a real process
whose stdout is a pipe (or a pseudo-terminal) against hosts that refuse SSH: no root, no simulated cluster."""

from __future__ import annotations

import pytest

import io
import os
import queue
import select
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import yaml
from conftest import DEPLOYCTL, EXAMPLES

from deployctl.cli.watch import Lines, summary
from deployctl.features.watch.down import Stopped


def test_lines_say_each_event_each_change_of_state_and_a_summary_when_due():
    out, now = io.StringIO(), [0.0]
    lines = Lines(out, every=60, clock=lambda: now[0])
    w = SimpleNamespace(rounds=1, round_s=0.42, stopped=None, states=lambda: {"a": "serving", "b": "serving"})
    lines.round(w)                                         # the first round: its summary, no change yet
    lines.event({"ts": 0, "event": "fault", "instance": "b", "node": "n3", "cause": "engine exited (exit 137)",
                 "kind": "container"})
    w.rounds, w.states = 2, lambda: {"a": "serving", "b": "failed"}
    now[0] = 5
    lines.round(w)                                         # a change: said at once; the summary is not due
    now[0] = 61
    w.rounds, w.stopped, w.states = 3, Stopped("down", "stopped by `deployctl down` (run r1)"), \
        lambda: {"a": "down", "b": "down"}
    lines.event({"ts": 60, "event": "deployment-down", "instance": "", "node": "", "cause": "no engine container"})
    lines.round(w)
    got = [line.split(" ", 1)[1] for line in out.getvalue().splitlines()]      # without the time stamp
    assert got == ["round 1 (0.4 s): serving 2/2",
                   "fault b n3 engine exited (exit 137)",
                   "state b failed (was serving)",
                   "deployment-down - - no engine container",
                   "state a down (was serving)",
                   "state b down (was failed)",
                   "round 3 (0.4 s): serving 0/2; down: a, b (stopped by `deployctl down` (run r1))"], got
    assert out.getvalue().splitlines()[1].startswith("1970-01-01T00:00:00Z fault")     # the event's own time


def test_summary_names_what_does_not_serve():
    assert summary({"a": "serving", "b": "failed", "c": "draining", "d": "failed"}) == \
        "serving 1/4; failed: b, d; draining: c"
    many = summary({f"i{k}": "left out" for k in range(10)})
    assert many == "serving 0/10; left out: i0, i1, i2, i3, i4, i5, i6, i7 and 2 more"


def unreachable_inventory(tmp_path):
    """Two nodes on loopback addresses whose SSH key does not exist: every round, every node unreachable."""
    doc = yaml.safe_load((EXAMPLES / "a2-2x8-tp-pp.yaml").read_text())
    doc["nodes"] = [{"name": "node1", "address": "127.0.0.1"}, {"name": "node2", "address": "127.0.0.2"}]
    doc["ssh"] = {"port": 9, "key": str(tmp_path / "no-such-key"), "known_hosts": str(tmp_path / "known_hosts")}
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    return inv


def watch(inv, tmp_path, stdout):
    env = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HOME": str(tmp_path), "COLUMNS": "120"}
    return subprocess.Popen([sys.executable, str(DEPLOYCTL), "watch", "-i", str(inv), "--interval", "0.5",
                             "--run-dir", str(tmp_path / "runs")], stdout=stdout, stderr=subprocess.PIPE, env=env,
                            cwd=tmp_path)


@pytest.mark.slow
def test_piped_text_mode_prints_lines_while_it_runs(tmp_path):
    proc = watch(unreachable_inventory(tmp_path), tmp_path, subprocess.PIPE)
    got: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [got.put(line) for line in iter(proc.stdout.readline, b"")], daemon=True).start()
    seen: list[str] = []
    try:
        end = time.monotonic() + 60
        while not any(" state mixed failed" in line for line in seen) and time.monotonic() < end:
            try:
                seen.append(got.get(timeout=max(0.1, end - time.monotonic())).decode())
            except queue.Empty:
                break
        running = proc.poll() is None               # the lines came while the watch runs
    finally:
        proc.terminate()
        proc.wait(30)
    assert running, (seen, proc.stderr.read().decode()[-2000:])
    text = "".join(seen)
    assert " round 1 (" in seen[0] and "serving 0/1; unknown: mixed" in seen[0], text
    assert " fault mixed node1 " in text and " instance-failed mixed " in text and " state mixed failed" in text, text
    assert "\x1b" not in text and "┃" not in text and "deployctl watch - round" not in text     # no live screen


def test_on_a_terminal_the_live_table_stays(tmp_path):
    import pty

    leader, follower = pty.openpty()
    proc = watch(unreachable_inventory(tmp_path), tmp_path, follower)
    os.close(follower)
    out = b""
    try:
        end = time.monotonic() + 60
        while b"deployctl watch - round" not in out and time.monotonic() < end:
            if not select.select([leader], [], [], 1)[0]:
                continue
            try:
                out += os.read(leader, 65536)
            except OSError:
                break
    finally:
        proc.terminate()
        proc.wait(30)
        os.close(leader)
    assert b"deployctl watch - round" in out, out[-2000:]
    assert b" round 1 (" not in out
