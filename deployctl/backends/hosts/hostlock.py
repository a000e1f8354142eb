"""The deployment lock on bare metal: one lock file per host, taken atomically on every host.

``<deploy_dir>/<cluster>/lock`` holds the owner (user@host, pid, command, run id, start time,
heartbeat) as JSON. It is created with a hard link of a fully written temporary file, so it appears
complete or not at all, and never replaces someone else's. The first host (the first master) is
taken alone first, so two operators starting together cannot each hold half the hosts: one wins there,
the other is refused at once. The holder refreshes its heartbeat every HEARTBEAT_S; a lock whose holder
is gone (its pid is dead on this machine, or no heartbeat for STALE_AFTER_S) is reported as stale, and
only `--break-lock` removes it.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from deployctl.backends.common.lockinfo import LockHeld, LockOwner, _now
from deployctl.core.errors import ExecutionError
from deployctl.io.executor import Executor, HostError, HostTarget, fan_out_width

HEARTBEAT_S = 20.0

# $1 cluster dir, $2 run id, $3 owner JSON. Prints "acquired", or "held" and the holder's JSON.
ACQUIRE = ('set -e; d="$1"; mkdir -p "$d"; t="$d/.lock.$2"; printf "%s\\n" "$3" > "$t"; '
           'if ln "$t" "$d/lock" 2>/dev/null; then rm -f "$t"; echo acquired; '
           'else rm -f "$t"; echo held; cat "$d/lock" 2>/dev/null || true; fi')
# $1 cluster dir, $2 run id, $3 new owner JSON: refresh only our own lock
REFRESH = ('d="$1"; grep -qF "\\"run_id\\": \\"$2\\"" "$d/lock" 2>/dev/null || exit 0; '
           't="$d/.lock.$2"; printf "%s\\n" "$3" > "$t" && mv -f "$t" "$d/lock"')
# $1 cluster dir, $2 run id: remove only our own lock
RELEASE = 'd="$1"; if grep -qF "\\"run_id\\": \\"$2\\"" "$d/lock" 2>/dev/null; then rm -f "$d/lock"; fi; true'
BREAK = 'rm -f "$1/lock"'


_UNREADABLE = LockOwner("?", "?", 0, "unreadable lock", "?", "", "")     # a lock file that is not deployctl's


def _sh(script: str, *args: str) -> list[str]:
    return ["sh", "-c", script, "deployctl-lock", *args]


class HostLock:
    """Context manager: the lock on every host of a deployment (raises LockHeld when someone has it)."""

    def __init__(self, executor: Executor, targets: list[HostTarget], cdir: str, owner: LockOwner,
                 timeout: float = 30, break_hint: str = "`deployctl up --break-lock`"):
        self.executor, self.targets, self.cdir, self.owner = executor, targets, cdir, owner
        self.timeout, self.break_hint = timeout, break_hint
        self.held: list[HostTarget] = []
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def _take(self, t: HostTarget) -> tuple[HostTarget, LockOwner | None, str | None]:
        """(target, holder or None when we got it, error)."""
        try:
            res = self.executor.run(t, _sh(ACQUIRE, self.cdir, self.owner.run_id, self.owner.to_json()),
                                    self.timeout)
        except HostError as exc:
            return t, None, f"{exc.message}" + (f" ({exc.hint})" if exc.hint else "")
        lines = res.stdout.splitlines()
        if res.rc == 0 and lines and lines[0] == "acquired":
            return t, None, None
        if res.rc == 0 and lines and lines[0] == "held":
            holder = LockOwner.from_json("\n".join(lines[1:]))       # the host's file: None when not a lock
            return t, holder or _UNREADABLE, None
        return t, None, f"could not take the lock (rc {res.rc}): {res.stdout.strip() or res.stderr.strip()}"

    def acquire(self) -> None:
        if not self.targets:
            raise ExecutionError("no host to lock: the inventory names no node")
        first, rest = self.targets[0], self.targets[1:]
        results = [self._take(first)]
        if results[0][1] is None and results[0][2] is None:
            self.held.append(first)
            with ThreadPoolExecutor(max_workers=max(1, min(fan_out_width(), len(rest)))) as pool:
                results += list(pool.map(self._take, rest)) if rest else []
            self.held += [t for t, holder, err in results[1:] if holder is None and err is None]
        for t, holder, err in results:
            if holder is not None:
                self.release()
                owner = None if holder is _UNREADABLE else holder
                raise LockHeld(f"{t.name} ({self.cdir}/lock)", owner, owner is None or owner.gone(), self.break_hint)
            if err is not None:
                self.release()
                raise ExecutionError(f"cannot take the deployment lock on {t.name}: {err}: nothing was changed",
                                     hint="fix SSH to that host (deployctl preflight shows why)")
        self._beat = threading.Thread(target=self._heartbeat, daemon=True, name="deployctl-lock-heartbeat")
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            fresh = replace(self.owner, heartbeat=_now()).to_json()
            for t in list(self.held):
                try:
                    self.executor.run(t, _sh(REFRESH, self.cdir, self.owner.run_id, fresh), self.timeout)
                except HostError:
                    pass     # a host that cannot be reached now is reported by the stage that needs it

    def release(self) -> None:
        self._stop.set()
        if self._beat is not None and self._beat is not threading.current_thread():
            self._beat.join(timeout=self.timeout)
        held, self.held = self.held, []
        if not held:
            return
        with ThreadPoolExecutor(max_workers=max(1, min(fan_out_width(), len(held)))) as pool:
            list(pool.map(self._release_one, held))

    def _release_one(self, t: HostTarget) -> None:
        try:
            self.executor.run(t, _sh(RELEASE, self.cdir, self.owner.run_id), self.timeout)
        except HostError:
            pass

    def __enter__(self) -> "HostLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def holders(executor: Executor, targets: list[HostTarget], cdir: str, timeout: float = 30) -> dict[str, str]:
    """host -> lock file content, for the hosts where a lock exists (read-only)."""
    out = {}

    def one(t: HostTarget) -> None:
        try:
            res = executor.run(t, ["cat", f"{cdir}/lock"], timeout)
        except HostError:
            return
        if res.rc == 0 and res.stdout.strip():
            out[t.name] = res.stdout.strip()

    with ThreadPoolExecutor(max_workers=max(1, min(fan_out_width(), len(targets)))) as pool:
        list(pool.map(one, targets))
    return out


def break_lock(executor: Executor, targets: list[HostTarget], cdir: str, timeout: float = 30) -> list[str]:
    """Remove the lock on every host (the caller has asked for confirmation); returns where one was."""
    found = holders(executor, targets, cdir, timeout)
    with ThreadPoolExecutor(max_workers=max(1, min(fan_out_width(), len(targets)))) as pool:
        list(pool.map(lambda t: executor.run(t, _sh(BREAK, cdir), timeout), [t for t in targets if t.name in found]))
    return sorted(found)
