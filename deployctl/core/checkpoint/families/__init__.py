"""Per-family reading of config.json: the typed keys each architecture has, and the parameters per weight class its
tensor shapes imply (the shapes follow each family's modelling code; docs/models.md names the sources).

One module per family group. `FAMILIES` maps a config.json `architectures` name to its reader; anything else is
refused by `describe()`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from deployctl.core.checkpoint.families.common import _DTYPE_BYTES, Shape, _Config
from deployctl.core.checkpoint.families.deepseek import DeepseekV3Config, GlmMoeDsaConfig, _deepseek, _glm_moe_dsa
from deployctl.core.checkpoint.families.deepseek_v4 import DeepseekV4Config, _deepseek_v4
from deployctl.core.checkpoint.families.glm import Glm4MoeConfig, _glm4_moe
from deployctl.core.checkpoint.families.minimax import MiniMaxM2Config, _minimax_m2
from deployctl.core.checkpoint.families.qwen import (Qwen3_5MoeConfig, Qwen3Config, Qwen3MoeConfig, Qwen3NextConfig,
                                                     _qwen3, _qwen3_5_moe, _qwen3_moe, _qwen3_next)

__all__ = ["FAMILIES", "FamilyReader", "Shape", "_DTYPE_BYTES"]


@dataclass(frozen=True)
class FamilyReader:
    family: str
    config: type[_Config]
    shape: Callable[..., Shape]
    text_config: bool = False      # the language model's keys sit under config.json "text_config"
    vision: bool = False           # a vision tower under "vision_config" (families/vision.py) is sized too


FAMILIES: dict[str, FamilyReader] = {
    "DeepseekV3ForCausalLM": FamilyReader("deepseek_v3", DeepseekV3Config, _deepseek),
    "DeepseekV32ForCausalLM": FamilyReader("deepseek_v32", DeepseekV3Config, _deepseek),
    "KimiK25ForConditionalGeneration": FamilyReader("kimi_k2", DeepseekV3Config, _deepseek, text_config=True),
    "Qwen3ForCausalLM": FamilyReader("qwen3", Qwen3Config, _qwen3),
    "Qwen3MoeForCausalLM": FamilyReader("qwen3_moe", Qwen3MoeConfig, _qwen3_moe),
    "Qwen3NextForCausalLM": FamilyReader("qwen3_next", Qwen3NextConfig, _qwen3_next),
    "Glm4MoeForCausalLM": FamilyReader("glm4_moe", Glm4MoeConfig, _glm4_moe),
    "MiniMaxM2ForCausalLM": FamilyReader("minimax_m2", MiniMaxM2Config, _minimax_m2),
    "GlmMoeDsaForCausalLM": FamilyReader("glm_moe_dsa", GlmMoeDsaConfig, _glm_moe_dsa),
    "DeepseekV4ForCausalLM": FamilyReader("deepseek_v4", DeepseekV4Config, _deepseek_v4),
    "Qwen3VLMoeForConditionalGeneration": FamilyReader("qwen3_vl_moe", Qwen3MoeConfig, _qwen3_moe, text_config=True,
                                                       vision=True),
    "Qwen3_5MoeForConditionalGeneration": FamilyReader("qwen3_5_moe", Qwen3_5MoeConfig, _qwen3_5_moe,
                                                       text_config=True, vision=True),
}
