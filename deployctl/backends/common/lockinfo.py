"""Who holds a deployment lock, and the error a second operator gets (shared by hosts and k8s)."""

from __future__ import annotations

import json
import os
import socket
import sys
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from deployctl.core.errors import ExecutionError

STALE_AFTER_S = 120        # a holder refreshes its lock every 20 s; two minutes of silence means it is gone


def local_user() -> str:
    """Who runs deployctl here (the uid when there is no passwd entry, as in some containers)."""
    import getpass

    try:
        return getpass.getuser()
    except Exception:     # noqa: BLE001 - no passwd entry
        return str(os.getuid())


def operator_name() -> str:
    """user@host of whoever runs deployctl: the lock's owner and the `user` of a history entry."""
    return f"{local_user()}@{socket.gethostname()}"


@dataclass(frozen=True)
class LockOwner:
    user: str
    host: str
    pid: int
    command: str
    run_id: str
    started: str              # ISO 8601, UTC
    heartbeat: str = ""       # last refresh (ISO 8601, UTC); empty = never refreshed

    @classmethod
    def me(cls, run_id: str) -> "LockOwner":
        now = _now()
        cmd = " ".join(["deployctl", *sys.argv[1:]])[:160]        # e.g. deployctl up -i prod.yaml -y
        return cls(local_user(), socket.gethostname(), os.getpid(), cmd, run_id, now, now)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "LockOwner | None":
        """The holder a lock file names, or None when it is not a deployctl lock (a host's file: untrusted)."""
        from deployctl.core.models.hostdata import parse_lock

        doc, _ = parse_lock(text, "")
        return None if doc is None else cls(**doc.model_dump())

    def who(self) -> str:
        return f"{self.user}@{self.host} (pid {self.pid}, `{self.command}`, run {self.run_id})"

    def age_s(self, now: datetime | None = None) -> float:
        return _age(self.started, now)

    def silent_s(self, now: datetime | None = None) -> float:
        return _age(self.heartbeat or self.started, now)

    def gone(self, now: datetime | None = None, local_host: str | None = None,
             pid_alive=None) -> bool:
        """The holder is gone: same machine and its pid is dead, or no heartbeat for STALE_AFTER_S."""
        local_host = local_host or socket.gethostname()
        if self.host == local_host:
            alive = pid_alive or _pid_alive
            if not alive(self.pid):
                return True
        return self.silent_s(now) > STALE_AFTER_S


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _age(stamp: str, now: datetime | None) -> float:
    try:
        t = datetime.fromisoformat(stamp)
    except ValueError:
        return float("inf")
    return ((now or datetime.now(timezone.utc)) - t).total_seconds()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def human_age(seconds: float) -> str:
    if seconds == float("inf"):
        return "unknown time"
    s = int(seconds)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    if s < 172800:
        return f"{s // 3600} h"
    return f"{s // 86400} days"


class LockHeld(ExecutionError):
    """Another operator (or a dead one) holds the deployment's lock. Exit 1, nothing changed."""

    def __init__(self, where: str, owner: LockOwner | None, stale: bool, break_hint: str):
        self.owner, self.stale, self.where = owner, stale, where
        if owner is None:
            msg = f"the deployment is locked on {where} by an unreadable lock"
        else:
            msg = (f"the deployment is locked on {where} by {owner.who()} since {owner.started} "
                   f"({human_age(owner.age_s())} ago)")
            if stale:
                msg += f"; the holder is gone (no sign of life for {human_age(owner.silent_s())}): a stale lock"
        hint = (f"remove it with {break_hint} (after checking that nobody is deploying)" if stale or owner is None
                else f"wait for it to finish; if it was killed, {break_hint} removes the lock after confirmation")
        super().__init__(msg + ": nothing was changed", hint=hint)
