"""The vision tower of Qwen3-VL and Qwen3.5 (config.json ``vision_config``): its parameters, and what a profile of
the largest image costs, for the weights and the workspace of the memory plan.

Weights (vllm-project/vllm@v0.27.1 vllm/model_executor/models/qwen3_vl.py): a Conv3d patch embedding with bias
(L358-378), a learned position embedding (L581), ``depth`` blocks of two LayerNorms, a biased qkv + proj attention
(qwen2_5_vl.py L370-387) and a biased two-layer MLP (L424-454), one patch merger (LayerNorm over hidden, two biased
linears of hidden x merge^2; L478-527, L599-606) and one more merger per ``deepstack_visual_indexes`` entry, normed
after the shuffle (L608-621).
"""

from __future__ import annotations

from pydantic import Field

from deployctl.core.checkpoint.families.common import _IGNORE, _N
from deployctl.core.models.base import Frozen


class VisionConfig(Frozen):
    model_config = _IGNORE
    depth: int = Field(gt=0, le=1000)
    hidden_size: int = _N
    intermediate_size: int = _N
    num_heads: int = _N
    patch_size: int = Field(gt=0, le=1024)
    temporal_patch_size: int = Field(2, gt=0, le=64)
    spatial_merge_size: int = Field(2, gt=0, le=64)
    in_channels: int = Field(3, gt=0, le=64)
    num_position_embeddings: int = Field(0, ge=0, le=1 << 20)
    out_hidden_size: int = _N
    deepstack_visual_indexes: list[int] = Field(default_factory=list, max_length=1000)


def vision_params(v: VisionConfig) -> int:
    h, i, out = v.hidden_size, v.intermediate_size, v.out_hidden_size
    patch = v.in_channels * v.temporal_patch_size * v.patch_size ** 2 * h + h
    block = 2 * 2 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * i + i) + (i * h + h)
    merged = h * v.spatial_merge_size ** 2
    linears = (merged * merged + merged) + (merged * out + out)
    return (patch + v.num_position_embeddings * h + v.depth * block + (2 * h + linears)
            + len(v.deepstack_visual_indexes) * (2 * merged + linears))


def vision_fields(v: VisionConfig) -> dict:
    """What the memory plan needs of the tower (ModelDescription.vision)."""
    return dict(params=vision_params(v), hidden=v.hidden_size, intermediate=v.intermediate_size,
                merge=v.spatial_merge_size, out_width=v.out_hidden_size * (1 + len(v.deepstack_visual_indexes)))
