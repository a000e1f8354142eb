"""deployctl's fleet commands through the CLI on 32 simulated A3 hosts behind one sshd (ManyHostCluster): preflight,
status and one watch round, with an NPU alarm on node7 and node9 refusing SSH; each is named for its host only."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from fakecluster import ManyHostCluster, fleet, with_faults
from fakecluster.fixtures import require_fake_cluster_support
from support.inventory import on_cluster

pytestmark = pytest.mark.e2e
N = 32


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    require_fake_cluster_support()
    work = tmp_path_factory.mktemp("fleet")
    specs = with_faults(fleet(N, "a3"), node7={"npu_health": {3: "Alarm"}}, node9={"unreachable": "refused"})
    mc = ManyHostCluster(specs, work / "mc")
    try:
        mc.start()
        # 4 instances of 8 hosts: expert parallelism 128 divides DeepSeek-R1's 256 experts
        yield on_cluster(mc, work / "inventory.yaml", preset="dp-ep", replicas=4), work
    finally:
        mc.stop()


def test_preflight(inventory):
    inv, work = inventory
    res = run_cli("preflight", "-i", str(inv), "--output", "json", "--run-dir", str(work / "runs"),
                  "--connect-timeout", "20")
    doc = json.loads(res.stdout)
    assert res.returncode == 1 and doc["ok"] is False, res.stderr[-2000:]
    fails = {(f["rule"], f["host"], f["device"]) for f in doc["findings"] if f["severity"] == "FAIL"}
    assert ("npu-health", "node7", 3) in fails
    assert {h for rule, h, _ in fails if rule == "npu-health"} == {"node7"}
    unreachable = {h for h, facts in doc["hosts"].items() if facts.get("error_kind")}
    assert unreachable == {"node9"}, unreachable
    assert len(doc["hosts"]) == N


def test_status(inventory):
    inv, work = inventory
    res = run_cli("status", "-i", str(inv), "--output", "json")
    doc = json.loads(res.stdout)
    assert res.returncode == 1 and doc["note"] == "a host could not be read", res.stderr[-2000:]
    assert [i["state"] for i in doc["instances"]] == ["down"] * 4
    problems = {n["node"]: n["problem"] for n in doc["nodes"]}
    assert set(problems) == {f"node{k}" for k in range(1, N + 1)}
    odd = {n for n, p in problems.items() if p != "no engine container"}
    assert odd == {"node9"}, {n: problems[n] for n in odd}


def test_watch_once(inventory):
    inv, work = inventory
    res = run_cli("watch", "-i", str(inv), "--once", "--output", "json", "--run-dir", str(work / "runs"))
    events = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    assert res.returncode == 1, res.stderr[-2000:]
    rounds = [e for e in events if e["event"] == "round"]
    assert len(rounds) == 1 and set(rounds[0]["states"]) == {f"mixed-{i}" for i in range(4)}
    faults = [e for e in events if e["event"] == "fault"]
    assert {(e["node"], e.get("device")) for e in faults if e["kind"] == "npu"} == {("node7", 3)}, faults
    # nothing deployed: every host that answers lacks its engine container
    assert {e["node"] for e in faults if e["kind"] == "container"} == {f"node{k}" for k in range(1, N + 1)} - {"node9"}
