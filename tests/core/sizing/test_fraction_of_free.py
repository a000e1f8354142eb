"""memory_fit with a fraction of the memory free before the weights load (MemoryInputs.fraction_of_free): the
fraction holds weights and KV cache only, the workspace lives in the rest. Numbers from a catalog model, checked
against the formula written out here, not against the function's own output."""

from __future__ import annotations

from deployctl.core import catalog
from deployctl.core.models.plan import Degrees
from deployctl.core.sizing.memory import GB, GIB, RUNTIME_GB, memory_fit, weights_per_die


def _fit(fraction: float, of_free: bool, prefill: int = 16384):
    m = catalog.models()["qwen3-235b-a22b"]
    d = Degrees(tp=16, moe_tp=16)
    return m, d, memory_fit(m, "w8a8", d, hbm_gb=64, fraction=fraction, hccl_buffsize_mb=200, max_seq_len=8192,
                            max_prefill_tokens=prefill, fraction_of_free=of_free, fraction_name="--mem-fraction-static")


def test_the_kv_budget_is_the_fraction_of_the_free_memory_less_the_weights():
    m, d, fit = _fit(0.8, True)
    weights = sum(weights_per_die(m, "w8a8", d).values())
    free = 64 * GIB - RUNTIME_GB * GB - fit.comm_buffers_gb * GB
    assert abs(fit.kv_budget_gb * GB - (0.8 * free - weights)) < 0.01 * GB
    _, _, hbm_share = _fit(0.8, False)
    # the workspace and the buffers no longer come out of the KV budget
    assert fit.kv_budget_gb > hbm_share.kv_budget_gb
    assert fit.fits


def test_a_fraction_that_leaves_little_room_for_the_workspace_is_said_not_refused():
    """SGLang's own guides run 0.9 with 65,536 prefill tokens on A2 (tests/conformance/sglang s04): deployctl's
    workspace term is an estimate, so it warns."""
    _, _, fit = _fit(0.99, True, prefill=262144)
    assert fit.fits
    assert any("workspace" in n and "--mem-fraction-static 0.99" in n for n in fit.notes)


def test_a_short_cache_is_a_note_only_for_an_engine_that_starts_with_one():
    m = catalog.models()["qwen3-235b-a22b"]
    d = Degrees(tp=16, moe_tp=16)
    kw = dict(hbm_gb=64, fraction=0.8, hccl_buffsize_mb=200, max_seq_len=10_000_000, max_prefill_tokens=16384,
              fraction_of_free=True)
    refused = memory_fit(m, "w8a8", d, **kw)
    assert not refused.fits and "less than one max_seq_len" in refused.reason
    said = memory_fit(m, "w8a8", d, starts_with_short_cache=True, **kw)
    assert said.fits and any("caps a request" in n for n in said.notes)


def test_context_parallel_multiplies_the_sequences_only_where_it_spreads_the_cache():
    """cp ranks that split a sequence's cache hold cp times the tokens together (MindIE); ranks that each keep the
    whole sequence (SGLang's prefill CP, MemoryInputs.kv_spread_over_cp False) hold what one rank holds."""
    m = catalog.models()["qwen3-235b-a22b"]
    d = Degrees(tp=2, cp=8, moe_tp=1, moe_ep=16)
    kw = dict(hbm_gb=64, fraction=0.8, hccl_buffsize_mb=200, max_seq_len=8192, max_prefill_tokens=16384,
              fraction_of_free=True)
    spread, whole = memory_fit(m, "w8a8", d, **kw), memory_fit(m, "w8a8", d, kv_spread_over_cp=False, **kw)
    assert spread.max_tokens == whole.max_tokens > 8192 * 8
    assert spread.max_sequences == (spread.max_tokens * 8) // 8192
    assert whole.max_sequences == whole.max_tokens // 8192
