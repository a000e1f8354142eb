"""Catalogs shipped as data files: models (architecture numbers) and layout presets."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from deployctl.catalog.info import KvSpec, LayoutPreset, ModelInfo, ParamsB, QuantBytes  # noqa: F401 - the catalog's types


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
