"""The watch loop: a round every ``interval`` s reads every node at once (one SSH command per node, bounded
by the round timeout and the executor's output cap), turns what they said into events (tracker.py), cleans,
bounds and rate-limits each event (events.py), records it in the cluster's run records
(runs/<id>-watch/events.jsonl, 0600), sends it to the hooks and hands it to the caller (the CLI prints it); a
failed instance goes to the recovery policy when it is enabled. A round that finds no engine container on any
node asks `status` whether the deployment is down (down.py): a deployment taken down on purpose is reported
down, not failed, and nothing of it is recovered. While it runs (not ``once``), the hang probe (hang.py) sends each
idle instance a one-token completion; its verdicts are faults of the rounds.

The hook command is the caller's (the operator's, ``hook_command``), never read from the inventory here."""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Callable

from deployctl.core.errors import DeployctlError
from deployctl.io.executor import Executor, HostTarget, fan_out_width
from deployctl.io.batch import PROBE_CONCURRENCY
from deployctl.io.fanout import fan_out, run_script
from deployctl.backends.hosts.router_control import Remote, control_for, control_gap
from deployctl.core.render.processes import processes
from deployctl.io.records import RunRecord
from deployctl.core.models.hostdata import printable
from deployctl.features.watch.down import RECHECK_S, Stopped, all_gone, read_verdict
from deployctl.features.watch.events import Limiter, clean_event
from deployctl.features.watch.hang import HangProber
from deployctl.features.watch.hooks import Hooks
from deployctl.features.watch.observe import NodeObs, node_commands, parse_node
from deployctl.features.watch.recover import Recoverer
from deployctl.features.watch.tracker import Tracker, event, instance_state

RESTART_TIMEOUT = 120     # s: `docker restart` of one node's engine containers
HISTORY = ("back", "restart-failed", "not-serving")       # a restart's outcome: an entry of the hosts' history


class Watcher:
    def __init__(self, plan, inv, targets: list[HostTarget], executor: Executor, run_root: Path | None, *,
                 interval: float = 2.5, confirm: int = 2, round_timeout: float = 8.0,
                 on_event: Callable[[dict], None] = lambda e: None, recover: bool | None = None,
                 history: Callable[[dict], list[str]] | None = None, hook_command: list[str] | None = None,
                 limiter: Limiter | None = None, verdict: Callable[[], Stopped | None] | None = None,
                 on_round: Callable[["Watcher"], None] = lambda w: None):
        self.plan, self.executor, self.interval = plan, executor, interval
        self.targets = {t.name: t for t in targets}
        self.round_timeout, self.on_event, self.history = round_timeout, on_event, history
        self.window = int(interval * 2 + round_timeout) + 1    # log seconds read per round (overlapping rounds)
        self.tracker = Tracker(plan, confirm=confirm)
        self.cancel = threading.Event()
        self.lock = threading.Lock()
        self.observed: dict[str, NodeObs] = {}
        self.rounds, self.round_s = 0, 0.0
        self.on_round = on_round            # after every round (the CLI's lines when stdout is not a terminal)
        # `status`'s verdict when no engine container is left (down.py); None: the watch judges as usual
        self.verdict = verdict or (lambda: read_verdict(plan, targets, executor))
        self.stopped: Stopped | None = None
        self.asked: float | None = None     # when the verdict was last asked, in this stretch of such rounds
        self.record = RunRecord.create(run_root, "watch") if run_root is not None else None
        if self.record is not None:
            self.record.status("running")
        policy = inv.deploy.recovery
        self.policy = policy
        self.limiter = limiter or Limiter()
        self.hooks = Hooks(policy.hooks.webhook, hook_command,
                           lambda msg: self._emit(event("hook-error", cause=msg), hooks=False))
        enabled = policy.enabled if recover is None else recover
        control = control_for(plan, Remote(executor, self.targets)) if enabled else None
        self.recoverer = Recoverer(plan, policy, control, self.observe, self.restart, self._emit, self.cancel,
                                   interval, gap=control_gap(plan) if control is None else "") if enabled else None
        # npu-smi must not run twice at once on a host: a round's reads and the probe's usage read take turns
        self.npu_locks = {n.name: threading.Lock() for n in plan.nodes}
        self.prober = HangProber(plan, policy.hang_probe, executor, self.targets, interval, self.cancel,
                                 self._probe_ready, lambda text: self.note(text, kind="hang-probe"),
                                 self.npu_locks) if policy.hang_probe.enabled else None

    # ---- reading -----------------------------------------------------------------------------------------
    def observe(self, nodes: list[str] | None = None) -> dict[str, NodeObs]:
        targets = [self.targets[n] for n in (nodes or [n.name for n in self.plan.nodes])]
        runs = fan_out(self.executor, targets, lambda t: node_commands(self.plan, t.name, self.window),
                       self.round_timeout, fan_out_width(), measure_clock=False, parallel=PROBE_CONCURRENCY)
        out = {}
        for name, run in runs.items():
            err = f"{run.error.message}" if run.error is not None else ""
            try:
                out[name] = parse_node(self.plan, name, run.outputs, err)
            except Exception as exc:    # noqa: BLE001 - a host's answer never stops the watch: it is unreadable
                out[name] = NodeObs(name, error=f"its answers could not be read ({type(exc).__name__}: "
                                                f"{printable(str(exc), 200)})")
        return out

    def _probe_ready(self, name: str) -> str | None:
        """The hang probe may probe instance ``name`` now: the deployment is up, the instance is not being recovered
        and every node of it answered the last round with its engine containers running and its health checks
        passing. Returns when the master's engine containers started (a new start: the probe warms up again)."""
        rec = self.recoverer
        with self.lock:
            observed, stopped = self.observed, self.stopped
        if stopped is not None or (rec is not None and name in rec.active):
            return None
        inst = self.plan.instance(name)
        for n in inst.nodes:
            o = observed.get(n)
            if o is None or o.error or o.ready is not True or any(s != "running" for s in o.containers.values()):
                return None
        return " ".join(f"{c}@{t}" for c, t in sorted(observed[inst.master].started.items()))

    def restart(self, nodes: list[str], kill: bool = False) -> list[str]:
        """`docker restart` of the engine containers on every node at once (never the router's); ``kill``: with
        no grace period (`-t 0`: SIGKILL at once, for an engine that is dead or hung)."""
        return run_script(self.executor, [self.targets[n] for n in nodes],
                          lambda t: ["docker", "restart", *(["-t", "0"] if kill else []),
                                     *processes(self.plan, t.name).engine.containers], RESTART_TIMEOUT)

    # ---- events --------------------------------------------------------------------------------------------
    def note(self, text: str, kind: str = "") -> None:
        """An event of the watch itself (e.g. the inventory's hook command that is not run)."""
        self._emit(event("note", cause=text, **({"kind": kind} if kind else {})))

    def _emit(self, ev: dict, hooks: bool = True) -> None:
        ev = clean_event(ev)           # host text made one printable bounded line, before anything sees it
        with self.lock:
            self._out(self.limiter.admit(ev), hooks)
        if self.history is not None and ev["event"] in HISTORY:
            try:
                failed = self.history(ev)
            except DeployctlError as exc:
                failed = [exc.message]
            if failed:
                self._emit(event("history-error", ev["instance"], cause="restart not written to the hosts' "
                                 f"history on: {'; '.join(failed)[:500]}"))

    def _out(self, docs: list[dict], hooks: bool = True) -> None:
        """Record, print and send ``docs`` (under ``self.lock``)."""
        if docs and self.record is not None:
            self.record.append_jsonl("events.jsonl", docs)
        for d in docs:
            self.on_event(d)
            if hooks and d.get("of") != "hook-error":
                self.hooks.send(d)

    def flush(self, final: bool = False) -> None:
        """The `suppressed` summaries of the rate limit's windows that ended (all of them when ``final``)."""
        with self.lock:
            self._out(self.limiter.due(final))

    # ---- the loop --------------------------------------------------------------------------------------------
    def _judge(self, observed: dict[str, NodeObs]) -> Stopped | None:
        """Whether the deployment is down or being changed (`status`'s verdict, asked only in rounds that find no
        engine container: at once, then every RECHECK_S, every round while an operation holds the lock); the
        events of a change of it."""
        before = self.stopped
        if not all_gone(self.plan, observed):
            self.stopped = self.asked = None
            if before is not None:
                self._emit(event("deployment-up", cause="engine containers are there again: watching them"))
            return None
        now = time.monotonic()
        if self.asked is not None and now - self.asked < RECHECK_S and (before is None or before.state != "changing"):
            return before
        self.asked = now
        try:
            self.stopped = self.verdict()
        except Exception as exc:    # noqa: BLE001 - a read-back that fails leaves the round to the usual judgement
            self.stopped = None
            self._emit(event("note", cause="no engine container on any node; whether the deployment is down could "
                                           f"not be read: {type(exc).__name__}: {printable(str(exc), 200)}"))
        now_in = self.stopped
        if now_in is not None and (before is None or before.state != now_in.state):
            cause = (f"no engine container on any node, and `deployctl status` says down: {now_in.cause}; nothing "
                     "is failed or recovered until engine containers are there again" if now_in.state == "down" else
                     f"no engine container on any node while a deployctl operation runs: {now_in.cause}; nothing "
                     "is failed or recovered until it ends")
            self._emit(event(f"deployment-{now_in.state}", cause=cause))
            self.tracker.reset()
            if self.prober is not None:
                self.prober.forget()
            if self.recoverer is not None:
                self.recoverer.halt(f"recovery stopped: {now_in.cause}")
        return now_in

    def step(self) -> list[dict]:
        t0 = time.monotonic()
        with ExitStack() as held:
            for name in sorted(self.npu_locks):       # always in this order: the probe holds one at a time
                held.enter_context(self.npu_locks[name])
            observed = self.observe()
        if self._judge(observed) is not None:         # down, or being changed: no fault is a failure
            with self.lock:
                self.observed = observed
                self.rounds += 1
                self.round_s = time.monotonic() - t0
            self.flush()
            self.on_round(self)
            return []
        rec = self.recoverer
        busy = frozenset(rec.active) if rec else frozenset()
        if rec:
            with rec.lock:
                for name in rec.done:
                    self.tracker.forget(self.plan.instance(name))
                    if self.prober is not None:
                        self.prober.forget(name)
                rec.done.clear()
        if self.prober is not None:
            for name, (node, cause) in self.prober.verdicts().items():
                if name not in busy and node in observed:
                    observed[node].hang = cause
        events = self.tracker.round(observed, skip=busy)
        with self.lock:
            self.observed = observed
            self.rounds += 1
            self.round_s = time.monotonic() - t0
        for ev in events:
            self._emit(ev)
            if ev["event"] == "instance-failed" and rec is not None:
                inst = self.plan.instance(ev["instance"])
                rec.start(inst.name, frozenset(f.kind for f in self.tracker.faults_of(inst)))
        self.flush()
        self.on_round(self)
        return events

    def run(self, once: bool = False) -> None:
        try:
            if self.prober is not None and not once:       # a hang takes probes in a row: none in one round
                self.prober.start()
            while not self.cancel.is_set():
                start = time.monotonic()
                self.step()
                if once:
                    break
                self.cancel.wait(max(0.0, self.interval - (time.monotonic() - start)))
        finally:
            self.close()

    def close(self) -> None:
        self.cancel.set()
        if self.recoverer:
            self.recoverer.join()
        if self.prober is not None:
            self.prober.join()
        self.flush(final=True)         # the last summaries, to the hooks too
        self.hooks.close()
        self.flush(final=True)         # what the hooks reported while they finished (recorded, printed)
        if self.record is not None:
            self.record.status("finished")

    def states(self) -> dict[str, str]:
        if self.stopped is not None:
            return {i.name: self.stopped.state for i in self.plan.instances}
        busy = dict(self.recoverer.active) if self.recoverer else {}
        return {i.name: instance_state(i, self.observed, self.tracker, busy) for i in self.plan.instances}

    def healthy(self) -> bool:
        return all(s == "serving" for s in self.states().values())
