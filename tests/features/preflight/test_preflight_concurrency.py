"""Concurrent preflight on simulated hosts (real SSH, fake npu-smi / hccn_tool with a per-call latency).

* a host's probes run PROBE_CONCURRENCY at a time and print exactly what the one-after-another batch
  prints, in well under (tool calls x latency);
* the pipelined run (phase-2 pings start once their peers' facts are in) gives the results of the
  two-phase run (all phase 1, then all pings), and a host's pings do not wait for the slowest host.

Timing asserts use wide margins (half the serial sum, against a measured run of the same CPU cost); no test depends on
the machine being idle.
These tests never skip: without root/sshd/netns the fixtures fail and say what to install.
"""

from __future__ import annotations

import time
from pathlib import Path

from deployctl.app.plan import for_discovery
from deployctl.io.executor import HostTarget
from deployctl.io.ssh import SshExecutor
from deployctl.core.models.host_facts import HostFacts
from deployctl.features.preflight import probes
from deployctl.io.batch import PROBE_CONCURRENCY
from deployctl.io.fanout import fan_out, probe_host
from deployctl.features.preflight.rules import check_facts, not_checked
from deployctl.io.targets import ssh_targets
from deployctl.features.preflight.run import run_preflight
from fakecluster import FakeCluster, default_cluster, with_faults
from fakecluster.spec import DEFAULT_IMAGES, DEFAULT_WEIGHTS_DIR
from support.inventory import on_cluster

TOOLS = ("npu-smi", "hccn_tool")
# df of /dev/shm and of the weights' disk: this machine's, shared with everything else running on it
VOLATILE_PROBES = {"host.shm", "host.weights_df"}
VOLATILE_FACTS = {"seconds", "clock_offset_s", "shm", "weights_disk"}
ENVIRONMENT_WARNINGS = {"shm", "clock", "disk"}


def target(fc: FakeCluster, name: str) -> HostTarget:
    n = fc.node(name)
    return HostTarget(n.name, n.ip, key=str(fc.client_key), known_hosts=str(fc.known_hosts))


def write_inventory(fc: FakeCluster, path: Path, preset: str = "tp-pp") -> Path:
    return on_cluster(fc, path, preset=preset)


def stable(facts: HostFacts) -> dict:
    return facts.model_dump(exclude=VOLATILE_FACTS)


def settled_addresses(fc: FakeCluster, name: str) -> None:
    """Wait until the node's `ip -o addr` stops changing: the IPv6 link-local address of a just started
    node is `tentative` (duplicate address detection) for a moment, then changes."""
    last, deadline = None, time.monotonic() + 10
    while time.monotonic() < deadline:
        out = fc.ssh(name, "ip -o addr show").stdout
        if out == last and "tentative" not in out:
            return
        last = out
        time.sleep(0.3)


def test_concurrent_probes_print_the_sequential_output_in_a_fraction_of_the_serial_time(fake_cluster_factory):
    latency = 0.25                                        # every npu-smi / hccn_tool call
    fc = fake_cluster_factory(default_cluster(1, slow=latency))
    t = target(fc, "node1")
    # the tool calls, which wait; the image-version probe (a `docker run` of the image, deployctl.probes.image_versions)
    # is left out: on the simulated hosts it spends this machine's CPU, not a host's wait, and would time that instead
    commands = [c for c in probes.host_commands("a2", DEFAULT_IMAGES["a2"], DEFAULT_WEIGHTS_DIR)
                if c[0] != "image.versions"]
    serial = sum(1 for _, argv in commands if argv[0] in TOOLS) * latency     # 42 calls: 10.5 s
    settled_addresses(fc, "node1")
    ex = SshExecutor(connect_timeout=10)
    try:
        ex.run(t, ["true"], 30)                           # connected: the handshake is in neither timing
        seq = probe_host(ex, t, commands, 60, measure_clock=False, parallel=False)
        par = probe_host(ex, t, commands, 60, measure_clock=False, parallel=PROBE_CONCURRENCY)
    finally:
        ex.close()
    assert seq.error is None and par.error is None, (seq.error, par.error)
    assert seq.seconds > serial                           # the latency is really there
    # concurrent, the waits overlap: at least half the serial sum saved against the one-after-another run, which
    # starts the same processes (what a loaded machine stretches: seconds, for these 42 python3 starts)
    assert seq.seconds - par.seconds > 0.5 * serial, \
        f"{par.seconds:.2f} s concurrent, {seq.seconds:.2f} s one after another, serial sum {serial:.1f} s"
    # every probe's output, exit code and order as the one-after-another batch printed them
    assert list(par.outputs) == list(seq.outputs) == [name for name, _ in commands]
    for name in seq.outputs:
        if name not in VOLATILE_PROBES:
            assert par.outputs[name] == seq.outputs[name], name
        else:
            assert par.outputs[name].rc == seq.outputs[name].rc == 0
            assert par.outputs[name].text.split()[-1] == seq.outputs[name].text.split()[-1]   # mount point
    assert all(o.rc == 0 for n, o in seq.outputs.items() if not n.startswith("host.image"))
    a = probes.assemble(t, "a2", seq.outputs, None, seq.seconds)
    b = probes.assemble(t, "a2", par.outputs, None, par.seconds)
    assert stable(a) == stable(b) and a.probe_errors == {"image.versions": "no output (the batch was cut short)"}
    assert len(a.npu.chips) == 8          # (the image-version probe was left out of these batches, above)


def two_phase_preflight(inv, base_dir, executor, ping_sample):
    """Preflight as it ran before the pipelining: every host's probes one after another, then, once all
    hosts are back, every host's pings (probes.ping_plan over all facts). The reference."""
    hw = inv.cluster.hardware
    targets = ssh_targets(inv, base_dir)
    commands = probes.host_commands(hw, inv.engine.image, inv.model.weights_path, inv.engine_spec.image_packages)
    facts = {}
    for name, run in fan_out(executor, targets, lambda t: commands, 60).items():
        if run.error is not None:
            facts[name] = HostFacts(name=name, address=run.target.address, error_kind=run.error.kind,
                                    error=run.error.message, error_hint=run.error.hint)
        else:
            facts[name] = probes.assemble(run.target, hw, run.outputs, run.clock_offset_s, run.seconds)
    plan = probes.ping_plan(facts, ping_sample)
    ping_targets = [t for t in targets if plan.get(t.name)]
    pings = fan_out(executor, ping_targets, lambda t: probes.ping_commands(plan[t.name]), 60, measure_clock=False,
                    parallel=True)
    for name, run in pings.items():
        if run.error is None:
            facts[name] = facts[name].model_copy(update={"pings": probes.ping_results(plan[name], run.outputs)})
    return facts, check_facts(inv, facts), not_checked(inv, facts, ping_sample)


def test_pipelined_preflight_gives_the_two_phase_results(fake_cluster_factory, tmp_path):
    # node3 refuses SSH, node4 has no device IP (pings nobody, is pinged by nobody), node6's devices 0 and 1
    # are down (some pings fail); with a sample of 2 the rotation has to skip node3 and node4
    specs = with_faults(default_cluster(7), node3={"unreachable": True},
                        node4={"missing_device_ip": set(range(8))}, node6={"link_down": {0, 1}})
    fc = fake_cluster_factory(specs)
    for n in fc.nodes:
        if n.spec.reachable:
            settled_addresses(fc, n.name)
    inv = for_discovery(write_inventory(fc, tmp_path / "inventory.yaml")).inventory
    ex = SshExecutor(connect_timeout=20)    # node3 refuses at once; the others connect, however loaded the machine
    try:
        result = run_preflight(inv, tmp_path, ex, timeout=60, ping_sample=2)
        facts, findings, notes = two_phase_preflight(inv, tmp_path, ex, 2)
    finally:
        ex.close()
    assert list(result.facts) == list(facts) == [f"node{i}" for i in range(1, 8)]
    for name in facts:
        assert stable(result.facts[name]) == stable(facts[name]), name
    pinged = {n: [(p.peer, p.ok) for p in f.pings] for n, f in result.facts.items()}
    assert pinged["node3"] == pinged["node4"] == []
    assert [peer for peer, _ in pinged["node2"]] == ["node5", "node6"]    # skips node3 (down), node4 (no IPs)
    assert any(not ok for checks in pinged.values() for _, ok in checks)  # node6's devices 0, 1 answer nothing
    judged = lambda fs: [f for f in fs if not (f.severity == "WARN" and f.rule in ENVIRONMENT_WARNINGS)]  # noqa: E731
    assert judged(result.findings) == judged(findings) and result.not_checked == notes
    assert {f.rule for f in judged(findings)} >= {"host-reachable", "device-ip", "link-up", "peer-reachable"}


def test_a_hosts_pings_do_not_wait_for_the_slowest_host(fake_cluster_factory, tmp_path):
    # ping sample 1: node1 pings node2, node2 pings node3, node3 pings node1. node3's tools are slow
    # (its phase 1 takes >= 6 x 0.5 s); node1's pings need node1's and node2's facts only.
    fc = fake_cluster_factory(with_faults(default_cluster(3), node3={"slow": 0.5}))
    inv = for_discovery(write_inventory(fc, tmp_path / "inventory.yaml")).inventory
    events: list[tuple[float, str, str]] = []
    ex = SshExecutor(connect_timeout=20)
    try:
        result = run_preflight(inv, tmp_path, ex, timeout=60, ping_sample=1,
                               progress=lambda host, what: events.append((time.monotonic(), host, what)))
    finally:
        ex.close()
    when = {(host, what): t for t, host, what in events}
    assert when[("node1", "peer pings: done")] < when[("node3", "done")]
    assert when[("node2", "peer pings: connecting")] > when[("node3", "done")]     # node2 needs node3's IPs
    assert [(p.peer, p.ok) for p in result.facts["node1"].pings] == [("node2", True)]
    assert [(p.peer, p.ok) for p in result.facts["node2"].pings] == [("node3", True)]
    assert [(p.peer, p.ok) for p in result.facts["node3"].pings] == [("node1", True)]
    assert not [f for f in result.findings if f.severity == "FAIL"]


def test_ssh_executor_waits_without_polling_and_loses_nothing(fake_cluster_2a2, monkeypatch):
    """SshExecutor.run sleeps until output, EOF or the exit status arrives (many hosts' channels are in
    flight at once): large stdout and stderr (more than the SSH window) both come back whole, exit codes
    and timeouts hold, and an idle command costs a few wake-ups, not one per 5 ms."""
    import paramiko

    from deployctl.io.executor import HostError

    fc = fake_cluster_2a2
    t = target(fc, "node1")
    ex = SshExecutor(connect_timeout=10, output_limit=8 << 20)   # above the 5.5 MB this test streams (default 4 MB)
    try:
        ex.run(t, ["true"], 30)
        big = ex.run(t, ["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a; head -c 2500000 /dev/zero | "
                                     "tr '\\0' b >&2; sleep 0.2; echo tail; exit 7"], 60)
        assert big.rc == 7 and big.stdout == "a" * 3_000_000 + "tail\n" and big.stderr == "b" * 2_500_000
        checks = []
        recv_ready = paramiko.Channel.recv_ready
        monkeypatch.setattr(paramiko.Channel, "recv_ready", lambda self: checks.append(1) or recv_ready(self))
        idle = ex.run(t, ["sleep", "1.5"], 30)            # 1.5 s with nothing to read
        monkeypatch.undo()
        assert idle.rc == 0 and idle.stdout == ""
        assert len(checks) < 40, len(checks)              # polling every 5 ms looked ~300 times
        t0 = time.monotonic()
        try:
            ex.run(t, ["sleep", "10"], 1)
            raise AssertionError("no timeout")
        except HostError as exc:
            assert exc.kind == "timeout" and time.monotonic() - t0 < 3
        assert ex.run(t, ["echo", "still usable"], 30).stdout == "still usable\n"
    finally:
        ex.close()


def test_a_ping_whose_replies_came_back_is_reachable_whatever_the_exit_code():
    """The summary decides: received > 0 is reachable even when the tool exited late (timeout's 124);
    a 0-received summary is not, and the exit code is named beside the count."""
    from deployctl.io.batch import ProbeOutput

    checks = [(0, "node1", 0, "172.16.1.100"), (1, "node1", 1, "172.16.1.101")]
    summary = "device {d} PING {ip}\n{n} packets transmitted, {r} received, {loss}% packet loss\n"
    out = {"ping.0.node1.0": ProbeOutput("ping.0.node1.0", 124,
                                         summary.format(d=0, ip="172.16.1.100", n=3, r=3, loss="0.00")),
           "ping.1.node1.1": ProbeOutput("ping.1.node1.1", 1,
                                         summary.format(d=1, ip="172.16.1.101", n=3, r=0, loss="100.00"))}
    got = probes.ping_results(checks, out)
    assert [(p.ok, p.detail) for p in got] == [(True, "3/3 received (hccn_tool exit 124)"),
                                               (False, "0/3 received (hccn_tool exit 1)")]


def test_a_ping_whose_answer_never_came_back_is_not_measured_and_warns_instead_of_failing():
    """A probe batch cut short (a busy host, a timeout) leaves some pings without an answer: that is no evidence
    the peer is unreachable, so it warns (run preflight again) where a ping that printed 0 received fails."""
    from deployctl.core.models.host_facts import HostFacts, PingCheck
    from deployctl.features.preflight import rules

    [p] = probes.ping_results([(0, "node1", 0, "172.16.1.100")], {})
    assert (p.ok, p.measured) == (False, False) and "not measured" in p.detail
    lost = PingCheck(device=1, peer="node1", peer_device=1, peer_ip="172.16.1.101", ok=False, detail="0/3 received")
    host = HostFacts(name="node0", address="10.0.0.1", pings=[p, lost])
    found = [(f.severity, f.device, f.hint) for f in rules.check_pings(None, {"node0": host})]
    assert found == [("WARN", 0, "run preflight again to measure it"),
                     ("FAIL", 1, "check the RoCE switch/VLAN and routes between the two NICs")]
