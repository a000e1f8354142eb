"""DeepSeek-V4 (DeepseekV4ForCausalLM: V4-Flash, V4-Pro): one 512-wide K=V latent per token (MQA), compressed sparse
attention with a compression ratio per layer (0: sliding window only, 4: CSA with a lightning indexer, 128: HCA),
a grouped low-rank output projection, every layer MoE (the first num_hash_layers routed by a fixed token table),
manifold hyper-connections (hc_mult residual streams) and one MTP layer.

Weight shapes: vllm-project/vllm-ascend@182b75ea vllm_ascend/models/deepseek_v4/model.py (attention L472-518,
compressor use L519-597, MoE L265-354, decoder layer L689-702, model L769-812, lm_head L964-970), compressor.py
L119-144, indexer.py L270-315, mtp.py L43-102. Entries of compress_ratios past num_hidden_layers are the MTP
layers' (vllm_ascend/utils.py L86-114).
"""

from __future__ import annotations

from pydantic import Field

from deployctl.core.checkpoint.families.common import _N, _Z, Shape, _Config, _mlp


class DeepseekV4Config(_Config):
    head_dim: int = _N
    qk_rope_head_dim: int = _N
    q_lora_rank: int = _N
    o_groups: int = _N
    o_lora_rank: int = _N
    n_routed_experts: int = _N
    n_shared_experts: int = _Z
    num_experts_per_tok: int = _N
    moe_intermediate_size: int = _N
    num_hash_layers: int = _Z
    num_nextn_predict_layers: int = Field(0, ge=0, le=16)
    index_n_heads: int = _N
    index_head_dim: int = _N
    index_topk: int = _N
    sliding_window: int = _N
    hc_mult: int = Field(1, gt=0, le=64)
    compress_ratios: list[int] = Field(max_length=1000)


def ratio(c: DeepseekV4Config, layer: int) -> int:
    """The layer's compression ratio (0 past the list: sliding window only, utils.py L109-114)."""
    return c.compress_ratios[layer] if layer < len(c.compress_ratios) else 0


def _compressor(h: int, r: int, d: int) -> int:
    coff = 2 if r == 4 else 1                       # ratio 4 compresses with overlap (compressor.py L119-122)
    return r * coff * d + 2 * h * coff * d + d      # ape, wkv, wgate, norm


def _layer(c: DeepseekV4Config, r: int) -> dict[str, int]:
    h, nh, d, ql = c.hidden_size, c.num_attention_heads, c.head_dim, c.q_lora_rank
    hc = c.hc_mult
    out = {"attention": nh + h * ql + ql + ql * nh * d + h * d + d,     # attn_sink, wq_a, q_norm, wq_b, wkv, kv_norm
           "o_proj": nh * d * c.o_lora_rank + c.o_groups * c.o_lora_rank * h,
           "indexer": 0, "norms": 2 * h,
           # hyper-connections: hc_{attn,ffn}_{fn,base,scale}
           "other": 2 * ((2 + hc) * hc * hc * h + (2 + hc) * hc + 3)}
    if r:
        out["attention"] += _compressor(h, r, d)
    if r == 4:
        ih, idim = c.index_n_heads, c.index_head_dim
        out["indexer"] = ql * ih * idim + h * ih + _compressor(h, 4, idim)
    return out


def _deepseek_v4(c: DeepseekV4Config) -> Shape:
    h, L, E = c.hidden_size, c.num_hidden_layers, c.n_routed_experts
    expert = _mlp(h, c.moe_intermediate_size)
    params = {k: 0 for k in ("attention", "o_proj", "indexer", "norms", "other")}
    for i in range(L):
        for k, v in _layer(c, ratio(c, i)).items():
            params[k] += v
    hashed = min(c.num_hash_layers, L)
    params.update(routed_experts=L * E * expert, shared_experts=L * c.n_shared_experts * expert,
                  # gate; e_score_correction_bias on learned-routing layers, the int32 token table on hash layers
                  router=L * h * E + (L - hashed) * E + hashed * c.vocab_size * c.num_experts_per_tok,
                  embedding=c.vocab_size * h, lm_head=0 if c.tie_word_embeddings else c.vocab_size * h)
    params["norms"] += h
    params["other"] += c.hc_mult * c.hc_mult * h + c.hc_mult + 1                # hc_head_{fn,base,scale}
    mtp = 0
    for j in range(c.num_nextn_predict_layers):
        layer = sum(_layer(c, ratio(c, L + j)).values()) + E * expert + c.n_shared_experts * expert + h * E + E
        mtp += layer + 2 * h * h + 3 * h + c.hc_mult * c.hc_mult * h + c.hc_mult + 1   # e/h_proj, norms, hc_head
    params["mtp"] = mtp
    r4 = sum(1 for i in range(L) if ratio(c, i) == 4)
    r128 = sum(1 for i in range(L) if ratio(c, i) == 128)
    fields = dict(layers=L, dense_layers=0, hidden=h, heads=c.num_attention_heads, attention="mla", kv_heads=1,
                  head_dim=c.head_dim, intermediate=0, moe_intermediate=c.moe_intermediate_size, routed_experts=E,
                  shared_experts=c.n_shared_experts, experts_per_token=c.num_experts_per_tok,
                  mtp_layers=c.num_nextn_predict_layers,
                  compressed=dict(c4_layers=r4, c128_layers=r128, window_layers=L - r4 - r128,
                                  head_dim=c.head_dim, index_head_dim=c.index_head_dim, index_topk=c.index_topk,
                                  sliding_window=c.sliding_window))
    return Shape(fields, params, [])
