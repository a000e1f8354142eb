"""deployctl's sizes of real checkpoints against published numbers (issue 26 item 5).

Weights: the parameter totals the model's publishers or a cited source give, the one measured on-disk size
(DeepSeek-R1 FP8) and the four real model.safetensors.index.json found, all Qwen3 (1.7B as mlx-lm and as
transformers wrote it, a 4B fine-tune, Qwen3-Coder-30B-A3B's MoE): `metadata.total_size` against deployctl's bytes
from config.json, exact.
tt-metal's DeepSeek-V3 index is trimmed (total_size 0); the MLA, hybrid, GLM and MiniMax checkpoints' indexes:
not found (unverified).
KV: vLLM's own per-token formulas, vllm-project/vllm@001cabc1be16a59a70d720ed61a13b678c060a18
vllm/v1/kv_cache_interface.py: FullAttentionSpec.real_page_size_bytes = block_size x num_kv_heads x
(head_size + head_size_v) x dtype size (per layer); MLAAttentionSpec.real_page_size_bytes = block_size x num_kv_heads
(1) x head_size x dtype size, head_size = kv_lora_rank + qk_rope_head_dim (planner-math.md §2.2, DeepSeek's 70,272
B per token); MambaSpec.page_size_bytes = sum of prod(shape) x dtype size over the state tensors.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deployctl.io.checkpoint_files import describe
from deployctl.core.checkpoint.planner import model_info
from deployctl.core.models.plan import Degrees
from deployctl.core.sizing.memory import kv_bytes_per_token, state_bytes_per_seq
from tests.core.checkpoint.quoted import FIXTURES, QUOTED, real, write


def _describe(key: str, tmp_path: Path):
    if (FIXTURES / key / "config.json").is_file():
        return describe(FIXTURES / key)
    return describe(write(tmp_path / key, QUOTED[key]))


# (checkpoint, published parameters, which ones, tolerance, source)
PUBLISHED = [
    ("deepseek-v3", 671e9, "main", 0.002, "tt-metal@f3712cc6 models/demos/deepseek_v3/reference/README_WEIGHTS.md: "
     "main model 671B"),
    ("deepseek-v3.2", 671.85e9, "main", 0.002, "planner-math.md §2.2: V3 trunk + 0.85B lightning indexer "
     "(cann-recipes)"),
    ("kimi-k2-instruct", 1026e9, "main", 0.005, "planner-math.md §2.3: ~1,026B (official: about 1T)"),
    ("kimi-k2.6", 1026e9, "main", 0.005, "planner-math.md §2.3: ~1,026B for the K2 language model (vision tower "
     "not counted)"),
    ("qwen3-235b-a22b", 235e9, "main", 0.005, "planner-math.md §2.3: official 235B"),
    ("qwen3-30b-a3b", 30.5e9, "main", 0.02, "huggingface.co/ggml-org/Qwen3-30B-A3B-GGUF: 31B params (rounded)"),
    ("qwen3-coder-30b-a3b-instruct", 30.5e9, "main", 0.002, "fastllm@f8f04c33 Qwen3-Coder-30B-A3B-Instruct/README.md "
     "L28 (Qwen's model card): 30.5B in total"),
    ("qwen3-32b", 32.8e9, "main", 0.005, "huggingface.co/spaces/polats/ZeroGPU-LLM-Inference@b9efb74a app.py: 32.8B"),
    ("qwen3-14b", 14.8e9, "main", 0.005, "huggingface.co/spaces/polats/ZeroGPU-LLM-Inference@b9efb74a app.py: 14.8B"),
    ("glm-4.5", 355e9, "all", 0.01, "huggingface/transformers docs/source/en/model_doc/glm4_moe.md: 355B total "
     "(config QUOTED, unverified)"),
    ("glm-4.5-air", 106e9, "main", 0.01, "huggingface/transformers docs/source/en/model_doc/glm4_moe.md: GLM-4.5-Air "
     "106B total (deployctl: 106.85B without the MTP layer, 0.8%; 109.23B with it)"),
    ("qwen3-next-80b-a3b-thinking", 80e9, "all", 0.01, "huggingface/transformers docs/source/en/model_doc/"
     "qwen3_next.md: 80B"),
    ("minimax-m2", 230e9, "all", 0.01, "huggingface/transformers docs/source/en/model_doc/minimax_m2.md: 230B total"),
    # GLM-5.x: zai-org/GLM-5@1a977a8a README.md "744B parameters (40B active)" and its Download table (744B-A40B for
    # GLM-5, 5.1, 5.2): the main model, its MTP layer (9.95B) not counted; GLM-5.2 has no indexer weights on its 57
    # "shared" layers (vllm-ascend@182b75ea vllm_ascend/patch/__init__.py L585-592)
    ("glm-5", 744e9, "main", 0.01, "zai-org/GLM-5@1a977a8a README.md: 744B (deployctl 743.91B)"),
    ("glm-5.1", 744e9, "main", 0.01, "zai-org/GLM-5@1a977a8a README.md Download table: GLM-5.1 744B-A40B"),
    ("glm-5.2", 744e9, "main", 0.01, "zai-org/GLM-5@1a977a8a README.md Download table: GLM-5.2 744B-A40B "
     "(deployctl 743.38B)"),
    # the multimodal ones: every tensor (language model, MTP, vision tower) against third-party mirrors of the Hub's
    # safetensors metadata (not authoritative; the fixtures' SOURCE files name them)
    ("qwen3.5-397b-a17b", 403.4e9, "all", 0.01, "huface.ru/baa-ai/Qwen3.5-397B-A17B-SWAN-4bit: 403.4B (deployctl "
     "403.40B: 396.35B language model, 6.60B MTP, 0.46B vision)"),
    ("qwen3.5-35b-a3b", 35.95e9, "all", 0.01, "a third-party note quoting the Hub: 35.95B (unverified)"),
    ("qwen3-vl-30b-a3b-instruct", 31.07e9, "all", 0.01, "free2aitools.com: 31.07B (deployctl 31.071B)"),
    # Qwen3-VL-235B-A22B: no published total found; its language model is Qwen3-235B-A22B's, 235B (Qwen's card as
    # quoted in planner-math.md §2.3): deployctl 235.09B for it, 0.58B more for the tower
    ("qwen3-vl-235b-a22b-instruct", 235e9, "all", 0.01, "Qwen3-235B-A22B's 235B + the vision tower (0.25%)"),
    # DeepSeek-V4: the model card as quoted in antirez/ds4 issue #112 and vllm-project/recipes' parameter_count
    # (fixtures' SOURCE): Flash 284B (deployctl 284.33B without MTP, +0.12 %), Pro 1.6T (two significant figures:
    # deployctl 1,573B without MTP, 1,599B with it)
    ("deepseek-v4-flash", 284e9, "main", 0.01, "DeepSeek-V4-Flash 284B total"),
    ("deepseek-v4-pro", 1.6e12, "all", 0.01, "DeepSeek-V4-Pro 1.6T total"),
]


@pytest.mark.parametrize("key,published,which,tol,source", PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_parameters_match_the_published_total(key, published, which, tol, source, tmp_path):
    d = _describe(key, tmp_path)
    total = sum(d.params.values()) - (d.params.get("mtp", 0) if which == "main" else 0)
    assert total == pytest.approx(published, rel=tol), f"{key}: {total / 1e9:.2f}B vs {source}"


def test_deepseek_fp8_bytes_match_the_measured_checkpoint():
    """The FP8 checkpoint on disk: 642 GiB measured for R1 (same architecture; vllm-ascend issue #2296, quoted in
    planner-math.md §2.1). deployctl: FP8 linear layers with one fp32 scale per 128x128 block, BF16 embedding, head,
    router and norms, MTP layer included (within 1%: norms' fp32 copies and biases are not modelled)."""
    d = describe(FIXTURES / "deepseek-v3")
    assert d.quantization.scheme == "fp8"
    assert d.weights.computed_total == pytest.approx(642 * 2**30, rel=0.01)


QWEN3_17B = "qwen3-1.7b-mlx-bf16"        # mlx-lm 0.24.0's BF16 conversion (fixture SOURCE)

def _attention(h: int, layers: int, q: int, kv: int, hd: int) -> dict[str, int]:
    """Qwen3 attention in a 2-byte dtype: q/k/v projections with q/k RMSNorms of head_dim, and o_proj."""
    return {"attention": layers * (h * q * hd + 2 * h * kv * hd + 2 * hd) * 2, "o_proj": layers * q * hd * h * 2}


def _qwen3_dense(h, layers, q, kv, hd, ffn, vocab) -> tuple[dict[str, int], dict[str, int]]:
    """(bytes, tensor names) per class of a Qwen3 dense checkpoint with tied embeddings: SwiGLU of 3 matrices,
    two RMSNorms per layer + the final one."""
    nbytes = {"embedding": vocab * h * 2, **_attention(h, layers, q, kv, hd), "dense_ffn": layers * 3 * h * ffn * 2,
              "norms": (2 * layers + 1) * h * 2}
    return nbytes, {"embedding": 1, "attention": 5 * layers, "o_proj": layers, "dense_ffn": 3 * layers,
                    "norms": 2 * layers + 1}


def _qwen3_moe(h, layers, q, kv, hd, experts, moe, vocab) -> tuple[dict[str, int], dict[str, int]]:
    """Qwen3 MoE, every layer sparse, untied head: per layer `experts` SwiGLU experts and a router of experts x h."""
    nbytes = {"embedding": vocab * h * 2, "lm_head": vocab * h * 2, **_attention(h, layers, q, kv, hd),
              "routed_experts": layers * experts * 3 * h * moe * 2, "router": layers * experts * h * 2,
              "norms": (2 * layers + 1) * h * 2}
    return nbytes, {"embedding": 1, "lm_head": 1, "attention": 5 * layers, "o_proj": layers,
                    "routed_experts": 3 * layers * experts, "router": layers, "norms": 2 * layers + 1}


# Real model.safetensors.index.json files (each fixture's SOURCE names repository, commit, path and writer): the
# index's metadata.total_size as the file states it, and the bytes and tensor names per class that the architecture
# gives with the numbers of the fixture's config.json (hidden, layers, query/KV heads, head_dim, FFN or experts and
# expert width, vocab).
REAL_INDEXES = [
    (QWEN3_17B, 3_441_149_952, _qwen3_dense(2048, 28, 16, 8, 128, 6144, 151936), "mlx-lm 0.24.0, BF16"),
    ("qwen3-1.7b-fp16", 3_441_149_952, _qwen3_dense(2048, 28, 16, 8, 128, 6144, 151936),
     "transformers 4.57.1, float16"),
    ("qwen3-4b-ft-fp16", 8_043_569_152, _qwen3_dense(2560, 36, 32, 8, 128, 9728, 151669),
     "transformers 4.55.4, float16, a Qwen3-4B fine-tune with its vocabulary resized to 151,669"),
    ("qwen3-coder-30b-a3b-instruct", 61_064_245_248, _qwen3_moe(2048, 48, 32, 4, 128, 128, 768, 151936),
     "Qwen's own BF16 index (transformers 4.52.3), copied by fastllm"),
]


@pytest.mark.parametrize("key,total_size,per_class,writer", REAL_INDEXES, ids=[r[0] for r in REAL_INDEXES])
def test_weight_bytes_from_the_config_equal_the_real_index_total_size(key, total_size, per_class, writer):
    """deployctl's bytes from config.json alone (tensor shapes x the 2-byte dtype) against the real index's
    metadata.total_size: error 0 B for each (tolerance 0: these Qwen3 checkpoints have no tensor class deployctl
    leaves out). Per class they are the architecture's, and the index's tensor names sort into the same classes
    (q/k/v projections and q/k norms under attention). The reader then takes the index's total."""
    index = real(key, "model.safetensors.index.json")
    nbytes, names = per_class
    assert index["metadata"]["total_size"] == total_size == sum(nbytes.values()), writer
    d = describe(FIXTURES / key)
    assert d.weights.by_class == nbytes
    assert d.weights.computed_total - total_size == 0
    assert d.weights.index_total == d.weights.total == total_size
    assert d.weights.index_tensors == names and sum(names.values()) == len(index["weight_map"])


@pytest.mark.parametrize("key,dtype_key", [("qwen3-1.7b-fp16", "dtype"), ("qwen3-4b-ft-fp16", "torch_dtype"),
                                           (QWEN3_17B, "torch_dtype")])
def test_the_stored_dtype_is_read_under_either_key_transformers_writes(key, dtype_key):
    """transformers 4.57.1 wrote `"dtype": "float16"` and no torch_dtype (huggingface/transformers PR #39782); the
    description names the key it read and the file's dtype (it said torch_dtype bfloat16, a default, before)."""
    cfg = real(key)
    d = describe(FIXTURES / key)
    assert d.dtype == cfg[dtype_key] and d.quantization.source == f"config.json {dtype_key} {cfg[dtype_key]}"


# (checkpoint, engine KV bytes per token per die at tp=1 in BF16, formula)
KV = [
    ("deepseek-v3", 61 * (512 + 64) * 2, "MLA: layers x (kv_lora_rank + qk_rope_head_dim) x 2 = 70,272"),
    ("kimi-k2-instruct", 61 * (512 + 64) * 2, "MLA, as DeepSeek-V3 (planner-math.md §2.3)"),
    ("kimi-k2.6", 61 * (512 + 64) * 2, "MLA, real K2.6 config.json text_config"),
    ("deepseek-v3.2", 61 * (576 + 128) * 2, "MLA + indexer key 128 (BF16, planner-math.md §2.2)"),
    ("qwen3-235b-a22b", 94 * 2 * 4 * 128 * 2, "GQA: layers x 2 x kv_heads x head_dim x 2 = 192,512 (192.5 KB)"),
    ("qwen3-30b-a3b", 48 * 2 * 4 * 128 * 2, "GQA"),
    ("qwen3-coder-30b-a3b-instruct", 48 * 2 * 4 * 128 * 2, "GQA"),
    ("qwen3-32b", 64 * 2 * 8 * 128 * 2, "GQA"),
    ("qwen3-8b", 36 * 2 * 8 * 128 * 2, "GQA"),
    ("glm-4.5", 92 * 2 * 8 * 128 * 2, "GQA (config QUOTED, unverified)"),
    ("glm-4.5-air", 46 * 2 * 8 * 128 * 2, "GQA"),
    ("glm-4.7-fp8", 92 * 2 * 8 * 128 * 2, "GQA (aiconfigurator's abridged GLM-4.7 file)"),
    ("qwen3-1.7b-mlx-bf16", 28 * 2 * 8 * 128 * 2, "GQA"),
    ("qwen3-4b-ft-fp16", 36 * 2 * 8 * 128 * 2, "GQA (float16: 2 bytes as BF16)"),
    ("minimax-m2", 62 * 2 * 8 * 128 * 2, "GQA"),
    ("qwen3-next-80b-a3b-thinking", 12 * 2 * 2 * 256 * 2, "GQA in the 12 full-attention layers only"),
    # vllm-project/vllm-ascend@182b75ea: one AscendMLAAttentionSpec of head 576 (kv_lora_rank + rope) in the model's
    # dtype per layer (vllm_ascend/worker/model_runner_v1.py L4688-4714), and an AscendSFAIndexerCacheSpec of
    # index_head_dim 128 on each layer that built an indexer (L4730-4746; vllm_ascend/core/kv_cache_interface.py
    # L118-144): GLM-5/5.1 every layer, GLM-5.2 its 21 "full" layers (patch/worker/patch_deepseek_v2.py L36-54)
    ("glm-5", 78 * 576 * 2 + 78 * 128 * 2, "78 MLA layers x 1152 + 78 indexer keys x 256 = 109,824"),
    ("glm-5.1", 78 * 576 * 2 + 78 * 128 * 2, "as GLM-5"),
    ("glm-5.2", 78 * 576 * 2 + 21 * 128 * 2, "78 MLA layers x 1152 + 21 indexer keys x 256 = 95,232"),
    # FullAttentionSpec (vllm@v0.27.1 v1/kv_cache_interface.py L211-226): 2 x kv heads x head_dim x 2 bytes a layer
    ("qwen3.5-397b-a17b", 15 * 2 * 2 * 256 * 2, "the 15 full-attention layers of 60: 30,720"),
    ("qwen3.5-35b-a3b", 10 * 2 * 2 * 256 * 2, "the 10 full-attention layers of 40: 20,480"),
    ("qwen3-vl-235b-a22b-instruct", 94 * 2 * 4 * 128 * 2, "Qwen3-235B-A22B's: 192,512"),
    ("qwen3-vl-30b-a3b-instruct", 48 * 2 * 4 * 128 * 2, "98,304"),
]


@pytest.mark.parametrize("key,expected,formula", KV, ids=[k[0] for k in KV])
def test_kv_bytes_per_token_match_the_engine_formula(key, expected, formula, tmp_path):
    info = model_info(_describe(key, tmp_path), key)
    assert kv_bytes_per_token(info, "bf16", Degrees()) == expected, formula


def test_gqa_kv_heads_split_over_tp_until_one_per_rank(tmp_path):
    info = model_info(_describe("qwen3-32b", tmp_path), "q")
    assert kv_bytes_per_token(info, "bf16", Degrees(tp=4)) == 64 * 2 * 2 * 128 * 2
    assert kv_bytes_per_token(info, "bf16", Degrees(tp=16)) == 64 * 2 * 1 * 128 * 2     # replicated past 8


def test_qwen3_next_linear_state_per_sequence_is_vllm_mamba_state(tmp_path):
    """36 gated-DeltaNet layers, each: conv state (kernel-1) x (2 x 16 x 128 + 32 x 128) and recurrent state
    32 x 128 x 128, BF16 (MambaSpec: sum of prod(shape) x dtype size); TP splits it by heads."""
    d = _describe("qwen3-next-80b-a3b-thinking", tmp_path)
    per_layer = 3 * (2 * 16 * 128 + 32 * 128) * 2 + 32 * 128 * 128 * 2
    assert d.linear.layers == 36 and d.full_attention_layers == 12
    info = model_info(d, "q")
    assert state_bytes_per_seq(info, Degrees()) == 36 * per_layer
    assert state_bytes_per_seq(info, Degrees(tp=4)) == 36 * per_layer / 4


def test_qwen3_5_linear_state_is_vllms_gated_deltanet_state_with_an_fp32_recurrent_state(tmp_path):
    """vllm-project/vllm@v0.27.1 model_executor/layers/mamba/mamba_utils.py L246-268: per gated-DeltaNet layer a conv
    state of (conv_kernel - 1) x (2 x 16 x 128 + 64 x 128) in the model dtype and a recurrent state of 64 x 128 x 128
    in mamba_ssm_dtype, which Qwen3.5's config sets to float32 and vLLM copies into the cache config
    (model_executor/models/config.py L799-823): 45 layers, 183.2 MiB a sequence before TP."""
    d = _describe("qwen3.5-397b-a17b", tmp_path)
    per_layer = 3 * (2 * 16 * 128 + 64 * 128) * 2 + 64 * 128 * 128 * 4
    assert d.linear.layers == 45 and d.full_attention_layers == 15 and d.linear.state_dtype_bytes == 4
    info = model_info(d, "q")
    assert state_bytes_per_seq(info, Degrees()) == 45 * per_layer == 192_061_440
    assert state_bytes_per_seq(info, Degrees(tp=16)) == 45 * per_layer / 16


def test_the_vision_towers_parameters_are_vllms_tensors(tmp_path):
    """qwen3_vl.py@v0.27.1 (families/vision.py): 27 blocks of 15,239,504, patch embedding 1,770,624, positions
    2,654,208, a merger of 40,119,040 (out 4096) and, on Qwen3-VL only, 3 deepstack mergers of 40,125,952."""
    block, stem, merger, deep = 15_239_504, 1_770_624 + 2_654_208, 40_119_040, 40_125_952
    assert _describe("qwen3.5-397b-a17b", tmp_path).params["vision"] == stem + 27 * block + merger
    assert _describe("qwen3-vl-235b-a22b-instruct", tmp_path).params["vision"] == stem + 27 * block + merger + 3 * deep


DSV4_PAGES = 128 * 512 * 2 + 128 * (128 + 2)      # pad_t2 + pad_t1 at --block-size 128: 131,072 + 16,640


@pytest.mark.parametrize("key,t", [("deepseek-v4-flash", 21 + 1), ("deepseek-v4-pro", 31 + 1)])
def test_deepseek_v4_kv_per_token_is_vllm_ascends_pool_cost(key, t, tmp_path):
    """vllm-project/vllm-ascend@182b75ea vllm_ascend/patch/platform/patch_kv_cache_utils.py L185-245: a block id of the
    shared pool takes (pad_t1 + pad_t2) x T bytes (layer.py L34-52: 16,640 and 131,072 at block size 128; T = the
    larger of the ratio-4 and ratio-128 layer counts + the MTP layer), and covers 512 tokens of a ratio-4 layer and
    16,384 of a ratio-128 one: 6.55 KB a token on Flash, 9.52 KB on Pro, on every die (one KV head, not split)."""
    info = model_info(_describe(key, tmp_path), key)
    per_token = DSV4_PAGES * t * (1 / 512 + 1 / 16384)
    assert kv_bytes_per_token(info, "bf16", Degrees()) == round(per_token)
    assert kv_bytes_per_token(info, "bf16", Degrees(tp=8)) == round(per_token)
    # per running sequence, blocks of the same size for the sliding window and the compressor states (deployctl's
    # derivation from the pool's layout, planner.compressed_spec): 2 window groups x 2 + 2 + 2 + 5
    assert state_bytes_per_seq(info, Degrees()) == 13 * DSV4_PAGES * t


def test_a_c8_calibrated_gqa_checkpoint_keeps_an_int8_kv_cache(tmp_path):
    """msmodelslim's quant_model_description with kv_cache_type C8 and a k_proj.kv_cache_scale per calibrated layer:
    vLLM-Ascend keeps those layers' K/V in int8 (vllm_ascend/quantization/modelslim_config.py@182b75ea L1034-1052,
    methods/kv_c8.py L108-145): 1 byte an element instead of 2 (Qwen3-32B, 64 layers, 8 KV heads of 128)."""
    from tests.core.checkpoint.quoted import real

    cfg = real("qwen3-32b")
    layers = {f"model.layers.{i}.self_attn.k_proj.kv_cache_scale": "C8" for i in range(64)}
    desc = {"model_quant_type": "W8A8", "kv_cache_type": "C8", **layers,
            **{f"model.layers.{i}.mlp.down_proj.weight": "W8A8" for i in range(64)}}
    d = describe(write(tmp_path / "c8", cfg, quant_model_description__json=desc))
    assert d.quantization.kv_cache_bytes == 1.0
    info = model_info(d, "q")
    assert kv_bytes_per_token(info, "w8a8", Degrees(tp=8)) == 64 * 2 * 1 * 128 * 1
    half = {**desc, **{k: v for k, v in desc.items() if "kv_cache_scale" not in k}}
    half = {k: v for k, v in half.items() if not ("kv_cache_scale" in k and int(k.split(".")[2]) >= 32)}
    d = describe(write(tmp_path / "half", cfg, quant_model_description__json=half))
    assert model_info(d, "q").quants["w8a8"].kv_cache == 1.5        # 32 of 64 layers calibrated
