"""Qwen3 (dense), Qwen3-MoE, Qwen3-Next (gated DeltaNet linear attention interleaved with full attention) and the
multimodal ones whose language model sits under text_config: Qwen3-VL-MoE (Qwen3-MoE) and Qwen3.5-MoE (Qwen3-Next's
hybrid trunk with a gated full attention and one MTP layer, vllm-project/vllm@v0.27.1 qwen3_5.py L479-490,
qwen3_5_mtp.py L96-134)."""

from __future__ import annotations

from pydantic import Field

from deployctl.core.checkpoint.families.common import _DTYPE_BYTES, _N, _Z, Shape, _Config, _gqa_attention, _mlp


class Qwen3Config(_Config):
    num_key_value_heads: int = _N
    head_dim: int | None = Field(None, gt=0, le=1 << 16)
    intermediate_size: int = _N
    attention_bias: bool = False


class Qwen3MoeConfig(Qwen3Config):
    num_experts: int = _N
    num_experts_per_tok: int = _N
    moe_intermediate_size: int = _N
    decoder_sparse_step: int = Field(1, gt=0, le=1000)
    mlp_only_layers: list[int] = Field(default_factory=list, max_length=1000)


class Qwen3NextConfig(Qwen3MoeConfig):
    full_attention_interval: int = Field(4, gt=0, le=1000)
    layer_types: list[str] | None = Field(None, max_length=1000)
    linear_num_key_heads: int = _N
    linear_num_value_heads: int = _N
    linear_key_head_dim: int = _N
    linear_value_head_dim: int = _N
    linear_conv_kernel_dim: int = Field(4, gt=0, le=64)
    shared_expert_intermediate_size: int = _Z
    mamba_ssm_dtype: str | None = Field(None, max_length=40)
    num_nextn_predict_layers: int = Field(0, ge=0, le=16)


def _qwen3(c: Qwen3Config) -> Shape:
    h, L = c.hidden_size, c.num_hidden_layers
    hd = c.head_dim or h // c.num_attention_heads
    qkv, o = _gqa_attention(h, c.num_attention_heads, c.num_key_value_heads, hd, bias=c.attention_bias, qk_norm=True)
    params = {"attention": L * qkv, "o_proj": L * o, "dense_ffn": L * _mlp(h, c.intermediate_size),
              "embedding": c.vocab_size * h, "lm_head": 0 if c.tie_word_embeddings else c.vocab_size * h,
              "norms": 2 * h * L + h}
    return Shape(dict(layers=L, dense_layers=L, hidden=h, heads=c.num_attention_heads,
                      attention="gqa" if c.num_key_value_heads < c.num_attention_heads else "mha",
                      kv_heads=c.num_key_value_heads, head_dim=hd, intermediate=c.intermediate_size), params, [])


def _moe_layers(c: Qwen3MoeConfig) -> list[int]:
    return [i for i in range(c.num_hidden_layers)
            if i not in c.mlp_only_layers and (i + 1) % c.decoder_sparse_step == 0]


def _qwen3_moe(c: Qwen3MoeConfig) -> Shape:
    s = _qwen3(c)
    h, moe = c.hidden_size, len(_moe_layers(c))
    expert = _mlp(h, c.moe_intermediate_size)
    s.params.update(dense_ffn=(c.num_hidden_layers - moe) * _mlp(h, c.intermediate_size),
                    routed_experts=moe * c.num_experts * expert, router=moe * h * c.num_experts)
    s.fields.update(dense_layers=c.num_hidden_layers - moe, moe_intermediate=c.moe_intermediate_size,
                    routed_experts=c.num_experts, experts_per_token=c.num_experts_per_tok)
    return s


def _qwen3_next(c: Qwen3NextConfig) -> Shape:
    h, L = c.hidden_size, c.num_hidden_layers
    hd = c.head_dim or h // c.num_attention_heads
    if c.layer_types:
        full = sum(1 for t in c.layer_types if t == "full_attention")
    else:
        full = sum(1 for i in range(L) if (i + 1) % c.full_attention_interval == 0)
    linear = L - full
    qkv, o = _gqa_attention(h, c.num_attention_heads, c.num_key_value_heads, hd, bias=False, qk_norm=True, gate=True)
    nk, nv, dk, dv = c.linear_num_key_heads, c.linear_num_value_heads, c.linear_key_head_dim, c.linear_value_head_dim
    conv_dim = 2 * nk * dk + nv * dv
    # gated DeltaNet: in_proj_qkvz, in_proj_ba, conv1d, dt_bias, A_log, gated norm; out_proj
    lin_in = h * (2 * nk * dk + 2 * nv * dv) + h * 2 * nv + conv_dim * c.linear_conv_kernel_dim + 2 * nv + dv
    lin_out = nv * dv * h
    moe = len(_moe_layers(c))
    expert = _mlp(h, c.moe_intermediate_size)
    shared = _mlp(h, c.shared_expert_intermediate_size) + h            # + the shared expert's gate
    layer = qkv + o + expert * c.num_experts + shared + h * c.num_experts
    params = {"attention": full * qkv + linear * lin_in, "o_proj": full * o + linear * lin_out,
              "dense_ffn": (L - moe) * _mlp(h, c.intermediate_size), "routed_experts": moe * c.num_experts * expert,
              "shared_experts": moe * shared, "router": moe * h * c.num_experts, "embedding": c.vocab_size * h,
              "lm_head": 0 if c.tie_word_embeddings else c.vocab_size * h, "norms": 2 * h * L + h,
              "mtp": c.num_nextn_predict_layers * (layer + 2 * h * h + 5 * h)}
    units = round(c.shared_expert_intermediate_size / c.moe_intermediate_size)
    fields = dict(layers=L, dense_layers=L - moe, hidden=h, heads=c.num_attention_heads, attention="gqa",
                  kv_heads=c.num_key_value_heads, head_dim=hd, intermediate=c.intermediate_size,
                  moe_intermediate=c.moe_intermediate_size, routed_experts=c.num_experts, shared_experts=units,
                  experts_per_token=c.num_experts_per_tok, mtp_layers=c.num_nextn_predict_layers,
                  linear=dict(layers=linear, key_heads=nk, value_heads=nv, key_head_dim=dk, value_head_dim=dv,
                              conv_kernel=c.linear_conv_kernel_dim,
                              state_dtype_bytes=_DTYPE_BYTES.get((c.mamba_ssm_dtype or "bfloat16").lower(), 2)))
    notes = [] if c.mamba_ssm_dtype else ["linear-attention state dtype: bf16 assumed (config names no "
                                          "mamba_ssm_dtype)"]
    return Shape(fields, params, notes)


class Qwen3_5MoeConfig(Qwen3NextConfig):
    """Qwen3.5-MoE's text_config: Qwen3-Next's keys, its MTP depth named mtp_num_hidden_layers, no dense FFN width
    (every layer is MoE: mlp_only_layers is empty)."""

    intermediate_size: int = _Z
    mtp_num_hidden_layers: int = Field(0, ge=0, le=16)


def _qwen3_5_moe(c: Qwen3_5MoeConfig) -> Shape:
    return _qwen3_next(c.model_copy(update={"num_nextn_predict_layers": c.mtp_num_hidden_layers}))
