"""What deployctl knows of a model once it has read its checkpoint's small files: a `ModelDescription`.

Built by `deployctl.core.checkpoint.describe()` from `config.json` (architecture numbers), `model.safetensors.index.json`
(the tensor names and `metadata.total_size`) and msmodelslim's `quant_model_description*.json` (per-tensor quantization
on Ascend). docs/models.md says what is read from where.
"""

from __future__ import annotations

from typing import Literal, get_args

from deployctl.core.models.base import Frozen
from deployctl.core.models.model_info import ContextWindow

Family = Literal["deepseek_v3", "deepseek_v32", "kimi_k2", "qwen3", "qwen3_moe", "glm4_moe", "qwen3_next",
                 "minimax_m2", "glm_moe_dsa", "qwen3_vl_moe", "qwen3_5_moe", "deepseek_v4"]
WeightClass = Literal["attention", "o_proj", "dense_ffn", "routed_experts", "shared_experts", "router", "embedding",
                      "lm_head", "mtp", "indexer", "norms", "vision", "other"]
WEIGHT_CLASSES: tuple[str, ...] = get_args(WeightClass)


class Mla(Frozen):
    """Multi-head latent attention (DeepSeek-V3): the cache holds kv_lora_rank + qk_rope_head_dim per token and layer."""

    q_lora_rank: int          # 0: q is projected from the hidden state directly
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


class Indexer(Frozen):
    """DeepSeek-V3.2's sparse attention (DSA) lightning indexer: one index_head_dim key cached per token and layer."""

    n_heads: int
    head_dim: int
    topk: int
    layers: int = 0           # layers that own one (0: every layer; GLM-5.2 shares the top-k of its "full" layers)


class LinearAttention(Frozen):
    """Qwen3-Next's gated DeltaNet layers: a fixed state per sequence instead of a KV cache."""

    layers: int               # layers with linear attention (the others have full attention)
    key_heads: int
    value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    state_dtype_bytes: int    # of the recurrent state (mamba_ssm_dtype; bf16 when the config names none)

    def state_elements_per_layer(self) -> tuple[int, int]:
        """(convolution state, recurrent state) elements one sequence keeps in one layer, before any TP split."""
        conv = (self.conv_kernel - 1) * (2 * self.key_heads * self.key_head_dim + self.value_heads * self.value_head_dim)
        return conv, self.value_heads * self.key_head_dim * self.value_head_dim


class Compressed(Frozen):
    """DeepSeek-V4's compressed sparse attention: how many layers compress by 4 (with an indexer) or 128, or keep
    the sliding window only, and the widths of what they cache (families/deepseek_v4.py)."""

    c4_layers: int
    c128_layers: int
    window_layers: int
    head_dim: int             # the K=V latent of one entry
    index_head_dim: int
    index_topk: int
    sliding_window: int


class Vision(Frozen):
    """A vision tower (Qwen3-VL, Qwen3.5: config.json vision_config, families/vision.py)."""

    params: int
    hidden: int
    intermediate: int
    merge: int                # spatial_merge_size: merge^2 patches make one image token
    out_width: int            # what one image token hands the language model: out_hidden x (1 + deepstack mergers)


class Quantization(Frozen):
    """How the checkpoint's weights are stored, per weight class (bytes per parameter, scales included)."""

    scheme: str               # bf16, fp8, w8a8, w4a8, w4a16, ...
    source: str               # which file and key said so
    bytes_per_param: dict[str, float]
    kv_cache_bytes: float | None = None   # an INT8 ("C8") KV cache the checkpoint calibrated (bytes per element)


class WeightBytes(Frozen):
    """Weight bytes of the whole checkpoint by class.

    `by_class` comes from the tensor shapes the config implies times the stored dtype (`by_class_source`);
    `index_total` is the index's `metadata.total_size` (exact, every tensor of every shard) when an index was read.
    `index_tensors` counts the index's tensor names per class (names only: the index holds no shapes).
    """

    by_class: dict[str, int]
    by_class_source: str
    index_total: int | None = None
    index_tensors: dict[str, int] = {}

    @property
    def computed_total(self) -> int:
        return sum(self.by_class.values())

    @property
    def total(self) -> int:
        """The exact total when the index gave one, else the computed total."""
        return self.index_total if self.index_total else self.computed_total


class ModelDescription(Frozen):
    architecture: str         # config.json architectures[0]
    family: Family
    model_type: str
    layers: int               # num_hidden_layers, MTP layers excluded
    dense_layers: int         # layers with a dense FFN instead of experts
    hidden: int
    heads: int
    attention: Literal["mha", "gqa", "mla"]
    kv_heads: int
    head_dim: int             # of q/k (MLA: qk_nope + qk_rope)
    mla: Mla | None = None
    indexer: Indexer | None = None
    linear: LinearAttention | None = None
    vision: Vision | None = None
    compressed: Compressed | None = None
    intermediate: int         # dense FFN width
    moe_intermediate: int = 0
    routed_experts: int = 0
    shared_experts: int = 0   # in units of one routed expert's size (Qwen3-Next: shared width / expert width)
    experts_per_token: int = 0
    vocab: int
    tied_embeddings: bool = False
    mtp_layers: int = 0
    dtype: str                # config.json dtype (or torch_dtype) of the unquantized tensors
    quantization: Quantization
    params: dict[str, int]    # parameters per weight class (MTP layers under "mtp")
    weights: WeightBytes
    context: ContextWindow | None = None   # what of config.json decides the context window (checkpoint/context.py)
    notes: tuple[str, ...] = ()

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers

    @property
    def full_attention_layers(self) -> int:
        return self.layers - (self.linear.layers if self.linear else 0)

    def kv_elements_per_token_layer(self) -> int:
        """KV-cache elements one token occupies in one full-attention layer, unsplit (MLA: latent + rope key;
        GQA/MHA: K and V of every KV head), plus the V3.2 indexer key."""
        if self.mla is not None:
            base = self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        else:
            base = 2 * self.kv_heads * self.head_dim
        return base + (self.indexer.head_dim if self.indexer else 0)
