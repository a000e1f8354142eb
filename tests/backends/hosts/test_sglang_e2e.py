"""SGLang end to end on simulated A3 hosts (engine.kind: sglang; the fake SGLang image runs the stand-in
`python3 -m sglang.launch_server`, tests/fakecluster/fake_bin/sglang_fake.py, and the REAL sglang-router 0.3.2):

* P/D: one prefill server on p1, one decode server over d1 + d2 (node rank 1 joins rank 0's --dist-init-addr), the
  router on p1: `preflight`, `up` (its smoke goes through the router: the prefill and decode servers meet over the
  prefill's bootstrap server), `status` (every node ready, read back from the hosts), then requests through the
  router, plain and streamed, and the router's view of its workers;
* mixed: one server on one node, `up` and `status`.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from conftest import run_cli
from fakecluster import default_cluster
from support.sglang_inventory import IMAGE, PD_LAYOUT, PD_NODES, WEIGHTS, require_router, sglang_inventory

ENGINE = "deployctl_{}_sglang"


def post(url: str, body: dict, timeout: float = 30) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def get(url: str, timeout: float = 10) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def up(inv: Path, runs: Path, *extra: str):
    res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "90", "--output", "json",
                  *extra)
    return res, (json.loads(res.stdout) if res.stdout.strip().startswith("{") else {})


def test_sglang_pd_split_preflight_up_status_through_the_real_router(fake_cluster_factory, tmp_path):
    require_router()
    specs = default_cluster(3, "a3", weights_dir=WEIGHTS, engine_join_timeout=20, images=(IMAGE,))
    fc = fake_cluster_factory([s.replace(name=n) for s, n in zip(specs, PD_NODES)])
    inv = sglang_inventory(fc, tmp_path / "inv.yaml", name="qwen3-sgl", layout=PD_LAYOUT, interface=False)
    runs = tmp_path / "runs"
    pre = run_cli("preflight", "-i", str(inv), "--run-dir", str(runs), "--output", "json")
    assert pre.returncode == 0, pre.stdout + pre.stderr
    res, doc = up(inv, runs)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    assert doc["status"] == "successful", doc
    engine, router = ENGINE.format("qwen3-sgl"), ENGINE.format("qwen3-sgl") + "-router"
    # every node's server: the prefill's HTTP + bootstrap server on p1, the decode's rank 0 on d1, rank 1 on d2
    logs = {n: fc.ssh(n, f"docker logs {engine} 2>&1", check=True).stdout for n in PD_NODES}
    assert "The server is fired up and ready to roll!" in logs["p1"] and "Bootstrap server started" in logs["p1"]
    assert "The server is fired up and ready to roll!" in logs["d1"]
    assert "ready to roll" not in logs["d2"] and logs["d2"].count("Memory pool end.") == 16, logs["d2"][-2000:]
    assert "Node rank 1 joined" in logs["d1"], logs["d1"][-2000:]
    args = fc.ssh("d2", f"docker inspect --format '{{{{json .Args}}}}' {engine}", check=True).stdout
    assert "sglang.launch_server" in args
    # the router is the real sglang-router 0.3.2: its ready line and its routes
    rlog = fc.ssh("p1", f"docker logs {router} 2>&1", check=True).stdout
    assert "Router ready" in rlog, rlog[-3000:]
    base = f"http://{fc.node('p1').ip}:6688"
    assert get(base + "/health") == (200, b"OK")
    workers = json.loads(get(base + "/workers")[1])
    kinds = sorted((w["worker_type"], w["url"], w["is_healthy"]) for w in workers["workers"])
    assert kinds == [("decode", f"http://{fc.node('d1').ip}:30000", True),
                     ("prefill", f"http://{fc.node('p1').ip}:30000", True)], workers
    assert [w.get("bootstrap_port") for w in workers["workers"] if w["worker_type"] == "prefill"] == [8998]
    # requests through the router: the same request to P and D with bootstrap_host/port/room; D fetched P's KV
    code, body = post(base + "/v1/chat/completions", {"model": "qwen3", "max_tokens": 8,
                                                      "messages": [{"role": "user", "content": "hello there"}]})
    answer = json.loads(body)
    assert code == 200 and answer["usage"]["completion_tokens"] == 8, answer
    assert "answering from d1" in answer["choices"][0]["message"]["content"], answer     # the decode server
    code, body = post(base + "/v1/completions", {"model": "qwen3", "prompt": "one two three", "max_tokens": 4,
                                                 "stream": True, "stream_options": {"include_usage": True}})
    events = [ln[6:] for ln in body.decode().splitlines() if ln.startswith("data: ")]
    assert code == 200 and events[-1] == "[DONE]", body
    assert json.loads(events[-2])["usage"]["completion_tokens"] == 4
    metrics = get(f"http://{fc.node('d1').ip}:30000/metrics")[1].decode()
    assert 'sglang:generation_tokens_total{model_name="qwen3"}' in metrics
    # status: every node ready, read back from the hosts
    st = run_cli("status", "-i", str(inv), "--output", "json")
    assert st.returncode == 0, st.stdout[-3000:] + st.stderr[-2000:]
    sdoc = json.loads(st.stdout)
    assert sdoc["state"] == "serving", sdoc
    assert sorted(n["node"] for n in sdoc["nodes"]) == sorted(PD_NODES), sdoc["nodes"]
    assert all(n.get("ready") for n in sdoc["nodes"]), sdoc["nodes"]


def test_sglang_mixed_single_node_up_status(fake_cluster_factory, tmp_path):
    require_router()
    fc = fake_cluster_factory(default_cluster(1, "a3", weights_dir=WEIGHTS, images=(IMAGE,)))
    layout = {"preset": "single", "tp": 16, "moe_ep": 16}
    inv = sglang_inventory(fc, tmp_path / "inv.yaml", name="qwen3-one", layout=layout)
    res, doc = up(inv, tmp_path / "runs", "--skip-preflight")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    assert doc["status"] == "successful", doc
    code, body = post(f"http://{fc.node('node1').ip}:30000/v1/chat/completions",
                      {"model": "qwen3", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
    assert code == 200 and json.loads(body)["usage"]["completion_tokens"] == 3
    st = run_cli("status", "-i", str(inv), "--output", "json")
    assert st.returncode == 0, st.stdout[-3000:] + st.stderr[-2000:]
    sdoc = json.loads(st.stdout)
    assert sdoc["state"] == "serving" and [n["node"] for n in sdoc["nodes"]] == ["node1"], sdoc
