"""config.json values of the families whose real Hugging Face config.json was not found in this session: built from a
real file where one covers the family, otherwise from values a cited source quotes (the keys deployctl reads only).
Sources are named per model; real files are under tests/fixtures/checkpoints/ with a SOURCE each."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).parents[1] / "fixtures/checkpoints"
DSV3 = json.loads((FIXTURES / "deepseek-v3/config.json").read_text())
# DeepSeek's own V3.2-Exp inference config (real file, deepseek-ai/DeepSeek-V3.2-Exp@3b99a535 inference/)
DSV32_INFERENCE = json.loads((FIXTURES / "deepseek-v3.2-exp/config_671B_v3.2.json").read_text())
# Kimi-K2.6's config.json (real file, tt-metal@291b855c): the Kimi-K2 language model under text_config
KIMI_K26 = json.loads((FIXTURES / "kimi-k2.6/config.json").read_text())

# DeepSeek-V3.2-Exp in HF form: DeepSeek-V3's real config.json (test_read.py checks that every trunk value of the
# V3.2-Exp inference config equals it) plus the indexer keys of the real V3.2-Exp inference config. Architecture and
# model_type names: as vLLM registers them (DeepseekV32ForCausalLM / deepseek_v32); the HF file itself: unverified.
DEEPSEEK_V32 = {**DSV3, "architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
                **{k: DSV32_INFERENCE[k] for k in ("index_n_heads", "index_head_dim", "index_topk")}}

# Kimi-K2-Instruct (FP8): the language model of the real Kimi-K2.6 config (text_config: 61 layers, 64 heads, MLA
# 512+64, 384 experts, top-8, 1 shared, first_k_dense 1, vocab 163,840, no MTP layer) with DeepSeek-V3's FP8 block
# quantization (K2-Instruct is published in FP8 as V3: planner-math.md §2.3; its own config.json: unverified).
KIMI_K2 = {**{k: v for k, v in KIMI_K26["text_config"].items() if k != "quantization_config"},
           "quantization_config": DSV3["quantization_config"]}

# planner-math.md §2.3 (HF config as quoted in vLLM test fixtures): hidden 4096, 94 layers, 64 heads, 4 KV heads,
# head_dim 128, 128 experts, top-8, moe_inter 1536, vocab 151,936; intermediate 12288 from
# github.com/zyzshishui/slime scripts/models/qwen3-235B-A22B.sh (--ffn-hidden-size 12288).
# Every value here also equals a verbatim copy of Qwen3-235B-A22B-Instruct-2507's config.json in a report the code
# index returns without its repository (index file id 62836009775): not citable, so the file is not stored.
QWEN3_235B = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 4096,
              "num_hidden_layers": 94, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
              "intermediate_size": 12288, "moe_intermediate_size": 1536, "num_experts": 128,
              "num_experts_per_tok": 8, "vocab_size": 151936, "tie_word_embeddings": False,
              "torch_dtype": "bfloat16"}

# github.com/zyzshishui/slime scripts/models/glm4.5-355B-A32B.sh: 3 dense + 89 MoE layers, hidden 5120, 96 heads,
# 8 query groups, kv-channels 128, ffn 12288, qkv bias, qk-layernorm, vocab 151552, 160 experts of 1536, one shared
# expert of 1536, top-8, untied embeddings. MTP layers (1): unverified.
GLM45 = {"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "hidden_size": 5120,
         "num_hidden_layers": 92, "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128,
         "intermediate_size": 12288, "moe_intermediate_size": 1536, "n_routed_experts": 160, "n_shared_experts": 1,
         "num_experts_per_tok": 8, "first_k_dense_replace": 3, "num_nextn_predict_layers": 1,
         "attention_bias": True, "use_qk_norm": True, "vocab_size": 151552, "tie_word_embeddings": False,
         "torch_dtype": "bfloat16"}

# Qwen/Qwen3-Next-80B-A3B-Instruct config.json as quoted in the code corpus (file not named by the index): hidden
# 2048, 48 layers, head_dim 256, full_attention_interval 4, linear 16 key / 32 value heads of 128, conv kernel 4,
# intermediate 5120, moe_intermediate 512; 512 experts, 10 routed + 1 shared per token (xAGI-labs blog post on
# Qwen3-Next); 16 heads / 2 KV heads, shared expert 512, vocab 151936: unverified. Every value here also equals a
# verbatim copy of its config.json in a report the code index returns without its repository (index file id
# 62751147890): not citable, so the file is not stored.
QWEN3_NEXT = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_size": 2048,
              "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
              "intermediate_size": 5120, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
              "num_experts": 512, "num_experts_per_tok": 10, "full_attention_interval": 4,
              "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
              "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "vocab_size": 151936,
              "tie_word_embeddings": False, "torch_dtype": "bfloat16"}

QUOTED = {"deepseek-v3.2-exp": DEEPSEEK_V32, "kimi-k2": KIMI_K2, "qwen3-235b-a22b": QWEN3_235B, "glm-4.5": GLM45,
          "qwen3-next-80b-a3b": QWEN3_NEXT}


def write(tmp: Path, config: dict, **files: dict) -> Path:
    """A checkpoint directory with this config.json (and other small files by name)."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "config.json").write_text(json.dumps(config))
    for name, data in files.items():
        (tmp / name.replace("__", ".")).write_text(json.dumps(data))
    return tmp
