"""Fleet logic without hosts: how nodes form instances, which changes roll and in which batches, what the
router's runtime API answers mean, and how status judges an instance. The end-to-end proof (real HAProxy, real
SSH, steady load) is tests/backends/hosts/test_fleet_e2e.py and test_xpyd_e2e.py."""

from __future__ import annotations

import pytest
import yaml
from conftest import EXAMPLES

from deployctl.backends.hosts.status import instance_rows
from deployctl.core.errors import InventoryError
from deployctl.backends.hosts.router_control import HaproxyControl, control_for
from deployctl.backends.hosts.rolling import plan_rollout
from deployctl.core.input.raw import parse_yaml
from deployctl.app.inventory import validate_inventory
from deployctl.core.models.deploy import ChangeSet, HostChange
from deployctl.core.sizing.planner import plan_layout

FLEET = EXAMPLES / "a2-fleet-4x2x8-dp-ep.yaml"


def load(text: str, name: str = "inv.yaml"):
    return validate_inventory(parse_yaml(text, name, EXAMPLES))


def fleet_text(**layout) -> str:
    doc = yaml.safe_load(FLEET.read_text())
    doc["layout"] = {"preset": "dp-ep", **layout}
    return yaml.safe_dump(doc, sort_keys=False)


def changes(plan, moving: set[str], router: str | None = "keep") -> ChangeSet:
    hosts = []
    for n in plan.nodes:
        action = "restart" if n.instance in moving else "keep"
        hosts.append(HostChange(node=n.name, instance=n.instance, rev="b", current_rev="a", files=[], action=action,
                                reason="", ms_action=router if plan.router and plan.router.node == n.name else None))
    return ChangeSet(hosts=hosts)


class FakeRemote:
    """Answers the runtime API's `show stat` with a fixed table, records `set server` commands."""

    def __init__(self, stat: str):
        self.stat, self.sent = stat, []

    def py(self, node, script, port, command):
        self.sent.append(command)
        return self.stat if command == "show stat" else ""


STAT = """# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status
api,FRONTEND,,,3,9,,,,,,,,,,,,OPEN
instances,mixed-0,0,0,2,5,,,,,,,,,,,,UP
instances,mixed-1,1,1,0,4,,,,,,,,,,,,DRAIN
instances,mixed-2,0,0,0,4,,,,,,,,,,,,DOWN
instances,mixed-3,0,0,0,4,,,,,,,,,,,,DOWN 1/2
instances,BACKEND,1,1,2,9,,,,,,,,,,,,UP
"""


def test_replicas_split_nodes_in_order_and_each_instance_is_its_own_world():
    plan = plan_layout(load(FLEET.read_text()))
    assert [(i.name, i.nodes, i.world_size, i.master) for i in plan.instances] == [
        ("mixed-0", ["a2-node1", "a2-node2"], 16, "a2-node1"), ("mixed-1", ["a2-node3", "a2-node4"], 16, "a2-node3"),
        ("mixed-2", ["a2-node5", "a2-node6"], 16, "a2-node5"), ("mixed-3", ["a2-node7", "a2-node8"], 16, "a2-node7")]
    assert all([r.rank for r in i.ranks] == list(range(16)) for i in plan.instances)
    assert plan.router.node == "a2-node1" and plan.router.url == "http://10.200.5.2:8080"


def test_explicit_instances_and_their_mistakes_are_named():
    names = [f"a2-node{i}" for i in range(1, 9)]
    ok = plan_layout(load(fleet_text(instances=[{"nodes": names[4:]}, {"nodes": names[:4]}])))
    assert [(i.name, i.nodes[0], len(i.nodes)) for i in ok.instances] == [("mixed-0", "a2-node5", 4),
                                                                          ("mixed-1", "a2-node1", 4)]
    for layout, words in [({"replicas": 3}, "8 nodes do not split into 3 equal mixed instances"),
                          ({"instances": [{"nodes": names[:4]}, {"nodes": names[3:]}]},
                           "node 'a2-node4' is already in instance 0"),
                          ({"instances": [{"nodes": names[:4]}, {"nodes": names[4:7]}]}, "nodes in no instance: a2-node8"),
                          ({"replicas": 2, "instances": [{"nodes": names}]}, "both say how nodes form instances")]:
        with pytest.raises(InventoryError) as exc:
            load(fleet_text(**layout))
        messages = [p.message for p in exc.value.problems]
        assert any(words in m for m in messages), (layout, messages)
        assert all(p.line for p in exc.value.problems), exc.value.problems     # each names its line


def test_rolling_batches_keep_one_instance_of_each_role_serving():
    plan = plan_layout(load(FLEET.read_text()))
    ctl = control_for(plan, FakeRemote(STAT))
    every = {"mixed-0", "mixed-1", "mixed-2", "mixed-3"}
    roll, why = plan_rollout(plan, changes(plan, every), ctl, "rolling", 1)
    assert roll.batches == [["mixed-0"], ["mixed-1"], ["mixed-2"], ["mixed-3"]] and why == ""
    roll, _ = plan_rollout(plan, changes(plan, every), ctl, "rolling", 3)
    assert roll.batches == [["mixed-0", "mixed-1", "mixed-2"], ["mixed-3"]]
    roll, _ = plan_rollout(plan, changes(plan, every), ctl, "rolling", 9)     # never all four out at once
    assert roll.batches == [["mixed-0", "mixed-1", "mixed-2"], ["mixed-3"]] and roll.warnings
    roll, _ = plan_rollout(plan, changes(plan, {"mixed-2"}), ctl, "rolling", 1)
    assert roll.batches == [["mixed-2"]]
    assert plan_rollout(plan, changes(plan, every), ctl, "recreate", 1) == (None, "--strategy recreate")
    assert plan_rollout(plan, changes(plan, every, router="restart"), ctl, "rolling", 1)[1] == \
        "the router itself starts or restarts"
    assert plan_rollout(plan, changes(plan, set()), ctl, "rolling", 1)[1] == "no instance restarts"


def test_single_instance_roles_and_old_proxies_go_all_at_once():
    pd = plan_layout(load((EXAMPLES / "vllm-a3-1p1d-qwen3.yaml").read_text()))
    assert control_for(pd, FakeRemote("")) is None        # 0.13's proxy cannot take a server out safely
    doc = yaml.safe_load((EXAMPLES / "vllm-a3-2p1d-qwen3.yaml").read_text())
    doc["engine"]["image"] = "quay.io/ascend/vllm-ascend:v0.18.0-a3"
    two_p = plan_layout(load(yaml.safe_dump(doc)))
    ctl = control_for(two_p, FakeRemote(""))
    assert ctl is not None
    assert plan_rollout(two_p, changes(two_p, {"prefill-0", "prefill-1", "decode"}), ctl, "rolling", 1)[1] == \
        "decode has a single instance"
    roll, _ = plan_rollout(two_p, changes(two_p, {"prefill-0", "prefill-1"}), ctl, "rolling", 1)
    assert roll.batches == [["prefill-0"], ["prefill-1"]]


def test_haproxy_runtime_api_answers():
    plan = plan_layout(load(FLEET.read_text()))
    remote = FakeRemote(STAT)
    ctl = HaproxyControl(plan, remote)
    assert ctl.view() == {"mixed-0": "UP", "mixed-1": "DRAIN", "mixed-2": "DOWN", "mixed-3": "DOWN 1/2"}  # rising: 1 of 2 checks passed
    assert ctl.in_flight("mixed-0") == 2 and ctl.in_flight("mixed-1") == 1 and ctl.in_flight("mixed-2") == 0
    assert ctl.serving("mixed-0") and not ctl.serving("mixed-1") and not ctl.serving("mixed-3")
    ctl.drain("mixed-1")
    ctl.ready("mixed-1")
    assert remote.sent[-2:] == ["set server instances/mixed-1 state drain", "set server instances/mixed-1 state ready"]
    remote.py = lambda *a: "No such server.\n"
    with pytest.raises(Exception, match="No such server"):
        ctl.drain("mixed-9")


def test_status_judges_each_instance_from_its_nodes_and_the_router():
    plan = plan_layout(load(FLEET.read_text()))
    rows = [{"node": n.name, "instance": n.instance, "revision": f"r-{n.name}", "engine": "running", "problem": ""}
            for n in plan.nodes]
    rows[2]["engine"] = "exited"                                # mixed-1 has a node down
    rows[6]["problem"] = "a health check of the engine did not answer 200"
    entries = [{"revision": 1, "operation": "up", "result": "successful",
                "nodes": {r["node"]: r["revision"] for r in rows}}]
    view = {"mixed-0": "UP", "mixed-1": "DOWN", "mixed-2": "DRAIN", "mixed-3": "UP"}
    got = {i["instance"]: (i["state"], i["router"], i["history_revision"])
           for i in instance_rows(plan, rows, entries, view)}
    assert got == {"mixed-0": ("serving", "UP", 1), "mixed-1": ("down", "DOWN", 1),
                   "mixed-2": ("draining", "DRAIN", 1), "mixed-3": ("degraded", "UP", 1)}
