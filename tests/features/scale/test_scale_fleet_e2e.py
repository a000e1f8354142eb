"""`deployctl scale --apply` on a fleet behind deployctl's router (the real HAProxy 2.6 run by the fake docker): two
2-server MindIE replicas and two spare servers. The role's minimum raised to three adds a replica on the spares: HAProxy's
configuration stays as it was (the router does not restart) and the new server is put in through its runtime API
("add server"), read back from HAProxy itself; requests keep flowing. Idle, with the minimum back at two, the added
replica is drained, stopped and deleted from the running HAProxy.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time

import yaml
from conftest import DEPLOYCTL, run_cli
from fakecluster import default_cluster
from support.fleet import Load, RouterWatch
from support.inventory import on_cluster


def _policy(inv, low: int) -> None:
    doc = yaml.safe_load(inv.read_text())
    doc["layout"]["replicas"] = 2
    doc["deploy"] = {"scaling": {"interval_s": 2, "spares": ["node5", "node6"], "roles": {"mixed": {"min": low, "max": 3}},
                                 "scale_down": {"for_s": 4}, "cooldown_down_s": 0}}
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))


def test_a_replica_added_on_the_spare_joins_haproxy_at_run_time_and_leaves_it(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(6))
    for n in fc.nodes:
        fc.update_node(n.name, engine_timing={"ttft_ms": 50, "tpot_ms": 15})
    runs, inv = tmp_path / "runs", tmp_path / "inv.yaml"
    on_cluster(fc, inv, replicas=2, router=True)
    _policy(inv, low=2)
    res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "90", "--skip-preflight",
                  "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    router = json.loads(res.stdout)["url"]
    scale = ["scale", "-i", str(inv), "--run-dir", str(runs), "--output", "json", "--apply"]
    _policy(inv, low=3)
    watch = RouterWatch(fc, "node1")
    started = fc.container_started("node1", "deployctl_fake-a2-6_router")
    with Load(router, workers=2) as load:
        res = run_cli(*scale, "--rounds", "1")
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        [change] = [json.loads(x) for x in res.stdout.splitlines() if '"change"' in x]
        assert (change["ok"], change["instance"], change["nodes"]) == (True, "mixed-2", ["node5", "node6"]), change
        deadline = time.monotonic() + 90
        while watch.statuses().get("mixed-2") != "UP" and time.monotonic() < deadline:
            time.sleep(0.5)
        assert watch.statuses() == {"mixed-0": "UP", "mixed-1": "UP", "mixed-2": "UP"}
    assert load.failures == [] and load.ok > 0, load.failures[:3]
    assert fc.container_started("node1", "deployctl_fake-a2-6_router") == started      # no router restart
    cfg = fc.ssh("node1", "cat /var/lib/deployctl/fake-a2-6/current/haproxy.cfg", check=True).stdout
    assert "server mixed-2" not in cfg
    st = json.loads(run_cli("status", "-i", str(inv), "--run-dir", str(runs), "--output", "json").stdout)
    assert {(i["instance"], i["router"]) for i in st["instances"]} >= {("mixed-2", "UP")}
    # idle, the minimum back at 2, under `watch --scale` (recovery on): drained, stopped, deleted from HAProxy, and
    # the watch neither reports the removed replica as failed nor restarts it
    _policy(inv, low=2)
    proc = subprocess.Popen([DEPLOYCTL, "watch", "-i", str(inv), "--run-dir", str(runs), "--output", "json",
                             "--scale", "--recover"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[dict] = []
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("{"):
                seen.append(json.loads(line))
                if seen[-1].get("event") == "change":
                    break
        time.sleep(6)                          # a few rounds of the watch of the deployment as scaled
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    seen += [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    [change] = [e for e in seen if e.get("event") == "change"]
    assert (change["ok"], change["action"], change["instance"]) == (True, "down", "mixed-2"), (change, err[-2000:])
    assert watch.statuses() == {"mixed-0": "UP", "mixed-1": "UP"}
    assert not [e for e in seen if e.get("instance") == "mixed-2" and e.get("event") in (
        "fault", "instance-failed", "restart", "left-out", "back")]
    assert any(e.get("event") == "decision" and e.get("source") == "scale" for e in seen)
    history = json.loads(run_cli("history", "-i", str(inv), "--run-dir", str(runs), "--output", "json").stdout)
    assert [r["operation"] for r in history["revisions"]][-2:] == ["scale-up", "scale-down"]
