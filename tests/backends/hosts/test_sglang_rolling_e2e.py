"""Rolling an SGLang P/D fleet on simulated A3 hosts: one prefill server (p1) and two decode servers (d1, d2) behind
the real sglang-router 0.3.2 on p1. A decode-only change (layout.decode.env) rolls the two decode servers one at a
time through the router's worker API (DELETE /workers/<id>, wait for the server's sglang:num_running_reqs and
num_queue_reqs to reach 0, restart, verify, POST /workers; engines/sglang/control.py) while a steady load runs
through the router: no request fails, neither the prefill server nor the router is restarted, and both decode
servers end on the new revision, listed by the router again."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from conftest import run_cli
from fakecluster import default_cluster
from support.sglang_inventory import IMAGE, WEIGHTS, require_router, sglang_inventory
from test_fleet_e2e import Load

CLUSTER = "qwen3-sgl-roll"
ENGINE = f"deployctl_{CLUSTER}_sglang"
ROUTER = f"{ENGINE}-router"


def layout(decode_env: dict | None = None) -> dict:
    return {"preset": "pd-split", "prefill": {"nodes": ["p1"], "tp": 16, "dp": 1, "moe_ep": 16},
            "decode": {"nodes": ["d1", "d2"], "instances": 2, "tp": 16, "dp": 1, "moe_ep": 16,
                       **({"env": decode_env} if decode_env else {})}}


def up(inv: Path, runs: Path):
    res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "90", "--skip-preflight",
                  "--output", "json")
    return res, (json.loads(res.stdout) if res.stdout.strip().startswith("{") else {})


def test_a_decode_only_change_rolls_the_decode_servers_through_the_router_without_a_failed_request(
        fake_cluster_factory, tmp_path):
    require_router()
    specs = default_cluster(3, "a3", weights_dir=WEIGHTS, engine_join_timeout=20,
                            engine_timing={"ttft_ms": 40, "tpot_ms": 15}, images=(IMAGE,))
    fc = fake_cluster_factory([s.replace(name=n) for s, n in zip(specs, ("p1", "d1", "d2"))])
    runs = tmp_path / "runs"
    inv = sglang_inventory(fc, tmp_path / "inv.yaml", name=CLUSTER, layout=layout())
    res, _ = up(inv, runs)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    before = {n: fc.container_started(n, ENGINE) for n in ("p1", "d1", "d2")}
    router_before = fc.container_started("p1", ROUTER)
    url = f"http://{fc.node('p1').ip}:6688"

    inv2 = sglang_inventory(fc, tmp_path / "inv2.yaml", name=CLUSTER, layout=layout({"TEST_DECODE_SETTING": "2"}))
    with Load(url, model="qwen3") as load:
        res, doc = up(inv2, runs)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    assert doc["status"] == "successful", doc
    assert load.failures == [], load.failures[:5]
    assert load.ok > 20, load.ok
    actions = {h["node"]: h["action"] for h in doc["changes"]["hosts"]}
    assert actions == {"p1": "keep", "d1": "restart", "d2": "restart"}, actions
    assert fc.container_started("p1", ENGINE) == before["p1"] and fc.container_started("p1", ROUTER) == router_before
    assert all(fc.container_started(n, ENGINE) != before[n] for n in ("d1", "d2"))
    # the router lists both decode servers again (added back through POST /workers), healthy
    with urllib.request.urlopen(f"{url}/workers", timeout=10) as answer:
        listed = json.loads(answer.read())["workers"]
    decode = sorted(w["url"] for w in listed if w["worker_type"] == "decode" and w["is_healthy"])
    assert decode == sorted(f"http://{fc.node(n).ip}:30000" for n in ("d1", "d2")), listed
    st = json.loads(run_cli("status", "-i", str(inv2), "--output", "json").stdout)
    assert st["state"] == "serving", st
    env_of = {n: fc.ssh(n, f"cat /var/lib/fakedocker/{ENGINE}/env", check=True).stdout for n in ("p1", "d1", "d2")}
    assert "TEST_DECODE_SETTING=2" in env_of["d1"] and "TEST_DECODE_SETTING=2" in env_of["d2"]
    assert "TEST_DECODE_SETTING" not in env_of["p1"]
