"""Talk to the router in front of the instances during a rolling update and for `status`: take an instance
out (drain), see when it has no request in flight, put it back, read which instances the router sends to.

Every call runs on a host over the executor (SSH), as `python3 -c SCRIPT ARG...` (Ansible needs python3 on every
managed host already): values are arguments, never spliced into a shell string.

deployctl's HAProxy is driven through its runtime API on 127.0.0.1:<router.admin_port> (HAProxy 2.6
management guide §9.3: `set server <backend>/<server> state drain|ready`, `show stat`: CSV with pxname,
svname, scur (current sessions), qcur (queued), status (UP, DOWN, DRAIN, MAINT, "UP 1/2" while rising)).
An engine's own P/D router gives its control through its driver (``router_control``).
"""

from __future__ import annotations

import csv
import io
import re
import threading
import time
from dataclasses import dataclass
from typing import Callable, Protocol

from deployctl.core.errors import ExecutionError
from deployctl.io.executor import Executor, HostError, HostTarget
from deployctl.core.engine_spec.router import InFlightNotes, RouterControl
from deployctl.core.models.plan import Plan

BACKEND = "instances"      # the backend name in haproxy.cfg.j2
# what a router/engine answer may be for deployctl to read it (`show stat` of a fleet is a few kB); beyond it the
# rest is not read, rows beyond MAX_STAT_ROWS neither
MAX_ANSWER = 1 << 20
MAX_STAT_ROWS = 4096
NOT_IDLE = 1 << 30         # requests in flight when the router's answer cannot tell: never "idle"
_SERVER = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")          # an instance name (the inventory's pattern)
_STATUS = re.compile(r"^[A-Za-z][A-Za-z0-9 /_-]{0,31}$")                    # UP, DOWN, DRAIN, MAINT, UP 1/2, no check
_HTTP_CODE = re.compile(r"^[0-9]{1,3}$")

# one request/answer over the runtime API socket (the API closes the connection after answering)
ADMIN = """import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
s.sendall(sys.argv[2].encode() + b"\\n")
out = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    out += d
sys.stdout.write(out.decode(errors="replace"))
"""

# an HTTP request from that host: METHOD URL [JSON BODY] -> status line then the body
HTTP = """import sys, urllib.request, urllib.error
body = sys.argv[3].encode() if len(sys.argv) > 3 else None
req = urllib.request.Request(sys.argv[2], data=body, method=sys.argv[1],
                             headers={"Content-Type": "application/json"} if body else {})
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        sys.stdout.write(str(r.status) + "\\n" + r.read().decode(errors="replace"))
except urllib.error.HTTPError as e:
    sys.stdout.write(str(e.code) + "\\n" + e.read().decode(errors="replace"))
except Exception as e:
    sys.stdout.write("0\\n" + repr(e))
"""


@dataclass
class Remote:
    """Runs small python3 programs on the deployment's hosts."""

    executor: Executor
    targets: dict[str, HostTarget]
    timeout: float = 30

    def py(self, node: str, script: str, *args: str) -> str:
        try:
            res = self.executor.run(self.targets[node], ["python3", "-c", script, *args], self.timeout)
        except HostError as exc:
            raise ExecutionError(f"{node}: {exc.message}", hint="check SSH to that host") from None
        if res.rc != 0:
            lines = (res.stderr or res.stdout).strip().splitlines() or ["(no output)"]
            missing = res.rc == 127
            raise ExecutionError(f"{node}: {lines[-1][:300]}" if not missing else f"{node}: python3 not found",
                                 hint="deployctl needs python3 on the hosts (Ansible does too)" if missing else
                                 "is the router running? (`deployctl status`, `deployctl logs`)")
        return res.stdout

    def http(self, node: str, method: str, url: str, body: str | None = None) -> tuple[int, str]:
        """(HTTP status, body) of a request from ``node``; status 0 when nothing answered (or the answer is not
        an HTTP status line); the body cut at ``MAX_ANSWER`` characters."""
        out = self.py(node, HTTP, method, url, *([body] if body is not None else []))
        code, _, text = out.partition("\n")
        code = code.strip()
        return (int(code) if _HTTP_CODE.fullmatch(code) else 0), text[:MAX_ANSWER]


@dataclass(frozen=True)
class ServerStat:
    """One server row of HAProxy's `show stat`, typed; a count HAProxy left empty is 0, one it did not print as
    a number is None (unknown)."""

    status: str                 # UP, DOWN, DRAIN, MAINT, "UP 1/2", ...; "unknown" when not printed as such
    scur: int | None            # current sessions
    qcur: int | None            # queued requests

    @property
    def in_flight(self) -> int:
        return NOT_IDLE if self.scur is None or self.qcur is None else min(self.scur + self.qcur, NOT_IDLE)


def _count(value) -> int | None:
    """A count HAProxy printed: an int from 0 to ``NOT_IDLE - 1`` (empty: 0), else None (unknown)."""
    v = (value or "0").strip() if isinstance(value, str) or value is None else ""
    n = int(v) if v.isascii() and v.isdigit() and len(v) <= 12 else None
    return n if n is not None and n < NOT_IDLE else None


def parse_show_stat(text: str, backend: str = BACKEND) -> dict[str, ServerStat]:
    """The servers of ``backend`` in a `show stat` answer (CSV, header line ``# pxname,svname,...``).

    Rows of other proxies, FRONTEND/BACKEND rows, rows with a server name that is no instance name, and short or
    odd rows are skipped; counts that are not numbers are unknown (never idle); at most ``MAX_STAT_ROWS`` rows.

    Raises:
        ValueError: no header with pxname, svname, scur, qcur and status (not a `show stat` answer).
    """
    text = text[:MAX_ANSWER].lstrip("# ")
    reader = csv.DictReader(io.StringIO(text))
    if not {"pxname", "svname", "scur", "qcur", "status"} <= set(reader.fieldnames or ()):
        raise ValueError(f"not a `show stat` answer: {text.strip()[:80]!r}")
    out: dict[str, ServerStat] = {}
    try:
        for i, row in enumerate(reader):
            if i >= MAX_STAT_ROWS:
                break
            name, status = row.get("svname"), row.get("status")
            if row.get("pxname") != backend or not isinstance(name, str) or not _SERVER.fullmatch(name):
                continue
            status = status.strip() if isinstance(status, str) else ""
            out[name] = ServerStat(status=status if _STATUS.fullmatch(status) else "unknown",
                                   scur=_count(row.get("scur")), qcur=_count(row.get("qcur")))
    except csv.Error:
        pass                    # a broken row (a NUL, an unterminated quote): the rows before it stand
    return out


class HaproxyControl(InFlightNotes):
    """deployctl's HAProxy (fleet/router.py) through its runtime API."""

    def __init__(self, plan: Plan, remote: Remote) -> None:
        self.plan, self.remote = plan, remote
        self.node, self.port = plan.router.node, str(plan.router.admin_port)
        self.what = f"the router (HAProxy on {self.node})"

    def _api(self, command: str) -> str:
        return self.remote.py(self.node, ADMIN, self.port, command)

    def stats(self) -> dict[str, ServerStat]:
        try:
            return parse_show_stat(self._api("show stat"))
        except ValueError as exc:
            raise ExecutionError(f"{self.what}: {exc}",
                                 hint="is the router running this deployment's haproxy.cfg? (deployctl status)") from None

    def _set(self, instance: str, state: str) -> None:
        out = self._api(f"set server {BACKEND}/{instance} state {state}").strip()
        if out:      # the API answers nothing on success
            raise ExecutionError(f"{self.what}: `set server {BACKEND}/{instance} state {state}`: {out}",
                                 hint="is the router running this deployment's haproxy.cfg? (deployctl status)")

    def routed(self) -> list[str]:
        return [i.name for i in self.plan.role("mixed")]

    def drain(self, instance: str) -> None:
        self._set(instance, "drain")

    def ready(self, instance: str) -> None:
        if instance in self.plan.joined and instance not in self.stats():
            self._add(instance)
        self._set(instance, "ready")

    def _add(self, instance: str) -> None:
        """An instance scale added (not in haproxy.cfg): a dynamic server (management guide 9.3 "add server",
        2.4+), with the checks of the file's servers; it starts in maintenance with its checks off."""
        from deployctl.core.render.router import backends

        b = next(b for b in backends(self.plan) if b.name == instance)
        ms = self.plan.inventory.router.check_interval_ms if self.plan.inventory.router else 1000
        out = self._api(f"add server {BACKEND}/{instance} {b.host}:{b.port} check port {b.check_port} "
                        f"inter {ms}ms fall 2 rise 2").strip()
        if out != "New server registered.":
            raise ExecutionError(f"{self.what}: `add server {BACKEND}/{instance}`: {out[:300]}",
                                 hint="HAProxy 2.4 or later adds servers at run time (router.image)")
        self._set_health(instance)

    def _set_health(self, instance: str) -> None:
        out = self._api(f"enable health {BACKEND}/{instance}").strip()
        if out:
            raise ExecutionError(f"{self.what}: `enable health {BACKEND}/{instance}`: {out[:300]}")

    def forget(self, instance: str) -> None:
        """Delete an instance scale removed from the running HAProxy (in maintenance first, as `del server` wants)."""
        if instance not in self.stats():
            return
        self._set(instance, "maint")
        out = self._api(f"del server {BACKEND}/{instance}").strip()
        if out != "Server deleted.":
            raise ExecutionError(f"{self.what}: `del server {BACKEND}/{instance}`: {out[:300]}",
                                 hint="it stays in maintenance (no request goes to it)")

    def in_flight(self, instance: str) -> int:
        row = self.stats().get(instance)
        n = 0 if row is None else row.in_flight
        self.told(instance, f"{self.what}: `show stat` gives no count of its sessions (scur, qcur)"
                  if n == NOT_IDLE else "")
        return n

    def serving(self, instance: str) -> bool:
        row = self.stats().get(instance)
        return row is not None and row.status.split(" ")[0] == "UP"

    def view(self) -> dict[str, str]:
        stats = self.stats()
        return {i: stats[i].status if i in stats else "absent" for i in self.routed()}


def control_for(plan, remote: Remote) -> RouterControl | None:
    """The router control of this deployment: deployctl's HAProxy, else the engine's P/D router's (if any)."""
    if plan.router is not None:
        return HaproxyControl(plan, remote)

    return plan.engine_spec.router_control(plan, remote)


def control_gap(plan) -> str:
    """Why this deployment has no router control (control_for gave None): for the watch's `not-recovered`."""

    why = plan.engine_spec.router_control_gap(plan)
    if why:
        return why
    if plan.preset == "pd-split":
        return f"{plan.engine.kind}'s own P/D router gives deployctl no way to take an instance out"
    return "no router in front of it can take it out (a single instance): restarting it would stop the only " \
           "thing serving"


def wait_until(check: Callable[[], bool], timeout: float, cancel: threading.Event | None = None,
               interval: float = 1.0) -> bool:
    """True once ``check()`` holds; False after ``timeout`` s or on cancel."""
    end = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() >= end or (cancel is not None and cancel.is_set()):
            return False
        if cancel is not None:
            cancel.wait(interval)
        else:
            time.sleep(interval)
