"""`deployctl bench` end to end on the simulated cluster: MindIE (stand-in) deployed with `deployctl up` on 2 x A2
(TP8 x PP2, the master serves), its engines pacing tokens as the cluster spec says (engine_timing: TTFT = a + b x
input tokens, TPOT = c + d x requests in flight); bench drives AIPerf against the deployment's entry point and
must recover those numbers within 10 %, write the table, the plots, the report and the raw data, and show the
estimate comparison.

Never skips: without root/sshd/netns the fixtures fail and say what to install.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from benchlib import bench_runs, deployctl_bench, png_size, read_jsonl
from conftest import run_cli
from fakecluster import FakeCluster, default_cluster
from fakecluster.fixtures import require_fake_cluster_support
from fakecluster.pacing import OVERHEAD_MS, paced
from support.inventory import on_cluster

# the stand-ins' timing on this cluster (milliseconds)
A, B, C, D = 300.0, 0.5, 20.0, 4.0          # TTFT = A + B x input tokens; TPOT = C + D x requests in flight
TOLERANCE = 0.10
# output tokens of a request: a TPOT is its stream's span over OUTPUT - 1 steps, so the tens of ms a loaded machine may
# add to its first or last token come divided by 47 (at 24 tokens, by 23: 40 ms was 1.7 ms of a 24 ms TPOT's 2.4)
OUTPUT = 48

SUITE = f"""\
name: e2e-small
warmup: 1
duration_limit: 120
points:
  - {{name: long-256, input: 256, output: {OUTPUT}, concurrency: 1, requests: 4}}
  - {{name: long-1536, input: 1536, output: {OUTPUT}, concurrency: 1, requests: 4}}
  - {{name: conc-4, input: 256, output: {OUTPUT}, concurrency: 4, requests: 8}}
"""


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    require_fake_cluster_support()
    timing = {"ttft_ms": A, "ttft_per_token_ms": B, "tpot_ms": C, "tpot_per_request_ms": D}
    fc = FakeCluster(default_cluster(2, engine_timing=timing), tmp_path_factory.mktemp("fakecluster-bench")).start()
    try:
        work = tmp_path_factory.mktemp("bench")
        inv = work / "inv.yaml"
        on_cluster(fc, inv)
        res = run_cli("up", "-i", str(inv), "-y", "--skip-preflight", "--run-dir", str(work / "runs"),
                      "--ready-timeout", "90", "--output", "json")
        assert res.returncode == 0, res.stdout + res.stderr
        yield fc, inv, work
    finally:
        fc.stop()


def expected_ttft(tokens: float) -> float:
    return A + B * tokens


def expected_tpot(concurrency: int) -> float:
    return C + D * concurrency


def close(measured: float, expected: float) -> bool:
    return abs(measured - expected) <= TOLERANCE * expected


def test_bench_recovers_the_configured_timing_and_writes_everything(deployed):
    fc, inv, work = deployed
    suite = work / "suite.yaml"
    suite.write_text(SUITE)
    runs = work / "bench-runs"
    res = deployctl_bench("-i", str(inv), "--suite", str(suite), "--run-dir", str(runs))
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    # the table: every point, p50/p90/p99 cells, and the comparison with the estimate (a ratio column)
    assert "Measured: ds-r1 at http://%s:1025 (p50 / p90 / p99)" % fc.node("node1").ip in res.stdout, out
    assert "Against the plan's estimate (ratio = measured / estimated)" in res.stdout, out
    for col in ("TTFT ms", "TPOT ms", "E2E s", "out tok/s", "tok/s/die", "est. TTFT", "est. TPOT", "est. tok/s",
                "ratio"):
        assert col in res.stdout, (col, out)
    for name in ("long-256", "long-1536", "conc-4"):
        assert name in res.stdout, out
    assert re.search(r"\d+\.\d / \d+\.\d / \d+\.\d", res.stdout), out

    [record] = bench_runs(runs)
    assert (record / "status").read_text() == "successful\n" and (record / "rc").read_text() == "0\n"
    doc = json.loads((record / "summary.json").read_text())
    assert doc["tool"]["name"] == "AIPerf" and doc["tool"]["version"]
    assert doc["target"]["url"] == "http://%s:1025" % fc.node("node1").ip and doc["target"]["dies"] == 16
    points = {p["point"]: p for p in doc["points"]}
    assert list(points) == ["long-256", "long-1536", "conc-4"]

    # the configured timing, recovered within 10 %, TTFT + 50 ms of load (medians; the input length is the server's
    # own count)
    for name, tokens, conc in (("long-256", 256, 1), ("long-1536", 1536, 1), ("conc-4", 256, 4)):
        p = points[name]
        assert p["ok"] == p["requests"] and p["errors"] == 0 and not p["failure"], p
        assert p["input_tokens"]["p50"] == tokens and p["output_tokens"]["p50"] == OUTPUT, p
        ttft, tpot = p["ttft_ms"]["p50"], p["tpot_ms"]["p50"]
        assert paced(ttft, expected_ttft(tokens)), (name, ttft, expected_ttft(tokens))
        assert close(tpot, expected_tpot(conc)), (name, tpot, expected_tpot(conc))
        for metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
            assert p[metric]["p50"] <= p[metric]["p90"] <= p[metric]["p99"], (name, metric, p[metric])
        assert p["output_tokens_per_s"] > 0 and p["per_die_tokens_per_s"] == pytest.approx(
            p["output_tokens_per_s"] / 16)
    # the prefill's growth with the input and the decode step's with concurrency, from differences (client overheads
    # cancel; what a loaded machine adds to one request and not to another does not: up to OVERHEAD_MS on a first
    # token, or a late first or last token of a stream, divided by its steps). Each bound tells no growth and twice
    # the growth apart
    grown = points["long-1536"]["ttft_ms"]["p50"] - points["long-256"]["ttft_ms"]["p50"]
    assert abs(grown - B * (1536 - 256)) <= TOLERANCE * B * (1536 - 256) + OVERHEAD_MS, grown      # 640 +- 114 ms
    step = (points["conc-4"]["tpot_ms"]["p50"] - points["long-256"]["tpot_ms"]["p50"]) / 3
    assert abs(step - D) <= 0.5 * D, step
    assert points["conc-4"]["output_tokens_per_s"] > 2 * points["long-256"]["output_tokens_per_s"]

    # the estimate comparison: a value and a ratio where the performance model gives one, "-" and a note where not
    for p in doc["points"]:
        assert set(p["comparison"]) == {"ttft_ms", "tpot_ms", "output_tokens_per_s", "per_die_tokens_per_s"}
        for k, c in p["comparison"].items():
            assert set(c) == {"measured", "estimated", "ratio"}
            if c["estimated"] is not None and c["measured"] is not None:
                assert c["ratio"] == pytest.approx(c["measured"] / c["estimated"])
            else:
                assert c["ratio"] is None
    if all(p["estimate"] is None for p in doc["points"]):
        assert doc["estimate_note"], doc

    # raw per-request data in the run record: every request of every point (warm-up marked), AIPerf's own records
    rows = read_jsonl(record / "requests.jsonl")
    for name, p in points.items():
        mine = [r for r in rows if r["point"] == name]
        assert len([r for r in mine if r["phase"] == "profiling"]) == p["requests"], name
        assert len([r for r in mine if r["phase"] == "warmup"]) == 1, name
        assert all(r["ttft_ms"] > 0 and r["e2e_ms"] >= r["ttft_ms"] for r in mine)
        assert (record / p["artifacts"] / "profile_export.jsonl").exists()
    point_dirs = sorted((record / "points").iterdir())
    assert [d.name for d in point_dirs] == ["01-long-256", "02-long-1536", "03-conc-4"]
    assert all((d / "input.jsonl").exists() and (d / "aiperf.log").exists() for d in point_dirs)

    # plots: five valid PNGs; the report links them and shows both tables
    plots = sorted(p.name for p in (record / "plots").glob("*.png"))
    assert plots == sorted(["ttft_vs_input.png", "tpot_vs_input.png", "ttft_vs_concurrency.png",
                            "tpot_vs_concurrency.png", "throughput_vs_concurrency.png"])
    for name in plots:
        w, h = png_size(record / "plots" / name)
        assert w > 200 and h > 200
    report = (record / "report.md").read_text()
    assert report.startswith("# Benchmark: ds-r1 at http://")
    assert "## Measured (p50 / p90 / p99)" in report and "## Against the plan's estimate" in report
    for name in plots:
        assert f"](plots/{name})" in report
    assert f"| long-1536 | 1 | 1536 (1536) / {OUTPUT} | 4 / 0 |" in report


def test_bench_json_output_and_flags(deployed):
    fc, inv, work = deployed
    runs = work / "bench-json"
    res = deployctl_bench("-i", str(inv), "--input", "64", "--output-len", "8", "--concurrency", "2",
                          "--requests", "2", "--warmup", "0", "--run-dir", str(runs), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["status"] == "successful" and doc["suite"]["name"] == "custom"
    [p] = doc["points"]
    assert (p["input_len"], p["output_len"], p["concurrency"], p["requests"], p["ok"]) == (64, 8, 2, 2, 2)
    assert "comparison" in p and "estimate" in p
    assert Path(doc["report"]).exists() and doc["plots"] == []    # one point: nothing to draw a line through
    assert "smoke: answered" in res.stderr                        # progress goes to stderr in JSON mode


def test_bench_refuses_what_it_cannot_measure(deployed, tmp_path):
    fc, inv, work = deployed
    # nothing listens there: exit 1 naming the URL, with the hint, and the run recorded as failed
    res = deployctl_bench("-i", str(inv), "--url", "http://%s:1999" % fc.node("node1").ip, "--input", "64",
                          "--run-dir", str(tmp_path))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "does not answer" in res.stderr and "deployctl status -i INV" in res.stderr, res.stderr
    [record] = bench_runs(tmp_path)
    assert (record / "status").read_text() == "failed\n"
    # a suite flag together with point flags, a bad number, a bad suite file: exit 2 before anything is sent
    res = deployctl_bench("-i", str(inv), "--suite", "long-context", "--input", "64")
    assert res.returncode == 2 and "both choose the points" in res.stderr, res.stderr
    res = deployctl_bench("-i", str(inv), "--concurrency", "4,x")
    assert res.returncode == 2 and "'x' is not a whole number" in res.stderr, res.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("points:\n  - {input: 1024, output: 0, concurrency: 1, speed: 3}\n")
    res = deployctl_bench("-i", str(inv), "--suite", str(bad), "--output", "json")
    assert res.returncode == 2
    err = json.loads(res.stdout)
    assert {p["path"] for p in err["problems"]} == {"points[0].output", "points[0].speed"}, err
