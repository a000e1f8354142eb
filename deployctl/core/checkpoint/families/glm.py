"""GLM-4.5 / 4.6 / 4.7 (Glm4Moe: GQA with DeepSeek MoE)."""

from __future__ import annotations

from pydantic import Field

from deployctl.core.checkpoint.families.common import _N, Shape, _gqa_attention, _mlp, _SharedExpertMoe


class Glm4MoeConfig(_SharedExpertMoe):
    num_key_value_heads: int = _N
    head_dim: int | None = Field(None, gt=0, le=1 << 16)
    attention_bias: bool = False
    use_qk_norm: bool = False


def _glm4_moe(c: Glm4MoeConfig) -> Shape:
    h, L = c.hidden_size, c.num_hidden_layers
    hd = c.head_dim or h // c.num_attention_heads
    qkv, o = _gqa_attention(h, c.num_attention_heads, c.num_key_value_heads, hd, bias=c.attention_bias,
                            qk_norm=c.use_qk_norm)
    dense = min(c.first_k_dense_replace, L)
    moe = L - dense
    expert = _mlp(h, c.moe_intermediate_size)
    router = h * c.n_routed_experts + c.n_routed_experts
    layer = qkv + o + expert * (c.n_routed_experts + c.n_shared_experts) + router
    params = {"attention": L * qkv, "o_proj": L * o, "dense_ffn": dense * _mlp(h, c.intermediate_size),
              "routed_experts": moe * c.n_routed_experts * expert, "shared_experts": moe * c.n_shared_experts * expert,
              "router": moe * router, "embedding": c.vocab_size * h,
              "lm_head": 0 if c.tie_word_embeddings else c.vocab_size * h, "norms": 2 * h * L + h,
              "mtp": c.num_nextn_predict_layers * (layer + 2 * h * h + 5 * h)}
    return Shape(dict(layers=L, dense_layers=dense, hidden=h, heads=c.num_attention_heads, attention="gqa",
                      kv_heads=c.num_key_value_heads, head_dim=hd, intermediate=c.intermediate_size,
                      moe_intermediate=c.moe_intermediate_size, routed_experts=c.n_routed_experts,
                      shared_experts=c.n_shared_experts, experts_per_token=c.num_experts_per_tok,
                      mtp_layers=c.num_nextn_predict_layers), params, [])
