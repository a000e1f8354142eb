"""The watch's hang probe without hosts: which instances are probed (and why the others are not), when an instance is
idle, how probes in a row become a verdict (a busy NPU excuses a timeout; an answer clears it), and a verdict as a
fault of the watch's rounds that fails the instance and starts its recovery as a dead engine would (killed at once).
The hosts' answers are the facts' own texts, handed to the prober through a fake fan-out."""

from __future__ import annotations

import json
import threading

import pytest
import yaml
from conftest import EXAMPLES
from test_watch_units import FakeControl, pd_plan

from deployctl.app.inventory import validate_inventory
from deployctl.core.input.raw import parse_yaml
from deployctl.core.sizing.planner import plan_layout
from deployctl.features.watch import hang
from deployctl.features.watch.hang import Count, HangProber, idle, judge, targets
from deployctl.features.watch.loop import Watcher
from deployctl.features.watch.observe import NodeObs
from deployctl.io.batch import ProbeOutput
from deployctl.io.executor import HostTarget
from deployctl.io.fanout import HostRun
from deployctl.probes.engine_load import EngineLoad
from deployctl.probes.infer import InferAnswer
from deployctl.probes.npu_smi_watch import NpuUsage

TIMEOUT = InferAnswer(outcome="timeout", seconds=5.0)
OK = InferAnswer(outcome="status", status=200, seconds=0.05)
HEAD = "NpuID(Idx)  ChipId(Idx) AI Cube(%)\n"


def plan_from(example: str, **changes):
    doc = yaml.safe_load((EXAMPLES / example).read_text())
    for key, value in changes.items():
        doc[key] = {**doc.get(key, {}), **value} if isinstance(value, dict) else value
    inv = validate_inventory(parse_yaml(yaml.safe_dump(doc, sort_keys=False), "inv.yaml", EXAMPLES))
    return inv, plan_layout(inv)


def vllm_fleet(**hang_probe):
    """Two single-node vLLM-Ascend instances behind deployctl's router (A2), recovery on."""
    doc = yaml.safe_load((EXAMPLES / "vllm-a2-2x8-v32-dp-ep.yaml").read_text())
    doc["layout"] = {"preset": "single", "replicas": 2}
    doc["router"] = {"port": 8080, "admin_port": 8081}
    doc["deploy"] = {"recovery": {"enabled": True, "backoff_s": 0.05, "max_restarts": 1, "hang_probe": hang_probe}}
    doc["model"] = {"name": "qwen3-235b-a22b", "quant": "w8a8", "weights_path": "/w", "served_name": "m",
                    "max_seq_len": 8192, "max_input_len": 4096, "max_batch_size": 16}
    inv = validate_inventory(parse_yaml(yaml.safe_dump(doc, sort_keys=False), "inv.yaml", EXAMPLES))
    return inv, plan_layout(inv)


# ---- which instances, which request ---------------------------------------------------------------------------

def test_every_vllm_role_is_probed_on_its_own_api_from_its_master():
    inv, plan = pd_plan(2)
    probes, gaps = targets(plan)
    assert gaps == {} and sorted(probes) == ["decode", "prefill-0", "prefill-1"]
    for name, t in probes.items():
        inst = plan.instance(name)
        assert t.probe.node == inst.master
        ip = plan.node(inst.master).container_ip
        assert t.probe.url.startswith(f"http://{ip}:") and t.probe.url.endswith("/v1/completions")
        assert json.loads(t.probe.body) == {"model": inv.model.served_name, "prompt": "1", "max_tokens": 1}
        # its own gauges, on every API process of the instance; the NPU of the master's first device (A3: a die)
        assert t.metrics and all(m.startswith(f"http://{ip}:") for m in t.metrics)
        assert t.npu == divmod(plan.node(inst.master).device_ids[0], 2)
    assert len({t.probe.url for t in probes.values()}) == 3


def test_a_decode_fed_layer_by_layer_is_not_probed_and_the_watch_says_why():
    doc = yaml.safe_load((EXAMPLES / "vllm-a3-1p1d-qwen3.yaml").read_text())
    doc["engine"]["connector"] = "MooncakeLayerwiseConnector"
    inv = validate_inventory(parse_yaml(yaml.safe_dump(doc, sort_keys=False), "inv.yaml", EXAMPLES))
    probes, gaps = targets(plan_layout(inv))
    assert list(probes) == ["prefill"] and "MooncakeLayerwiseConnector" in gaps["decode"], gaps


@pytest.mark.parametrize("example, why", [("sglang-a2-1x8-qwen3-235b.yaml", "/health is itself a one-token"),
                                          ("a2-2x8-tp-pp.yaml", "unverified")])
def test_engines_without_a_probe_say_why(example, why):
    probes, gaps = targets(plan_from(example)[1])
    assert probes == {} and gaps and all(why in g for g in gaps.values()), gaps


# ---- idle ---------------------------------------------------------------------------------------------------------

def test_idle_counts_every_endpoint_and_forgives_only_the_probes_of_its_own():
    zero, one = EngineLoad(running=0, waiting=0), EngineLoad(running=1, waiting=0)
    assert idle([zero, zero], 0) == (True, "")
    assert idle([zero, one], 0) == (False, "")
    assert idle([zero, one], 1) == (True, "")            # the watch's own probe a hung engine still counts
    assert idle([EngineLoad(running=0, waiting=2)], 1) == (False, "")
    assert idle([zero, EngineLoad(error="URLError")], 5)[0] is None
    assert idle([EngineLoad(running=0)], 0)[0] is None      # no waiting gauge: unknown, never idle


# ---- probes in a row ----------------------------------------------------------------------------------------------

def _target():
    inv, plan = pd_plan(1)
    return targets(plan)[0]["decode"]


def run(answers, usages=None, failures=3, busy=3.0):
    """judge() over a row of answers; usage is given to the probe that could make the verdict, as the prober does."""
    t, c, notes = _target(), Count(started="s"), []
    for k, a in enumerate(answers):
        decisive = c.failures + 1 >= failures and not c.verdict
        u = (usages or {}).get(k) if decisive else None
        j = judge(c, a, u, t, failures=failures, busy_pct=busy, timeout=5.0, usage_why="not asked")
        c = j.count
        notes += [j.note] if j.note else []
    return c, notes


def test_three_timeouts_on_an_idle_npu_make_a_hang_with_its_cause():
    idle_npu = NpuUsage(npu=4, chip=0, samples=(0.0, 1.0))
    c, _ = run([TIMEOUT] * 2)
    assert c.failures == 2 and not c.verdict
    c, _ = run([TIMEOUT] * 3, {2: idle_npu})
    assert c.verdict.startswith("answers its health check but a 1-token completion timed out after 5 s, "
                                "3 times in a row;"), c.verdict
    assert "AI Cube usage 1 % at most" in c.verdict


def test_a_busy_npu_excuses_the_timeouts_and_the_count_starts_again():
    busy = NpuUsage(npu=4, chip=0, samples=(0.0, 61.0))
    c, _ = run([TIMEOUT] * 3, {2: busy})
    assert c.failures == 0 and not c.verdict
    c, _ = run([TIMEOUT] * 6, {2: busy, 5: NpuUsage(npu=4, chip=0, samples=(2.9,))})   # below 3 %: counted
    assert c.failures == 3 and c.verdict


def test_an_npu_smi_without_the_letter_leaves_the_failures_counted_and_says_so():
    refused = NpuUsage(npu=4, chip=0, refused="Error parameter of -s")
    c, _ = run([TIMEOUT] * 3, {2: refused})
    assert c.verdict and "needs HDK 26.0.RC1 or later" in c.verdict, c.verdict
    c, _ = run([TIMEOUT] * 3)
    assert "AI Cube usage not read (not asked)" in c.verdict


def test_an_answer_clears_the_row_and_the_verdict_mixed_failures_say_the_last():
    c, _ = run([TIMEOUT, TIMEOUT, OK])
    assert c.failures == 0 and c.warm
    c, _ = run([TIMEOUT] * 4 + [OK])
    assert not c.verdict and c.failures == 0
    failed = InferAnswer(outcome="status", status=503, seconds=0.01)
    refused = InferAnswer(outcome="error", error="ConnectionRefusedError", seconds=0.0)
    c, _ = run([TIMEOUT, failed, refused])
    assert "3 1-token completions in a row failed (the last could not connect (ConnectionRefusedError))" in c.verdict


def test_a_refusal_of_the_probe_itself_is_a_note_not_a_failure():
    c, notes = run([TIMEOUT, InferAnswer(outcome="status", status=404, seconds=0.01), TIMEOUT, TIMEOUT])
    assert c.failures == 2 and not c.verdict
    assert len(notes) == 1 and "HTTP 404" in notes[0] and "not counted" in notes[0]


# ---- the prober against its hosts' answers ------------------------------------------------------------------------

class Hosts:
    """A fake fan-out: the prober's commands answered as the facts print (gauges, the probe's line, npu-smi)."""

    def __init__(self):
        self.running, self.probe, self.usage = 0, "status 200 0.040", HEAD + "0 0 0\n"
        self.sent: list[list[str]] = []
        self.locked: list[bool] = []
        self.locks = {}

    def __call__(self, executor, targets, commands_for, timeout, workers=0, measure_clock=True, parallel=False):
        t = targets[0]
        cmds = commands_for(t)
        self.sent.append([k for k, _ in cmds])
        self.locked.append(self.locks[t.name].locked())
        out = {}
        for key, argv in cmds:
            if key.startswith("h.m."):
                text = f"vllm:num_requests_running{{engine=\"0\"}} {self.running}\nvllm:num_requests_waiting 0\n"
            elif key == "h.p":
                text = self.probe
            else:
                text = self.usage
            out[key] = ProbeOutput(key, 0, text)
        return {t.name: HostRun(t, outputs=out)}


@pytest.fixture
def fleet(monkeypatch, tmp_path):
    inv, plan = vllm_fleet(timeout_s=1, failures=3)
    hosts = Hosts()
    monkeypatch.setattr(hang, "fan_out", hosts)
    events = []
    targets_ = {n.name: HostTarget(n.name, n.address) for n in plan.nodes}
    w = Watcher(plan, inv, [], None, tmp_path / "runs", on_event=events.append, interval=0.05)
    w.targets = targets_
    w.prober.hosts = targets_
    hosts.locks = w.npu_locks
    ctl = FakeControl(plan)
    w.recoverer.control = ctl
    restarts = []
    started = {"e": "2026-01-01T00:00:00Z"}
    w.restart = lambda nodes, kill=False: restarts.append((nodes, kill)) or started.update(e=str(len(restarts))) or []
    w.recoverer.restart = w.restart
    w.observe = lambda nodes=None: {n.name: NodeObs(n.name, containers={"e": "running"}, started=dict(started),
                                                    ready=True) for n in plan.nodes if nodes is None or n.name in nodes}
    w.recoverer.observe = w.observe
    return w, plan, hosts, events, restarts, ctl, started


def test_an_idle_instance_that_stops_answering_is_failed_as_hung_and_killed_at_once(fleet):
    w, plan, hosts, events, restarts, ctl, started = fleet
    name = plan.instances[0].name
    w.step()
    w.prober.cycle(name)                       # the warm-up probe answers
    assert hosts.sent[-1] == ["h.p"] and w.prober.counts[name].warm
    hosts.probe = "timeout 1.004"
    for _ in range(2):
        w.prober.cycle(name)
    assert hosts.sent[-1] == ["h.p"] and w.prober.verdicts() == {}
    w.step()
    assert not [e for e in events if e["event"] == "instance-failed"]
    w.prober.cycle(name)                       # the third: the NPU's usage is read with it, under the npu lock
    assert hosts.sent[-1] == ["h.p", "h.u"] and hosts.locked[-1]
    assert list(w.prober.verdicts()) == [name]
    w.step()
    failed = next(e for e in events if e["event"] == "instance-failed")
    assert failed["instance"] == name and failed["kind"] == "hang" and failed["node"] == plan.instance(name).master
    assert "timed out after 1 s, 3 times in a row" in failed["cause"] and "AI Cube usage 0 %" in failed["cause"]
    w.recoverer.join(10)
    assert restarts == [(list(plan.instance(name).nodes), True)], [e["cause"] for e in events]  # killed at once
    assert [e["event"] for e in events if e["instance"] == name][-2:] == ["restart", "back"], events
    drained = next(e for e in events if e["event"] == "drained")
    assert "nothing to wait for (hang)" in drained["cause"]
    w.step()                                   # back: the prober starts afresh on the new engine start
    assert w.prober.verdicts() == {} and name not in w.tracker.failed


def test_a_busy_instance_is_not_probed_and_a_busy_npu_is_no_hang(fleet):
    w, plan, hosts, events, restarts, ctl, started = fleet
    name = plan.instances[1].name
    w.step()
    w.prober.cycle(name)
    hosts.running = 3                          # requests of its clients: nothing is sent
    hosts.probe = "timeout 1.004"
    for _ in range(5):
        w.prober.cycle(name)
    assert hosts.sent[-5:] == [["h.m.0"]] * 5     # the gauges only
    hosts.running = 0
    hosts.usage = HEAD + "0 0 12\n0 0 80\n"   # idle gauges, but the NPU is busy: the timeouts are excused
    for _ in range(6):
        w.prober.cycle(name)
    w.step()
    assert w.prober.verdicts() == {} and not [e for e in events if e.get("kind") == "hang"]
    assert w.prober.counts[name].failures < 3
