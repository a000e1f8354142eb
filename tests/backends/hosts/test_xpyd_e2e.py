"""xPyD end to end on simulated A3 hosts: vLLM-Ascend 0.18 with one prefill instance (p1) and two decode instances
(d1, d2) behind the P/D proxy on p1 (every P and D endpoint in its argv). A decode-only change (layout.decode.env)
rolls the two decode instances one at a time through the proxy's own API (/instances/remove, wait for the
engine's vllm:num_requests_running to reach 0, restart, verify, /instances/add) while a steady load runs
through the proxy: no request fails, prefill is never restarted, both decode instances end on new revisions.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli
from fakecluster import default_cluster
from support.inventory import from_example
from test_fleet_e2e import Load

TIMING = {"ttft_ms": 40, "tpot_ms": 15}
# 0.18: its proxy removes servers safely (0.13's does not: support.yaml proxy_instances_api)
IMAGE = "quay.io/ascend/vllm-ascend:v0.18.0-a3"


def inventory(fc, path: Path, decode_env: dict | None = None) -> Path:
    return from_example("vllm-a3-1p1d-qwen3", path, fc=fc, cluster={"name": "qwen3-xpyd"}, engine={"image": IMAGE},
                        layout={"preset": "pd-split", "prefill": {"nodes": ["p1"]},
                                "decode": {"nodes": ["d1", "d2"], "instances": 2,
                                           **({"env": decode_env} if decode_env else {})}})


def up(inv: Path, runs: Path):
    res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "90", "--skip-preflight",
                  "--output", "json")
    return res, (json.loads(res.stdout) if res.stdout.strip().startswith("{") else {})


def test_decode_only_change_rolls_the_decode_instances_without_a_failed_request(fake_cluster_factory, tmp_path):
    specs = default_cluster(3, "a3", weights_dir="/data/models/Qwen3-235B-A22B-W8A8", engine_join_timeout=20,
                            engine_timing=TIMING, images=(IMAGE,))
    fc = fake_cluster_factory([s.replace(name=n) for s, n in zip(specs, ("p1", "d1", "d2"))])
    runs = tmp_path / "runs"
    inv = inventory(fc, tmp_path / "inv.yaml")
    res, first = up(inv, runs)
    assert res.returncode == 0, res.stdout + res.stderr
    plan = json.loads(run_cli("plan", "-i", str(inv), "--output", "json").stdout)
    assert [(i["name"], i["role"]) for i in plan["instances"]] == [
        ("prefill", "prefill"), ("decode-0", "decode"), ("decode-1", "decode")]
    engine, proxy = "deployctl_qwen3-xpyd_vllm", "deployctl_qwen3-xpyd_vllm-proxy"
    before = {n: fc.container_started(n, engine) for n in ("p1", "d1", "d2")}
    proxy_before = fc.container_started("p1", proxy)

    inv2 = inventory(fc, tmp_path / "inv2.yaml", decode_env={"TEST_DECODE_SETTING": "2"})
    with Load(f"http://{fc.node('p1').ip}:1999", model="qwen3") as load:
        res, doc = up(inv2, runs)
    assert res.returncode == 0, res.stdout + res.stderr
    assert doc["status"] == "successful"
    assert load.failures == [], load.failures[:5]
    assert load.ok > 20, load.ok
    actions = {h["node"]: h["action"] for h in doc["changes"]["hosts"]}
    assert actions == {"p1": "keep", "d1": "restart", "d2": "restart"}, actions
    # prefill and the proxy were never restarted; each decode instance was
    assert fc.container_started("p1", engine) == before["p1"] and fc.container_started("p1", proxy) == proxy_before
    assert all(fc.container_started(n, engine) != before[n] for n in ("d1", "d2"))
    # one at a time: d2 was restarted only after d1 was back (the proxy log names each removal and addition)
    log = fc.ssh("p1", f"docker logs {proxy} 2>&1", check=True).stdout
    # a removal while requests are being dispatched taints the servers first (0.15+: "Start to taint decode
    # instances"), removed later; either way they leave the selection
    events = [ln for ln in log.splitlines() if "decoder instances" in ln or "taint decode instances" in ln]
    d1, d2 = (f"{fc.node(n).ip}:" for n in ("d1", "d2"))
    order = [("add" if "Add decoder" in ln else "remove", "d1" if d1 in ln.split("Status")[0] else "d2")
             for ln in events]
    order = order[next(k for k, o in enumerate(order) if o[0] == "remove"):]
    # adding is idempotent and deployctl asks again until the proxy lists the servers: one "add" per run of them
    order = [o for k, o in enumerate(order) if k == 0 or o != order[k - 1]]
    assert order[:4] == [("remove", "d1"), ("add", "d1"), ("remove", "d2"), ("add", "d2")], events

    st = json.loads(run_cli("status", "-i", str(inv2), "--output", "json").stdout)
    assert st["state"] == "serving", st
    env_of = {n: fc.ssh(n, f"cat /var/lib/fakedocker/{engine}/env", check=True).stdout for n in ("p1", "d1", "d2")}
    assert "TEST_DECODE_SETTING=2" in env_of["d1"] and "TEST_DECODE_SETTING=2" in env_of["d2"]
    assert "TEST_DECODE_SETTING" not in env_of["p1"]
