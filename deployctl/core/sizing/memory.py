"""Memory fit per die: weights resident, KV budget, KV bytes per token, capacity.

Formulas: docs/performance.md "How `plan` sizes memory". The KV rule is MindIE's (its error-code reference
mindie_log_0202 on hiascend.com: kv_cache = total_memory x memory_fraction - weight - workspace); the
communication buffer sizes follow CloudMatrix384 (arXiv 2506.12708 §4.2.1).
All byte counts are per die (one rank, one HBM pool); GB here means 1e9 bytes.
"""

from __future__ import annotations

import math

from deployctl.core.catalog import ModelInfo
from deployctl.core.models.plan import Degrees, MemoryFit

GB = 1e9
GIB = 2**30
RUNTIME_GB = 1.0          # CANN runtime + ATB context per die, outside the KV pool
OTHER_COMM_MB = 120       # buffer of each communicator other than the widest one


def with_kv_cache(m: ModelInfo, quant: str, mem: object) -> ModelInfo:
    """``m`` with the KV cache the engine really keeps for ``quant``: the engine's MemoryInputs name the bytes per
    cached element when it stores the cache in another type (INT8 "C8" caches); otherwise ``m`` unchanged."""
    kv = getattr(mem, "kv_cache_bytes", None)
    idx = getattr(mem, "indexer_cache_bytes", None)
    if kv is None and idx is None:
        return m
    q = m.quants[quant]
    own = q.model_copy(update={"kv_cache": q.kv_cache if kv is None else kv,
                               "indexer_cache": q.indexer_cache if idx is None else idx})
    return m.model_copy(update={"quants": {**m.quants, quant: own}})


def weights_per_die(m: ModelInfo, quant: str, d: Degrees, redundant_experts: int = 0) -> dict[str, float]:
    """Bytes of weights resident on the most loaded die, by component.

    Pipeline stages are cut by layers; the first stage also holds the dense layers and the
    embedding, the last the lm_head, so the worst stage is taken (conservative).
    """
    q = m.quants[quant]
    p = m.params_b
    layers = math.ceil(m.layers / d.pp)
    moe_layers = min(m.moe_layers, math.ceil(m.moe_layers / d.pp))
    dense_layers = min(m.dense_layers, layers)
    head_tp = d.lm_head_tp or d.tp
    emb = p.embedding * q.embedding / d.tp
    head = p.lm_head * q.embedding / head_tp
    # redundant experts (EPLB) add slots to the EP group: the most loaded rank holds the ceiling of its share
    experts_per_rank = math.ceil((m.routed_experts + (redundant_experts if m.routed_experts else 0)) / d.moe_ep)
    # o_proj can have its own local TP (decode); the rest of attention follows tp
    attn = (p.attention_per_layer - p.o_proj_per_layer) / d.tp + p.o_proj_per_layer / (d.o_proj_tp or d.tp)
    return {
        "attention": layers * attn * q.attention * GB,
        "dense_ffn": dense_layers * p.dense_ffn_per_layer * q.dense / d.tp * GB,
        "routed_experts": moe_layers * experts_per_rank * p.expert * q.experts / d.moe_tp * GB,
        "shared_experts": moe_layers * m.shared_experts * p.expert * q.shared / d.tp * GB,
        "router": moe_layers * p.router_per_layer * 2 * GB,
        "embedding_lm_head": (emb + head if d.pp == 1 else max(emb, head)) * GB,
        # the vision tower in BF16, its linears split by TP (vLLM's default --mm-encoder-tp-mode weights)
        **({"vision": m.vision.params_b * 2 / d.tp * GB} if m.vision else {}),
    }


def vision_workspace(m: ModelInfo, d: Degrees, max_prefill_tokens: int) -> float:
    """Bytes a vision tower takes out of the KV budget on one die: the encoder cache vLLM keeps (at least the
    largest image's tokens, else the batch's: vllm@v0.27.1 v1/core/encoder_cache_manager.py L273-320, each token
    out_width BF16 values, qwen3_vl.py L568-572) plus the tower's activations while the start-up profile runs that
    image (vllm@v0.27.1 v1/worker/gpu_model_runner.py L6433-6506): its patches x (qkv + MLP widths) in BF16, split
    by TP. The activation term is deployctl's estimate from the widths (unverified against a profile)."""
    v = m.vision
    if v is None:
        return 0.0
    cache = max(v.max_image_tokens, max_prefill_tokens) * v.out_width * 2
    patches = v.max_image_tokens * v.merge ** 2
    return cache + patches * (3 * v.hidden + v.intermediate) * 2 / d.tp


def kv_bytes_per_token(m: ModelInfo, quant: str, d: Degrees, token_split: int = 1) -> int:
    """KV-cache bytes one token occupies on one die.

    MLA caches one latent (576 elements) per layer that TP cannot split; V3.2 adds its
    indexer key. GQA (Qwen3) splits KV heads over TP until each rank holds one.
    Decode context parallel (``token_split`` ranks) keeps 1/N of each token's latent or K/V on a rank and the
    indexer key whole on each: vllm-project/vllm-ascend@v0.23.0 vllm_ascend/core/kv_cache_interface.py L241-249
    (max_model_len // dcp per rank), L79-98 with worker/model_runner_v1.py L455-457 and utils.py L125-136 (the SFA
    indexer key replicated over the DCP ranks when PCP is 1).
    """
    layers = math.ceil((m.kv.full_layers or m.layers) / d.pp)     # hybrid: only full-attention layers cache KV
    cache, index_key = kv_layer_bytes(m, quant, d.tp)
    # GLM-5.2: only the layers that own an indexer cache its key (the others reuse a full layer's top-k)
    index_layers = math.ceil((m.kv.indexer_layers or m.layers) / d.pp) if index_key else 0
    return int(round(layers * cache / max(1, token_split) + index_layers * index_key))


def kv_layer_bytes(m: ModelInfo, quant: str, tp: int) -> tuple[float, float]:
    """(cache bytes, indexer-key bytes) one token keeps in one attention layer on one die: the one KV formula of the
    memory plan (kv_bytes_per_token) and of the performance model (the KV a decode step reads, sizing/step.py).

    MLA caches one latent (576 elements) per layer that TP cannot split; V3.2 (DSA) adds its indexer key. GQA splits
    KV heads over TP until each rank holds one (K and V)."""
    q = m.quants[quant]
    if m.kv.kind == "compressed":       # DeepSeek-V4: the engine's pool cost per token, spread over the layers
        return m.kv.token_bytes / m.layers, 0.0
    if m.kv.kind == "mla":
        return m.kv.latent * q.kv_cache, m.kv.indexer * q.indexer_cache
    return 2 * math.ceil(m.kv.kv_heads / tp) * m.kv.head_dim * q.kv_cache, 0.0


def state_bytes_per_seq(m: ModelInfo, d: Degrees) -> int:
    """Hybrid models (Qwen3-Next): the linear-attention state one sequence keeps on one die, whatever its length
    (the worst pipeline stage holds ceil(1/pp) of the layers; TP splits the state's heads)."""
    if not m.kv.state_bytes_per_seq:
        return 0
    return math.ceil(m.kv.state_bytes_per_seq / d.pp / min(d.tp, m.kv.state_split))


def comm_groups(d: Degrees) -> int:
    sizes = [d.tp, d.dp, d.pp, d.cp, d.moe_tp, d.moe_ep, d.o_proj_tp or 1, d.lm_head_tp or 1]
    return sum(1 for s in sizes if s > 1)


def memory_fit(m: ModelInfo, quant: str, d: Degrees, *, hbm_gb: int, fraction: float,
               hccl_buffsize_mb: int, max_seq_len: int, max_prefill_tokens: int,
               notes: tuple[str, ...] = (), fraction_name: str = "memory fraction",
               kv_token_split: int = 1, fraction_of_free: bool = False,
               starts_with_short_cache: bool = False, kv_spread_over_cp: bool = True,
               redundant_experts: int = 0) -> MemoryFit:
    """kv = HBM x memory fraction - weights - workspace, minus the HCCL buffers (MindIE mindie_log_0202, hiascend.com).

    The communication buffers come out of the KV budget too (this project's choice); that is
    conservative (engines' docs say the fraction excludes HCCL memory) and avoids plans that
    look fine and then run out of memory.

    ``fraction_of_free``: the fraction is of the memory free before the weights load (HBM less the runtime context
    and the communication buffers), and holds the weights and the KV cache only; the workspace (activations, graphs)
    must fit in what the fraction leaves (MemoryInputs.fraction_of_free); deployctl's workspace term is an estimate,
    so a workspace larger than that rest is a note, not a refusal. ``starts_with_short_cache``: a KV cache shorter
    than one max_seq_len sequence is a note too (MemoryInputs.starts_with_short_cache). ``kv_spread_over_cp``
    False: every context-parallel rank holds whole sequences, so cp does not multiply what the cache holds.
    """
    hbm = hbm_gb * GIB
    usable = hbm * fraction
    parts = weights_per_die(m, quant, d, redundant_experts)
    weights = sum(parts.values())
    workspace = RUNTIME_GB * GB + max_prefill_tokens / d.cp * m.workspace_mb_per_prefill_token * 1e6 \
        + vision_workspace(m, d, max_prefill_tokens)
    groups = comm_groups(d)
    comm = (2 * hccl_buffsize_mb + 2 * OTHER_COMM_MB * max(0, groups - 1)) * 1e6 if groups else 0.0
    left = 0.0
    if fraction_of_free:
        free = hbm - RUNTIME_GB * GB - comm
        usable = free * fraction
        left = free - usable            # activations and graphs live here
        budget = usable - weights
    else:
        budget = usable - weights - workspace - comm
    per_token = kv_bytes_per_token(m, quant, d, kv_token_split)
    tokens = max(0, int(budget // per_token)) if per_token else 0
    state = state_bytes_per_seq(m, d)     # hybrid: each sequence's fixed state, as the tokens its bytes would hold
    seq_cost = max_seq_len + (math.ceil(state / per_token) if state and per_token else 0)
    spread = d.cp if kv_spread_over_cp else 1     # the ranks one sequence's cache is spread over
    seqs = d.dp * ((tokens * spread) // seq_cost)
    reason = ""
    notes = tuple(notes)
    if fraction_of_free and workspace - RUNTIME_GB * GB > left:
        notes += (f"deployctl's estimate of the workspace ({(workspace - RUNTIME_GB * GB) / GB:.2f} GB) is more than "
                  f"the {left / GB:.2f} GB {fraction_name} {fraction} leaves outside weights and KV cache: lower "
                  "the fraction if the engine runs out of memory while it serves",)
    if budget <= 0:
        reason = "no room left for the KV cache"
    elif tokens * spread < seq_cost:
        short = (f"the KV cache holds {tokens * spread:,} tokens, less than one max_seq_len sequence "
                 f"({max_seq_len:,})")
        if starts_with_short_cache:
            notes += (f"{short}: the engine caps a request at what the cache holds",)
        else:
            reason = short
    return MemoryFit(
        hbm_gb=round(hbm / GB, 2), memory_fraction=fraction, fraction_name=fraction_name, usable_gb=round(usable / GB, 2),
        weights_gb=round(weights / GB, 2),
        weights_breakdown_gb={k: round(v / GB, 2) for k, v in parts.items()},
        workspace_gb=round(workspace / GB, 2), comm_buffers_gb=round(comm / GB, 2),
        kv_budget_gb=round(budget / GB, 2), kv_bytes_per_token=per_token, max_tokens=tokens,
        state_bytes_per_seq=state, max_sequences=seqs, fits=not reason, reason=reason, notes=list(notes))
