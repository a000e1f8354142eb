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
    kind: Literal["mla", "gqa", "hybrid"]     # hybrid: GQA in full_layers, a per-sequence state in the others
    latent: int = 0
    indexer: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    full_layers: int = 0              # layers with a KV cache (0: every layer)
    state_bytes_per_seq: int = 0      # hybrid: linear-attention state of one sequence over all its layers, unsplit
    state_split: int = 1              # hybrid: TP splits the state over at most this many ranks (its key heads)


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
def builtin_models() -> dict[str, ModelInfo]:
    """models.yaml; an entry naming a `checkpoint` takes its architecture numbers from that checkpoint's files
    (catalog/checkpoints/<name>/), its quantizations and workspace from models.yaml."""
    return {k: _from_checkpoint(ModelInfo(key=k, **v)) for k, v in _read("models.yaml").items()}


def _from_checkpoint(info: ModelInfo) -> ModelInfo:
    if not info.checkpoint:
        return info
    from pathlib import Path

    from deployctl.checkpoint import describe
    from deployctl.checkpoint.planner import kv_spec, params_b

    d = describe(Path(str(resources.files(__package__).joinpath("checkpoints", info.checkpoint))))
    return info.model_copy(update={
        "layers": d.layers, "dense_layers": d.dense_layers, "hidden": d.hidden, "heads": d.heads,
        "routed_experts": d.routed_experts, "shared_experts": d.shared_experts,
        "experts_per_token": d.experts_per_token, "mtp_layers": d.mtp_layers, "params_b": params_b(d),
        "kv": kv_spec(d)})


_FROM_CHECKPOINT: dict[str, ModelInfo] = {}
_ARCH_FROM_CHECKPOINT: dict[str, dict] = {}
_FAMILY_FROM_CHECKPOINT: dict[str, str] = {}


def models() -> dict[str, ModelInfo]:
    """The built-in models, and those described from a checkpoint (model.config_path) under their inventory name."""
    return {**builtin_models(), **_FROM_CHECKPOINT}


def register(info: ModelInfo, arch: dict | None = None, family: str = "") -> None:
    """Make a model described from its checkpoint known under `info.key` (arch: perf/arch.yaml's extras; family:
    deployctl.checkpoint's family id, which the engines' support matrices list)."""
    _FROM_CHECKPOINT[info.key] = info
    _ARCH_FROM_CHECKPOINT[info.key] = arch or {}
    _FAMILY_FROM_CHECKPOINT[info.key] = family


def checkpoint_family(key: str) -> str | None:
    return _FAMILY_FROM_CHECKPOINT.get(key) if key in _FROM_CHECKPOINT else None


def checkpoint_arch(key: str) -> dict | None:
    return _ARCH_FROM_CHECKPOINT.get(key)


@cache
def layouts() -> dict[str, LayoutPreset]:
    return {k: LayoutPreset(key=k, **v) for k, v in _read("layouts.yaml").items()}
