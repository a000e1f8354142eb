"""Terminal safety (issue 21, observation 5 / deliverable 8): host text never reaches the terminal as escape
sequences, control characters or rich markup, in text and JSON output alike.

The hostile strings are what a host controls: a history entry's user, the lock holder, a smoke-test answer, a
failed Ansible task's output, docker/probe output quoted in an error.
"""

from __future__ import annotations

import json
import re

import pytest

from deployctl.core.textsafe import clean, clean_data

OSC_TITLE = "\x1b]0;pwned-title\x07"
CLEAR = "\x1b[2J"
MARKUP = "[red]x[/red]"
LINK = "[link=https://evil.example]click[/link]"
C1 = "\x9b31m\x85\x90dcs\x9c"
HOSTILE = f"mallory{OSC_TITLE}{CLEAR}{MARKUP} {LINK}{C1}\x07\x08\r\x00\x7f\u202eevil"
# no ESC, no C0 but \n \t, no DEL, no C1, no bidi override in anything printed
FORBIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _assert_safe(text: str) -> None:
    bad = FORBIDDEN.findall(text)
    assert not bad, f"control characters reached the output: {bad!r} in {text!r}"


# ----------------------------------------------------------------------------------------- the function


@pytest.mark.parametrize("raw, want", [
    ("a\x1b]0;title\x07b", "ab"),
    ("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b", "alinkb"),
    ("a\x1b[2Jb\x1b[31;1mc\x1b[0m", "abc"),
    ("a\x9b2Jb", "ab"),
    ("a\x1b(Bb\x1b7c", "abc"),
    ("a\x90payload\x9cb", "ab"),
    ("a\x1b]0;never closed\nnext", "a\nnext"),
    ("line1\nline2\ttab", "line1\nline2\ttab"),
    ("cr\r\nlf", "cr\nlf"),
    ("over\rwrite", "overwrite"),
    ("bell\x07del\x7fnel\x85", "belldelnel"),
    ("rtl\u202eevil\u2066x\u2069", "rtlevilx"),
    ("lone\ud800surrogate", "lone\ufffdsurrogate"),
    ("trailing\x1b", "trailing"),
    ("plain ascii [red] and ünïcode 中文", "plain ascii [red] and ünïcode 中文"),
])
def test_clean(raw, want):
    assert clean(raw) == want


def test_clean_single_line_folds_newlines():
    assert clean("a\nb\tc\x1b[1m", multiline=False) == "a b c"


def test_clean_data_cleans_keys_and_nested_values():
    doc = {"user\x1b[2J": [HOSTILE, {"x": (OSC_TITLE, 3)}], "n": 1, "ok": True, "none": None}
    out = clean_data(doc)
    _assert_safe(json.dumps(out, ensure_ascii=False))
    assert out["n"] == 1 and out["ok"] is True and out["none"] is None
    assert "user" in out


# ----------------------------------------------------------------------------------------- the printers


def _row(**kw):
    from deployctl.backends.common.historyrow import HistoryRow

    base = dict(revision=3, run_id="20250101-000000-abcd", time="2025-01-01T00:00:00Z", user="root",
                operation="up", result="successful", live=True, summary="qwen", changed="")
    return HistoryRow(**{**base, **kw})


def test_history_text_output_is_clean_and_markup_literal(capsys):
    from deployctl.cli.history_output import print_history

    print_history([_row(user=HOSTILE, summary=f"sum{CLEAR}{MARKUP}")], "text", f"history {OSC_TITLE}")
    out = capsys.readouterr().out
    _assert_safe(out)
    assert MARKUP in out and "[link=https://evil.example]" in out     # printed literally, never interpreted


def test_history_json_output_carries_no_control_characters(capsys):
    from deployctl.cli.history_output import print_history

    print_history([_row(user=HOSTILE)], "json", "history")
    out = capsys.readouterr().out
    _assert_safe(out)
    doc = json.loads(out)
    user = doc["revisions"][0]["user"]
    _assert_safe(user)                      # the decoded value too (`jq -r` prints it raw)
    assert user.startswith("mallory") and MARKUP in user


def test_reporter_lock_holder_and_task_output(capsys):
    """The --break-lock holder line and a failed task's output go through the reporter."""
    from deployctl.cli.deploy import CliReporter
    from deployctl.backends.common.lockinfo import LockOwner

    owner = LockOwner(user=HOSTILE, host=f"node1{CLEAR}", pid=1, command=f"up {MARKUP}", run_id="r",
                      started="2025-01-01T00:00:00Z")
    rep = CliReporter(json_mode=False)
    rep.step(f"lock on node1: {owner.who()}")
    rep.failure(f"node1: task failed: {HOSTILE}")
    rep.con.print(f"raw {OSC_TITLE}{CLEAR} not escaped by the caller")     # the console's own safety net
    out = capsys.readouterr().out
    _assert_safe(out)
    assert MARKUP in out and "not escaped by the caller" in out


def test_reporter_json_mode_stderr_is_clean(capsys):
    from deployctl.cli.deploy import CliReporter

    rep = CliReporter(json_mode=True)
    rep.step(f"smoke answer: {HOSTILE}")
    err = capsys.readouterr().err
    _assert_safe(err)
    assert MARKUP in err


def test_errors_quoting_host_text_are_clean(capsys, monkeypatch):
    from deployctl.cli._errors import handle
    from deployctl.core.errors import ExecutionError

    exc = ExecutionError(f"node1: docker inspect printed {HOSTILE}", hint=f"see {CLEAR}logs")
    monkeypatch.setattr("sys.argv", ["deployctl", "status"])
    assert handle(exc, debug=False) == 1
    _assert_safe(capsys.readouterr().err)
    monkeypatch.setattr("sys.argv", ["deployctl", "status", "--output", "json"])
    handle(exc, debug=False)
    out = capsys.readouterr().out
    _assert_safe(out)
    _assert_safe(json.loads(out)["message"])
    handle(RuntimeError(f"boom {HOSTILE}"), debug=False)
    _assert_safe(capsys.readouterr().err)


def test_echo_json_cleans_every_string(capsys):
    from deployctl.cli._output import echo_json

    echo_json({"logs": {"node1": {"engine": f"line1\n{HOSTILE}\nline3"}}})
    out = capsys.readouterr().out
    text = json.loads(out)["logs"]["node1"]["engine"]
    _assert_safe(text)
    assert text.startswith("line1\n") and text.endswith("\nline3")
