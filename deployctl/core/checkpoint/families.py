"""Per-family reading of config.json: the typed keys each architecture has, and the parameters per weight class its
tensor shapes imply (the shapes follow each family's modelling code; docs/models.md names the sources).

`FAMILIES` maps a config.json `architectures` name to its reader; anything else is refused by `describe()`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pydantic import ConfigDict, Field

from deployctl.core.models.base import Frozen

_IGNORE: ConfigDict = {"frozen": True, "extra": "ignore", "strict": True}   # "94" is not 94
_N = Field(gt=0, le=1 << 20)          # a dimension or count: positive and bounded (hostile configs)
_Z = Field(0, ge=0, le=1 << 20)


class _Config(Frozen):
    model_config = _IGNORE
    model_type: str = ""
    hidden_size: int = _N
    num_hidden_layers: int = Field(gt=0, le=1000)
    num_attention_heads: int = _N
    vocab_size: int = Field(gt=0, le=1 << 24)
    tie_word_embeddings: bool = False
    torch_dtype: str | None = Field(None, max_length=40)
    dtype: str | None = Field(None, max_length=40)      # transformers >= 4.56 writes this instead of torch_dtype

    @property
    def dtype_key(self) -> tuple[str, str]:
        """(key, value) of the stored dtype: `dtype` before `torch_dtype` as transformers reads them (PR #39782);
        bfloat16 when the config names neither."""
        if self.dtype:
            return "dtype", self.dtype.lower()
        return "torch_dtype", (self.torch_dtype or "bfloat16").lower()


class _SharedExpertMoe(_Config):
    """The MoE keys DeepSeek-V3 introduced and GLM-4.5 kept: dense first layers, routed and shared experts, MTP."""

    intermediate_size: int = _N
    moe_intermediate_size: int = _N
    n_routed_experts: int = _N
    n_shared_experts: int = _Z
    num_experts_per_tok: int = _N
    first_k_dense_replace: int = _Z
    num_nextn_predict_layers: int = Field(0, ge=0, le=16)


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


class Glm4MoeConfig(_SharedExpertMoe):
    num_key_value_heads: int = _N
    head_dim: int | None = Field(None, gt=0, le=1 << 16)
    attention_bias: bool = False
    use_qk_norm: bool = False


class MiniMaxM2Config(_Config):
    num_key_value_heads: int = _N
    head_dim: int | None = Field(None, gt=0, le=1 << 16)
    intermediate_size: int = _N          # MiniMax-M2: the width of one routed expert
    num_local_experts: int = _N
    num_experts_per_tok: int = _N
    use_qk_norm: bool = True
    num_mtp_modules: int = Field(0, ge=0, le=16)


@dataclass
class Shape:
    """What a family reader returns: the description's architecture fields and the parameters per class."""

    fields: dict
    params: dict[str, int]
    notes: list[str]


def _gqa_attention(h: int, heads: int, kv: int, hd: int, *, bias: bool, qk_norm: bool, gate: bool = False,
                   norm_per_head: bool = True) -> tuple[int, int]:
    """(q/k/v projections + q/k norms, o_proj) parameters of one GQA layer."""
    q = h * heads * hd * (2 if gate else 1)
    qkv = q + 2 * h * kv * hd + ((heads + 2 * kv) * hd if bias else 0)
    if qk_norm:
        qkv += 2 * hd if norm_per_head else (heads + kv) * hd
    return qkv, heads * hd * h


def _mlp(h: int, width: int) -> int:
    return 3 * h * width                 # gate, up, down (SwiGLU)


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


_DTYPE_BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2}


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


@dataclass(frozen=True)
class FamilyReader:
    family: str
    config: type[_Config]
    shape: Callable[..., Shape]
    text_config: bool = False      # the language model's keys sit under config.json "text_config"


FAMILIES: dict[str, FamilyReader] = {
    "DeepseekV3ForCausalLM": FamilyReader("deepseek_v3", DeepseekV3Config, _deepseek),
    "DeepseekV32ForCausalLM": FamilyReader("deepseek_v32", DeepseekV3Config, _deepseek),
    "KimiK25ForConditionalGeneration": FamilyReader("kimi_k2", DeepseekV3Config, _deepseek, text_config=True),
    "Qwen3ForCausalLM": FamilyReader("qwen3", Qwen3Config, _qwen3),
    "Qwen3MoeForCausalLM": FamilyReader("qwen3_moe", Qwen3MoeConfig, _qwen3_moe),
    "Qwen3NextForCausalLM": FamilyReader("qwen3_next", Qwen3NextConfig, _qwen3_next),
    "Glm4MoeForCausalLM": FamilyReader("glm4_moe", Glm4MoeConfig, _glm4_moe),
    "MiniMaxM2ForCausalLM": FamilyReader("minimax_m2", MiniMaxM2Config, _minimax_m2),
}
