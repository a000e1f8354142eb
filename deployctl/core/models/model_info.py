"""The catalog's types: a model's architecture numbers (ModelInfo and its parts) and a layout preset."""

from __future__ import annotations

from typing import Any, Literal

from deployctl.core.models.base import Frozen


class QuantBytes(Frozen):
    attention: float
    dense: float
    experts: float
    shared: float
    embedding: float
    kv_cache: float
    indexer_cache: float = 0.0


class ParamsB(Frozen):
    attention_per_layer: float
    o_proj_per_layer: float
    dense_ffn_per_layer: float
    expert: float
    router_per_layer: float
    embedding: float
    lm_head: float


class KvSpec(Frozen):
    # hybrid: GQA in full_layers, a per-sequence state in the others; compressed: DeepSeek-V4 (token_bytes)
    kind: Literal["mla", "gqa", "hybrid", "compressed"]
    latent: int = 0
    indexer: int = 0
    indexer_layers: int = 0           # layers with an indexer key cache (0: every layer; GLM-5.2: its "full" ones)
    kv_heads: int = 0
    head_dim: int = 0
    full_layers: int = 0              # layers with a KV cache (0: every layer)
    state_bytes_per_seq: int = 0      # hybrid: linear-attention state of one sequence over all its layers, unsplit
    state_split: int = 1              # hybrid: TP splits the state over at most this many ranks (its key heads)
    token_bytes: int = 0              # compressed: the engine's cache bytes per token on one die, every layer


class VisionSpec(Frozen):
    """A vision tower: its weights and what the engine's profile of the largest image costs (sizing/memory.py)."""

    params_b: float
    hidden: int
    intermediate: int
    merge: int                        # merge^2 patches per image token
    out_width: int                    # encoder output per image token (out_hidden x (1 + deepstack mergers))
    # the largest image in tokens: the processor's longest_edge 16,777,216 px / (patch 16 x merge 2)^2 = 16,384
    # (Qwen3.5/3.6 preprocessor_config.json as third-party copies show it; unverified for each checkpoint)
    max_image_tokens: int = 16384


class ContextWindow(Frozen):
    """What of config.json decides a model's context window: the length keys of its text config, its rope scaling
    (the keys that decide the length of rope_scaling, else rope_parameters; per layer type when nested) and where
    it was read. deployctl/core/checkpoint/context.py reads it; each engine derives its length from it."""

    keys: dict[str, float]               # VLLM_KEYS the text config sets (numbers)
    rope: dict[str, Any] | None = None
    original_max_position_embeddings: float | None = None   # the text config's own key (Phi-3 style)
    model_type: str = ""
    under: str = ""                      # "text_config" when the language model's config is nested (VL models)
    source: str = "config.json"

    @property
    def where(self) -> str:
        return f"{self.source} {self.under}".strip()


class ModelInfo(Frozen):
    key: str
    display: str
    layers: int
    dense_layers: int
    hidden: int
    heads: int
    routed_experts: int
    shared_experts: int
    experts_per_token: int
    params_b: ParamsB
    kv: KvSpec
    workspace_mb_per_prefill_token: float
    quants: dict[str, QuantBytes]
    mtp_layers: int = 0     # num_nextn_predict_layers of the checkpoint: MTP drafts need at least one
    checkpoint: str = ""    # catalog/checkpoints/<this>/: the checkpoint files the architecture numbers come from
    family: str = ""        # deployctl.core.checkpoint's family id (the engines' support matrices list families)
    arch: dict[str, Any] | None = None   # perf/arch.yaml's extras (MLA, DSA) of a model described from its checkpoint
    vision: VisionSpec | None = None     # Qwen3-VL, Qwen3.5: the vision tower
    # config.json's length keys and rope scaling (checkpoint/context.py), for the engines' --max-model-len check;
    # None for a catalog model without checkpoint files (no check then)
    context: ContextWindow | None = None

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers


class LayoutPreset(Frozen):
    key: str
    summary: str
    min_nodes: int
    max_nodes: int
    roles: dict[str, dict[str, int | str]]
