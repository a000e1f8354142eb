"""The batch runner: many probes, one round trip, outputs split back exactly, values quoted."""

from __future__ import annotations

import subprocess

import pytest

from deployctl.io.batch import batch_argv, split_outputs


def run(commands, timeout=5):
    res = subprocess.run(batch_argv(commands, per_command_timeout=timeout), capture_output=True, text=True)
    return split_outputs(res.stdout)


def test_outputs_and_exit_codes_come_back_per_probe():
    out = run([("a", ["echo", "hello"]), ("b", ["sh", "-c", "echo oops >&2; exit 3"]), ("c", ["true"])])
    assert out["a"].text == "hello\n" and out["a"].rc == 0
    assert out["b"].text == "oops\n" and out["b"].rc == 3
    assert out["c"].text == "" and out["c"].rc == 0


def test_last_line_without_newline_is_kept_apart_from_the_marker():
    out = run([("a", ["printf", "x\ny"]), ("b", ["echo", "z"])])
    assert out["a"].text == "x\ny" and out["b"].text == "z\n"


def test_hostile_values_stay_arguments():
    evil = "$(touch /tmp/deployctl-pwned); `id`; rm -rf / #"
    out = run([("a", ["echo", evil])])
    assert out["a"].text == evil + "\n"


def test_a_hanging_probe_is_cut_by_its_own_timeout():
    out = run([("slow", ["sleep", "10"]), ("next", ["echo", "after"])], timeout=1)
    assert out["slow"].rc == 124 and out["next"].text == "after\n"


def test_truncated_output_marks_the_probe_as_cut():
    out = split_outputs("@@deployctl-begin a\nfull\n\n@@deployctl-end 0\n@@deployctl-begin b\npart")
    assert out["a"].rc == 0 and out["b"].rc == -1 and out["b"].text == "part"


@pytest.mark.parametrize("name", ["a b", "x;y", "$(id)"])
def test_probe_names_must_be_identifiers(name):
    with pytest.raises(ValueError):
        batch_argv([(name, ["true"])])


def test_parallel_batch_runs_at_once_and_keeps_order():
    import time

    cmds = [(f"p.{i}", ["sh", "-c", f"sleep 0.5; echo {i}; exit {i}"]) for i in range(6)]
    start = time.monotonic()
    res = subprocess.run(batch_argv(cmds, parallel=True), capture_output=True, text=True)
    elapsed = time.monotonic() - start
    out = split_outputs(res.stdout)
    assert [(o.name, o.text, o.rc) for o in out.values()] == [(f"p.{i}", f"{i}\n", i) for i in range(6)]
    assert elapsed < 2.0          # six half-second sleeps at once, not one after the other


# --------------------------------------------------------------------------- bounded concurrency (phase 1)

SHELLS = ["sh", "bash"]     # /bin/sh is dash here; many servers' /bin/sh is bash


def run_raw(commands, parallel, shell="sh", timeout=5, env=None):
    argv = batch_argv(commands, per_command_timeout=timeout, parallel=parallel)
    return subprocess.run([shell, *argv[1:]], capture_output=True, text=True, env=env)


def at_once(batches):
    """run_raw(commands, parallel, shell[, env], timeout=1) for each batch, all started together."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(batches)) as pool:
        return list(pool.map(lambda b: run_raw(*b[:3], env=b[3] if len(b) > 3 else None, timeout=1), batches))


MIXED = [("out", ["echo", "hello"]), ("err", ["sh", "-c", "echo to-out; echo to-err >&2; exit 3"]),
         ("empty", ["true"]), ("nonl", ["printf", "x\ny"]), ("evil", ["echo", "$(id); `id` | rm -rf / #"]),
         ("multi", ["sh", "-c", "i=0; while [ $i -lt 200 ]; do echo line $i; i=$((i + 1)); done"]),
         ("missing", ["/nonexistent/tool", "-x"]), ("slow", ["sleep", "10"]), ("after", ["echo", "after"]),
         ("marker", ["echo", "@@deployctl-end 0"])]


@pytest.mark.parametrize("shell", SHELLS)
def test_concurrent_batch_prints_exactly_the_sequential_output(shell):
    # the five batches run side by side: each waits a second for its timed-out probe
    seq, *pars = at_once([(MIXED, parallel, shell) for parallel in (False, 2, 3, 8, True)])
    for parallel, par in zip((2, 3, 8, True), pars):
        assert par.stdout == seq.stdout and par.returncode == seq.returncode == 0, parallel
    out = split_outputs(par.stdout)
    assert list(out) == [name for name, _ in MIXED]
    assert out["err"].rc == 3 and out["err"].text == "to-out\nto-err\n"
    assert out["slow"].rc == 124 and out["after"].text == "after\n" and out["missing"].rc == 127
    assert out["marker"].text == "@@deployctl-end 0\n" and out["nonl"].text == "x\ny"


def _intervals(out):
    """(start, end) of each probe that printed two `date +%s.%N` lines."""
    return [tuple(float(x) for x in o.text.split()) for o in out.values()]


def _max_overlap(intervals):
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


@pytest.mark.parametrize("shell", SHELLS)
def test_bounded_batch_runs_probes_at_once_but_never_more_than_the_bound(shell):
    cmds = [(f"p.{i}", ["sh", "-c", "date +%s.%N; sleep 0.4; date +%s.%N"]) for i in range(12)]
    res = run_raw(cmds, 4, shell)
    out = split_outputs(res.stdout)
    assert list(out) == [f"p.{i}" for i in range(12)] and all(o.rc == 0 for o in out.values())
    intervals = _intervals(out)
    assert len(intervals) == 12
    peak = _max_overlap(intervals)
    assert 2 <= peak <= 4, peak                   # concurrent, and bounded (the bound is never exceeded)
    span = max(e for _, e in intervals) - min(s for s, _ in intervals)
    assert span < 0.5 * 12 * 0.4, span            # well under the serial sum (3 rounds of 0.4 s when unloaded)


@pytest.mark.parametrize("shell", SHELLS)
def test_every_probe_runs_exactly_once(shell, tmp_path):
    log = tmp_path / "log"
    cmds = [(f"p.{i}", ["sh", "-c", f"echo {i} >> {log}; echo ran {i}"]) for i in range(40)]
    out = split_outputs(run_raw(cmds, 8, shell).stdout)
    assert sorted(int(x) for x in log.read_text().split()) == list(range(40))
    assert [o.text for o in out.values()] == [f"ran {i}\n" for i in range(40)]


def test_the_script_names_the_bound_and_cleans_up(tmp_path):
    import os

    cmds = [(f"p.{i}", ["true"]) for i in range(20)]
    script = batch_argv(cmds, parallel=8)[2]
    assert script.count("w &") == 8                            # 8 workers share the 20 probes
    assert batch_argv(cmds[:3], parallel=8)[2].count("w &") == 3   # never more workers than probes
    assert "w &" not in batch_argv(cmds)[2] and "w &" not in batch_argv(cmds, parallel=1)[2]
    res = run_raw(cmds, 8, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert len(split_outputs(res.stdout)) == 20 and list(tmp_path.iterdir()) == []    # temp dir removed


def test_without_a_temporary_directory_the_probes_run_one_after_another(tmp_path):
    import os

    env = {**os.environ, "TMPDIR": str(tmp_path / "missing")}      # mktemp -d fails
    seq, par = at_once([(MIXED, False, "sh"), (MIXED, 8, "sh", env)])
    assert par.stdout == seq.stdout


def test_probe_host_runs_the_batch_concurrently_through_an_executor():
    """probe_host with a fake executor (runs argv on this machine): outputs per probe, bounded, fast."""
    import time

    from deployctl.io.executor import HostTarget
    from deployctl.io.fanout import probe_host
    from support import FakeExecutor

    ex = FakeExecutor(here=True)
    cmds = [(f"p.{i}", ["sh", "-c", "date +%s.%N; sleep 0.3; date +%s.%N"]) for i in range(16)]
    t0 = time.monotonic()
    run = probe_host(ex, HostTarget("h", "127.0.0.1"), cmds, 30, parallel=8)
    took = time.monotonic() - t0
    assert run.error is None and run.clock_offset_s is not None and abs(run.clock_offset_s) < 1
    assert list(run.outputs) == [f"p.{i}" for i in range(16)]
    assert 2 <= _max_overlap(_intervals(run.outputs)) <= 8
    assert took < 0.5 * 16 * 0.3
    assert ex.argvs[-1][2].count("w &") == 8
