"""Memory fit per die against the published minimum hardware (planner-math.md §2, §4.2)."""

from __future__ import annotations

import pytest

from deployctl.core.errors import LayoutError
from deployctl.core.input.raw import parse_yaml
from deployctl.core.sizing.planner import plan_layout
from deployctl.app.inventory import validate_inventory
from support.inventory import synthetic as inventory


def plan_of(text: str):
    from pathlib import Path

    return plan_layout(validate_inventory(parse_yaml(text, "t.yaml", Path("."))))


def test_r1_w8a8_does_not_fit_one_a2_server():
    with pytest.raises(LayoutError) as err:
        plan_of(inventory("deepseek-r1", "w8a8", 1, "single"))
    text = err.value.render()
    assert "does not fit" in text
    assert "GB per die" in text and "usable" in text      # the numbers: needed vs available
    assert "w4a8" in err.value.hint                       # the smaller quantization is suggested
    assert err.value.exit_code == 2


@pytest.mark.parametrize("preset", ["tp-pp", "dp-ep"])
def test_r1_w8a8_fits_two_a2_servers(preset):
    plan = plan_of(inventory("deepseek-r1", "w8a8", 2, preset))
    mem = plan.instances[0].memory
    assert mem.fits and mem.kv_budget_gb > 5
    assert 38 < mem.weights_gb < 48            # ~673 GB of W8A8 weights over 16 dies, plus replicas


def test_v32_bf16_needs_four_a2_servers():
    with pytest.raises(LayoutError, match="does not fit in memory"):
        plan_of(inventory("deepseek-v3.2", "bf16", 2, "dp-ep", version="3.0"))
    plan = plan_of(inventory("deepseek-v3.2", "bf16", 4, "dp-ep", version="3.0"))
    assert plan.instances[0].memory.fits


def test_r1_w8a8_fits_one_a3_server():
    # vllm-ascend: R1 W8A8 "requires 1 Atlas 800 A3 (64G x 16) node or 2 Atlas 800 A2"
    plan = plan_of(inventory("deepseek-r1", "w8a8", 1, "single", hardware="a3", moe_tp=1))
    assert plan.instances[0].memory.fits


def test_qwen3_235b_w8a8_fits_one_a2_server_with_gqa_kv():
    plan = plan_of(inventory("qwen3-235b-a22b", "w8a8", 1, "single"))
    mem = plan.instances[0].memory
    assert mem.fits
    # GQA: 4 KV heads < TP8, so each rank keeps one head: 94 layers x 2 x 1 x 128 x 2 bytes
    assert mem.kv_bytes_per_token == 94 * 2 * 1 * 128 * 2


def test_mla_kv_is_not_split_by_tp_but_by_pipeline_stage():
    one = plan_of(inventory("deepseek-r1", "w8a8", 2, "dp-ep")).instances[0].memory
    two = plan_of(inventory("deepseek-r1", "w8a8", 2, "tp-pp")).instances[0].memory
    assert one.kv_bytes_per_token == 61 * 576 * 2               # 70,272 B: DeepSeek's published figure
    assert two.kv_bytes_per_token == 31 * 576 * 2               # pp=2: 31 layers on the first stage


def test_v32_adds_the_indexer_cache_and_c8_halves_it():
    from deployctl.core import catalog
    from deployctl.core.models.plan import Degrees
    from deployctl.core.sizing.memory import kv_bytes_per_token

    bf16 = plan_of(inventory("deepseek-v3.2", "w8a8", 2, "dp-ep", version="3.0")).instances[0].memory
    assert bf16.kv_bytes_per_token == 61 * (576 * 2 + 128 * 2)
    # MindIE does not run C8 for V3.2 (tests/core/engines); the memory model still sizes it for the engines that do
    c8 = kv_bytes_per_token(catalog.models()["deepseek-v3.2"], "w8a8c8", Degrees(tp=8, dp=2, moe_ep=16))
    assert c8 == 61 * (576 + 128)


def test_memory_fraction_override_changes_the_budget():
    base = plan_of(inventory("deepseek-r1", "w8a8", 2, "dp-ep")).instances[0].memory
    text = inventory("deepseek-r1", "w8a8", 2, "dp-ep", env={"NPU_MEMORY_FRACTION": 0.8})
    low = plan_of(text).instances[0].memory
    assert low.memory_fraction == 0.8
    assert low.kv_budget_gb < base.kv_budget_gb


def test_refuses_when_one_max_length_sequence_does_not_fit():
    text = inventory("deepseek-r1", "w8a8", 2, "tp-pp").replace("max_seq_len: 8192", "max_seq_len: 4000000")
    with pytest.raises(LayoutError) as err:
        plan_of(text)
    assert "less than one max_seq_len sequence" in err.value.render()
