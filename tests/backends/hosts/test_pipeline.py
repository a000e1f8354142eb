"""The deploy pipeline's own rules, with a scripted backend: stage order, success only from verify, undo
after a failed apply or verify, the lock held exactly around apply/verify/undo/record, re-check under
the lock, and the run record's status."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from deployctl.backends.common.pipeline import Applied, Options, UnitCheck, Verification, run_pipeline
from deployctl.io.records import RunRecord
from deployctl.core.errors import ExecutionError


@dataclass(frozen=True)
class Changes:
    n: int

    @property
    def nothing_to_do(self) -> bool:
        return self.n == 0


class Script:
    """A backend whose answers are set per test; it logs every call and whether the lock was held."""

    operation = "up"

    def __init__(self, changes=1, applied=True, verified=True, restored=True, drift=False):
        self.log, self.locked = [], False
        self.changes, self.applied, self.verified, self.restored, self.drift = changes, applied, verified, \
            restored, drift
        self.reads = 0

    def read(self):
        self.reads += 1
        self.log.append("read")
        return {"reads": self.reads}

    def preflight(self, observed):
        self.log.append("preflight")

    def render(self, observed):
        self.log.append("render")
        return "desired"

    def diff(self, desired, observed):
        self.log.append("diff")
        return Changes(self.changes + (1 if self.drift and observed["reads"] > 1 else 0))

    @contextmanager
    def _lock(self):
        self.locked = True
        self.log.append("lock")
        try:
            yield
        finally:
            self.locked = False
            self.log.append("unlock")

    def lock(self):
        return self._lock()

    def apply(self, desired, changes, observed, cancel):
        assert self.locked
        self.log.append("apply")
        if isinstance(self.applied, BaseException):
            raise self.applied
        return Applied(True) if self.applied else Applied(False, "node2: Run start.sh failed")

    def verify(self, desired, changes):
        assert self.locked
        self.log.append("verify")
        return Verification([UnitCheck("node1", "rev b", "rev b running", True),
                             UnitCheck("node2", "rev b", "rev a running", self.verified,
                                       "" if self.verified else "the container runs revision a")])

    def undo(self, desired, changes, observed):
        assert self.locked
        self.log.append("undo")
        return Verification([UnitCheck("node2", "restore: rev a", "rev a running", self.restored,
                                       "" if self.restored else "engine container exited")])

    def record(self, outcome, desired):
        assert self.locked
        self.log.append(f"record {outcome.status}")


class Quiet:
    def stage(self, name): pass
    def changes(self, changes): pass
    def step(self, message): pass
    def failure(self, message): pass
    def verification(self, title, result): pass


def run(backend, tmp_path, **opts):
    rec = RunRecord.create(tmp_path, "up")
    out = run_pipeline(backend, rec, Options(yes=True, **opts), Quiet(), lambda c: opts.get("confirm", True))
    return out, rec


def test_success_comes_from_verify_and_the_lock_covers_the_change(tmp_path):
    b = Script()
    out, rec = run(b, tmp_path)
    assert out.status == "successful" and out.exit_code == 0
    assert b.log == ["read", "preflight", "render", "diff", "lock", "read", "diff", "apply", "verify",
                     "record successful", "unlock"]
    assert (rec.path / "status").read_text() == "successful\n"


def test_a_verification_mismatch_fails_undoes_and_records(tmp_path):
    b = Script(verified=False)
    out, rec = run(b, tmp_path)
    assert out.status == "failed" and out.exit_code == 1
    assert out.failure == "verification failed: node2: the container runs revision a"
    assert b.log[-4:] == ["verify", "undo", "record failed", "unlock"]
    assert (rec.path / "status").read_text() == "failed\n" and (rec.path / "rc").read_text() == "1\n"


def test_a_failed_undo_is_said(tmp_path):
    out, _ = run(Script(applied=False, restored=False), tmp_path)
    assert out.failure.startswith("node2: Run start.sh failed")
    assert "rollback also failed: node2: engine container exited" in out.failure


def test_ctrl_c_in_apply_is_canceled_undone_and_unlocked(tmp_path):
    b = Script(applied=KeyboardInterrupt())
    out, _ = run(b, tmp_path)
    assert out.status == "canceled" and out.exit_code == 1
    assert b.log[-3:] == ["undo", "record canceled", "unlock"]


def test_an_error_inside_the_lock_still_releases_it_and_marks_the_record(tmp_path):
    b = Script(applied=ExecutionError("ssh dropped"))
    with pytest.raises(ExecutionError):
        run(b, tmp_path)
    assert b.log[-1] == "unlock" and not b.locked
    rec = next((tmp_path / "runs").iterdir())
    assert (rec / "status").read_text() == "failed\n"


def test_changes_seen_under_the_lock_stop_the_run(tmp_path):
    b = Script(drift=True)
    with pytest.raises(ExecutionError, match="changed on the hosts after it was read"):
        run(b, tmp_path)
    assert "apply" not in b.log and b.log[-1] == "unlock"


def test_nothing_to_do_dry_run_and_declined_take_no_lock(tmp_path):
    for kw, status in (({}, "nothing-to-do"), ({"dry_run": True}, "dry-run")):
        b = Script(changes=0 if not kw else 1)
        out, _ = run(b, tmp_path, **kw)
        assert out.status == status and "lock" not in b.log
    b = Script()
    rec = RunRecord.create(tmp_path, "up")
    out = run_pipeline(b, rec, Options(), Quiet(), lambda c: False)
    assert out.status == "declined" and "lock" not in b.log and out.exit_code == 0


def test_no_unit_observed_is_not_success():
    assert not Verification([]).ok
    assert Verification([]).summary() == "nothing was observed (no unit to verify)"


def test_cancel_event_reaches_apply(tmp_path):
    seen = []

    class Waits(Script):
        def apply(self, desired, changes, observed, cancel):
            seen.append(cancel)
            return Applied(True)

    ev = threading.Event()
    rec = RunRecord.create(tmp_path, "up")
    run_pipeline(Waits(), rec, Options(yes=True), Quiet(), lambda c: True, ev)
    assert seen == [ev]
