"""One deploy pipeline for every target (hosts, k8s) and operation (up, rollback, down).

Named stages, in order::

    read -> preflight -> render -> diff -> confirm -> lock -> apply -> verify -> record

The pipeline owns the order, the confirmation, the lock's lifetime (taken before any change, released
on success, failure and Ctrl-C), the re-check under the lock, the undo after a failed apply or a
failed verification, and the run record's status. Everything that touches a host or an API server is
a method of the backend passed in (as pyinfra passes connectors), so this logic is unit-tested with
fakes in milliseconds (tests/backends/hosts/test_pipeline.py) and end to end on the simulated hosts.

Success is never inferred from the absence of an error: the result of a run is what ``verify``
reads back from the hosts (or the API server) after ``apply``, compared unit by unit with the intent.
"""

from __future__ import annotations

import threading
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from deployctl.io.records import RunRecord

STAGES = ("read", "preflight", "render", "diff", "confirm", "lock", "apply", "verify", "record")
OK_STATUSES = ("successful", "nothing-to-do", "dry-run", "declined")


@dataclass(frozen=True)
class UnitCheck:
    """One unit (a node, a pod, an instance) after a change: what was intended and what was observed."""

    unit: str
    intended: str
    observed: str
    ok: bool
    cause: str = ""

    def line(self) -> str:
        mark = "✓" if self.ok else "✗"
        text = f"{mark} {self.unit}: {self.observed}"
        return text if self.ok or not self.cause else f"{text} ({self.cause})"


@dataclass
class Verification:
    units: list[UnitCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.units) and all(u.ok for u in self.units)

    @property
    def failures(self) -> list[UnitCheck]:
        return [u for u in self.units if not u.ok]

    def summary(self) -> str:
        if not self.units:
            return "nothing was observed (no unit to verify)"
        bad = self.failures
        if not bad:
            return f"all {len(self.units)} verified"
        return "; ".join(f"{u.unit}: {u.cause or u.observed}" for u in bad)


@dataclass
class Applied:
    """What apply reports. ``ok`` only means the tool ran to its end; verify decides the outcome."""

    ok: bool
    failure: str = ""
    canceled: bool = False


@dataclass
class Outcome:
    status: str                          # nothing-to-do, dry-run, declined, successful, failed, canceled
    record: RunRecord
    changes: Any = None
    verification: Verification | None = None
    failure: str = ""
    restored: Verification | None = None  # after a failure: what the undo left (read back too)
    stages: list[tuple[str, float]] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 0 if self.status in OK_STATUSES else 1


class Reporter(Protocol):
    def stage(self, name: str) -> None: ...
    def changes(self, changes: Any) -> None: ...
    def step(self, message: str) -> None: ...
    def failure(self, message: str) -> None: ...
    def verification(self, title: str, result: Verification) -> None: ...


class Backend(Protocol):
    """The effects of one operation on one target. Every method may raise a DeployctlError."""

    operation: str                       # up, rollback, down

    def read(self) -> Any: ...                                   # what runs now
    def preflight(self, observed: Any) -> None: ...              # raise ExecutionError to stop
    def render(self, observed: Any) -> Any: ...                  # the intent
    def diff(self, desired: Any, observed: Any) -> Any: ...      # has .nothing_to_do
    def lock(self) -> AbstractContextManager: ...                # raises LockHeld
    def apply(self, desired: Any, changes: Any, observed: Any, cancel: threading.Event) -> Applied: ...
    def verify(self, desired: Any, changes: Any) -> Verification: ...
    def undo(self, desired: Any, changes: Any, observed: Any) -> Verification: ...
    def record(self, outcome: Outcome, desired: Any) -> None: ...


@dataclass
class Options:
    dry_run: bool = False
    yes: bool = False
    skip_preflight: bool = False


class _Clock:
    def __init__(self, reporter: Reporter, stages: list[tuple[str, float]]):
        self.reporter, self.stages = reporter, stages

    def __call__(self, name: str, fn: Callable[[], Any]) -> Any:
        self.reporter.stage(name)
        t0 = time.monotonic()
        try:
            return fn()
        finally:
            self.stages.append((name, round(time.monotonic() - t0, 3)))


def run_pipeline(backend: Backend, record: RunRecord, opts: Options, reporter: Reporter,
                 confirm: Callable[[Any], bool], cancel: threading.Event | None = None) -> Outcome:
    """Run the stages; the run record's status/rc always end set, whatever happens."""
    record.status("running")
    try:
        out = _run(backend, record, opts, reporter, confirm, cancel or threading.Event())
    except BaseException:
        record.finish("failed", 1)
        raise
    record.write_json("stages.json", [{"stage": n, "seconds": s} for n, s in out.stages])
    record.finish(out.status if out.status in ("successful", "failed", "canceled") else "successful",
                  out.exit_code)
    return out


def _run(backend: Backend, record: RunRecord, opts: Options, reporter: Reporter, confirm, cancel) -> Outcome:
    stages: list[tuple[str, float]] = []
    step = _Clock(reporter, stages)
    observed = step("read", backend.read)
    if not opts.skip_preflight:
        step("preflight", lambda: backend.preflight(observed))
    desired = step("render", lambda: backend.render(observed))
    changes = step("diff", lambda: backend.diff(desired, observed))
    reporter.changes(changes)
    if changes.nothing_to_do:
        return Outcome("nothing-to-do", record, changes, stages=stages)
    if opts.dry_run:
        return Outcome("dry-run", record, changes, stages=stages)
    if not opts.yes and not step("confirm", lambda: confirm(changes)):
        return Outcome("declined", record, changes, stages=stages)
    lock = step("lock", backend.lock)
    with lock:
        # another operator may have changed the deployment between our read and the lock
        now = backend.read()
        again = backend.diff(desired, now)
        if again != changes:
            from deployctl.core.errors import ExecutionError

            raise ExecutionError("the deployment changed on the hosts after it was read (another operator?): "
                                 "nothing was changed", hint="run the command again to see the new changes")
        return _apply_and_verify(backend, record, step, reporter, desired, changes, observed, cancel, stages)


def _apply_and_verify(backend, record, step, reporter, desired, changes, observed, cancel, stages) -> Outcome:
    interrupted = False
    try:
        applied = step("apply", lambda: backend.apply(desired, changes, observed, cancel))
    except KeyboardInterrupt:
        cancel.set()
        interrupted = True
        applied = Applied(False, "interrupted (Ctrl-C)", canceled=True)
    if applied.canceled and not applied.failure:
        applied.failure = "interrupted (Ctrl-C)"
    verification = None
    if applied.ok:
        verification = step("verify", lambda: backend.verify(desired, changes))
        reporter.verification(f"{backend.operation}: observed on the hosts", verification)
        failure = "" if verification.ok else f"verification failed: {verification.summary()}"
    else:
        failure = applied.failure or "the apply stage failed"
    if not failure:
        out = Outcome("successful", record, changes, verification, stages=stages)
        step("record", lambda: backend.record(out, desired))
        return out
    reporter.failure(f"✗ {failure}")
    status = "canceled" if interrupted or applied.canceled else "failed"
    restored = step("undo", lambda: backend.undo(desired, changes, observed))
    reporter.verification("after the rollback: observed on the hosts", restored)
    if not restored.ok and restored.units:
        failure += f"\nrollback also failed: {restored.summary()}"
    out = Outcome(status, record, changes, verification, failure, restored, stages=stages)
    step("record", lambda: backend.record(out, desired))
    return out
