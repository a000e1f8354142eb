"""The workload as published (issue 40): open-loop clients at a request rate (Poisson or evenly spaced), a prefix
cache hit rate, and the error band every estimate carries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deployctl.core.sizing.clients import Client, arrivals, cached, from_shared_prefix
from deployctl.core.sizing.simulate import Sched, simulate
from perflib import plan
from test_perf_simulate import BIG, Lin

EXAMPLES = Path(__file__).resolve().parents[3] / "inventories" / "examples"


def test_fixed_arrivals_are_evenly_spaced_and_poisson_ones_are_not():
    import random

    fixed = arrivals(Client(100, 10, mode="rate", rate=4.0, arrival="fixed"), 5, random.Random(0))
    assert fixed == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])
    gaps = [b - a for a, b in zip(*[arrivals(Client(100, 10, mode="rate", rate=4.0), 50, random.Random(0))] * 2)]
    pois = arrivals(Client(100, 10, mode="rate", rate=4.0), 50, random.Random(0))
    gaps = [b - a for a, b in zip(pois, pois[1:])]
    assert max(gaps) > 2 * min(gaps) and sum(gaps) / len(gaps) == pytest.approx(0.25, rel=0.4)
    with pytest.raises(ValueError):
        Client(100, 10, mode="rate", rate=1.0, arrival="bursty")


def test_evenly_spaced_arrivals_queue_less_than_poisson_ones_at_the_same_rate():
    """Near capacity, Poisson bunches arrivals: its p99 TTFT is above the evenly spaced client's."""
    sched, steps = Sched(2048, 8, BIG), Lin(base=0.02, per_seq=0.004, prefill_base=0.01, per_token=0.0002)
    p99 = {a: simulate(Client(2000, 50, mode="rate", rate=1.2, concurrency=0, requests=120, arrival=a), sched,
                       steps).dist("ttft")["p99"] for a in ("poisson", "fixed")}
    assert p99["fixed"] < p99["poisson"]


def test_a_rate_below_capacity_bounds_throughput_by_the_rate():
    r = simulate(Client(1000, 100, mode="rate", rate=0.5, concurrency=0, requests=60, arrival="fixed"),
                 Sched(8192, 256, BIG), Lin())
    assert r.throughput == pytest.approx(0.5 * 100, rel=0.1)


def test_a_prefix_hit_skips_the_cached_tokens_of_every_prompt():
    steps = Lin()
    simulate(Client(1000, 10, concurrency=1, requests=3, prefix_hit=0.75), Sched(8192, 256, BIG), steps)
    assert steps.prefills and max(steps.prefills) == 250       # 1000 - 750 cached tokens computed
    assert cached(Client(1000, 10, prefix_hit=0.75), 1000) == 750
    assert cached(Client(4, 10, prefix_hit=0.99), 4) == 3          # at least one token is computed
    assert from_shared_prefix(2048, 4096) == 0.5 and from_shared_prefix(9000, 4096) == 4095 / 4096


@pytest.mark.parametrize("chunked", [True, False])
def test_a_prefix_hit_lowers_ttft_and_keeps_the_kv_of_the_whole_prompt(chunked):
    """vLLM (chunked) and MindIE (whole prompts) schedulers alike: less prefill time, the same KV per request."""
    sched = Sched(4096, 64, BIG, chunked=chunked)
    cold = simulate(Client(4000, 64, concurrency=16, requests=64), sched, Lin())
    warm = simulate(Client(4000, 64, concurrency=16, requests=64, prefix_hit=0.9), sched, Lin())
    assert warm.dist("ttft")["mean"] < 0.5 * cold.dist("ttft")["mean"]
    # a KV cache that holds two whole requests still admits two at a time with the prefix cached
    tight = Sched(4096, 64, 2 * (4000 + 64) + 10, chunked=chunked)
    a = simulate(Client(4000, 64, concurrency=4, requests=8, prefix_hit=0.9), tight, Lin())
    assert len(a.e2e) == 8 and a.preemptions == 0 or chunked


def test_plan_takes_the_rate_and_the_prefix_and_says_so():
    from deployctl.core.sizing.estimate import estimate_plan
    from deployctl.core.sizing.estimate_types import Workload

    p = plan("vllm-a2-2x8-v32-dp-ep")
    base = estimate_plan(p, Workload(input_len=4000, output_len=500))
    slow = estimate_plan(p, Workload(input_len=4000, output_len=500, request_rate=0.2, arrival="fixed"))
    warm = estimate_plan(p, Workload(input_len=4000, output_len=500, prefix_hit=0.9))
    assert slow.output_tokens_per_s == pytest.approx(0.2 * 500, rel=0.15)
    assert slow.output_tokens_per_s < base.output_tokens_per_s
    assert slow.client["mode"] == "rate" and slow.client["arrival"] == "fixed" and slow.client["concurrency"] == 0
    assert slow.ttft_ms < base.ttft_ms and slow.tpot_ms < base.tpot_ms
    assert warm.distribution["ttft_ms"]["mean"] < base.distribution["ttft_ms"]["mean"]
    assert warm.output_tokens_per_s > base.output_tokens_per_s
    assert any("prefix cache: 90%" in a for a in warm.assumptions)
    assert any("open loop: 0.2 requests/s" in a for a in slow.assumptions)


def test_an_engine_without_a_prefix_cache_ignores_the_hit_rate_and_warns():
    from deployctl.core.sizing.estimate import estimate_plan
    from deployctl.core.sizing.estimate_types import Workload

    p = plan("a2-4x8-dp-ep")                      # MindIE: deployctl renders no prefix_cache plugin
    assert not p.engine_spec.prefix_caching(p.inventory)[0]
    base = estimate_plan(p, Workload(input_len=3500, output_len=500, concurrency=8))
    hit = estimate_plan(p, Workload(input_len=3500, output_len=500, concurrency=8, prefix_hit=0.9))
    assert hit.ttft_ms == base.ttft_ms and hit.workload.prefix_hit == 0.0
    assert any("without a prefix cache" in w for w in hit.warnings)


def test_every_estimate_carries_its_error_band_from_the_check_set():
    from deployctl.core.sizing.estimate import estimate_plan
    from deployctl.core.sizing.estimate_types import Workload

    est = estimate_plan(plan("vllm-a2-2x8-v32-dp-ep"), Workload(input_len=3500, output_len=1500, concurrency=16))
    acc = est.accuracy
    band = acc["band"]
    thr = band["output_tokens_per_s"]
    assert thr["mape"] == acc["throughput"]["mape"] and "published check point" in thr["from"]
    assert thr["low"] == pytest.approx(est.output_tokens_per_s * (1 - thr["mape"]), rel=1e-3)
    assert thr["high"] == pytest.approx(est.output_tokens_per_s * (1 + thr["mape"]), rel=1e-3)
    assert "deployctl calibrate" in acc["replaced_by"]


def test_a_users_calibration_replaces_the_band_with_its_own_fit_error():
    from deployctl.core.sizing.accuracy import band, user_mape

    rows = [{"tpot_ms": {"error": 0.1, "fitted": True}, "tokens_per_s": {"error": -0.3, "fitted": True},
             "ttft_ms": {"error": 0.5, "fitted": False}},
            {"tpot_ms": {"error": -0.2, "fitted": True}, "tokens_per_s": {"error": 0.1, "fitted": True},
             "ttft_ms": {"error": None, "fitted": True}}]
    mine = user_mape(rows)
    assert mine == {"user_mape_tpot": 0.15, "user_mape_throughput": 0.2}
    b = band({"tpot": {"mape": 0.5, "points": 3}, "ttft": {"mape": 0.3, "points": 2}, "throughput": None},
             {"tpot_ms": 40.0, "ttft_ms": 1000.0, "output_tokens_per_s": 100.0}, mine)
    assert b["tpot_ms"] == {"low": 34.0, "high": 46.0, "mape": 0.15, "from": "your bench runs (deployctl calibrate)"}
    assert b["ttft_ms"]["mape"] == 0.3 and "check point" in b["ttft_ms"]["from"]
    assert b["output_tokens_per_s"]["mape"] == 0.2


def test_plan_json_carries_mean_percentiles_band_and_the_load_flags(tmp_path):
    from typer.testing import CliRunner

    from deployctl.cli import app

    inv = EXAMPLES / "vllm-a2-2x8-v32-dp-ep.yaml"
    res = CliRunner().invoke(app, ["plan", "-i", str(inv), "--input-len", "4000", "--output-len", "500",
                                   "--request-rate", "0.5", "--arrival", "fixed", "--shared-prefix", "1000",
                                   "--run-dir", str(tmp_path), "-O", "json"])
    assert res.exit_code == 0, res.output
    est = json.loads(res.stdout)["estimate"]
    for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
        assert set(est["distribution"][key]) == {"p50", "p90", "p99", "mean"}
    assert est["workload"]["request_rate"] == 0.5 and est["workload"]["prefix_hit"] == 0.25
    assert set(est["accuracy"]["band"]) == {"ttft_ms", "tpot_ms", "output_tokens_per_s"}
    both = CliRunner().invoke(app, ["plan", "-i", str(inv), "--prefix-hit", "0.5", "--shared-prefix", "10",
                                    "--run-dir", str(tmp_path)])
    from deployctl.core.errors import UsageError

    assert isinstance(both.exception, UsageError) and "both set the prefix hit rate" in str(both.exception)


def test_recommend_at_a_request_rate_keeps_only_layouts_that_sustain_it():
    from deployctl.core.sizing.recommend import Objective, recommend_report

    inv = plan("vllm-a2-2x8-v32-dp-ep").inventory
    easy = recommend_report(inv, Objective(input_len=2000, output_len=200, request_rate=0.05))
    hard = recommend_report(inv, Objective(input_len=2000, output_len=200, request_rate=500.0))
    assert easy.candidates[0].meets_slo and not hard.candidates[0].meets_slo
    assert any("requests/s" in n for n in easy.notes)
