"""watch and status agree after `deployctl down`: a round that finds no engine container asks `status`'s own
read-back and judgement (deployctl.backends.hosts.status.judge over read_deployed) and reports the deployment
down, not failed, and recovers nothing; containers removed behind deployctl's back are still failures. The real
`up`/`down` pipeline over the in-memory fleet (tests/support/fakefleet.py, the status read-back included); the
watch's own round reads what the fleet's containers are. Milliseconds, no root."""

from __future__ import annotations

import threading
import time

from conftest import EXAMPLES
from recording import RecordingReporter
from support.fakefleet import FakeFleet
from test_watch_units import FakeControl, plan_of

from deployctl.app.inventory import read_inventory as load_and_validate
from deployctl.backends.common.lockinfo import LockOwner
from deployctl.backends.hosts.hosts import host_targets_abs
from deployctl.backends.hosts.remote import read_deployed
from deployctl.backends.hosts.revision import cluster_dir
from deployctl.backends.hosts.status import judge
from deployctl.backends.hosts.up import UpOptions, run_hosts_operation
from deployctl.core.sizing.planner import plan_layout
from deployctl.features.watch import down
from deployctl.features.watch.loop import Watcher
from deployctl.features.watch.observe import NodeObs
from deployctl.features.watch.recover import Recoverer

INV = EXAMPLES / "a2-2x8-tp-pp.yaml"


class Deployment:
    """One inventory on the in-memory fleet: `up`, `down`, `status` as the CLI runs them, and a Watcher whose
    rounds read the fleet's containers (its verdict reads the fleet as `status` does)."""

    def __init__(self, tmp_path, recover: bool = True):
        self.inv = load_and_validate(INV)
        self.plan = plan_layout(self.inv)
        self.fleet = FakeFleet([n.name for n in self.plan.nodes], cluster_dir(self.plan),
                               f"deployctl_{self.inv.cluster.name}_mindie")
        self.tmp, self.events = tmp_path, []
        self.targets = host_targets_abs(self.inv, INV.parent)
        self.w = Watcher(self.plan, self.inv, self.targets, self.fleet, tmp_path / "watch", recover=recover,
                         on_event=self.events.append)
        self.w.observe = self.observe

    def op(self, operation: str) -> None:
        opts = UpOptions(yes=True, skip_preflight=True, run_root=self.tmp / "runs", inventory_dir=INV.parent)
        out = run_hosts_operation(operation, self.inv, opts, RecordingReporter(), lambda c: True,
                                  executor=self.fleet, runner=self.fleet)
        assert out.status == "successful", operation

    def status(self):
        return judge(self.plan, read_deployed(self.plan, self.targets, self.fleet, self.fleet.cdir, health=True))

    def observe(self, nodes=None) -> dict[str, NodeObs]:
        out = {}
        for n in self.plan.nodes:
            c = self.fleet.hosts[n.name].containers.get(self.fleet.engine)
            state = "absent" if c is None else c.status if c.status == "running" else f"{c.status} (exit {c.exit_code})"
            out[n.name] = NodeObs(n.name, containers={self.fleet.engine: state},
                                  ready=True if state == "running" else None)
        return out

    def round(self) -> list[str]:
        """One round of the watch: the events it made (its own and those of the recovery)."""
        start = len(self.events)
        self.w.step()
        return [e["event"] for e in self.events[start:]]


def test_after_down_watch_says_down_as_status_does_and_recovers_nothing(tmp_path):
    d = Deployment(tmp_path)
    name = d.plan.instances[0].name
    # nothing deployed yet: status says down, and so does the watch (not a failure of every instance)
    assert d.status().state == "down" and d.round() == ["deployment-down"]
    assert "nothing deployed yet" in d.events[-1]["cause"] and d.w.states() == {name: "down"}
    assert not d.w.healthy()
    d.op("up")
    assert d.round() == ["deployment-up"] and d.w.states() == {name: "serving"}
    assert d.round() == [] and d.w.healthy()

    d.op("down")
    st = d.status()
    assert st.state == "down" and "stopped by `deployctl down`" in st.note
    assert d.round() == ["deployment-down"]             # no fault, no instance-failed, no not-recovered
    ev = d.events[-1]
    assert st.note in ev["cause"] and "`deployctl status` says down" in ev["cause"] and ev["instance"] == ""
    assert d.w.states() == {name: "down"}
    # later rounds: nothing new, and status is not asked again before RECHECK_S
    reads = len(d.fleet.commands)
    assert [d.round() for _ in range(3)] == [[], [], []] and len(d.fleet.commands) == reads
    assert d.w.tracker.failed == {} and d.w.recoverer.active == {}

    # up again: the watch follows it
    d.op("up")
    assert d.round() == ["deployment-up"] and d.w.states() == {name: "serving"}


def test_containers_removed_behind_deployctls_back_are_still_a_failure(tmp_path):
    d = Deployment(tmp_path)
    name = d.plan.instances[0].name
    d.op("up")
    d.round()
    for h in d.fleet.hosts.values():
        h.containers.clear()
    assert d.status().state == "degraded"
    events = d.round()
    # status does not say down: the watch judges as before (no router in front of it: not recovered, said why)
    assert "instance-failed" in events and "not-recovered" in events and "deployment-down" not in events, events
    assert d.w.states()[name].startswith("failed")


def test_while_an_operation_holds_the_lock_nothing_is_failed(tmp_path):
    d = Deployment(tmp_path)
    d.op("up")
    d.round()
    for h in d.fleet.hosts.values():        # a `down` between removing the containers and recording its outcome
        h.containers.clear()
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    owner = LockOwner("ops", "ctl", 1, "deployctl down -i inv.yaml", "20261126-050211-down", now, now)
    d.fleet.hosts["node1"].lock = owner.to_json()
    assert d.round() == ["deployment-changing"]
    assert "deployctl down -i inv.yaml" in d.events[-1]["cause"] and d.w.states() == {d.plan.instances[0].name:
                                                                                       "changing"}
    assert d.round() == []                   # asked again every round while it holds the lock
    d.fleet.hosts["node1"].lock = None       # it ended without recording a down: the watch judges as before
    assert "instance-failed" in d.round()
    # a lock whose holder is gone (no heartbeat for minutes) holds nothing
    long_ago = "2020-01-01T00:00:00+00:00"
    stale = LockOwner("ops", "elsewhere", 1, "deployctl up", "r", long_ago, long_ago)
    states = read_deployed(d.plan, d.targets, d.fleet, d.fleet.cdir)
    assert down.verdict(d.plan, states) is None
    d.fleet.hosts["node2"].lock = stale.to_json()
    assert down.verdict(d.plan, read_deployed(d.plan, d.targets, d.fleet, d.fleet.cdir)) is None


def test_a_recovery_in_flight_stops_when_the_deployment_is_taken_down():
    """halt(): the recovery's waits end at once, nothing more is restarted, put back or reported of it but one
    `recovery-stopped`; the next failure starts afresh."""
    inv, plan = plan_of(enabled=True, backoff_s=30, max_restarts=3, ready_timeout_s=600)
    inst = plan.instances[0]
    events, restarts = [], []
    restarted = threading.Event()

    def restart(nodes, kill):
        restarts.append(nodes)
        restarted.set()
        return []

    def observe(nodes):        # never comes back: the recovery waits for ready_timeout_s
        return {n: NodeObs(n, containers={"e": "running"}, started={"e": "same"}, ready=False) for n in nodes}

    ctl = FakeControl(plan)
    rec = Recoverer(plan, inv.deploy.recovery, ctl, observe, restart, events.append, threading.Event(), interval=0.01)
    rec.start(inst.name)
    assert restarted.wait(5)
    t0 = time.monotonic()
    rec.halt("recovery stopped: stopped by `deployctl down` (run r1)")
    rec.join(5)
    assert time.monotonic() - t0 < 3 and not any(t.is_alive() for t in rec.threads)
    assert [e["event"] for e in events] == ["drained", "restart", "recovery-stopped"], events
    assert "deployctl down" in events[-1]["cause"]
    assert rec.active == {} and rec.restarts == {} and rec.stops == {} and len(restarts) == 1
    assert ("ready", inst.name) not in ctl.calls                      # never put back
    rec.start(inst.name)                                              # a later failure is recovered again
    assert restarted.wait(5) and rec.active[inst.name] in ("draining", "restarting")
    rec.cancel.set()
    rec.join(5)


def test_the_watch_halts_recoveries_when_status_says_down(tmp_path):
    inv, plan = plan_of(enabled=True)
    w = Watcher(plan, inv, [], None, tmp_path / "runs", recover=True,
                verdict=lambda: down.Stopped("down", "stopped by `deployctl down` (run r1)"))
    halted = []
    w.recoverer.halt = halted.append
    w.tracker.failed[plan.instances[0].name] = 0.0
    w.observe = lambda nodes=None: {n.name: NodeObs(n.name, containers={"e": "absent"}) for n in plan.nodes}
    assert w.step() == [] and halted and "deployctl down" in halted[0]
    assert set(w.states().values()) == {"down"} and w.tracker.failed == {}
    w.close()
