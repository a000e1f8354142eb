"""Step time by attention kind and by what the layout sets (issue 27 item 2): core.step on plain Setups."""

from __future__ import annotations

import pytest
from perflib import setup

from deployctl.core.sizing.calibration import FITTED
from deployctl.core.sizing.step import step


def _part(st, name):
    return next(p for p in st.parts if p.name.startswith(name))


def _decode(ctx, **kw):
    return step(setup(**kw), "decode", 32, ctx, FITTED)


def test_v32_top_k_caps_the_decode_growth_at_64k():
    grow = {m: _decode(65536, model=m).total / _decode(4096, model=m).total for m in ("deepseek-v3", "deepseek-v3.2")}
    assert grow["deepseek-v3"] > 2.0                       # the whole 64K latent is read per token
    assert grow["deepseek-v3.2"] < grow["deepseek-v3"] / 2   # attention capped at 2,048 tokens; the indexer is O(L)
    # the indexer still grows with the context: the V3.2 step at 64K is not that at 4K
    assert _decode(65536, model="deepseek-v3.2").total > _decode(4096, model="deepseek-v3.2").total


def test_v32_prefill_indexer_grows_faster_than_linear():
    short, long_ = (step(setup(model="deepseek-v3.2"), "prefill", n, n, FITTED) for n in (4096, 32768))
    per_token = [_part(st, "attention core").flops / n for st, n in ((short, 4096), (long_, 32768))]
    assert per_token[1] > 2 * per_token[0]                  # O(L^2) indexer scoring over the prompt


@pytest.mark.parametrize("tp,share", [(1, 1.0), (2, 0.5), (4, 0.25), (8, 0.25)])
def test_gqa_kv_read_scales_with_kv_heads_over_tp(tp, share):
    def kv(t):
        return _part(step(setup(model="qwen3-235b-a22b", tp=t, dp=32 // t), "decode", 8, 8192, FITTED),
                     "attention core").bytes
    # 4 KV heads: split by TP down to one head per rank, replicated beyond
    assert kv(tp) == pytest.approx(kv(1) * share)


def test_hybrid_reads_kv_only_on_full_layers():
    from deployctl.core import catalog

    base = catalog.models()["qwen3-235b-a22b"]
    state = 8 << 20
    hybrid = base.model_copy(update={
        "key": "hybrid-test", "kv": base.kv.model_copy(update={"kind": "hybrid", "full_layers": base.layers // 4,
                                                               "state_bytes_per_seq": state, "state_split": 4})})
    seqs, ctx = 8, 16384
    full = _part(step(setup(model="qwen3-235b-a22b", tp=4, dp=8), "decode", seqs, ctx, FITTED), "attention core")
    hyb = _part(step(setup(model="hybrid-test", info=hybrid, tp=4, dp=8), "decode", seqs, ctx, FITTED), "attention core")
    # a quarter of the layers read KV; every sequence reads its fixed linear state once (split over 4 ranks)
    share = (base.layers // 4) / base.layers
    assert hyb.bytes == pytest.approx(full.bytes * share + seqs * state / 4)
    longer = _part(step(setup(model="hybrid-test", info=hybrid, tp=4, dp=8), "decode", seqs, 2 * ctx, FITTED), "attention core")
    assert longer.bytes - hyb.bytes == pytest.approx(full.bytes * share)     # the state does not grow with context


def test_c8_halves_the_kv_bound_term():
    c16, c8 = (_part(_decode(65536, model="deepseek-v3.2", quant=q), "attention core") for q in ("w8a8", "w8a8c8"))
    assert c8.bytes == pytest.approx(c16.bytes / 2)
    kv_time = [step(setup(model="deepseek-v3.2", quant=q), "decode", 32, 65536, FITTED).part_time(p)
               for q, p in (("w8a8", c16), ("w8a8c8", c8))]
    assert kv_time[1] < kv_time[0]


def test_w4a8_halves_the_expert_bytes():
    w8, w4 = (_part(_decode(4096, quant=q), "routed experts").bytes for q in ("w8a8", "w4a8"))
    assert w4 == pytest.approx(w8 / 2)


def test_o_proj_tp_trades_weight_reads_for_a_gather():
    dp_only, local_tp = (_decode(4096, tp=1, dp=32, o_proj_tp=o) for o in (None, 8))
    assert _part(local_tp, "attention weights").bytes < _part(dp_only, "attention weights").bytes
    assert _part(local_tp, "attention weights").flops == pytest.approx(_part(dp_only, "attention weights").flops)
    assert not any(k.startswith("o_proj TP") for k in dp_only.comm)
    assert any(k.startswith("o_proj TP") and v > 0 for k, v in local_tp.comm.items())


def test_lm_head_tp_reads_less_and_gathers():
    plain, wide = (_decode(4096, tp=1, dp=32, lm_head_tp=h) for h in (None, 8))
    assert _part(wide, "lm_head").bytes == pytest.approx(_part(plain, "lm_head").bytes / 8)
    assert any(k.startswith("lm_head TP") for k in wide.comm)


def test_two_microbatches_hide_communication_above_the_decode_threshold():
    kw = dict(tp=1, dp=32, microbatches=2, dbo_decode_tokens=32)
    small, big = step(setup(**kw), "decode", 16, 4096, FITTED), step(setup(**kw), "decode", 64, 4096, FITTED)
    assert not small.overlap and big.overlap
    plain = step(setup(tp=1, dp=32), "decode", 64, 4096, FITTED)
    assert big.total < plain.total


def test_dbo_is_read_from_the_engine_settings():
    from types import SimpleNamespace

    from deployctl.core.engines.vllm_ascend.overlap import overlap_of

    def eng(d):
        return SimpleNamespace(model_dump=lambda: d)

    assert overlap_of(eng({"env": {"VLLM_ASCEND_ENABLE_DBO": "1"}}))[0] == 32
    assert overlap_of(eng({"extra_args": ["--enable-dbo", "--dbo-decode-token-threshold 64"]}))[0] in (32, 64)
    assert overlap_of(eng({"args": "--enable-dbo --dbo-decode-token-threshold=64"}))[0] == 64
    assert overlap_of(eng({"env": {"VLLM_ASCEND_ENABLE_DBO": "0"}})) == (0, "")
    assert overlap_of(eng({})) == (0, "")
