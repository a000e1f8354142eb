"""DeepSeek-V3's family (MLA, DeepSeek MoE, MTP) and the families built on its trunk: DeepSeek-V3.2 (DSA indexer),
Kimi-K2."""

from __future__ import annotations

from pydantic import Field

from deployctl.core.checkpoint.families.common import _N, _Z, Shape, _mlp, _SharedExpertMoe


class DeepseekV3Config(_SharedExpertMoe):
    num_key_value_heads: int = _Z
    q_lora_rank: int | None = Field(None, ge=0, le=1 << 20)
    kv_lora_rank: int = _N
    qk_nope_head_dim: int = _N
    qk_rope_head_dim: int = _N
    v_head_dim: int = _N
    index_n_heads: int = _Z        # DeepSeek-V3.2 (DSA)
    index_head_dim: int = _Z
    index_topk: int = _Z


def _deepseek(c: DeepseekV3Config) -> Shape:
    h, L = c.hidden_size, c.num_hidden_layers
    qk = c.qk_nope_head_dim + c.qk_rope_head_dim
    ql = c.q_lora_rank or 0
    q = h * ql + ql + ql * c.num_attention_heads * qk if ql else h * c.num_attention_heads * qk
    kv = h * (c.kv_lora_rank + c.qk_rope_head_dim) + c.kv_lora_rank + c.kv_lora_rank * c.num_attention_heads * (
        c.qk_nope_head_dim + c.v_head_dim)
    o = c.num_attention_heads * c.v_head_dim * h
    idx = 0
    if c.index_n_heads:
        # wq_b from the q latent, wk and its norm, the per-head weights projection
        idx = (ql or h) * c.index_n_heads * c.index_head_dim + h * c.index_head_dim + 2 * c.index_head_dim + \
            h * c.index_n_heads
    dense = min(c.first_k_dense_replace, L)
    moe = L - dense
    expert = _mlp(h, c.moe_intermediate_size)
    layer_moe = c.n_routed_experts * expert + c.n_shared_experts * expert + h * c.n_routed_experts + c.n_routed_experts
    mtp_layer = q + kv + o + idx + layer_moe + 2 * h * h + 5 * h     # eh_proj, enorm, hnorm, shared_head norm, 2 norms
    params = {"attention": L * (q + kv), "o_proj": L * o, "indexer": L * idx,
              "dense_ffn": dense * _mlp(h, c.intermediate_size), "routed_experts": moe * c.n_routed_experts * expert,
              "shared_experts": moe * c.n_shared_experts * expert,
              "router": moe * (h * c.n_routed_experts + c.n_routed_experts),
              "embedding": c.vocab_size * h, "lm_head": 0 if c.tie_word_embeddings else c.vocab_size * h,
              "norms": 2 * h * L + h, "mtp": c.num_nextn_predict_layers * mtp_layer}
    fields = dict(layers=L, dense_layers=dense, hidden=h, heads=c.num_attention_heads, attention="mla",
                  kv_heads=1, head_dim=qk, intermediate=c.intermediate_size, moe_intermediate=c.moe_intermediate_size,
                  routed_experts=c.n_routed_experts, shared_experts=c.n_shared_experts,
                  experts_per_token=c.num_experts_per_tok, mtp_layers=c.num_nextn_predict_layers,
                  mla=dict(q_lora_rank=ql, kv_lora_rank=c.kv_lora_rank, qk_nope_head_dim=c.qk_nope_head_dim,
                           qk_rope_head_dim=c.qk_rope_head_dim, v_head_dim=c.v_head_dim),
                  indexer=dict(n_heads=c.index_n_heads, head_dim=c.index_head_dim, topk=c.index_topk)
                  if c.index_n_heads else None)
    return Shape(fields, params, [])


class GlmMoeDsaConfig(DeepseekV3Config):
    """GLM-5, 5.1, 5.2 (GlmMoeDsaForCausalLM): DeepSeek-V3.2's MLA + DSA trunk with GLM's dimensions. config.json's
    ``head_dim`` is not read: transformers replaces it by qk_rope_head_dim (GlmMoeDsaConfig.__post_init__).

    Which layers own an indexer: ``indexer_types`` ("full" / "shared", GLM-5.2), else ``index_topk_pattern`` (F/S),
    else the layers where max(i - index_skip_topk_offset + 1, 0) % index_topk_freq == 0 (defaults 1 and 2: every
    layer) -- transformers GlmMoeDsaConfig.__post_init__; vllm-project/vllm-ascend@182b75ea
    vllm_ascend/patch/worker/patch_deepseek_v2.py L36-54, L198-227 builds no indexer only where a layer both skips
    top-k and is "shared", and GLM-5.2's checkpoints carry no indexer weights there (vllm_ascend/patch/__init__.py
    L585-592)."""

    indexer_types: list[str] | None = Field(None, max_length=1000)
    index_topk_pattern: str | None = Field(None, max_length=1000)
    index_topk_freq: int = Field(1, gt=0, le=1000)
    index_skip_topk_offset: int = Field(2, ge=0, le=1000)


def indexer_layers(c: GlmMoeDsaConfig) -> int:
    """How many of the num_hidden_layers layers own an indexer (and cache its key)."""
    L = c.num_hidden_layers
    if c.indexer_types:
        return sum(1 for t in c.indexer_types[:L] if t == "full")
    if c.index_topk_pattern:
        return sum(1 for ch in c.index_topk_pattern[:L] if ch.upper() == "F")
    return sum(1 for i in range(L) if max(i - c.index_skip_topk_offset + 1, 0) % c.index_topk_freq == 0)


def _glm_moe_dsa(c: GlmMoeDsaConfig) -> Shape:
    s = _deepseek(c)
    n = indexer_layers(c)
    s.params["indexer"] = s.params["indexer"] // c.num_hidden_layers * n
    if s.fields["indexer"] is not None:
        s.fields["indexer"]["layers"] = n
    return s
