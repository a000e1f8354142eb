"""Preflight's phase 2 is pipelined: a host's peer pings start once the facts they need are in.

Unit tests, no hosts: the per-host ping plan (probes.host_ping_checks) is the whole-cluster plan the
two-phase preflight used, for every order in which hosts finish; and fan_out_pipelined starts a
second stage while another host's first stage is still running (a fake executor proves it).
"""

from __future__ import annotations

import random
import threading
import time

from support import FakeExecutor
from deployctl.io.executor import CommandResult, HostError, HostTarget
from deployctl.core.models.facts import IpConf
from deployctl.core.models.host_facts import DeviceFacts, HostFacts
from deployctl.features.preflight import probes
from deployctl.io.fanout import fan_out_pipelined


def two_phase_ping_plan(facts, sample):
    """The plan of the two-phase preflight (before pipelining), verbatim: the reference."""
    with_ips = {name: sorted((d.phy_id, d.ip.ip) for d in f.devices.values() if d.ip)
                for name, f in facts.items() if f.reachable}
    names = [n for n in facts if with_ips.get(n)]
    plan = {}
    for i, name in enumerate(names):
        peers = [names[(i + k) % len(names)] for k in range(1, len(names))][:sample]
        local = with_ips[name]
        checks = []
        for k, peer in enumerate(peers):
            dev, _ = local[k % len(local)]
            peer_dev, peer_ip = with_ips[peer][k % len(with_ips[peer])]
            checks.append((dev, peer, peer_dev, peer_ip))
        plan[name] = checks
    return plan


def random_facts(rng: random.Random, n: int) -> dict[str, HostFacts]:
    facts = {}
    for h in range(n):
        name = f"node{h + 1}"
        kind = rng.random()
        if kind < 0.15:
            facts[name] = HostFacts(name=name, address=f"10.0.0.{h}", error_kind="unreachable", error="x")
            continue
        devices = {}
        for d in range(rng.choice([2, 8, 16])):
            has_ip = kind > 0.3 or rng.random() < 0.5         # some hosts: no device IP at all or a few
            ip = IpConf(ip=f"172.16.{h}.{100 + d}", netmask="255.255.0.0") if has_ip else None
            devices[d] = DeviceFacts(phy_id=d, ip=ip)
        facts[name] = HostFacts(name=name, address=f"10.0.0.{h}", devices=devices)
    return facts


def test_per_host_plan_is_the_two_phase_plan_in_any_completion_order():
    rng = random.Random(15)
    for trial in range(300):
        n = rng.randint(1, 40)
        facts = random_facts(rng, n)
        sample = rng.choice([1, 2, 3, 16, 100])
        order = list(facts)
        want = two_phase_ping_plan(facts, sample)
        assert probes.ping_plan(facts, sample) == want
        # hosts finish in a random order; each host's plan, once known, never changes and is the final one
        known: dict[str, list] = {}
        decided: dict[str, list] = {}
        for name in rng.sample(order, n):
            known[name] = probes.device_ips(facts[name])
            for other in order:
                if other in known and other not in decided:
                    checks = probes.host_ping_checks(other, order, known, sample)
                    if checks is not None:
                        decided[other] = checks
        assert set(decided) == set(order), trial                     # all decided once all are in
        assert {k: v for k, v in decided.items() if k in want} == want, trial
        assert all(decided[k] == [] for k in order if k not in want)   # no device IPs: nothing to ping


def test_a_host_waits_only_for_the_peers_it_pings():
    def ips(h):
        return {d: DeviceFacts(phy_id=d, ip=IpConf(ip=f"172.16.{h}.{d}", netmask="255.255.0.0")) for d in range(8)}

    facts = {f"n{h}": HostFacts(name=f"n{h}", address=f"10.0.0.{h}", devices=ips(h)) for h in range(6)}
    order = list(facts)
    partial = {k: probes.device_ips(facts[k]) for k in ("n0", "n1", "n2")}
    assert probes.host_ping_checks("n0", order, partial, 2) == two_phase_ping_plan(facts, 2)["n0"]
    assert probes.host_ping_checks("n1", order, partial, 2) is None          # needs n3
    assert probes.host_ping_checks("n0", order, partial, 3) is None          # needs n3
    down = {**partial, "n3": probes.device_ips(HostFacts(name="n3", address="x", error_kind="timeout"))}
    assert down["n3"] == []
    assert probes.host_ping_checks("n1", order, down, 2) is None             # n3 is down: needs n4 too


class GatedExecutor(FakeExecutor):
    """A fake host per target: batches run on this machine; `slow`'s first stage waits until `fast` has
    finished its second stage (a fan-out with a barrier between the stages would never get there)."""

    def __init__(self):
        super().__init__(here=True, command="sh")
        self.fast_followed = threading.Event()
        self.log: list[tuple[str, str]] = []

    @staticmethod
    def stage(argv) -> str:
        return "second" if "pong" in argv[2] else "first"

    def answer(self, target, argv):
        if argv[0] == "date":
            return CommandResult(target.name, "date", 0, f"{time.time()}\n")
        if target.name == "slow" and self.stage(argv) == "first":
            if not self.fast_followed.wait(10):
                raise HostError(target.name, "timeout", "the second stage of `fast` never started")
        if target.name == "down":
            raise HostError(target.name, "unreachable", "refused")
        return None                                                  # run here

    def run_here(self, target, argv, timeout):
        res = super().run_here(target, argv, timeout)
        self.log.append((target.name, self.stage(argv)))
        if target.name == "fast" and self.stage(argv) == "second":
            self.fast_followed.set()
        return res


def test_second_stage_starts_while_another_host_is_still_in_the_first():
    ex = GatedExecutor()
    targets = [HostTarget(n, "127.0.0.1") for n in ("slow", "fast", "down")]
    seen = []

    def follow_ups(run):
        seen.append(run.target.name)
        if run.error is None and run.target.name in ("fast", "slow"):
            return [(run.target, [("pong", ["echo", "pong", run.target.name])])]
        return []

    first, second = fan_out_pipelined(ex, targets, lambda t: [("hello", ["echo", t.name])], follow_ups,
                                      timeout=20, workers=8, parallel=8)
    assert ex.fast_followed.is_set() and first["slow"].error is None
    assert ex.log.index(("fast", "second")) < ex.log.index(("slow", "first"))
    assert list(first) == ["slow", "fast", "down"] and list(second) == ["slow", "fast"]   # targets' order
    assert first["fast"].outputs["hello"].text == "fast\n" and first["fast"].clock_offset_s is not None
    assert first["down"].error.kind == "unreachable" and "down" in seen
    assert second["slow"].outputs["pong"].text == "pong slow\n"
    assert second["fast"].clock_offset_s is None              # no clock probe in the second stage
    assert sorted(seen) == ["down", "fast", "slow"]


def test_second_stage_shares_the_worker_bound():
    """workers=1: one host at a time, stages included; everything still completes."""
    ex = GatedExecutor()
    ex.fast_followed.set()
    targets = [HostTarget(n, "127.0.0.1") for n in ("a", "b", "c")]
    first, second = fan_out_pipelined(ex, targets, lambda t: [("hello", ["echo", t.name])],
                                      lambda run: [(run.target, [("pong", ["echo", "pong"])])],
                                      timeout=20, workers=1)
    assert list(first) == list(second) == ["a", "b", "c"]
    assert [r.outputs["pong"].text for r in second.values()] == ["pong\n"] * 3
