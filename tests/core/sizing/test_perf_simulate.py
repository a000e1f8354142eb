"""The serving-loop simulation (deployctl.core.sizing.simulate): behaviour on simple step times, then on real plans."""

from __future__ import annotations

from pathlib import Path

import pytest

from deployctl.core.sizing.clients import Client
from deployctl.core.sizing.simulate import PrefillSide, Sched, simulate
from perflib import plan

EXAMPLES = Path(__file__).resolve().parents[3] / "inventories" / "examples"


class Lin:
    """Step times linear in what they process (seconds)."""

    def __init__(self, base=0.02, per_seq=0.0005, prefill_base=0.01, per_token=0.0001):
        self.base, self.per_seq, self.pb, self.pt = base, per_seq, prefill_base, per_token
        self.prefills: list[float] = []

    def decode(self, batch, ctx):
        return self.base + self.per_seq * batch + 1e-8 * batch * ctx

    def prefill(self, tokens):
        self.prefills.append(tokens)
        return self.pb + self.pt * tokens

    def mixed(self, batch, ctx, tokens):
        return self.decode(batch, ctx) + self.pt * tokens


BIG = 1e9


def test_closed_loop_ttft_rises_with_concurrency():
    p50 = [simulate(Client(1000, 100, concurrency=c), Sched(8192, 256, BIG), Lin()).dist("ttft")["p50"]
           for c in (1, 4, 16, 64)]
    assert p50 == sorted(p50) and p50[-1] > 3 * p50[0]


def test_simultaneous_start_queues_the_first_wave_one_prefill_after_another():
    """MindIE-style separate batches with a budget of one prompt: the n-th client of the first wave waits for the
    n - 1 prefills before its own, so the last one's TTFT is the sum of the prefills."""
    steps = Lin()
    r = simulate(Client(1000, 100, concurrency=4), Sched(1000, 256, BIG, chunked=False), steps)
    one = steps.pb + steps.pt * 1000
    assert r.first_wave_ttft == pytest.approx([one, 2 * one, 3 * one, 4 * one])


def test_chunked_prefill_takes_the_wave_in_one_budget():
    r = simulate(Client(1000, 100, concurrency=4), Sched(8192, 256, BIG, chunked=True), Lin())
    assert r.first_wave_ttft == pytest.approx([0.01 + 0.0001 * 4000] * 4)


def _pd(concurrency: int, servers: float = 1, transfer_s: float = 0.0):
    """A P/D run: prompts of 1000 tokens, one prompt per prefill batch, 50 output tokens."""
    lin = Lin()
    pside = PrefillSide(steps=lin, sched=Sched(1000, 1, 0), servers=servers, transfer_s=transfer_s,
                        transfer_s_per_token=0.0)
    return simulate(Client(1000, 50, concurrency=concurrency), Sched(8192, 256, BIG), lin, pside), lin


def test_pd_decode_admission_waits_for_the_kv_transfer():
    a, lin = _pd(1)
    b, _ = _pd(1, transfer_s=0.5)
    # concurrency 1: prefill (0.11 s) + transfer + the first decode step
    assert a.ttft[0] == pytest.approx(0.11 + lin.decode(1, 1000), rel=1e-3)
    assert b.ttft[0] - a.ttft[0] == pytest.approx(0.5, rel=1e-3)
    assert b.tpot == pytest.approx(a.tpot)


def test_pd_prefill_servers_shared_by_more_decode_groups_queue_longer():
    a, _ = _pd(8)
    b, _ = _pd(8, servers=0.5)
    assert b.dist("ttft")["p90"] > a.dist("ttft")["p90"]


def test_kv_full_preempts_and_lengthens_ttft():
    roomy = simulate(Client(1000, 100, concurrency=32), Sched(8192, 256, BIG), Lin())
    tight = simulate(Client(1000, 100, concurrency=32), Sched(8192, 256, 20_000), Lin())
    assert roomy.preemptions == 0 and tight.preemptions > 0
    assert tight.dist("ttft")["p50"] > roomy.dist("ttft")["p50"]
    assert len(tight.e2e) == len(roomy.e2e) == 128          # every request still completes


def test_vllm_admits_on_the_first_chunk_and_preempts_the_newest():
    """vLLM V1: three 1000-token prompts enter together on their first 512-token chunks (1,536 of 2,500 KV
    tokens), their second chunks do not all fit, so the newest is preempted and recomputed after the others: its
    TTFT is the longest. Reserving whole prompts (MindIE's path) never preempts here."""
    r = simulate(Client(1000, 50, concurrency=3, requests=3), Sched(512, 256, 2500, chunked=True), Lin())
    assert r.preemptions >= 1 and len(r.e2e) == 3
    assert r.first_wave_ttft[2] == max(r.first_wave_ttft) > 2 * r.first_wave_ttft[0]
    whole = simulate(Client(1000, 50, concurrency=3, requests=3), Sched(1000, 256, 2500, chunked=False), Lin())
    assert whole.preemptions == 0 and len(whole.e2e) == 3


def test_a_request_the_kv_cache_can_never_hold_is_not_admitted():
    r = simulate(Client(3000, 50, concurrency=1, requests=2), Sched(512, 256, 2500, chunked=True), Lin())
    assert r.e2e == []


def test_batch_limit_queues_beyond_it():
    free = simulate(Client(1000, 100, concurrency=32), Sched(8192, 256, BIG), Lin())
    capped = simulate(Client(1000, 100, concurrency=32), Sched(8192, 8, BIG), Lin())
    assert capped.dist("ttft")["p90"] > 2 * free.dist("ttft")["p90"]


def test_mtp_emits_accepted_drafts_per_step():
    plain = simulate(Client(100, 201, concurrency=1), Sched(8192, 256, BIG), Lin())
    mtp = simulate(Client(100, 201, concurrency=1), Sched(8192, 256, BIG, drafts=1, accepted=0.7), Lin())
    assert mtp.tpot[0] == pytest.approx(plain.tpot[0] / 1.7, rel=0.03)


def test_same_seed_same_numbers_and_the_seed_matters():
    def run(seed):
        return simulate(Client(1000, 100, mode="rate", rate=5.0, concurrency=0, spread=0.5, requests=100, seed=seed),
                        Sched(8192, 256, BIG), Lin())

    a, b, c = run(1), run(1), run(2)
    assert (a.ttft, a.tpot, a.throughput) == (b.ttft, b.tpot, b.throughput)
    assert a.ttft != c.ttft


def test_poisson_rate_below_capacity_keeps_ttft_near_one_prefill():
    r = simulate(Client(1000, 100, mode="rate", rate=0.5, concurrency=0, requests=100), Sched(8192, 256, BIG), Lin())
    assert r.dist("ttft")["p50"] < 0.2
    assert r.throughput == pytest.approx(0.5 * 100, rel=0.3)


def test_a_rate_clients_concurrency_ceiling_bounds_the_groups_it_keeps_busy():
    """One request in flight at a time (AISBench batch_size 1 with a request rate) reaches one DP group, however
    many the plan has: the deployment's throughput is one group's, not one group's times the group count."""
    from deployctl.core.sizing.estimate import context
    from deployctl.core.sizing.serving import simulate_plan

    ctx = context(plan("a2-4x8-dp-ep"))
    assert ctx.decoders * ctx.setups[ctx.decoder.name].dp > 1
    one = simulate_plan(ctx, Client(4096, 256, mode="rate", rate=1.0, concurrency=1, requests=8))
    open_loop = simulate_plan(ctx, Client(4096, 256, mode="rate", rate=1.0, concurrency=0, requests=8))
    assert one.groups == 1 and open_loop.groups > 1
    assert one.throughput < open_loop.throughput


def test_plan_estimate_carries_distributions_and_client():
    from deployctl.core.sizing.estimate import estimate_plan
    from deployctl.core.sizing.estimate_types import Workload

    est = estimate_plan(plan("a3-pd-2p1d"), Workload(input_len=2048, output_len=256, concurrency=32))
    d = est.distribution
    for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
        assert d[key]["p50"] <= d[key]["p90"] <= d[key]["p99"]
    assert est.ttft_ms == d["ttft_ms"]["p50"] and est.tpot_ms == d["tpot_ms"]["p50"]
    assert est.client["mode"] == "concurrency" and est.client["concurrency"] == 32
    assert sum(t.ms for t in est.ttft_terms) == pytest.approx(est.ttft_ms, rel=1e-3)


def test_plan_ttft_rises_with_concurrency_under_simultaneous_start():
    from deployctl.core.sizing.estimate import estimate_point

    p = plan("a2-4x8-dp-ep")
    got = [estimate_point(p, 3500, 1500, c)["ttft_ms"] for c in (1, 16, 64)]
    assert got == sorted(got) and got[2] > 3 * got[0]


def test_a_kv_cache_that_holds_no_request_falls_back_to_the_steady_state():
    from deployctl.core.sizing.estimate import context, estimate_plan
    from deployctl.core.sizing.estimate_types import Workload

    p = plan("a2-4x8-dp-ep")
    ctx = context(p)
    inst = ctx.decoder
    tokens = inst.memory.max_tokens * inst.degrees.cp
    est = estimate_plan(p, Workload(input_len=tokens + 10, output_len=16, concurrency=2), ctx=ctx)
    assert "never fit the KV cache" in est.distribution["note"] and est.ttft_ms > 0


def test_which_engines_chunk_prefill_into_decode_steps():
    """vLLM-Ascend's V1 scheduler mixes prefill chunks into decode steps; with chunking off (or 0.11's Ascend
    scheduler without it: the driver's own test) and on MindIE prefill and decode run apart: the simulation's
    schedulers follow what the engine's driver says."""
    import yaml

    from deployctl.core.input.raw import parse_yaml
    from deployctl.app.inventory import validate_inventory
    from deployctl.core.sizing.estimate import context
    from deployctl.core.sizing.serving import sched_of
    from deployctl.core.sizing.planner import plan_layout

    def chunked(example: str, args: list[str] | None = None) -> bool:
        path = EXAMPLES / example
        doc = yaml.safe_load(path.read_text())
        if args is not None:
            doc["engine"]["args"] = args
        p = plan_layout(validate_inventory(parse_yaml(yaml.safe_dump(doc), str(path), path.parent)))
        return sched_of(context(p), p.instances[0]).chunked

    assert chunked("vllm-a2-2x8-v32-dp-ep.yaml")
    assert not chunked("a2-2x8-tp-pp.yaml")
    assert not chunked("vllm-a2-2x8-v32-dp-ep.yaml", ["--no-enable-chunked-prefill"])


def test_each_distribution_carries_the_mean_beside_its_percentiles():
    """Sources publish means as often as medians (issue 40): the mean is of the simulated requests themselves."""
    from deployctl.core.sizing.simulate import Result

    res = Result(ttft=[1.0, 2.0, 9.0], tpot=[0.02, 0.02, 0.05], e2e=[3.0, 4.0, 11.0], throughput=10.0, duration=11.0,
                 steps=30, preemptions=0)
    assert res.dist("ttft") == pytest.approx({"p50": 2.0, "p90": 7.6, "p99": 8.86, "mean": 4.0})
    assert abs(res.dist("tpot")["mean"] - 0.03) < 1e-12
    assert Result(ttft=[], tpot=[], e2e=[], throughput=0.0, duration=0.0, steps=0, preemptions=0).dist("e2e")["mean"] == 0.0
