"""`deployctl scale --apply` without hosts (deployctl.features.scale.apply Applier, run.run_rounds): what an add
refuses before touching anything, how it declines a change set that would restart another instance and puts the
state back, which peers it records; what a remove refuses and the order of its steps; how the rounds carry out
decisions and hold a role after a failed change. `up`, the router and the hosts are fakes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import EXAMPLES

import deployctl.backends.hosts.router_control as router_control
import deployctl.backends.hosts.scaling as host_scaling
from deployctl.app.inventory import validate_inventory
from deployctl.app.scaled import base_groups
from deployctl.backends.hosts.runstate import UpOptions
from deployctl.core.input.raw import parse_yaml
from deployctl.core.models.deploy import ChangeSet, HostChange
from deployctl.core.models.scaling import AddedInstance, ScaleState
from deployctl.core.scaling.decide import Decision
from deployctl.core.scaling.effective import effective_raw
from deployctl.core.sizing.planner import plan_layout
from deployctl.features.scale.apply import Applier, Change
from deployctl.features.scale.run import run_rounds
from deployctl.io.scale_store import read_state, write_state

CLUSTER = "r1-fleet"
SPARES = ("a2-node7", "a2-node8")
M3 = AddedInstance(role="mixed", name="mixed-3", nodes=list(SPARES), run_id="earlier")


def plan_of(doc: dict, added: list[AddedInstance]):
    raw = parse_yaml(yaml.safe_dump(doc, sort_keys=False), "inv.yaml", EXAMPLES)
    return plan_layout(validate_inventory(effective_raw(raw, added, base_groups(raw))))


def fleet_doc() -> dict:
    """The fleet example: 3 replicas of 2 servers behind HAProxy, a2-node7 and a2-node8 spare."""
    doc = yaml.safe_load((EXAMPLES / "a2-fleet-4x2x8-dp-ep.yaml").read_text())
    doc["layout"]["replicas"] = 3
    doc["deploy"] = {"scaling": {"spares": list(SPARES)}}
    return doc


@pytest.fixture(scope="module")
def fleet_plan():
    return plan_of(fleet_doc(), [])


@pytest.fixture(scope="module")
def scaled_plan():
    plan = plan_of(fleet_doc(), [M3])
    return plan.model_copy(update={"joined": frozenset({"mixed-3"})})


def ctx(plan, spares=SPARES):
    return SimpleNamespace(plan=plan, inventory=plan.inventory, targets=[], spares=tuple(spares))


def changes(plan, restarting: dict[str, str]) -> ChangeSet:
    """Every node of ``plan``: "keep", or the action ``restarting`` gives its instance."""
    return ChangeSet(hosts=[HostChange(node=n.name, instance=n.instance, rev="b", current_rev="a", files=[],
                                       action=restarting.get(n.instance, "keep"), reason="")
                            for n in plan.nodes])


@dataclass
class FakeUp:
    """`up` of the deployment as scaled: shows the change set to the applier's check, then ends as told (the
    pipeline's Outcome: status, record, failure). What it saw is kept."""

    changeset: object = None
    status_if_confirmed: str = "successful"
    raises: Exception | None = None
    failure: str = ""
    calls: list = field(default_factory=list)

    def __call__(self, scaled_ctx, opts, confirm):
        state = read_state(scaled_ctx.run_root, CLUSTER)
        self.calls.append({"ctx": scaled_ctx, "opts": opts, "state": state})
        if self.raises is not None:
            raise self.raises
        ok = confirm(self.changeset)
        self.calls[-1]["confirmed"] = ok
        status = self.status_if_confirmed if ok else "declined"
        return SimpleNamespace(status=status, record=SimpleNamespace(path=Path("/runs/up-1")),
                               failure=self.failure if ok else "")


def applier(tmp_path, run_up, opened=None) -> Applier:
    opened = opened if opened is not None else []

    def open_ctx():
        c = SimpleNamespace(run_root=tmp_path, n=len(opened), plan=f"plan-{len(opened)}", targets=[])
        opened.append(c)
        return c

    return Applier(open_ctx, run_up, tmp_path, executor=object(), opts=UpOptions(ssh_timeout=5), run_id="scale-9",
                   clock=iter(range(0, 1000, 7)).__next__)


# ------------------------------------------------------------------ add: refusals before anything is done

@pytest.mark.parametrize("spares, left", [(("a2-node7",), "1 left (a2-node7)"), ((), "0 left (none)")])
def test_add_refuses_when_too_few_spares_are_left(tmp_path, fleet_plan, spares, left):
    up = FakeUp()
    change = applier(tmp_path, up).add(ctx(fleet_plan, spares), "mixed", "overloaded")
    assert not change.ok and change.action == "up" and change.role == "mixed"
    assert "one more mixed instance needs 2 spare server(s)" in change.detail and left in change.detail
    assert up.calls == [] and read_state(tmp_path, CLUSTER) is None


def test_add_refuses_a_role_the_deployment_does_not_have(tmp_path, fleet_plan):
    up = FakeUp()
    change = applier(tmp_path, up).add(ctx(fleet_plan), "decode", "overloaded")
    assert not change.ok and "no decode instance" in change.detail and up.calls == []


def test_add_refuses_when_no_router_control_could_take_the_new_instance(tmp_path, fleet_plan, monkeypatch):
    monkeypatch.setattr(router_control, "control_for", lambda plan, remote: None)
    monkeypatch.setattr(router_control, "control_gap", lambda plan: "the router cannot be told")
    up = FakeUp()
    change = applier(tmp_path, up).add(ctx(fleet_plan), "mixed", "overloaded")
    assert not change.ok and change.detail.startswith("not added: the router cannot be told")
    assert up.calls == [] and read_state(tmp_path, CLUSTER) is None


def test_add_behind_a_pd_proxy_that_cannot_take_an_instance_is_refused_with_the_reason(tmp_path):
    """vLLM-Ascend 0.13's P/D proxy (the example's image) has no safe way to add a server at run time."""
    doc = yaml.safe_load((EXAMPLES / "vllm-a3-1p1d-qwen3.yaml").read_text())
    doc["nodes"].append({"name": "d2", "address": "10.202.0.4", "interface": "enp189s0f0"})
    doc["deploy"] = {"scaling": {"spares": ["d2"]}}
    plan = plan_of(doc, [])
    up = FakeUp()
    change = applier(tmp_path, up).add(ctx(plan, ("d2",)), "decode", "overloaded")
    assert not change.ok and change.detail.startswith("not added: ") and "could not be put behind it" in change.detail
    assert up.calls == [] and read_state(tmp_path, "qwen3-pd") is None


# ------------------------------------------------------------------ add: the up run

def test_add_writes_the_state_before_up_and_runs_up_recorded_as_scale_up(tmp_path, fleet_plan):
    up = FakeUp(changeset=changes(fleet_plan, {}))
    opened: list = []
    change = applier(tmp_path, up, opened).add(ctx(fleet_plan), "mixed", "overloaded: 12 waiting")
    assert change.ok and (change.instance, change.nodes) == ("mixed-3", list(SPARES))
    assert change.run == "/runs/up-1" and change.detail == ""
    [call] = up.calls
    assert call["ctx"] is opened[0]                       # the deployment as scaled, opened after the state
    [seen] = call["state"].added
    assert (seen.role, seen.name, seen.nodes, seen.run_id) == ("mixed", "mixed-3", list(SPARES), "scale-9")
    opts = call["opts"]
    assert opts.record_as == "scale-up" and opts.yes is False and opts.ssh_timeout == 5
    assert opts.record_why == "scale added mixed-3 on a2-node7, a2-node8: overloaded: 12 waiting"
    assert read_state(tmp_path, CLUSTER).added == [seen]           # kept after a successful up


def test_add_records_the_live_instances_of_its_role_as_peers_newest_first(tmp_path, fleet_plan):
    up = FakeUp(changeset=changes(fleet_plan, {}))
    applier(tmp_path, up).add(ctx(fleet_plan), "mixed", "overloaded",
                              live={"mixed-0", "mixed-2", "decode", "mixed-9"})
    [added] = read_state(tmp_path, CLUSTER).added
    assert added.peers == ["mixed-2", "mixed-0"]       # mixed-1 did not answer; no other role, no unknown name


def test_add_declines_a_change_set_that_restarts_another_instance_and_puts_the_state_back(tmp_path, fleet_plan):
    up = FakeUp(changeset=changes(fleet_plan, {"mixed-1": "restart"}))
    change = applier(tmp_path, up).add(ctx(fleet_plan), "mixed", "overloaded")
    assert up.calls[0]["confirmed"] is False
    assert not change.ok
    assert change.detail == ("adding mixed-3 would restart a2-node3 (mixed-1: restart), a2-node4 (mixed-1: restart)"
                             ": declined")
    assert read_state(tmp_path, CLUSTER) is None      # put back: nothing added


def test_add_accepts_a_change_set_where_only_the_new_instance_starts(tmp_path, fleet_plan, scaled_plan):
    cs = changes(scaled_plan, {"mixed-3": "start"})
    up = FakeUp(changeset=cs)
    change = applier(tmp_path, up).add(ctx(fleet_plan), "mixed", "overloaded")
    assert up.calls[0]["confirmed"] is True and change.ok


def test_a_router_restart_counts_as_restarting_another_instance(tmp_path, fleet_plan):
    cs = changes(fleet_plan, {})
    hosts = [h.model_copy(update={"ms_action": "restart"}) if h.node == "a2-node1" else h for h in cs.hosts]
    up = FakeUp(changeset=ChangeSet(hosts=hosts))
    change = applier(tmp_path, up).add(ctx(fleet_plan), "mixed", "overloaded")
    assert up.calls[0]["confirmed"] is False and not change.ok
    assert "a2-node1" in change.detail and change.detail.endswith(": declined")


def test_a_failing_up_puts_the_state_back_as_it_was(tmp_path, fleet_plan):
    earlier = AddedInstance(role="mixed", name="mixed-9", nodes=["a2-node6"], run_id="old")
    before = ScaleState(cluster=CLUSTER, added=[earlier])
    write_state(tmp_path, before)
    up = FakeUp(changeset=changes(fleet_plan, {}), status_if_confirmed="failed", failure="mixed-3 never ready")
    change = applier(tmp_path, up).add(ctx(fleet_plan), "mixed", "overloaded")
    assert [a.name for a in up.calls[0]["state"].added] == ["mixed-9", "mixed-3"]   # during up: both
    assert not change.ok and change.detail == "up failed: mixed-3 never ready"
    assert read_state(tmp_path, CLUSTER) == before


def test_an_up_that_raises_puts_the_state_back_and_the_error_goes_on(tmp_path, fleet_plan):
    up = FakeUp(raises=RuntimeError("lock held"))
    with pytest.raises(RuntimeError, match="lock held"):
        applier(tmp_path, up).add(ctx(fleet_plan), "mixed", "overloaded")
    assert up.calls[0]["state"] is not None
    assert read_state(tmp_path, CLUSTER) is None


# ------------------------------------------------------------------ remove

def test_remove_refuses_a_role_scale_added_nothing_to(tmp_path, scaled_plan):
    write_state(tmp_path, ScaleState(cluster=CLUSTER, added=[AddedInstance(role="decode", name="decode-1",
                                                                            nodes=["x"])]))
    change = applier(tmp_path, FakeUp()).remove(ctx(scaled_plan), "mixed", "idle", drain_timeout=0)
    assert not change.ok and change.action == "down"
    assert change.detail.startswith("no mixed instance was added by scale")
    assert len(read_state(tmp_path, CLUSTER).added) == 1          # nothing changed


def test_remove_with_no_state_refuses(tmp_path, fleet_plan):
    change = applier(tmp_path, FakeUp()).remove(ctx(fleet_plan), "mixed", "idle", drain_timeout=0)
    assert not change.ok and "no mixed instance was added by scale" in change.detail


class FakeControl:
    what = "the router"

    def __init__(self, busy: int = 0):
        self.busy, self.calls = busy, []

    def drain(self, i):
        self.calls.append(("drain", i))

    def in_flight(self, i):
        return self.busy

    def ready(self, i):
        self.calls.append(("ready", i))

    def forget(self, i):
        self.calls.append(("forget", i))


def test_remove_drains_stops_forgets_then_writes_the_state_and_the_history(tmp_path, scaled_plan, monkeypatch):
    control, steps = FakeControl(), []
    monkeypatch.setattr(router_control, "control_for", lambda plan, remote: control)
    monkeypatch.setattr(host_scaling, "stop_instance",
                        lambda plan, name, *a: steps.append(("stop", name, read_state(tmp_path, CLUSTER))))
    monkeypatch.setattr(host_scaling, "scale_down_entry",
                        lambda plan, run_id, why, *a: steps.append(("entry", plan, run_id, why)) or [])
    keep = AddedInstance(role="decode", name="decode-1", nodes=["x"])
    write_state(tmp_path, ScaleState(cluster=CLUSTER, added=[keep, M3]))
    change = applier(tmp_path, FakeUp()).remove(ctx(scaled_plan), "mixed", "idle", drain_timeout=0)
    assert change.ok and (change.instance, change.nodes) == ("mixed-3", list(SPARES))
    assert control.calls == [("drain", "mixed-3"), ("forget", "mixed-3")]
    assert steps[0][:2] == ("stop", "mixed-3") and len(steps[0][2].added) == 2     # stopped before the state went
    # the entry is written for the deployment as it is after the removal (re-opened)
    assert steps[1] == ("entry", "plan-0", "scale-9", "scale removed mixed-3 from a2-node7, a2-node8: idle")
    assert read_state(tmp_path, CLUSTER).added == [keep]


def test_remove_puts_a_busy_instance_back_and_removes_nothing(tmp_path, scaled_plan, monkeypatch):
    control = FakeControl(busy=3)
    monkeypatch.setattr(router_control, "control_for", lambda plan, remote: control)
    monkeypatch.setattr(host_scaling, "stop_instance", lambda *a: pytest.fail("stopped a busy instance"))
    write_state(tmp_path, ScaleState(cluster=CLUSTER, added=[M3]))
    change = applier(tmp_path, FakeUp()).remove(ctx(scaled_plan), "mixed", "idle", drain_timeout=0)
    assert not change.ok and "still had requests in flight" in change.detail
    assert control.calls == [("drain", "mixed-3"), ("ready", "mixed-3")]
    assert read_state(tmp_path, CLUSTER).added == [M3]


# ------------------------------------------------------------------ run_rounds

class FakeShadow:
    """Decisions planted per round; replan and the cool-down clock as Shadow has them."""

    def __init__(self, rounds: list[list[Decision]]):
        self.planted, self.rounds, self.mode, self.record = rounds, 0, "apply", None
        self.answered = {"mixed-0", "mixed-1"}
        self.last_change: dict[str, float] = {}
        self.replanned: list = []
        self.clock = lambda: 100.0 + self.rounds

    def round(self):
        self.rounds += 1
        return self.planted[self.rounds - 1]

    def replan(self, plan, read, role):
        self.replanned.append((plan, read, role))


class FakeApplier:
    def __init__(self, ok: bool = True, back: list[str] | None = None):
        self.ok, self.back, self.calls = ok, back or [], []

    def add(self, c, role, why, live=frozenset()):
        self.calls.append(("add", c, role, why, set(live)))
        return Change("up", role, f"{role}-9", ["n9"], ok=self.ok, detail="" if self.ok else "up failed")

    def remove(self, c, role, why, drain_timeout):
        self.calls.append(("remove", c, role, why, drain_timeout))
        return Change("down", role, f"{role}-9", ["n9"], ok=self.ok)

    def rejoin(self, c):
        self.calls.append(("rejoin", c))
        return self.back


def decision(role: str, action: str, current: int = 2) -> Decision:
    desired = current + {"up": 1, "down": -1, "hold": 0}[action]
    return Decision(role=role, current=current, desired=desired, action=action, reason=f"{action} because")


def run(shadow, app, rounds: int):
    events, opened = [], []

    def reopen():
        c = SimpleNamespace(plan=f"plan-{len(opened)}")
        opened.append(c)
        return c

    failed = run_rounds(shadow, rounds, 0, events.append, applier=app, reopen=reopen,
                        reader=lambda c: f"reader of {c.plan}", drain_timeout=42, sleep=lambda s: None)
    return failed, events, opened


def test_rounds_carry_out_up_and_down_and_skip_hold():
    shadow = FakeShadow([[decision("mixed", "up"), decision("decode", "hold")], [decision("decode", "down")]])
    app = FakeApplier()
    failed, events, opened = run(shadow, app, 2)
    assert failed == 0
    carried = [c for c in app.calls if c[0] != "rejoin"]
    assert [(c[0], c[2], c[3]) for c in carried] == [("add", "mixed", "up because"),
                                                     ("remove", "decode", "down because")]
    assert carried[0][4] == {"mixed-0", "mixed-1"}           # live: the instances that answered
    assert carried[1][4] == 42                               # the drain timeout
    changes_ = [e for e in events if e["event"] == "change"]
    assert [(e["round"], e["action"], e["role"], e["instance"], e["ok"]) for e in changes_] == [
        (1, "up", "mixed", "mixed-9", True), (2, "down", "decode", "decode-9", True)]
    assert [e["action"] for e in events if e["event"] == "decision"] == ["up", "hold", "down"]
    # each round re-opens the deployment to rejoin (0, 3), for the change (1, 4) and after it (2, 5)
    assert len(opened) == 6 and carried[0][1] is opened[1] and carried[1][1] is opened[4]
    assert [c[1] for c in app.calls if c[0] == "rejoin"] == [opened[0], opened[3]]
    # after each successful change the shadow reads the deployment as it is now
    assert [(p, role) for p, _, role in shadow.replanned] == [(opened[2].plan, "mixed"), (opened[5].plan, "decode")]
    assert shadow.replanned[0][1] == f"reader of {opened[2].plan}"
    assert shadow.last_change == {}


def test_a_failed_change_is_counted_and_holds_the_role_for_its_cool_down():
    shadow = FakeShadow([[decision("mixed", "up")], [decision("decode", "down")]])
    failed, events, _ = run(shadow, FakeApplier(ok=False), 2)
    assert failed == 2
    assert shadow.last_change == {"mixed": 101.0, "decode": 102.0}     # the clock at the failure
    assert shadow.replanned == []
    assert [e["ok"] for e in events if e["event"] == "change"] == [False, False]


def test_without_an_applier_nothing_is_carried_out():
    shadow = FakeShadow([[decision("mixed", "up")]])
    events: list = []
    assert run_rounds(shadow, 1, 0, events.append, sleep=lambda s: None) == 0
    assert [e["event"] for e in events] == ["decision"]


def test_each_round_tells_the_router_again_of_what_it_forgot():
    shadow = FakeShadow([[decision("mixed", "hold")], [decision("mixed", "hold")]])
    app = FakeApplier(back=["mixed-3"])
    _, events, _ = run(shadow, app, 2)
    assert [c[0] for c in app.calls] == ["rejoin", "rejoin"]
    assert [e for e in events if e["event"] == "rejoined"] == [
        {"event": "rejoined", "round": 1, "instances": ["mixed-3"]},
        {"event": "rejoined", "round": 2, "instances": ["mixed-3"]}]


# ------------------------------------------------------------------ rejoin

def test_rejoin_tells_the_router_again_of_a_joined_instance_it_does_not_send_to(tmp_path, scaled_plan, monkeypatch):
    class Control(FakeControl):
        def __init__(self, serving):
            super().__init__()
            self.up = serving

        def serving(self, i):
            return i in self.up

        def view(self):        # HAProxy's answer: a server it does not list is "absent"
            return {i: "UP" if i in self.up else "absent" for i in ("mixed-0", "mixed-1", "mixed-2", "mixed-3")}

    forgot = Control(serving={"mixed-0", "mixed-1", "mixed-2"})
    monkeypatch.setattr(router_control, "control_for", lambda plan, remote: forgot)
    assert applier(tmp_path, FakeUp()).rejoin(ctx(scaled_plan)) == ["mixed-3"]
    assert forgot.calls == [("ready", "mixed-3")]                # only the joined one, never the others
    knows = Control(serving={"mixed-0", "mixed-1", "mixed-2", "mixed-3"})
    monkeypatch.setattr(router_control, "control_for", lambda plan, remote: knows)
    assert applier(tmp_path, FakeUp()).rejoin(ctx(scaled_plan)) == [] and knows.calls == []


def test_rejoin_with_nothing_joined_asks_no_router(tmp_path, fleet_plan, monkeypatch):
    monkeypatch.setattr(router_control, "control_for", lambda plan, remote: pytest.fail("asked the router"))
    assert applier(tmp_path, FakeUp()).rejoin(ctx(fleet_plan)) == []
