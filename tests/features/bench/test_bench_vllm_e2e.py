"""`deployctl bench` against vLLM-Ascend's P/D split on the simulated cluster (the example
vllm-a3-1p1d-qwen3.yaml on 2 x A3: prefill on p1, decode on d1, the proxy on p1): the entry point is the proxy,
the prefill happens once on P and D streams the decode steps through the proxy, paced as the cluster spec says."""

from __future__ import annotations

import json

import pytest
import yaml
from benchlib import bench_runs, deployctl_bench
from conftest import EXAMPLES, run_cli
from fakecluster import FakeCluster, default_cluster
from fakecluster.fixtures import require_fake_cluster_support

A, B, C, D = 300.0, 0.5, 20.0, 4.0
TIMING = {"ttft_ms": A, "ttft_per_token_ms": B, "tpot_ms": C, "tpot_per_request_ms": D}


# 0.18: the proxy streams text/event-stream (from 0.16); 0.13's labels its SSE lines application/json and AIPerf
# then reads no token (aiperf/transports/aiohttp_client.py L176-178; docs/troubleshooting.md "bench")
IMAGE = "quay.io/ascend/vllm-ascend:v0.18.0-a3"


@pytest.fixture(scope="module")
def pd(tmp_path_factory):
    require_fake_cluster_support()
    specs = default_cluster(2, "a3", weights_dir="/data/models/Qwen3-235B-A22B-W8A8", engine_join_timeout=20,
                            engine_timing=TIMING, images=(IMAGE,))
    specs = [specs[0].replace(name="p1"), specs[1].replace(name="d1")]
    fc = FakeCluster(specs, tmp_path_factory.mktemp("fakecluster-bench-pd")).start()
    try:
        work = tmp_path_factory.mktemp("bench-pd")
        doc = yaml.safe_load((EXAMPLES / "vllm-a3-1p1d-qwen3.yaml").read_text())
        doc["engine"]["image"] = IMAGE
        doc["ssh"] = {"user": "root", "key": str(fc.client_key), "known_hosts": str(fc.known_hosts)}
        doc["nodes"] = [{"name": n.name, "address": n.ip} for n in fc.nodes]
        inv = work / "inv.yaml"
        inv.write_text(yaml.safe_dump(doc, sort_keys=False))
        runs = work / "runs"
        res = run_cli("preflight", "-i", str(inv), "--run-dir", str(runs), "--output", "json")
        assert res.returncode == 0, res.stdout + res.stderr
        res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "90", "--output", "json")
        assert res.returncode == 0, res.stdout + res.stderr
        yield fc, inv, work
    finally:
        fc.stop()


def test_bench_through_the_pd_proxy(pd):
    fc, inv, work = pd
    runs = work / "bench-runs"
    res = deployctl_bench("-i", str(inv), "--input", "200,1000", "--output-len", "16", "--concurrency", "1",
                          "--requests", "3", "--warmup", "1", "--run-dir", str(runs), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["target"]["url"] == f"http://{fc.node('p1').ip}:1999"      # the proxy on the prefill master
    assert doc["target"]["dies"] == 32
    for p in doc["points"]:
        assert p["ok"] == 3 and p["errors"] == 0, p
        assert p["input_tokens"]["p50"] == p["input_len"] and p["output_tokens"]["p50"] == 16
        ttft, tpot = p["ttft_ms"]["p50"], p["tpot_ms"]["p50"]
        want = A + B * p["input_len"]
        assert abs(ttft - want) <= 0.1 * want, (p["point"], ttft, want)      # one prefill: D does not prefill again
        assert abs(tpot - (C + D)) <= 0.1 * (C + D), (p["point"], tpot)
    [record] = bench_runs(runs)
    assert (record / "status").read_text() == "successful\n"
    assert sorted(x.name for x in (record / "plots").iterdir()) == ["tpot_vs_input.png", "ttft_vs_input.png"]
