"""A `ModelDescription` as the catalog's `ModelInfo`, so the memory plan and the performance model size it unchanged.

Weights per class come from the description's parameters (shapes from config.json); bytes per parameter from the
checkpoint's own quantization (its scheme) plus the conversions Ascend deployments use (bf16, w8a8, w4a8 for MoE),
as catalog/models.yaml lists them for its hand-written entries.
"""

from __future__ import annotations

from deployctl.core.models.model_info import KvSpec, ModelInfo, ParamsB, QuantBytes, VisionSpec
from deployctl.core.checkpoint.description import Compressed, ModelDescription

REFERENCE_WORKSPACE_MB = 0.25      # catalog/models.yaml deepseek-v3 (hidden 7168): scaled by hidden for others
REFERENCE_HIDDEN = 7168


def _per(total: int, n: int) -> float:
    return total / n / 1e9 if n else 0.0


def params_b(d: ModelDescription) -> ParamsB:
    p = d.params
    attention = p.get("attention", 0) + p.get("o_proj", 0) + p.get("indexer", 0) + p.get("norms", 0)
    return ParamsB(attention_per_layer=_per(attention, d.layers), o_proj_per_layer=_per(p.get("o_proj", 0), d.layers),
                   dense_ffn_per_layer=_per(p.get("dense_ffn", 0), d.dense_layers),
                   expert=_per(p.get("routed_experts", 0), d.moe_layers * d.routed_experts),
                   router_per_layer=_per(p.get("router", 0), d.moe_layers),
                   embedding=p.get("embedding", 0) / 1e9, lm_head=p.get("lm_head", 0) / 1e9)


# vLLM-Ascend's DeepSeek-V4 cache pool at --block-size 128 (vllm-project/vllm-ascend@182b75ea
# vllm_ascend/models/layer/attention/layer.py L34-52 DSV4_BLOCK_SIZES: 128 compressed rows a block, state blocks of 8
# (ratio 4) and 32 (ratio 128) tokens, pages padded to 16,640 / 131,072 bytes)
DSV4_BLOCK_ROWS = 128
DSV4_STATE_BLOCK = {4: 8, 128: 32}


def compressed_spec(c: Compressed, mtp_layers: int) -> KvSpec:
    """DeepSeek-V4 on vLLM-Ascend: what its shared cache pool costs per token and per running sequence on one die.

    The pool (vllm_ascend/patch/platform/patch_kv_cache_utils.py L185-245): every block id takes (pad_t1 + pad_t2) x
    T bytes, pad_t2 = 128 rows x head_dim x 2 bytes (a compressed-KV page, bf16: layer.py L177-199), pad_t1 = 128 x
    (index_head_dim + 2) (the int8 indexer key and its fp16 scale: deepseek_v4/indexer.py L94-113), T = the larger of
    the ratio-4 and ratio-128 layer counts plus the MTP layers (L228); a ratio-4 block covers 4 x 128 tokens, a
    ratio-128 block 128 x 128. The KV head is one and TP does not split it.

    Per sequence (deployctl's derivation from that layout, unverified against a running engine): the sliding-window
    groups (every layer and the MTP ones, T layers a group) hold window / 128 + 1 blocks each, the compressor states
    (fp32, compressor.py L44-71: blocks of 8 tokens over a window of 8 for ratio 4 -- main and indexer -- and of 32
    over 128 for ratio 128) window / block + 1 each."""
    pad_t2 = DSV4_BLOCK_ROWS * c.head_dim * 2
    pad_t1 = DSV4_BLOCK_ROWS * (c.index_head_dim + 2)
    t = max(c.c4_layers, c.c128_layers) + mtp_layers
    block = (pad_t1 + pad_t2) * t
    per_token = block * (1 / (4 * DSV4_BLOCK_ROWS) + 1 / (128 * DSV4_BLOCK_ROWS))
    layers = c.c4_layers + c.c128_layers + c.window_layers + mtp_layers
    window_groups = -(-layers // t)
    blocks = window_groups * (-(-c.sliding_window // DSV4_BLOCK_ROWS) + 1)
    blocks += 2 * (4 * 2 // DSV4_STATE_BLOCK[4] + 1) if c.c4_layers else 0         # main and indexer compressors
    blocks += (128 // DSV4_STATE_BLOCK[128] + 1) if c.c128_layers else 0
    return KvSpec(kind="compressed", head_dim=c.head_dim, token_bytes=int(round(per_token)),
                  state_bytes_per_seq=blocks * block, state_split=1)


def kv_spec(d: ModelDescription) -> KvSpec:
    if d.compressed is not None:
        return compressed_spec(d.compressed, d.mtp_layers)
    if d.mla is not None:
        return KvSpec(kind="mla", latent=d.mla.kv_lora_rank + d.mla.qk_rope_head_dim,
                      indexer=d.indexer.head_dim if d.indexer else 0,
                      indexer_layers=d.indexer.layers if d.indexer else 0)
    if d.linear is not None:
        conv, rec = d.linear.state_elements_per_layer()
        return KvSpec(kind="hybrid", kv_heads=d.kv_heads, head_dim=d.head_dim, full_layers=d.full_attention_layers,
                      state_bytes_per_seq=d.linear.layers * (conv * 2 + rec * d.linear.state_dtype_bytes),
                      state_split=d.linear.key_heads)
    return KvSpec(kind="gqa", kv_heads=d.kv_heads, head_dim=d.head_dim)


def quants(d: ModelDescription) -> dict[str, QuantBytes]:
    idx = 2.0 if d.indexer else 0.0
    out = {"bf16": QuantBytes(attention=2, dense=2, experts=2, shared=2, embedding=2, kv_cache=2, indexer_cache=idx),
           "w8a8": QuantBytes(attention=1, dense=1, experts=1, shared=1, embedding=2, kv_cache=2, indexer_cache=idx)}
    if d.routed_experts:
        out["w4a8"] = QuantBytes(attention=1, dense=1, experts=0.5, shared=1, embedding=2, kv_cache=2,
                                 indexer_cache=idx)
    q = d.quantization
    if q.bytes_per_param:
        b = q.bytes_per_param
        base = 2.0
        out[q.scheme] = QuantBytes(attention=b.get("attention", base), dense=b.get("dense_ffn", base),
                                   experts=b.get("routed_experts", base), shared=b.get("shared_experts", base),
                                   embedding=b.get("embedding", base), kv_cache=q.kv_cache_bytes or 2,
                                   indexer_cache=idx)
    return out


def model_info(d: ModelDescription, key: str, display: str = "") -> ModelInfo:
    return ModelInfo(key=key, display=display or key, layers=d.layers, dense_layers=d.dense_layers, hidden=d.hidden,
                     heads=d.heads, routed_experts=d.routed_experts, shared_experts=d.shared_experts,
                     experts_per_token=d.experts_per_token, params_b=params_b(d), kv=kv_spec(d),
                     workspace_mb_per_prefill_token=max(0.05, REFERENCE_WORKSPACE_MB * d.hidden / REFERENCE_HIDDEN),
                     quants=quants(d), mtp_layers=d.mtp_layers, vision=vision_spec(d), context=d.context)


def vision_spec(d: ModelDescription) -> VisionSpec | None:
    v = d.vision
    return None if v is None else VisionSpec(params_b=v.params / 1e9, hidden=v.hidden, intermediate=v.intermediate,
                                             merge=v.merge, out_width=v.out_width)


def arch_extras(d: ModelDescription) -> dict:
    """What perf/arch.yaml holds for catalog models, from the description (MLA dimensions, DSA indexer)."""
    out: dict = {}
    if d.mla is not None:
        out["mla"] = {"kv_lora_rank": d.mla.kv_lora_rank, "qk_rope_head_dim": d.mla.qk_rope_head_dim,
                      "qk_nope_head_dim": d.mla.qk_nope_head_dim, "v_head_dim": d.mla.v_head_dim}
    if d.indexer is not None:
        out["dsa"] = {"index_n_heads": d.indexer.n_heads, "index_head_dim": d.indexer.head_dim,
                      "index_topk": d.indexer.topk}
    return out
