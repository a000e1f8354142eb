"""A rolling update that starts an instance `deployctl scale` added (deployctl.backends.hosts.rolling): an instance
whose hosts only "start" (no engine container yet) is new: nothing runs there to drain, so it is not taken out at
the router; it is put in once verified; and when its batch fails, put_back does not tell the router of it (it never
served). An instance that restarts is still drained first."""

from __future__ import annotations

import threading

import pytest
import yaml
from conftest import EXAMPLES

from deployctl.app.inventory import validate_inventory
from deployctl.app.scaled import base_groups
from deployctl.backends.common.pipeline import Applied, UnitCheck, Verification
from deployctl.backends.hosts.rolling import BatchSteps, plan_rollout, put_back, roll
from deployctl.backends.hosts.runstate import HostsRun, Rollout
from deployctl.core.input.raw import parse_yaml
from deployctl.core.models.deploy import ChangeSet, HostChange
from deployctl.core.models.scaling import AddedInstance
from deployctl.core.scaling.effective import effective_raw
from deployctl.core.sizing.planner import plan_layout


@pytest.fixture(scope="module")
def plan():
    """The fleet example as 3 replicas with mixed-3 added on the spares a2-node7, a2-node8 (joined)."""
    doc = yaml.safe_load((EXAMPLES / "a2-fleet-4x2x8-dp-ep.yaml").read_text())
    doc["layout"]["replicas"] = 3
    doc["deploy"] = {"scaling": {"spares": ["a2-node7", "a2-node8"]}}
    raw = parse_yaml(yaml.safe_dump(doc, sort_keys=False), "inv.yaml", EXAMPLES)
    added = [AddedInstance(role="mixed", name="mixed-3", nodes=["a2-node7", "a2-node8"])]
    p = plan_layout(validate_inventory(effective_raw(raw, added, base_groups(raw))))
    return p.model_copy(update={"joined": frozenset({"mixed-3"})})


class FakeControl:
    """A router that sends to every instance it was not told to drain; every call recorded."""

    what = "the router"

    def __init__(self, plan):
        self.plan, self.calls, self.out = plan, [], set()

    def routed(self):
        return [i.name for i in self.plan.role("mixed")]

    def drain(self, i):
        self.calls.append(("drain", i))
        self.out.add(i)

    def in_flight(self, i):
        self.calls.append(("in_flight", i))
        return 0

    def ready(self, i):
        self.calls.append(("ready", i))
        self.out.discard(i)

    def serving(self, i):
        return i not in self.out

    def view(self):
        return {i: "UP" for i in self.routed()}


class Reporter:
    def __init__(self):
        self.lines = []

    def step(self, m):
        self.lines.append(m)

    def failure(self, m):
        self.lines.append(m)

    def stage(self, name):
        pass


def changeset(plan, actions: dict[str, str]) -> ChangeSet:
    return ChangeSet(hosts=[HostChange(node=n.name, instance=n.instance, rev="b",
                                       current_rev=None if actions.get(n.instance) == "start" else "a", files=[],
                                       action=actions.get(n.instance, "keep"), reason="") for n in plan.nodes])


def steps(restarted: list, ok: bool = True) -> BatchSteps:
    def restart(nodes):
        restarted.append(sorted(nodes))
        return Applied(ok, "" if ok else "docker run failed")

    return BatchSteps(restart=restart,
                      read_back=lambda nodes: Verification([UnitCheck(n, "b", "b", True) for n in nodes]),
                      smoke=lambda batch: "")


def test_an_instance_whose_hosts_only_start_is_new(plan):
    ctl = FakeControl(plan)
    rollout, why = plan_rollout(plan, changeset(plan, {"mixed-3": "start"}), ctl, "rolling", 1)
    assert why == "" and rollout.batches == [["mixed-3"]] and rollout.new == frozenset({"mixed-3"})
    rollout, _ = plan_rollout(plan, changeset(plan, {"mixed-3": "start", "mixed-1": "restart"}), ctl, "rolling", 1)
    assert rollout.new == frozenset({"mixed-3"})          # a restarting instance is not new
    # one of its hosts starting, the other restarting: something runs there already, so it is not new
    cs = changeset(plan, {"mixed-3": "start"})
    hosts = [h.model_copy(update={"action": "restart", "current_rev": "a"}) if h.node == "a2-node8" else h
             for h in cs.hosts]
    rollout, _ = plan_rollout(plan, ChangeSet(hosts=hosts), ctl, "rolling", 1)
    assert rollout.batches == [["mixed-3"]] and rollout.new == frozenset()


def test_a_new_instance_is_not_drained_and_is_put_in_once_verified(plan):
    ctl = FakeControl(plan)
    rollout, _ = plan_rollout(plan, changeset(plan, {"mixed-3": "start"}), ctl, "rolling", 1)
    restarted, rep, state = [], Reporter(), HostsRun()
    applied = roll(plan, rollout, state, steps(restarted), rep, drain_timeout=1, cancel=threading.Event())
    assert applied.ok, applied.failure
    assert ctl.calls == [("ready", "mixed-3")]                     # no drain, no in-flight wait
    assert restarted == [["a2-node7", "a2-node8"]]
    assert any("mixed-3: new, starting a2-node7, a2-node8" in line for line in rep.lines), rep.lines


def test_a_restarting_instance_is_still_drained_first(plan):
    ctl = FakeControl(plan)
    rollout, _ = plan_rollout(plan, changeset(plan, {"mixed-1": "restart"}), ctl, "rolling", 1)
    assert rollout.new == frozenset()
    applied = roll(plan, rollout, HostsRun(), steps([]), Reporter(), drain_timeout=1, cancel=threading.Event())
    assert applied.ok, applied.failure
    assert ctl.calls[0] == ("drain", "mixed-1") and ("in_flight", "mixed-1") in ctl.calls
    assert ctl.calls[-1] == ("ready", "mixed-1")


def test_put_back_after_a_failed_new_instance_does_not_tell_the_router(plan):
    ctl = FakeControl(plan)
    rollout, _ = plan_rollout(plan, changeset(plan, {"mixed-3": "start"}), ctl, "rolling", 1)
    state = HostsRun(rollout=rollout)
    applied = roll(plan, rollout, state, steps([], ok=False), Reporter(), drain_timeout=1, cancel=threading.Event())
    assert not applied.ok and state.rolling_batch == ["mixed-3"]
    put_back(state, Reporter())
    assert ctl.calls == []                                          # never told, never drained


def test_put_back_tells_the_router_of_an_instance_that_served_before(plan):
    ctl = FakeControl(plan)
    state = HostsRun(rollout=Rollout(ctl, [["mixed-1", "mixed-3"]], [], frozenset({"mixed-3"})),
                     rolling_batch=["mixed-1", "mixed-3"])
    put_back(state, Reporter())
    assert ctl.calls == [("ready", "mixed-1")]
