"""watch without hosts: what a node's answers mean (hostile text stays data, bounded), which faults need
confirming, the events of successive rounds, the recovery policy's steps against a fake router, and the
hooks (the event on a command's stdin, never on its command line)."""

from __future__ import annotations

import json
import sys
import threading

import yaml
from conftest import EXAMPLES

from deployctl.io.batch import ProbeOutput
from deployctl.core.render.processes import processes
from deployctl.core.input.raw import parse_yaml
from deployctl.app.inventory import validate_inventory
from deployctl.core.sizing.planner import plan_layout
from deployctl.features.watch.hooks import Hooks
from deployctl.features.watch.observe import HCCL_FATAL, NodeObs, _time, fatal_lines, node_commands, parse_node
from deployctl.features.watch.recover import Recoverer
from deployctl.features.watch.tracker import Tracker

FLEET = EXAMPLES / "a2-fleet-4x2x8-dp-ep.yaml"


def plan_of(**recovery):
    doc = yaml.safe_load(FLEET.read_text())
    if recovery:
        doc.setdefault("deploy", {})["recovery"] = recovery
    inv = validate_inventory(parse_yaml(yaml.safe_dump(doc, sort_keys=False), "inv.yaml", EXAMPLES))
    return inv, plan_layout(inv)


def npu_smi(health: dict[int, str]) -> str:
    rows = []
    for i in range(8):
        rows.append(f"| {i}     910B3               | {health.get(i, 'OK'):<15} | 95.4        36                0    / 0"
                    "             |")
        rows.append("| 0                         | 0000:C1:00.0    | 0           0    / 0          3338 / 65536 "
                    "        |")
    return ("+------+\n| npu-smi 23.0.6                   Version: 23.0.6                                       |\n"
            "+---------------------------+---------------+----------------------------------------------------+\n"
            "| NPU     Name                | Health          | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
            "| Chip                        | Bus-Id          | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
            + "\n".join(rows) +
            "\n| NPU     Chip                | Process id    | Process name             | Process memory(MB)   |\n")


def answers(plan, node, *, state="running", code=0, health="200", npu=None, down=(), log="", started=
            "2026-01-01T00:00:00.000000000Z"):
    eng = processes(plan, node).engine
    out = {}
    for i, _ in enumerate(eng.containers):
        doc = {"Status": state, "ExitCode": code, "StartedAt": started, "Running": state == "running"}
        out[f"w.c.{i}"] = ProbeOutput(f"w.c.{i}", 0, json.dumps(doc) + "\n[]\n[]")
    for i, _ in enumerate(eng.health_urls):
        out[f"w.h.{i}"] = ProbeOutput(f"w.h.{i}", 0, health)
    out["w.npu"] = ProbeOutput("w.npu", 0, npu_smi(npu or {}))
    for d in plan.node(node).device_ids:
        out[f"w.link.{d}"] = ProbeOutput("x", 0, f"link status: {'DOWN' if d in down else 'UP'}")
    out["w.log"] = ProbeOutput("w.log", 0, log)
    return out


def test_one_ssh_command_per_node_with_fixed_programs():
    inv, plan = plan_of()
    node = plan.nodes[0].name
    cmds = node_commands(plan, node, 7)
    names = [n for n, _ in cmds]
    assert names[-1] == "w.log" and "w.npu" in names and len([n for n in names if n.startswith("w.link.")]) == 8
    log = dict(cmds)["w.log"]
    assert log[:2] == ["sh", "-c"] and log[-1] == "7s" and "$1" in log[2]     # values are arguments


def test_a_link_probe_that_did_not_answer_is_not_a_link_down():
    """A round whose batch was cut short or timed out (a loaded host) leaves link probes without output: said as a
    note, never as `link DOWN` (which failed the instance and restarted it)."""
    inv, plan = plan_of()
    node = plan.nodes[0].name
    out = answers(plan, node, down={3})
    del out["w.link.0"]
    out["w.link.1"] = ProbeOutput("w.link.1", 124, "")
    obs = parse_node(plan, node, out)
    assert [(f.kind, f.device) for f in obs.faults()] == [("link", 3)]
    assert f"{node}: hccn_tool -link did not answer for devices 0, 1" in obs.notes


def test_a_healthy_node_has_no_fault_and_each_fault_is_named():
    inv, plan = plan_of()
    node = plan.nodes[0].name
    assert parse_node(plan, node, answers(plan, node)).faults() == []
    obs = parse_node(plan, node, answers(plan, node, state="exited", code=137))
    assert [(f.kind, f.cause.split()[-1]) for f in obs.faults()] == [("container", "137)")]
    obs = parse_node(plan, node, answers(plan, node, npu={3: "Alarm"}, down=(5,)))
    assert {(f.kind, f.device) for f in obs.faults()} == {("npu", 3), ("link", 5)}
    hung = parse_node(plan, node, answers(plan, node, health="0")).faults()
    assert [(f.kind, f.confirm) for f in hung] == [("not-ready", True)]
    gone = parse_node(plan, node, {}, error="timed out")
    assert [(f.kind, f.confirm) for f in gone.faults()] == [("unreachable", True)]


def test_fatal_lines_after_the_start_only_and_hostile_text_stays_printable():
    log = ("2026-01-01T00:00:01.5Z [ERROR] EI0006 Getting socket times out\n"
           "2026-01-01T00:00:09.123456789Z rank 3: EI0013 Error ROCE CQE \x1b[31m\x07boom\n"
           "not a timestamp EI0009\n")
    since = _time("2026-01-01T00:00:05Z")
    lines = fatal_lines(log, HCCL_FATAL, since)
    assert len(lines) == 1 and "EI0013" in lines[0] and "\x1b" not in lines[0] and "\x07" not in lines[0]
    assert len(fatal_lines("2026-01-01T00:00:01Z EI0006 x\n" * 100000, HCCL_FATAL, None)) == 5     # bounded


def test_tracker_reports_once_confirms_hangs_and_clears():
    inv, plan = plan_of()
    inst = plan.instances[1]
    tr = Tracker(plan, confirm=2)
    healthy = {n.name: NodeObs(n.name, containers={"e": "running"}, ready=True) for n in plan.nodes}
    assert tr.round(healthy) == []
    hung = dict(healthy, **{inst.nodes[0]: NodeObs(inst.nodes[0], containers={"e": "running"}, ready=False)})
    assert tr.round(hung) == []                                              # once: a slow answer
    ev = tr.round(hung)
    assert [e["event"] for e in ev] == ["fault", "instance-failed"] and ev[1]["instance"] == inst.name
    assert tr.round(hung) == []                                              # reported once
    ev = tr.round(healthy)
    assert [e["event"] for e in ev] == ["cleared", "instance-serving"]
    dead = dict(healthy, **{inst.nodes[1]: NodeObs(inst.nodes[1], containers={"e": "exited (137)"})})
    assert [e["event"] for e in tr.round(dead)] == ["fault", "instance-failed"]   # at once
    assert tr.round(dead, skip=frozenset({inst.name})) == []


def test_tracker_names_the_earliest_fault_among_equals_then_the_node_never_the_answer_order():
    """The peers of a killed engine die a moment later: the instance is named by the fault seen first (then by
    node name when they were seen in the same round), whatever order the nodes answered in."""
    inv, plan = plan_of()
    inst = next(i for i in plan.instances if len(i.nodes) > 1)
    a, b = sorted(inst.nodes)[:2]
    healthy = {n.name: NodeObs(n.name, containers={"e": "running"}, ready=True) for n in plan.nodes}

    def dead(*nodes, order=()):
        obs = dict(healthy, **{n: NodeObs(n, containers={"e": "exited (137)"}) for n in nodes})
        return {**{n: obs[n] for n in order}, **obs}       # dict order: the nodes that answered first

    for order in ((a, b), (b, a)):                          # seen in the same round: by node name
        ev = Tracker(plan, confirm=2).round(dead(a, b, order=order))
        failed = next(e for e in ev if e["event"] == "instance-failed")
        assert failed["node"] == a and failed["kind"] == "container", (order, failed)
    # b's engine died first; a's fault is a round younger and answers first: still named by b
    tr = Tracker(plan, confirm=2)
    tr.since[(b, "container", None)] = 0.0
    ev = tr.round(dead(a, b, order=(a, b)))
    assert next(e for e in ev if e["event"] == "instance-failed")["node"] == b
    # a hung node (confirmed over two rounds) seen before a dead one: the dead container still ranks first
    tr = Tracker(plan, confirm=2)
    hung = dict(healthy, **{a: NodeObs(a, containers={"e": "running"}, ready=False)})
    assert tr.round(hung) == []
    ev = tr.round({**hung, b: NodeObs(b, containers={"e": "exited (137)"})})
    failed = next(e for e in ev if e["event"] == "instance-failed")
    assert failed["node"] == b and failed["kind"] == "container", failed


class FakeControl:
    what = "the router"

    def __init__(self, plan):
        self.plan, self.calls, self.state = plan, [], {}

    def routed(self):
        return [i.name for i in self.plan.instances]

    def drain(self, name):
        self.calls.append(("drain", name))

    def ready(self, name):
        self.calls.append(("ready", name))

    def in_flight(self, name):
        return 0

    def serving(self, name):
        return ("ready", name) in self.calls


def run_recovery(plan, policy, sick_rounds: int):
    """A recovery against fakes: the NPU of the instance's first node is in Alarm for ``sick_rounds`` reads."""
    inst = plan.instances[0]
    reads, restarts, events = [0], [], []

    def observe(nodes):
        reads[0] += 1
        sick = reads[0] <= sick_rounds
        return {n: NodeObs(n, containers={"e": "running"}, started={"e": str(len(restarts))}, ready=True,
                           npu={0: "Alarm" if sick and n == inst.nodes[0] else "OK"}) for n in nodes}

    ctl = FakeControl(plan)
    rec = Recoverer(plan, policy, ctl, observe, lambda nodes, kill: restarts.append((nodes, kill)) or [], events.append,
                    threading.Event(), interval=0.01)
    rec.start(inst.name)
    rec.join(10)
    return ctl, restarts, [e["event"] for e in events], rec


def test_recovery_drains_restarts_the_whole_instance_verifies_and_puts_back():
    inv, plan = plan_of(enabled=True, backoff_s=0.05, max_restarts=2)
    ctl, restarts, events, rec = run_recovery(plan, inv.deploy.recovery, sick_rounds=0)
    assert events == ["drained", "restart", "back"], events
    assert restarts == [(list(plan.instances[0].nodes), False)]             # every node at once, gracefully
    assert ctl.calls == [("drain", plan.instances[0].name), ("ready", plan.instances[0].name)]
    assert rec.active == {} and rec.done == [plan.instances[0].name]


def test_an_npu_that_stays_in_alarm_leaves_the_instance_out():
    inv, plan = plan_of(enabled=True, backoff_s=0.05, max_restarts=2)
    ctl, restarts, events, rec = run_recovery(plan, inv.deploy.recovery, sick_rounds=10 ** 6)
    assert restarts == [] and events[0] == "drained" and events[-1] == "left-out", events
    assert ("ready", plan.instances[0].name) not in ctl.calls                # stays out of the router
    assert rec.active[plan.instances[0].name] == "left out"


def test_hook_command_gets_the_event_on_stdin_never_in_its_argv(tmp_path):
    out = tmp_path / "got"
    errors = []
    hooks = Hooks(None, [sys.executable, "-c", "import sys; open(sys.argv[1], 'w').write(sys.stdin.read())",
                         str(out)], errors.append)
    ev = {"event": "fault", "cause": "$(touch /tmp/pwned) `id` ; rm -rf /"}
    hooks.send(ev)
    hooks.close()
    assert json.loads(out.read_text()) == ev and errors == []
    bad = Hooks("http://127.0.0.1:9/none", None, errors.append)
    bad.send(ev)
    bad.close()
    assert errors and errors[0].startswith("webhook")


def pd_plan(prefill: int, image: str = "quay.io/ascend/vllm-ascend:v0.18.0-a3"):
    doc = yaml.safe_load((EXAMPLES / "vllm-a3-1p1d-qwen3.yaml").read_text())
    doc["engine"]["image"] = image
    doc["nodes"] = [{"name": f"p{k}", "address": f"10.202.0.{k}", "interface": "eth0"} for k in range(1, prefill + 1)]
    doc["nodes"].append({"name": "d1", "address": "10.202.0.9", "interface": "eth0"})
    doc["layout"] = {"preset": "pd-split", "prefill": {"nodes": [n["name"] for n in doc["nodes"][:-1]],
                                                       "instances": prefill}, "decode": {"nodes": ["d1"]}}
    doc["deploy"] = {"recovery": {"enabled": True, "backoff_s": 0.05, "max_restarts": 2}}
    inv = validate_inventory(parse_yaml(yaml.safe_dump(doc, sort_keys=False), "inv.yaml", EXAMPLES))
    return inv, plan_layout(inv)


def recover_pd(plan, policy, name: str, kinds=frozenset()):
    events, restarts = [], []

    def observe(nodes):
        return {n: NodeObs(n, containers={"e": "running"}, started={"e": str(len(restarts))}, ready=True)
                for n in nodes}

    ctl = FakeControl(plan)
    ctl.in_flight = lambda n: ctl.calls.append(("in_flight", n)) or 0
    rec = Recoverer(plan, policy, ctl, observe, lambda nodes, kill: restarts.append((nodes, kill)) or [], events.append,
                    threading.Event(), interval=0.01)
    rec.start(name, kinds)
    rec.join(10)
    return ctl, restarts, events


def test_a_failed_prefill_leaves_the_proxy_while_the_other_prefill_and_decode_serve():
    inv, plan = pd_plan(2)
    names = {i.name: i.role for i in plan.instances}
    assert names == {"prefill-0": "prefill", "prefill-1": "prefill", "decode": "decode"}, names
    ctl, restarts, events = recover_pd(plan, inv.deploy.recovery, "prefill-1", frozenset({"container"}))
    assert [e["event"] for e in events] == ["drained", "restart", "back"], events
    assert "prefill keeps serving on prefill-0" in events[0]["cause"]
    assert restarts == [(list(plan.instance("prefill-1").nodes), True)]       # decode is never restarted;
    # a dead engine is killed at once (nothing to shut down cleanly)
    # a dead engine has nothing in flight to wait for (a hung one would not even answer /metrics)
    assert ctl.calls == [("drain", "prefill-1"), ("ready", "prefill-1")], ctl.calls


def test_a_roles_only_instance_is_restarted_in_place_and_the_event_says_nothing_is_served():
    inv, plan = pd_plan(2)
    ctl, restarts, events = recover_pd(plan, inv.deploy.recovery, "decode", frozenset({"npu"}))
    assert [e["event"] for e in events] == ["role-down", "restart", "back"], events
    assert "only decode instance" in events[0]["cause"] and "serves no request" in events[0]["cause"]
    assert ("drain", "decode") not in ctl.calls and restarts == [(list(plan.instance("decode").nodes), False)]


def test_a_pd_split_whose_proxy_cannot_remove_is_not_recovered_and_the_event_says_why():
    from deployctl.backends.hosts.router_control import control_for, control_gap

    inv, plan = pd_plan(2, image="quay.io/ascend/vllm-ascend:v0.13.0-a3")
    assert control_for(plan, None) is None
    events = []
    rec = Recoverer(plan, inv.deploy.recovery, None, lambda n: {}, lambda n, k: [], events.append, threading.Event(),
                    gap=control_gap(plan))
    rec.start("prefill-1")
    assert [e["event"] for e in events] == ["not-recovered"]
    assert "0.13" in events[0]["cause"] and "/instances/remove" in events[0]["cause"] and "0.18" in events[0]["cause"]
    assert rec.active == {"prefill-1": "failed (no recovery)"}
