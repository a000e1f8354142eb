"""Catalogs shipped as data files: models (architecture numbers) and layout presets."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any, Literal

from deployctl.models.base import Frozen


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
    kind: Literal["mla", "gqa"]
    latent: int = 0
    indexer: int = 0
    kv_heads: int = 0
    head_dim: int = 0


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

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers


class LayoutPreset(Frozen):
    key: str
    summary: str
    min_nodes: int
    max_nodes: int
    roles: dict[str, dict[str, int | str]]


def _read(name: str) -> Any:
    import yaml

    return yaml.safe_load(resources.files(__package__).joinpath(name).read_text(encoding="utf-8"))


@cache
def models() -> dict[str, ModelInfo]:
    return {k: ModelInfo(key=k, **v) for k, v in _read("models.yaml").items()}


@cache
def layouts() -> dict[str, LayoutPreset]:
    return {k: LayoutPreset(key=k, **v) for k, v in _read("layouts.yaml").items()}
