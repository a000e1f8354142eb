"""A `ModelDescription` as the catalog's `ModelInfo`, so the memory plan and the performance model size it unchanged.

Weights per class come from the description's parameters (shapes from config.json); bytes per parameter from the
checkpoint's own quantization (its scheme) plus the conversions Ascend deployments use (bf16, w8a8, w4a8 for MoE),
as catalog/models.yaml lists them for its hand-written entries.
"""

from __future__ import annotations

from deployctl.core.models.model_info import KvSpec, ModelInfo, ParamsB, QuantBytes, VisionSpec
from deployctl.core.checkpoint.description import ModelDescription

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


def kv_spec(d: ModelDescription) -> KvSpec:
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
                                   embedding=b.get("embedding", base), kv_cache=2, indexer_cache=idx)
    return out


def model_info(d: ModelDescription, key: str, display: str = "") -> ModelInfo:
    return ModelInfo(key=key, display=display or key, layers=d.layers, dense_layers=d.dense_layers, hidden=d.hidden,
                     heads=d.heads, routed_experts=d.routed_experts, shared_experts=d.shared_experts,
                     experts_per_token=d.experts_per_token, params_b=params_b(d), kv=kv_spec(d),
                     workspace_mb_per_prefill_token=max(0.05, REFERENCE_WORKSPACE_MB * d.hidden / REFERENCE_HIDDEN),
                     quants=quants(d), mtp_layers=d.mtp_layers, vision=vision_spec(d))


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
