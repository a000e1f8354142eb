"""The batch runner: many probes, one round trip, outputs split back exactly, values quoted."""

from __future__ import annotations

import subprocess

import pytest

from deployctl.preflight.batch import batch_argv, split_outputs


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
