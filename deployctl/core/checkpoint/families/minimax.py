"""MiniMax-M2 (GQA with per-layer q/k norm, all layers MoE)."""

from __future__ import annotations

from pydantic import Field

from deployctl.core.checkpoint.families.common import _N, Shape, _Config, _gqa_attention, _mlp


class MiniMaxM2Config(_Config):
    num_key_value_heads: int = _N
    head_dim: int | None = Field(None, gt=0, le=1 << 16)
    intermediate_size: int = _N          # MiniMax-M2: the width of one routed expert
    num_local_experts: int = _N
    num_experts_per_tok: int = _N
    use_qk_norm: bool = True
    num_mtp_modules: int = Field(0, ge=0, le=16)


def _minimax_m2(c: MiniMaxM2Config) -> Shape:
    h, L = c.hidden_size, c.num_hidden_layers
    hd = c.head_dim or h // c.num_attention_heads
    # MiniMax-M2 normalises q and k over all heads of the layer (one weight of heads x head_dim)
    qkv, o = _gqa_attention(h, c.num_attention_heads, c.num_key_value_heads, hd, bias=False,
                            qk_norm=c.use_qk_norm, norm_per_head=False)
    expert = _mlp(h, c.intermediate_size)
    router = h * c.num_local_experts + c.num_local_experts
    params = {"attention": L * qkv, "o_proj": L * o, "routed_experts": L * c.num_local_experts * expert,
              "router": L * router, "embedding": c.vocab_size * h,
              "lm_head": 0 if c.tie_word_embeddings else c.vocab_size * h, "norms": 2 * h * L + h}
    notes = [f"config names {c.num_mtp_modules} MTP module(s); their weights are not counted (unverified whether "
             "the checkpoint ships them)"] if c.num_mtp_modules else []
    return Shape(dict(layers=L, dense_layers=0, hidden=h, heads=c.num_attention_heads, attention="gqa",
                      kv_heads=c.num_key_value_heads, head_dim=hd, intermediate=c.intermediate_size,
                      moe_intermediate=c.intermediate_size, routed_experts=c.num_local_experts,
                      experts_per_token=c.num_experts_per_tok), params, notes)
