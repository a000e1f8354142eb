"""What every family reader shares: the typed config base, the Shape a reader returns and the layer shapes
(GQA attention, SwiGLU MLP) several families have."""

from __future__ import annotations

from dataclasses import dataclass

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


_DTYPE_BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2}
