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
from fakecluster.pacing import OVERHEAD_MS

A, B, C, D = 300.0, 0.5, 20.0, 4.0
TIMING = {"ttft_ms": A, "ttft_per_token_ms": B, "tpot_ms": C, "tpot_per_request_ms": D}
# output tokens of a request: a TPOT is its stream's span over OUTPUT - 1 steps, so what a loaded machine and the proxy
# add to its first or last token (40+ ms) comes divided by 63 (at 16 tokens, by 15: 3 ms of a 24 ms TPOT)
OUTPUT = 64


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
    res = deployctl_bench("-i", str(inv), "--input", "200,1000", "--output-len", str(OUTPUT), "--concurrency", "1",
                          "--requests", "3", "--warmup", "1", "--run-dir", str(runs), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["target"]["url"] == f"http://{fc.node('p1').ip}:1999"      # the proxy on the prefill master
    assert doc["target"]["dies"] == 32
    for p in doc["points"]:
        assert p["ok"] == 3 and p["errors"] == 0, p
        assert p["input_tokens"]["p50"] == p["input_len"] and p["output_tokens"]["p50"] == OUTPUT
        ttft, tpot = p["ttft_ms"]["p50"], p["tpot_ms"]["p50"]
        want = A + B * p["input_len"]
        # one prefill, on P: the stand-ins sleep the paced time, so it is a floor; the two hops through the proxy
        # only add to it, by 40+ ms on a loaded CI machine. A second prefill on D would double it: the ceiling
        # sits halfway to that
        assert 0.95 * want <= ttft <= 1.5 * want, (p["point"], ttft, want)
        # one request in flight on D: C + D per step (two would be C + 2D, 17 % more); a late first token shortens
        # the span of the others (the stand-in paces them against deadlines from its own first token)
        assert 0.95 * (C + D) - OVERHEAD_MS / (OUTPUT - 1) <= tpot <= 1.1 * (C + D), (p["point"], tpot)
    [record] = bench_runs(runs)
    assert (record / "status").read_text() == "successful\n"
    assert sorted(x.name for x in (record / "plots").iterdir()) == ["tpot_vs_input.png", "ttft_vs_input.png"]


LOAD_SUITE = """\
name: load
warmup: 2
duration_limit: 60
points:
  - {name: closed, input: 1000, output: 16, concurrency: 4, requests: 8}
  - {name: prefix, input: 1000, output: 16, concurrency: 4, requests: 8, shared_prefix: 900}
  - {name: rate, input: 1000, output: 16, concurrency: 4, requests: 8, request_rate: 2, arrival: fixed}
"""


def test_request_rate_and_shared_prefix_move_the_measurement_and_the_estimate(pd):
    """Issue 40's done-when: a shared prefix (P's prefix cache, on by default in vLLM) lowers the measured TTFT and
    an open loop's rate bounds the measured throughput near rate x output; the estimate beside each point, made
    for the same load, moves the same way. Directions and the rate bound only: nothing expected is taken from
    the estimator."""
    fc, inv, work = pd
    suite = work / "load.yaml"
    suite.write_text(LOAD_SUITE)
    res = deployctl_bench("-i", str(inv), "--suite", str(suite), "--run-dir", str(work / "load-runs"),
                          "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    [record] = bench_runs(work / "load-runs")
    doc = json.loads((record / "summary.json").read_text())
    pts = {p["point"]: p for p in doc["points"]}
    closed, prefix, rate = pts["closed"], pts["prefix"], pts["rate"]
    for p in (closed, prefix, rate):
        assert p["ok"] == 8 and p["errors"] == 0 and p["estimate"], p
    assert (closed["request_rate"], closed["arrival"], closed["shared_prefix"]) == (None, None, 0)
    assert (prefix["request_rate"], prefix["shared_prefix"]) == (None, 900)
    assert (rate["request_rate"], rate["arrival"], rate["shared_prefix"]) == (2, "fixed", 0)
    # (a) the shared prefix: ~900 of 1000 prompt tokens found cached on P; the stand-in then prefills ~100
    # (A + B x 100 = 350 ms against A + B x 1000 = 800 ms). P is DP2, each rank an API server with its own
    # prefix cache, as in vLLM; the stand-in proxy goes round robin, so the 2 warm-up requests prime both
    assert prefix["ttft_ms"]["mean"] < 0.7 * closed["ttft_ms"]["mean"], (prefix["ttft_ms"], closed["ttft_ms"])
    assert prefix["estimate"]["ttft_ms"] < closed["estimate"]["ttft_ms"], (prefix["estimate"], closed["estimate"])
    # (b) the open loop: 2 requests/s of 16 tokens is at most ~32 tokens/s (8 fixed arrivals: 7 gaps of 0.5 s plus
    # the last answer), well under what 4 clients back to back reach
    bound = rate["request_rate"] * rate["output_len"]
    assert 0.6 * bound <= rate["output_tokens_per_s"] <= 1.2 * bound, (rate["output_tokens_per_s"], bound)
    assert rate["output_tokens_per_s"] < 0.8 * closed["output_tokens_per_s"], (rate, closed)
    est = rate["estimate"]["output_tokens_per_s"]
    assert 0.6 * bound <= est <= 1.2 * bound, (est, bound)
    assert est < closed["estimate"]["output_tokens_per_s"], (rate["estimate"], closed["estimate"])
    argv = json.loads(next((record / "points").glob("03-*/aiperf.argv.json")).read_text())
    assert argv[argv.index("--request-rate") + 1] == "2" and argv[argv.index("--arrival-pattern") + 1] == "constant"
    assert "load" in (record / "report.md").read_text().lower()


def test_scale_reads_each_roles_load_from_its_engines_and_records_the_decision(pd):
    """`deployctl scale` (shadow) on the same P/D deployment: one decision per role from the engines' own metrics
    read on their hosts, each with the reading it used; the roles given bounds are judged, the others held."""
    fc, inv, work = pd
    doc = yaml.safe_load(inv.read_text())
    doc["deploy"] = {"scaling": {"roles": {"decode": {"min": 1, "max": 2}}}}
    scaled = work / "scaled.yaml"
    scaled.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = run_cli("scale", "-i", str(scaled), "--rounds", "2", "--interval", "1", "--run-dir", str(work / "scale"),
                  "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    last = {d["role"]: d for d in map(json.loads, res.stdout.splitlines()) if d["round"] == 2}
    assert set(last) == {"prefill", "decode"}
    dec = last["decode"]
    # the stand-ins are idle after the benches: 1 instance answered, nothing waiting or running, no tokens made
    assert dec["inputs"]["latest"]["instances"] == 1
    assert (dec["inputs"]["latest"]["waiting"], dec["inputs"]["latest"]["running"]) == (0.0, 0.0)
    assert dec["inputs"]["latest"]["tokens_per_s"] == 0.0 and dec["action"] == "hold"
    assert "names no bounds" in last["prefill"]["reason"]
    [record] = (work / "scale" / "runs").glob("*-scale")
    events = [json.loads(x) for x in (record / "events.jsonl").read_text().splitlines()]
    assert [e["role"] for e in events if e["round"] == 2] == ["prefill", "decode"]
