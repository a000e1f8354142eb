"""Reading a checkpoint's small files: hostile input refused with the file and key, unknown families refused with
what deployctl would need, tensors classified, quantization read from each source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deployctl.io.checkpoint_files import describe
from deployctl.core.checkpoint.files import MAX_CONFIG_BYTES, classify
from deployctl.core.errors import InventoryError
from tests.core.checkpoint.quoted import DSV3, DSV32_INFERENCE, FIXTURES, GLM45, KIMI_K26, QWEN3_235B, real, write

KIMI_K2 = real("kimi-k2-instruct")


def _refused(directory: Path) -> InventoryError:
    with pytest.raises(InventoryError) as exc:
        describe(directory)
    assert exc.value.exit_code == 2
    return exc.value


def test_unknown_architecture_is_refused_naming_it_and_what_is_needed(tmp_path):
    err = _refused(write(tmp_path, {**QWEN3_235B, "architectures": ["LlamaForCausalLM"]}))
    text = err.render()
    assert "'LlamaForCausalLM'" in text and "architectures" in text
    assert "Qwen3MoeForCausalLM" in text and "checkpoint/families/" in text     # what it reads, where a family is added


def test_missing_key_names_the_file_and_key(tmp_path):
    cfg = {k: v for k, v in QWEN3_235B.items() if k != "num_key_value_heads"}
    err = _refused(write(tmp_path, cfg))
    p = err.problems[0]
    assert p.path == "num_key_value_heads" and p.file.endswith("config.json")


def test_wrongly_typed_and_hostile_values_are_refused(tmp_path):
    err = _refused(write(tmp_path / "a", {**QWEN3_235B, "num_hidden_layers": "94"}))
    assert err.problems[0].path == "num_hidden_layers"
    err = _refused(write(tmp_path / "b", {**QWEN3_235B, "num_experts": 10**12}))
    assert err.problems[0].path == "num_experts"
    err = _refused(write(tmp_path / "c", {**QWEN3_235B, "hidden_size": -1}))
    assert err.problems[0].path == "hidden_size"


def test_not_json_too_big_or_not_an_object(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "config.json").write_text("{not json")
    assert "not valid JSON" in _refused(tmp_path / "a").render()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "config.json").write_text(" " * (MAX_CONFIG_BYTES + 1))
    assert "more than" in _refused(tmp_path / "b").render()
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "config.json").write_text("[1, 2]")
    assert "not an object" in _refused(tmp_path / "c").render()
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "config.json").write_text('{"hidden_size": NaN}')
    assert "NaN" in _refused(tmp_path / "d").render()
    assert "config.json" in _refused(tmp_path / "missing").render()
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "config.json").symlink_to("/dev/zero")        # endless: refused, not read
    assert "not a regular file" in _refused(tmp_path / "e").render()


def test_no_architecture_and_bad_index(tmp_path):
    assert "names no architecture" in _refused(write(tmp_path / "a", {"hidden_size": 1})).render()
    err = _refused(write(tmp_path / "b", QWEN3_235B, model__safetensors__index__json={"weight_map": [1, 2]}))
    assert err.problems[0].path == "weight_map" and "index.json" in err.problems[0].file


def test_index_total_is_the_exact_total_and_names_are_classified(tmp_path):
    names = {
        "model.embed_tokens.weight": "embedding", "lm_head.weight": "lm_head", "model.norm.weight": "norms",
        "model.layers.0.self_attn.q_a_proj.weight": "attention", "model.layers.0.self_attn.o_proj.weight": "o_proj",
        "model.layers.0.mlp.gate_proj.weight": "dense_ffn", "model.layers.5.mlp.gate.weight": "router",
        "model.layers.5.mlp.gate.e_score_correction_bias": "router",
        "model.layers.5.mlp.experts.17.down_proj.weight": "routed_experts",
        "model.layers.5.mlp.shared_experts.up_proj.weight": "shared_experts",
        "model.layers.5.self_attn.indexer.wk.weight": "indexer", "model.layers.61.eh_proj.weight": "mtp",
        "model.layers.7.block_sparse_moe.experts.3.w1.weight": "routed_experts",
        "model.layers.7.linear_attn.in_proj_qkvz.weight": "attention", "mtp.fc.weight": "mtp",
    }
    for name, cls in names.items():
        assert classify(name, 61) == cls, name
    d = describe(write(tmp_path, DSV3, model__safetensors__index__json={
        "metadata": {"total_size": 688_000_000_000}, "weight_map": {n: "s1" for n in names}}))
    assert d.weights.index_total == 688_000_000_000 and d.weights.total == 688_000_000_000
    assert d.weights.index_tensors["routed_experts"] == 2 and d.weights.index_tensors["mtp"] == 2


def test_trimmed_real_index_keeps_the_computed_total():
    """tt-metal's trimmed DeepSeek-V3 index says total_size 0: the computed total stands, the names are counted."""
    d = describe(FIXTURES / "deepseek-v3")
    assert d.weights.index_total is None and d.weights.total == d.weights.computed_total
    assert d.weights.index_tensors == {"attention": 8, "o_proj": 2}


def test_description_of_the_real_deepseek_config():
    d = describe(FIXTURES / "deepseek-v3")
    assert (d.family, d.attention, d.layers, d.dense_layers, d.moe_layers) == ("deepseek_v3", "mla", 61, 3, 58)
    assert (d.routed_experts, d.shared_experts, d.experts_per_token, d.mtp_layers) == (256, 1, 8, 1)
    assert d.kv_elements_per_token_layer() == 576 and d.vocab == 129280 and not d.tied_embeddings


def test_families_from_their_real_configs():
    k2 = describe(FIXTURES / "kimi-k2-instruct")
    assert (k2.family, k2.routed_experts, k2.mtp_layers, k2.quantization.scheme) == ("kimi_k2", 384, 0, "fp8")
    v32 = describe(FIXTURES / "deepseek-v3.2")
    assert (v32.family, v32.indexer.n_heads, v32.indexer.head_dim, v32.indexer.topk) == ("deepseek_v32", 64, 128, 2048)
    air = describe(FIXTURES / "glm-4.5-air")
    assert (air.family, air.attention, air.layers, air.dense_layers, air.routed_experts, air.mtp_layers) == (
        "glm4_moe", "gqa", 46, 1, 128, 1)
    nxt = describe(FIXTURES / "qwen3-next-80b-a3b-thinking")
    assert (nxt.linear.layers, nxt.full_attention_layers, nxt.shared_experts, nxt.experts_per_token) == (36, 12, 1, 10)
    q235 = describe(FIXTURES / "qwen3-235b-a22b")
    assert (q235.family, q235.layers, q235.routed_experts, q235.kv_heads, q235.head_dim) == ("qwen3_moe", 94, 128, 4, 128)
    mm = describe(FIXTURES / "minimax-m2")
    assert (mm.family, mm.attention, mm.layers, mm.routed_experts, mm.experts_per_token) == ("minimax_m2", "gqa", 62,
                                                                                           256, 8)
    assert mm.quantization.scheme == "fp8" and mm.notes                                    # MTP weights unverified
    dense = describe(FIXTURES / "qwen3-32b")
    assert dense.routed_experts == 0 and dense.dense_layers == dense.layers == 64


def test_the_quoted_glm45_against_the_real_glm47_file(tmp_path):
    """GLM-4.5's config stays QUOTED (its file was not found): every key it shares with aiconfigurator's abridged
    GLM-4.7 file (same architecture, one vLLM-Ascend guide for GLM-4.5/4.6/4.7) has the same value. That file drops
    attention_bias, use_qk_norm and num_nextn_predict_layers, so read from it GLM-4.7 has no MTP layer; GLM-4.5-Air's
    real file has one (and qkv bias), which the quoted GLM-4.5 keeps (unverified)."""
    glm47 = real("glm-4.7-fp8")
    shared = set(GLM45) & set(glm47)
    assert len(shared) >= 15 and {k: GLM45[k] for k in shared} == {k: glm47[k] for k in shared}
    assert {"attention_bias", "num_nextn_predict_layers", "quantization_config"}.isdisjoint(glm47)
    d47, d45 = describe(FIXTURES / "glm-4.7-fp8"), describe(write(tmp_path, GLM45))
    assert (d47.mtp_layers, d45.mtp_layers, d47.dense_layers, d47.routed_experts) == (0, 1, 3, 160)
    assert d47.quantization.scheme == "bf16"          # the FP8 checkpoint's quantization_config is not in this copy


def test_the_real_v32_config_has_deepseek_v3s_trunk_and_the_inference_configs_indexer():
    """DeepSeek-V3.2's real config.json against DeepSeek-V3's real config.json (every trunk key equal) and DeepSeek's
    own V3.2-Exp inference config (its key names; the indexer's three values equal)."""
    v32 = real("deepseek-v3.2")
    trunk = ("vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
             "first_k_dense_replace", "num_attention_heads", "n_routed_experts", "n_shared_experts",
             "num_experts_per_tok", "n_group", "topk_group", "routed_scaling_factor", "scoring_func", "q_lora_rank",
             "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "num_nextn_predict_layers")
    assert {k: v32[k] for k in trunk} == {k: DSV3[k] for k in trunk}
    assert {k: v32[k] for k in ("index_n_heads", "index_head_dim", "index_topk")} == {
        k: DSV32_INFERENCE[k] for k in ("index_n_heads", "index_head_dim", "index_topk")}


def test_the_v32_exp_inference_config_has_deepseek_v3s_trunk():
    """DeepSeek's real V3.2-Exp inference config (its own key names) against DeepSeek-V3's real config.json: every
    trunk value is equal (the built-in deepseek-v3.2-exp entry is V3.2's architecture)."""
    names = {"vocab_size": "vocab_size", "dim": "hidden_size", "inter_dim": "intermediate_size",
             "moe_inter_dim": "moe_intermediate_size", "n_layers": "num_hidden_layers",
             "n_dense_layers": "first_k_dense_replace", "n_heads": "num_attention_heads",
             "n_routed_experts": "n_routed_experts", "n_shared_experts": "n_shared_experts",
             "n_activated_experts": "num_experts_per_tok", "n_expert_groups": "n_group", "n_limited_groups": "topk_group",
             "route_scale": "routed_scaling_factor", "score_func": "scoring_func", "q_lora_rank": "q_lora_rank",
             "kv_lora_rank": "kv_lora_rank", "qk_nope_head_dim": "qk_nope_head_dim",
             "qk_rope_head_dim": "qk_rope_head_dim", "v_head_dim": "v_head_dim"}
    assert {k: DSV32_INFERENCE[k] for k in names} == {k: DSV3[v] for k, v in names.items()}
    assert DSV32_INFERENCE["dtype"] == "fp8" and DSV3["quantization_config"]["quant_method"] == "fp8"


def test_the_real_kimi_k26_config():
    """Kimi-K2.6's real config.json: the language model under text_config is read (vision tower noted), INT4
    group-32 routed experts; its text_config has Kimi-K2-Instruct's trunk (both real files)."""
    d = describe(FIXTURES / "kimi-k2.6")
    assert (d.family, d.attention, d.layers, d.dense_layers, d.routed_experts, d.mtp_layers) == ("kimi_k2", "mla", 61,
                                                                                                 1, 384, 0)
    assert d.quantization.scheme == "w4a16" and any("vision" in n for n in d.notes)
    trunk = ("hidden_size", "num_hidden_layers", "first_k_dense_replace", "num_attention_heads", "n_routed_experts",
             "n_shared_experts", "num_experts_per_tok", "kv_lora_rank", "qk_rope_head_dim", "moe_intermediate_size",
             "vocab_size", "num_nextn_predict_layers")
    assert {k: KIMI_K26["text_config"][k] for k in trunk} == {k: KIMI_K2[k] for k in trunk}


def test_kimi_k25_language_model_under_text_config(tmp_path):
    cfg = {"architectures": ["KimiK25ForConditionalGeneration"], "text_config": KIMI_K2}
    d = describe(write(tmp_path / "a", cfg))
    assert d.family == "kimi_k2" and any("vision" in n for n in d.notes)
    assert "text_config" in _refused(write(tmp_path / "b", {"architectures": ["KimiK25ForConditionalGeneration"]})).render()


def test_int4_experts_via_compressed_tensors(tmp_path):
    """Kimi-K2-Thinking's form (planner-math.md §2.3): INT4 group-32 routed experts, attention and shared experts
    unquantized."""
    qc = {"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"],
          "config_groups": {"group_0": {"weights": {"num_bits": 4, "group_size": 32}, "targets": ["Linear"]}}}
    d = describe(write(tmp_path, {**KIMI_K2, "quantization_config": qc}))
    b = d.quantization.bytes_per_param
    assert d.quantization.scheme == "w4a16"
    assert b["routed_experts"] == pytest.approx(0.5 + 2 / 32) and b["attention"] == 2 and b["shared_experts"] == 2


def test_msmodelslim_description_gives_bytes_per_class(tmp_path):
    desc = {"model_quant_type": "W8A8_DYNAMIC", "model.embed_tokens.weight": "FLOAT",
            "model.layers.0.self_attn.q_proj.weight": "W8A8_DYNAMIC",
            "model.layers.0.mlp.experts.0.up_proj.weight": "W4A8_DYNAMIC",
            "model.layers.0.mlp.gate.weight": "FLOAT"}
    d = describe(write(tmp_path, QWEN3_235B, quant_model_description_w8a8_dynamic__json=desc))
    q = d.quantization
    assert q.scheme == "w8a8" and "quant_model_description" in q.source
    assert q.bytes_per_param["attention"] == 1 and q.bytes_per_param["routed_experts"] == 0.5
    assert q.bytes_per_param["embedding"] == 2


def test_unknown_quantization_method_is_refused(tmp_path):
    err = _refused(write(tmp_path, {**QWEN3_235B, "quantization_config": {"quant_method": "gguf"}}))
    assert err.problems[0].path == "quantization_config.quant_method"


def test_quant_description_must_map_names_to_type_names(tmp_path):
    err = _refused(write(tmp_path, QWEN3_235B, quant_model_description__json={"a.weight": {"x": 1}}))
    assert "quantization type" in err.render()


def test_every_fixture_and_shipped_checkpoint_names_its_source():
    """Facts with their source: each checkpoint directory has a SOURCE naming repository, commit and path of every
    file it holds (or saying it is unverified)."""
    import re

    from deployctl.core import catalog

    dirs = [*FIXTURES.iterdir(), *(Path(catalog.__file__).parent / "checkpoints").iterdir()]
    for d in (d for d in dirs if d.is_dir()):
        source = (d / "SOURCE").read_text()
        for f in d.iterdir():
            if f.name != "SOURCE":
                assert f.name in source, (d, f.name)
        assert re.search(r"commit: +[0-9a-f]{40}", source), d


@pytest.mark.parametrize("newer,base", [("minimax-m2.5", "minimax-m2"), ("minimax-m2.7", "minimax-m2"),
                                        ("kimi-k2.5", "kimi-k2.6")])
def test_later_releases_read_with_their_predecessors_sizes(newer, base):
    """MiniMax-M2.5/M2.7 and Kimi-K2.5 (real files, aiconfigurator) against the real M2 and K2.6 files: the same
    family, parameters per class, cache layout and quantization (the conformance corpus sizes M2.5/M2.7 from theirs)."""
    a, b = describe(FIXTURES / newer), describe(FIXTURES / base)
    assert (a.family, a.params, a.kv_elements_per_token_layer(), a.quantization) == (
        b.family, b.params, b.kv_elements_per_token_layer(), b.quantization)
