"""`deployctl bench` against an SGLang P/D split on the simulated cluster (1 prefill server on p1, 1 decode server
over d1 + d2, the real sglang-router 0.3.2 on p1): the entry point is the router, which sends each request to the
prefill and the decode server with bootstrap_host/port/room; the prefill happens once on P (the decode server waits
for the room's KV from P's bootstrap server) and D streams the decode steps through the router, paced as the cluster
spec says."""

from __future__ import annotations

import json

import pytest
from benchlib import bench_runs, deployctl_bench
from conftest import run_cli
from fakecluster import FakeCluster, default_cluster
from fakecluster.fixtures import require_fake_cluster_support
from support.sglang_inventory import IMAGE, PD_LAYOUT, PD_NODES, WEIGHTS, require_router, sglang_inventory

A, B, C, D = 300.0, 0.5, 20.0, 4.0
# what the real router adds to the first token on top of the stand-ins' prefill: measured 45-56 ms on this machine
# (the stand-ins themselves take the prefill time to the millisecond: the decode server has the room's KV 400-402 ms
# after the request for a 400 ms prefill). Likely Nagle's algorithm on the router's streamed response (the first
# content chunk follows the role chunk at once and waits for the client's delayed ACK, ~40 ms): unverified guess.
ROUTER_MS = 70.0
TIMING = {"ttft_ms": A, "ttft_per_token_ms": B, "tpot_ms": C, "tpot_per_request_ms": D}
# output tokens of a request: a TPOT is its stream's span over OUTPUT - 1 steps, so what a loaded machine adds to its
# first or last token (tens of ms) comes divided by 63 (at 16 tokens, by 15: 40 ms was 2.7 ms of a 24 ms TPOT's 2.4)
OUTPUT = 64


@pytest.fixture(scope="module")
def pd(tmp_path_factory):
    require_fake_cluster_support()
    require_router()
    specs = default_cluster(3, "a3", weights_dir=WEIGHTS, engine_join_timeout=20, engine_timing=TIMING,
                            images=(IMAGE,))
    fc = FakeCluster([s.replace(name=n) for s, n in zip(specs, PD_NODES)],
                     tmp_path_factory.mktemp("fakecluster-bench-sglang")).start()
    try:
        work = tmp_path_factory.mktemp("bench-sglang")
        inv = sglang_inventory(fc, work / "inv.yaml", name="qwen3-sgl-bench", layout=PD_LAYOUT)
        res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(work / "runs"), "--ready-timeout", "90",
                      "--skip-preflight", "--output", "json")
        assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
        yield fc, inv, work
    finally:
        fc.stop()


def test_bench_through_the_sglang_router(pd):
    fc, inv, work = pd
    runs = work / "bench-runs"
    res = deployctl_bench("-i", str(inv), "--input", "200,1000", "--output-len", str(OUTPUT), "--concurrency", "1",
                          "--requests", "3", "--warmup", "1", "--run-dir", str(runs), "--output", "json")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    doc = json.loads(res.stdout)
    assert doc["target"]["url"] == f"http://{fc.node('p1').ip}:6688"      # the router on the prefill master
    assert doc["target"]["dies"] == 48
    for p in doc["points"]:
        assert p["ok"] == 3 and p["errors"] == 0, p
        assert p["input_tokens"]["p50"] == p["input_len"] and p["output_tokens"]["p50"] == OUTPUT
        ttft, tpot = p["ttft_ms"]["p50"], p["tpot_ms"]["p50"]
        want = A + B * p["input_len"]
        # one prefill: D does not prefill again (a second one would add `want` again)
        assert want - 0.1 * want <= ttft <= want + 0.1 * want + ROUTER_MS, (p["point"], ttft, want)
        # the late first token shortens the measured span of the other OUTPUT - 1 by as much (the stand-in paces them
        # against deadlines from its own first token)
        assert (C + D) * 0.9 - ROUTER_MS / (OUTPUT - 1) <= tpot <= (C + D) * 1.1, (p["point"], tpot)
    [record] = bench_runs(runs)
    assert (record / "status").read_text() == "successful\n"
