"""Checkpoint configs for the tests: the real files under tests/fixtures/checkpoints/ (a SOURCE each), and the one
family member whose own config.json was not found, GLM-4.5, QUOTED from a cited source and marked unverified."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).parents[2] / "fixtures/checkpoints"


def real(name: str, file: str = "config.json") -> dict:
    """The real file `file` of the fixture checkpoint `name` (its SOURCE names repository, commit and path)."""
    return json.loads((FIXTURES / name / file).read_text())


DSV3 = real("deepseek-v3")
# DeepSeek's own V3.2-Exp inference config (real file, deepseek-ai/DeepSeek-V3.2-Exp@3b99a535 inference/)
DSV32_INFERENCE = real("deepseek-v3.2-exp", "config_671B_v3.2.json")
KIMI_K26 = real("kimi-k2.6")
QWEN3_235B = real("qwen3-235b-a22b")

# UNVERIFIED: GLM-4.5's own config.json was not found in a citable repository. Values from
# github.com/zyzshishui/slime scripts/models/glm4.5-355B-A32B.sh: 3 dense + 89 MoE layers, hidden 5120, 96 heads,
# 8 query groups, kv-channels 128, ffn 12288, qkv bias, qk-layernorm, vocab 151552, 160 experts of 1536, one shared
# expert of 1536, top-8, untied embeddings. MTP layers (1): unverified. test_read.py checks that every one of these
# keys equals the real GLM-4.7 file aiconfigurator keeps (tests/fixtures/checkpoints/glm-4.7-fp8; same architecture:
# vllm-ascend @182b75ea docs/source/tutorials/models/GLM4.x.md L1 covers GLM-4.5/4.6/4.7 in one guide).
GLM45 = {"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "hidden_size": 5120,
         "num_hidden_layers": 92, "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128,
         "intermediate_size": 12288, "moe_intermediate_size": 1536, "n_routed_experts": 160, "n_shared_experts": 1,
         "num_experts_per_tok": 8, "first_k_dense_replace": 3, "num_nextn_predict_layers": 1,
         "attention_bias": True, "use_qk_norm": True, "vocab_size": 151552, "tie_word_embeddings": False,
         "torch_dtype": "bfloat16"}

QUOTED = {"glm-4.5": GLM45}


def write(tmp: Path, config: dict, **files: dict) -> Path:
    """A checkpoint directory with this config.json (and other small files by name)."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "config.json").write_text(json.dumps(config))
    for name, data in files.items():
        (tmp / name.replace("__", ".")).write_text(json.dumps(data))
    return tmp
