"""model.config_path: plan, estimate and refusals for models described from their checkpoint (issue 26 item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deployctl.core import catalog
from deployctl.io.checkpoint_files import describe
from deployctl.core.checkpoint.planner import model_info
from deployctl.core.errors import InventoryError
from deployctl.core.input.raw import parse_yaml
from deployctl.app.inventory import validate_inventory
from deployctl.core.sizing.planner import plan_layout
from support.inventory import synthetic
from tests.core.checkpoint.quoted import DSV32_INFERENCE, FIXTURES, QWEN3_235B, write

NEXT = FIXTURES / "qwen3-next-80b-a3b-thinking"


def inventory(name: str, config: Path | None, quant: str = "bf16", nodes: int = 1, preset: str = "single",
              hardware: str = "a2", engine: str = "vllm-ascend", max_seq_len: int = 8192) -> str:
    # the image of the hardware (vLLM-Ascend's -a3 builds: deployctl/core/engines/vllm_ascend/images.py)
    image = (f"quay.io/ascend/vllm-ascend:v0.13.0{'-a3' if hardware == 'a3' else ''}" if engine == "vllm-ascend"
             else "mindie:test")
    return synthetic(name, quant, nodes, preset, hardware=hardware, kind=engine, image=image, config_path=config,
                     max_seq_len=max_seq_len)


def plan_of(text: str):
    return plan_layout(validate_inventory(parse_yaml(text, "t.yaml", Path("."))))


def test_dense_qwen3_32b_plans_tp_over_one_a2_server():
    plan = plan_of(inventory("qwen3-32b", FIXTURES / "qwen3-32b"))
    (inst,) = plan.instances
    assert inst.degrees.tp == 8 and inst.memory.fits
    weights = describe(FIXTURES / "qwen3-32b").weights.computed_total
    # all of it split by TP 8 (no experts): within rounding of the plan's 2-decimal GB
    assert inst.memory.weights_gb == pytest.approx(weights / 8 / 1e9, abs=0.02)
    assert inst.memory.kv_bytes_per_token == 64 * 2 * 1 * 128 * 2     # 8 KV heads over TP 8


def test_a_model_not_in_the_catalog_needs_config_path():
    with pytest.raises(InventoryError) as exc:
        plan_of(inventory("qwen3-32b-local", None))
    assert "config_path" in exc.value.render()


def test_a_broken_checkpoint_is_refused_naming_config_path_file_and_key(tmp_path):
    bad = write(tmp_path / "ck", {**QWEN3_235B, "num_experts": "many"})
    with pytest.raises(InventoryError) as exc:
        plan_of(inventory("qwen3-broken", bad))
    paths = [(p.path, p.file) for p in exc.value.problems]
    assert ("model.config_path", "t.yaml") in paths
    assert any(path == "num_experts" and file.endswith("config.json") for path, file in paths)
    assert exc.value.exit_code == 2


def test_qwen3_next_hybrid_state_lowers_the_sequences_held():
    plan = plan_of(inventory("qwen3-next-80b-a3b", NEXT))
    (inst,) = plan.instances
    fit = inst.memory
    assert fit.fits and fit.kv_bytes_per_token == 12 * 2 * 1 * 256 * 2     # 2 KV heads: one per rank past TP 2
    # without the per-sequence state every max_seq_len sequence would cost only its tokens
    assert fit.max_sequences < fit.max_tokens // 8192


def test_deepseek_from_its_checkpoint_plans_and_estimates_like_the_catalog_entry():
    text = inventory("deepseek-v3", None, quant="w8a8", nodes=2, preset="dp-ep", hardware="a3")
    ours = plan_of(text.replace("weights_path: /w", f"weights_path: /w, config_path: '{FIXTURES / 'deepseek-v3'}'"))
    builtin_fit = plan_of(text.replace("name: deepseek-v3", "name: deepseek-r1")).instances[0].memory
    fit = ours.instances[0].memory
    assert fit.kv_bytes_per_token == builtin_fit.kv_bytes_per_token
    assert fit.weights_gb == pytest.approx(builtin_fit.weights_gb, abs=0.05)


def test_estimate_runs_for_an_mla_model_known_only_from_its_checkpoint():
    from deployctl.core.sizing.estimate import estimate_plan
    from deployctl.core.sizing.estimate_types import Workload

    ck = FIXTURES / "kimi-k2-instruct"
    plan = plan_of(inventory("kimi-k2", ck, quant="w8a8", nodes=4, preset="dp-ep", hardware="a3"))
    est = estimate_plan(plan, Workload(input_len=2048, output_len=512))
    assert est.tpot_ms > 0 and est.output_tokens_per_s > 0


def test_checkpoint_numbers_against_the_hand_written_catalog():
    """catalog/models.yaml's hand-written DeepSeek-V3 numbers are the checkpoint's rounded: every term within 0.05%
    except the router (0.00184 B written, 0.001835 B = 7168 x 256 + 256 bias from the config: 0.26%, rounded to 3
    digits). The checkpoint's are exact, and the built-in deepseek-v3/r1 entries use them (models.yaml
    `checkpoint: deepseek-v3`)."""
    hand = catalog._read("models.yaml")["deepseek-v3"]["params_b"]
    ours = catalog.builtin_models()["deepseek-v3"]
    assert ours.checkpoint == "deepseek-v3" and catalog.builtin_models()["deepseek-r1"].params_b == ours.params_b
    for field in ("attention_per_layer", "o_proj_per_layer", "dense_ffn_per_layer", "expert", "embedding", "lm_head"):
        assert getattr(ours.params_b, field) == pytest.approx(hand[field], rel=5e-4), field
    assert ours.params_b.router_per_layer == pytest.approx(0.001835264) != hand["router_per_layer"]
    assert (ours.layers, ours.dense_layers, ours.routed_experts, ours.mtp_layers, ours.kv.latent) == (61, 3, 256, 1, 576)


def test_hand_written_v32_numbers_against_the_real_config():
    """The built-in deepseek-v3.2 entry keeps models.yaml's hand-written numbers; they agree with the description of
    DeepSeek-V3.2's real config.json (tests/fixtures/checkpoints/deepseek-v3.2) within 0.05%, the router 0.26% as
    V3's; the KV layout (576-wide latent, 128-wide indexer key) is also DeepSeek's V3.2-Exp inference config's
    kv_lora_rank + qk_rope_head_dim and index_head_dim."""
    ours = model_info(describe(FIXTURES / "deepseek-v3.2"), "v32")
    hand = catalog.builtin_models()["deepseek-v3.2"]
    for field in ("attention_per_layer", "o_proj_per_layer", "dense_ffn_per_layer", "expert", "embedding", "lm_head"):
        assert getattr(hand.params_b, field) == pytest.approx(getattr(ours.params_b, field), rel=5e-4), field
    assert hand.params_b.router_per_layer == pytest.approx(ours.params_b.router_per_layer, rel=3e-3)
    assert hand.kv.latent == DSV32_INFERENCE["kv_lora_rank"] + DSV32_INFERENCE["qk_rope_head_dim"] == ours.kv.latent
    assert hand.kv.indexer == DSV32_INFERENCE["index_head_dim"] == ours.kv.indexer
    assert (hand.layers, hand.dense_layers, hand.routed_experts) == (ours.layers, ours.dense_layers,
                                                                     ours.routed_experts) == (61, 3, 256)


def test_hand_written_qwen3_235b_numbers_against_its_real_config():
    """The built-in qwen3-235b-a22b entry keeps models.yaml's hand-written numbers; they are the real config.json's
    (tests/fixtures/checkpoints/qwen3-235b-a22b) rounded to 3-4 digits, KV layout included."""
    ours = model_info(describe(FIXTURES / "qwen3-235b-a22b"), "q")
    hand = catalog.builtin_models()["qwen3-235b-a22b"]
    for field in ("attention_per_layer", "o_proj_per_layer", "expert", "router_per_layer", "embedding", "lm_head"):
        assert getattr(hand.params_b, field) == pytest.approx(getattr(ours.params_b, field), rel=1e-2), field
    assert (hand.layers, hand.routed_experts, hand.kv.kv_heads, hand.kv.head_dim) == (ours.layers, 128, 4, 128)


def test_recommend_for_a_dense_model_varies_attention_only():
    from deployctl.core.sizing.recommend import layouts

    inv = validate_inventory(parse_yaml(inventory("qwen3-32b", FIXTURES / "qwen3-32b"), "t.yaml", Path(".")))
    cands = layouts(inv)
    assert not any("moe_tp" in lay for lay in cands)
    assert {lay.get("tp") for lay in cands if lay["preset"] == "dp-ep"} == {1, 2, 4}     # DP8 x TP1 .. DP2 x TP4
    assert {"preset": "single"} in cands              # TP8: DP1 of a dense model, proposed once


def test_hybrid_decode_reads_kv_in_full_layers_and_the_state_of_each_sequence():
    """Qwen3-Next's decode step: KV of the 12 full-attention layers, plus each sequence's linear-attention state,
    not a KV cache in all 48 layers."""
    from deployctl.core.sizing.step import step
    from deployctl.core.sizing.estimate import context

    plan = plan_of(inventory("qwen3-next", NEXT))
    ctx = context(plan)
    su = ctx.setups[plan.instances[0].name]
    st = step(su, "decode", 8, 4096, ctx.consts, seqs_group=8)
    (core,) = [p for p in st.parts if p.name.startswith("attention core")]
    info = catalog.model_of(plan.inventory)
    kv_per_seq_layer = 4096 * 2 * 1 * 256 * 2                     # 2 KV heads over TP 8: one per rank
    state = info.kv.state_bytes_per_seq / 8
    assert core.bytes == pytest.approx(12 * 8 * kv_per_seq_layer + 8 * state)
