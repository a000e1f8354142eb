"""The recovery policy (inventory deploy.recovery): a failed instance behind the router is taken out
(drain), restarted whole (every node's engine containers: a rank cannot rejoin a live HCCL world), verified
from what its hosts report (containers running and restarted, health checks or ready lines, NPUs and links
healthy, no fatal log line) and put back; a retry waits backoff_s, doubled each time; after max_restarts the
instance stays out and is reported left out, with the nodes whose NPU or link is still unhealthy.

Behind an engine's P/D router (vLLM-Ascend's proxy from 0.18: /instances/remove|add) the other instances of the
role keep serving, and the other role is never touched; a role's only instance is not taken out (there is
nothing to send its requests to): it is restarted and the event says the deployment serves nothing meanwhile.

Each recovery runs on a thread of its own so the watch keeps reading (and reporting) the other instances. A
deployment taken down on purpose (`deployctl down`) stops every recovery where it is (``halt``): nothing more is
restarted, put back or reported of it."""

from __future__ import annotations

import threading
import time
from typing import Callable

from deployctl.core.errors import DeployctlError
from deployctl.backends.hosts.router_control import RouterControl, wait_until
from deployctl.features.watch.observe import NodeObs
from deployctl.core.input.roles import ROLES
from deployctl.features.watch.tracker import event

DRAIN_TIMEOUT = 30          # s: requests in flight on a drained instance may finish
SERVE_TIMEOUT = 60          # s: the router's health checks see the restarted instance up
# faults after which nothing in flight finishes (a hung engine finishes nothing: it is killed at once too)
DEAD = frozenset({"container", "not-ready", "unreachable", "hang"})

Observe = Callable[[list[str]], dict[str, NodeObs]]
Restart = Callable[[list[str], bool], list[str]]    # nodes, kill at once -> the ones where it failed (with why)


class Stop(threading.Event):
    """What one recovery waits on: set by ``Recoverer.halt`` (``halted``: the deployment was taken down), and
    set as far as the recovery can tell once the watch's own ``cancel`` is (looked at every ``POLL`` s)."""

    POLL = 0.25

    def __init__(self, cancel: threading.Event):
        super().__init__()
        self.cancel, self.halted = cancel, False

    def is_set(self) -> bool:
        return super().is_set() or self.cancel.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        end = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            left = self.POLL if end is None else min(self.POLL, end - time.monotonic())
            if left <= 0:
                break
            super().wait(left)
        return self.is_set()


class Recoverer:
    def __init__(self, plan, policy, control: RouterControl | None, observe: Observe, restart: Restart,
                 emit: Callable[[dict], None], cancel: threading.Event, interval: float = 2.0, gap: str = ""):
        self.plan, self.policy, self.control, self.gap = plan, policy, control, gap
        self.observe, self.restart, self.emit, self.cancel, self.interval = observe, restart, emit, cancel, interval
        self.restarts: dict[str, int] = {}
        self.active: dict[str, str] = {}        # instance -> what it does now (draining, restarting, left out)
        self.done: list[str] = []               # instances recovered since the caller last looked
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.stops: dict[str, Stop] = {}        # instance -> what its recovery waits on

    def start(self, name: str, kinds: frozenset[str] = frozenset()) -> None:
        """Recover ``name`` (failed with faults of ``kinds``) on a thread of its own."""
        with self.lock:
            if name in self.active:
                return
            routed = self.control.routed() if self.control is not None else []
            if name not in routed:
                self.emit(event("not-recovered", name, cause=self.gap or "no router in front of it can take it out"))
                self.active[name] = "failed (no recovery)"
                return
            self.active[name] = "draining"
            stop = self.stops[name] = Stop(self.cancel)
        t = threading.Thread(target=self._guarded, args=(name, kinds, stop), daemon=True, name=f"recover-{name}")
        self.threads.append(t)
        t.start()

    def halt(self, why: str) -> None:
        """The deployment was taken down on purpose: every recovery stops where it is (nothing more restarted, put
        back or reported of it but one ``recovery-stopped`` event each), and the next failure starts afresh."""
        with self.lock:
            names = list(self.stops)                  # the recoveries running now
            for stop in self.stops.values():
                stop.halted = True
                stop.set()
            self.stops.clear()
            self.active.clear()
            self.done.clear()
            self.restarts.clear()
        for name in names:
            self.emit(event("recovery-stopped", name, cause=why))

    def _say(self, stop: Stop, ev: dict) -> None:
        if not stop.halted:
            self.emit(ev)

    def _guarded(self, name: str, kinds: frozenset[str], stop: Stop) -> None:
        """A recovery that fails is an event and a state, never a thread that ends in silence (a router's answer
        is parsed into bounded values at the boundary, fleet/control.py; anything else it raises lands here)."""
        try:
            self._recover(name, kinds, stop)
        except DeployctlError as exc:
            self._failed(name, exc.message, stop)
        except Exception as exc:    # noqa: BLE001 - the instance may be out of the router: say so, never die quietly
            self._failed(name, f"{type(exc).__name__}: {str(exc)[:300]}", stop)
        finally:
            with self.lock:
                if self.stops.get(name) is stop:
                    del self.stops[name]          # no recovery of it runs now

    def _failed(self, name: str, why: str, stop: Stop) -> None:
        with self.lock:
            if stop.halted:
                return
            state = self.active.get(name, "")
            self.active[name] = "failed (recovery error)"
        out = f" (it was {state}: check {self.control.what} and `deployctl status`)" if state and self.control else ""
        self.emit(event("recovery-error", name, cause=why + out))

    def _peers(self, name: str) -> tuple[str, list[str]]:
        """The instance's role and the other instances of it the router can still send to."""
        role = self.plan.instance(name).role
        with self.lock:
            busy = set(self.active)
        return role, [i.name for i in self.plan.role(role) if i.name != name and i.name not in busy]

    def _take_out(self, name: str, kinds: frozenset[str], stop: Stop) -> None:
        """Out of the router, its requests in flight done; the role's only instance stays in (there is nothing to
        send its requests to: a P/D proxy with no server of a role serves nothing either way)."""
        role, peers = self._peers(name)
        sole = role in ROLES and not any(i.name != name for i in self.plan.role(role))
        if sole:
            self._say(stop, event("role-down", name, cause=f"the only {role} instance: the deployment serves no "
                                  "request until it is back (nothing to fail over to)"))
            return
        self.control.drain(name)
        dead = kinds & DEAD
        # what it still serves finishes first; a dead or hung engine finishes nothing (and may not answer)
        idle = True if dead else wait_until(lambda: self.control.in_flight(name) == 0, DRAIN_TIMEOUT, stop, 0.5)
        rest = (f"; {role} keeps serving on {', '.join(peers)}" if peers else
                f"; no other {role} instance is serving now") if role in ROLES else ""
        unknown = getattr(self.control, "unknown", {}).get(name, "")
        self._say(stop, event("drained", name, cause=f"out of {self.control.what}{rest}"
                              + ("; nothing to wait for (" + ", ".join(sorted(dead)) + ")" if dead else "")
                              + ("" if idle else f"; requests still in flight after {DRAIN_TIMEOUT} s"
                                 + (f" (cannot tell: {unknown})" if unknown else ""))))

    def _recover(self, name: str, kinds: frozenset[str], stop: Stop) -> None:
        inst = self.plan.instance(name)
        nodes = list(inst.nodes)
        t0 = time.monotonic()
        self._take_out(name, kinds, stop)
        while self.restarts.get(name, 0) < self.policy.max_restarts and not stop.is_set():
            attempt = self.restarts.get(name, 0) + 1
            self.restarts[name] = attempt
            wait = self.policy.backoff_s * 2 ** (attempt - 1)
            sick = self._sick_hardware(nodes)
            if sick:     # restarting on an NPU in Alarm only fails again: give it the backoff to come back
                self._say(stop, event("waiting", name, cause=f"{'; '.join(sick)}: waiting up to {wait:g} s"))
                if not wait_until(lambda: not self._sick_hardware(nodes), wait, stop, self.interval):
                    continue
            before = self.observe(nodes)
            if stop.is_set():
                break
            self._set(name, "restarting", stop)
            # a dead or hung engine has nothing to shut down cleanly: killed at once, not after docker's 10 s
            kill = bool(kinds & DEAD)
            self._say(stop, event("restart", name, attempt=attempt, nodes=nodes,
                                  cause=f"attempt {attempt} of {self.policy.max_restarts}: {', '.join(nodes)}"
                                  + (" (killed at once: " + ", ".join(sorted(kinds & DEAD)) + ")" if kill else "")))
            failed = self.restart(nodes, kill)
            if not failed and self._verified(nodes, before, stop) and not stop.halted:
                self._set(name, "putting back", stop)
                self.control.ready(name)
                back = wait_until(lambda: self.control.serving(name), SERVE_TIMEOUT, stop, 0.5)
                took = round(time.monotonic() - t0, 1)
                self._say(stop, event("back" if back else "not-serving", name, recover_s=took,
                                      cause=f"restarted and ready after {took} s" if back else
                                      f"ready, but {self.control.what} does not send to it after {SERVE_TIMEOUT} s"))
                with self.lock:
                    if not stop.halted:
                        self.active.pop(name, None)
                        self.done.append(name)
                return
            if stop.halted:
                return
            self._say(stop, event("restart-failed", name, cause="; ".join(failed) or "not ready in time: "
                                  + "; ".join(self._why(nodes)) or "not ready in time"))
            self._set(name, "backing off", stop)
            stop.wait(wait)
        if stop.halted:
            return
        sick = self._sick_hardware(nodes)
        self._say(stop, event("left-out", name, cause=f"after {self.restarts.get(name, 0)} restarts: "
                              + ("; ".join(sick) if sick else "it does not come back") + "; the others keep serving"))
        self._set(name, "left out", stop)

    def _set(self, name: str, what: str, stop: Stop) -> None:
        with self.lock:
            if not stop.halted:
                self.active[name] = what

    def _sick_hardware(self, nodes: list[str]) -> list[str]:
        obs = self.observe(nodes)
        return [f"{f.node}: {f.cause}" for o in obs.values() for f in o.faults() if f.kind in ("npu", "link")]

    def _why(self, nodes: list[str]) -> list[str]:
        return [f"{f.node}: {f.cause}" for o in self.observe(nodes).values() for f in o.faults()]

    def _verified(self, nodes: list[str], before: dict[str, NodeObs], stop: Stop) -> bool:
        """Every node's containers run a new start (StartedAt moved), answer ready and show no fault."""
        def ok() -> bool:
            now = self.observe(nodes)
            return all(n in now and not now[n].faults() and now[n].ready is True
                       and all(now[n].started.get(c) != before.get(n, NodeObs(n)).started.get(c)
                               for c in now[n].started) for n in nodes)

        return wait_until(ok, self.policy.ready_timeout_s, stop, self.interval)

    def join(self, timeout: float = 5) -> None:
        for t in self.threads:
            t.join(timeout)
