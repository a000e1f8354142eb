"""The deployment lock on Kubernetes: a Lease (coordination.k8s.io/v1) per release, in its namespace.

``deployctl-<release>`` holds::

    spec:
      holderIdentity: '{"user": ..., "host": ..., "pid": ..., "command": ..., "run_id": ..., "started": ...}'
      acquireTime: 2025-01-01T10:00:00.000000Z
      renewTime:   2025-01-01T10:04:20.000000Z      # refreshed every RENEW_S while deployctl runs
      leaseDurationSeconds: 120                    # STALE_AFTER_S: no renewal for that long = a stale lock

It is taken with a create (the API server answers 409 AlreadyExists to the second operator: nobody can
overwrite a lock), renewed from a background thread with an update that carries the resourceVersion we
last wrote, and deleted on release only if it is still ours (a delete precondition on resourceVersion).
A lock whose renewTime is older than its leaseDurationSeconds is reported as stale; only `--break-lock`
(``break_lock``) removes someone else's lock. A holderIdentity written by hand or by another tool may be
`user@host:pid:run` or any text: it is shown as it is.

`api` is anything with get_lease / create_lease / replace_lease / delete_lease (KubeApi, or a fake in tests).
"""

from __future__ import annotations

import re
import threading
from dataclasses import replace
from datetime import datetime, timezone
from typing import Callable

from deployctl.backends.common.lockinfo import STALE_AFTER_S, LockHeld, LockOwner
from deployctl.core.errors import ExecutionError

RENEW_S = 20.0
MANAGED_BY = {"app.kubernetes.io/managed-by": "deployctl"}


def lease_name(release: str) -> str:
    return f"deployctl-{release}"[:253]


def micro_time(t: datetime) -> str:
    """Kubernetes MicroTime: RFC 3339 in UTC with exactly six fractional digits."""
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(value) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if not value:
        return None
    text = str(value).strip()
    m = re.match(r"^(.*T\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)?$", text)
    if m:      # Python parses at most 6 fractional digits; Go writes up to 9
        frac = (m.group(2) or "")[:7]
        text = m.group(1) + frac + ("+00:00" if m.group(3) in (None, "Z") else m.group(3))
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _iso(t: datetime | None) -> str:
    return t.astimezone(timezone.utc).isoformat(timespec="seconds") if t else ""


def holder(lease: dict) -> LockOwner | None:
    """Who holds the Lease: deployctl's owner JSON, or `user@host:pid:run`, or any other text as the user;
    started = acquireTime, heartbeat = renewTime (as the API server has them). None: no holder at all."""
    spec = lease.get("spec") or {}
    ident = (spec.get("holderIdentity") or "").strip()
    acquired, renewed = _parse_time(spec.get("acquireTime")), _parse_time(spec.get("renewTime"))
    owner = LockOwner.from_json(ident) if ident.startswith("{") else None
    if owner is None:
        if not ident:
            return None
        m = re.match(r"^(?P<user>[^@\s]+)@(?P<host>[^:\s]+)(?::(?P<pid>\d+))?(?::(?P<run>\S+))?$", ident)
        if m:
            owner = LockOwner(m["user"], m["host"], int(m["pid"] or 0), "unknown command", m["run"] or "?", "")
        else:
            owner = LockOwner(ident, "?", 0, "unknown command", "?", "")
    started = _iso(acquired) or owner.started or _iso(renewed)
    return replace(owner, started=started, heartbeat=_iso(renewed) or owner.heartbeat)


def is_stale(lease: dict, now: datetime | None = None) -> bool:
    """renewTime (else acquireTime) older than leaseDurationSeconds (else STALE_AFTER_S); no time: stale."""
    spec = lease.get("spec") or {}
    last = _parse_time(spec.get("renewTime")) or _parse_time(spec.get("acquireTime"))
    if last is None:
        return True
    duration = spec.get("leaseDurationSeconds") or STALE_AFTER_S
    return ((now or datetime.now(timezone.utc)) - last).total_seconds() > duration


def where(namespace: str, release: str) -> str:
    return f"namespace {namespace} Lease {lease_name(release)}"


def break_lock(api, namespace: str, release: str) -> LockOwner | None:
    """Delete the release's Lease whoever holds it; returns who held it (None: there was none)."""
    lease = api.get_lease(lease_name(release))
    if lease is None:
        return None
    api.delete_lease(lease_name(release))
    return holder(lease) or LockOwner("?", "?", 0, "unreadable lock", "?", "")


def read_lock(api, release: str, now: datetime | None = None) -> tuple[LockOwner | None, bool] | None:
    """(holder, stale) of the release's Lease, or None when it is free (read-only)."""
    lease = api.get_lease(lease_name(release))
    if lease is None:
        return None
    return holder(lease), is_stale(lease, now)


class LeaseLock:
    """The release's Lease, taken by ``acquire()`` (LockHeld when someone has it); as a context manager it is
    renewed while the block runs and deleted (if still ours) when it ends, however it ends."""

    def __init__(self, api, namespace: str, release: str, owner: LockOwner, *, renew_every: float = RENEW_S,
                 duration: int = STALE_AFTER_S, break_hint: str = "`deployctl up --target k8s --break-lock`",
                 now: Callable[[], datetime] | None = None, on_lost: Callable[[str], None] | None = None):
        self.api, self.namespace, self.release_name, self.owner = api, namespace, release, owner
        self.name = lease_name(release)
        self.identity = owner.to_json()
        self.renew_every, self.duration, self.break_hint = renew_every, duration, break_hint
        self.now = now or (lambda: datetime.now(timezone.utc))
        self.on_lost = on_lost or (lambda message: None)
        self.lease: dict | None = None          # as last written by us
        self.lost = ""                          # why we no longer hold it (someone broke or took it)
        self.renewals = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._mutex = threading.Lock()

    def _body(self, resource_version: str | None = None, acquired: str | None = None) -> dict:
        now = micro_time(self.now())
        meta = {"name": self.name, "namespace": self.namespace,
                "labels": {**MANAGED_BY, "deployctl.io/release": self.release_name[:63]}}
        if resource_version:
            meta["resourceVersion"] = resource_version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.duration),
                         "acquireTime": acquired or now, "renewTime": now}}

    def acquire(self, break_existing: bool = False, report: Callable[[str], None] | None = None) -> "LeaseLock":
        """Create the Lease. Held by someone: LockHeld (who, since when, stale or not), or with
        break_existing, delete theirs (only the one we read) and create ours."""
        for _ in range(3):
            created = self.api.create_lease(self._body())
            if created is not None:
                self.lease = created
                return self
            current = self.api.get_lease(self.name)
            if current is None:
                continue                        # released between our create and our read: try again
            who, stale = holder(current), is_stale(current, self.now())
            if not break_existing:
                raise LockHeld(where(self.namespace, self.release_name), who, stale, self.break_hint)
            rv = (current.get("metadata") or {}).get("resourceVersion")
            if self.api.delete_lease(self.name, rv) and report:
                report(f"removed the lock held by {who.who() if who else 'an unreadable holder'} "
                       f"(--break-lock)")
        raise ExecutionError(f"could not take the {where(self.namespace, self.release_name)}: it keeps changing "
                             "(another deployctl is starting?): nothing was changed",
                             hint="run the command again")

    # -- renewal

    def renew(self) -> bool:
        """Refresh renewTime if the Lease is still ours; False (and ``lost`` set) when it is not."""
        with self._mutex:
            if self.lease is None or self.lost:
                return False
            acquired = (self.lease.get("spec") or {}).get("acquireTime")
            acquired = micro_time(_parse_time(acquired)) if _parse_time(acquired) else None
            rv = self.lease["metadata"].get("resourceVersion")
            for _ in range(2):
                got = self.api.replace_lease(self.name, self._body(rv, acquired))
                if got is not None:
                    self.lease = got
                    self.renewals += 1
                    return True
                current = self.api.get_lease(self.name)      # conflict or gone: is it still ours?
                if current is None or (current.get("spec") or {}).get("holderIdentity") != self.identity:
                    who = holder(current) if current else None
                    self.lost = (f"the lock {where(self.namespace, self.release_name)} was removed" if current is None
                                 else f"the lock {where(self.namespace, self.release_name)} was taken by "
                                      f"{who.who() if who else 'someone else'}")
                    self.on_lost(self.lost + " (--break-lock?) while this run held it")
                    return False
                rv = current["metadata"].get("resourceVersion")
            return False

    def _loop(self) -> None:
        while not self._stop.wait(self.renew_every):
            try:
                if not self.renew():
                    return
            except Exception as exc:  # noqa: BLE001 - a failed renewal is retried at the next tick
                self.on_lost(f"could not renew the lock {where(self.namespace, self.release_name)}: {exc}")

    def __enter__(self) -> "LeaseLock":
        if self.lease is None:
            self.acquire()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=f"lease-{self.name}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.release()
        except Exception as err:  # noqa: BLE001 - never hide the error that ended the block
            if exc[0] is None:
                raise
            self.on_lost(f"could not remove the lock {where(self.namespace, self.release_name)} ({err}): "
                         f"{self.break_hint} removes it")

    def release(self) -> None:
        """Stop renewing and delete the Lease if it is still ours (never someone else's)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(5.0, self.renew_every))
            self._thread = None
        with self._mutex:
            if self.lease is None:
                return
            for _ in range(3):
                current = self.api.get_lease(self.name)
                if current is None or (current.get("spec") or {}).get("holderIdentity") != self.identity:
                    break
                if self.api.delete_lease(self.name, current["metadata"].get("resourceVersion")):
                    break
            self.lease = None
