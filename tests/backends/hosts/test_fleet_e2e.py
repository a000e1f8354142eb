"""Fleets end to end on the simulated hosts: 3 replicas of a 2-node MindIE instance behind deployctl's router
(the real HAProxy 2.6 from Debian, run by the fake docker as the official image), a steady request load through
the router while `up` rolls an env change across the replicas: no request fails, at most one replica is out of
the router at any time (read from HAProxy's own runtime API), every instance ends on the new revision, and
`status` says so per instance. A failing replica stops the rollout and is restored and put back.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import run_cli
from fakecluster import default_cluster
from support.fleet import Load, RouterWatch
from support.inventory import on_cluster

# every answer takes a while (first token 50 ms, then 15 ms per token): requests are in flight when a replica
# is drained, so the drain has something to wait for
TIMING = {"ttft_ms": 50, "tpot_ms": 15}
ROUTER = "deployctl_fake-a2-6_router"  # deployctl_<cluster name>_router: default_cluster(6) names the cluster fake-a2-6


def inventory(fc, path: Path, level: str) -> Path:
    return on_cluster(fc, path, level=level, replicas=3, router=True)


def up(inv: Path, runs: Path, *extra: str):
    res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "90",
                  "--skip-preflight", "--output", "json", *extra)
    doc = json.loads(res.stdout) if res.stdout.strip().startswith("{") else {}
    return res, doc


def test_rolling_update_of_three_replicas_drops_no_request(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(6))
    for n in fc.nodes:
        fc.update_node(n.name, engine_timing=TIMING)
    runs = tmp_path / "runs"
    inv = inventory(fc, tmp_path / "inv.yaml", "info")
    res, first = up(inv, runs)
    assert res.returncode == 0, res.stdout + res.stderr
    router = f"http://{fc.node('node1').ip}:8080"
    assert first["url"] == router                              # up names the router, not an instance
    st = json.loads(run_cli("status", "-i", str(inv), "--output", "json").stdout)
    assert [(i["instance"], i["state"], i["router"]) for i in st["instances"]] == [
        ("mixed-0", "serving", "UP"), ("mixed-1", "serving", "UP"), ("mixed-2", "serving", "UP")]

    inv2 = inventory(fc, tmp_path / "inv2.yaml", "debug")       # an env change on every node
    with RouterWatch(fc, "node1") as watch, Load(router) as load:
        time.sleep(2)
        res, doc = up(inv2, runs)
        time.sleep(1)
    assert res.returncode == 0, res.stdout + res.stderr
    assert doc["status"] == "successful"
    assert load.failures == [], load.failures[:5]
    assert load.ok > 30, load.ok                               # the load really ran through the rollout
    # one replica at a time: the router always had two of the three to send to, and each was out once
    up_counts = [sum(1 for v in s.values() if v.startswith("UP")) for s in watch.samples if len(s) == 3]
    assert up_counts and min(up_counts) >= 2, up_counts
    drained = {name for s in watch.samples for name, v in s.items() if not v.startswith("UP")}
    assert drained == {"mixed-0", "mixed-1", "mixed-2"}, watch.samples[-3:]

    st = json.loads(run_cli("status", "-i", str(inv2), "--output", "json").stdout)
    assert st["state"] == "serving", st
    new_revs = {h["node"]: h["rev"] for h in doc["changes"]["hosts"]}
    assert {r["node"]: r["revision"] for r in st["nodes"]} == new_revs
    assert {(i["state"], i["router"]) for i in st["instances"]} == {("serving", "UP")}
    assert len({i["history_revision"] for i in st["instances"]}) == 1
    rolled = st["instances"][0]["history_revision"]
    assert rolled == st["live_revision"]

    # a replica whose new revision crashes stops the rollout: it is restored and put back, the replicas before
    # it keep the new revision, the ones after it the old one, and status says which runs what
    fc.update_node("node3", engine_crash_on="MINDIE_LOG_LEVEL=warn")
    inv3 = inventory(fc, tmp_path / "inv3.yaml", "warn")
    with Load(router) as load:
        res, doc = up(inv3, runs)
    assert res.returncode == 1 and doc["status"] == "failed", res.stdout
    assert doc["failure"].startswith("node3"), doc["failure"]
    assert load.failures == [], load.failures[:5]
    st = json.loads(run_cli("status", "-i", str(inv3), "--output", "json").stdout)
    by = {i["instance"]: i for i in st["instances"]}
    runs_rev = {r["node"]: r["revision"] for r in st["nodes"]}
    assert sorted(doc["restored"]) == ["node3", "node4"]
    for node in ("node3", "node4", "node5", "node6"):                # restored / never touched: the old one
        assert runs_rev[node] == new_revs[node], node
    assert runs_rev["node1"] != new_revs["node1"] and runs_rev["node2"] != new_revs["node2"]  # rolled before
    assert by["mixed-1"]["history_revision"] == by["mixed-2"]["history_revision"] == rolled
    assert by["mixed-0"]["history_revision"] == rolled + 1 and by["mixed-0"]["history_result"] == "failed"
    assert {i["state"] for i in st["instances"]} == {"serving"} and {i["router"] for i in st["instances"]} == {"UP"}
    assert "different revisions" in st["note"]

    # the replica on the router's node fails: it is restored, and the router (same node) keeps running throughout
    router_started = fc.container_started("node1", ROUTER)
    fc.update_node("node3", engine_crash_on="")
    fc.update_node("node1", engine_crash_on="MINDIE_LOG_LEVEL=error")
    inv4 = inventory(fc, tmp_path / "inv4.yaml", "error")
    with Load(router) as load:
        res, doc = up(inv4, runs)
    assert res.returncode == 1 and doc["failure"].startswith("node1"), res.stdout
    assert load.failures == [], load.failures[:5]
    assert sorted(doc["restored"]) == ["node1", "node2"]
    assert fc.container_started("node1", ROUTER) == router_started
    st = json.loads(run_cli("status", "-i", str(inv4), "--output", "json").stdout)
    assert {(i["state"], i["router"]) for i in st["instances"]} == {("serving", "UP")}, st["instances"]
