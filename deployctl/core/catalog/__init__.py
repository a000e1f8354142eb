"""Catalogs shipped as data files: models (architecture numbers) and layout presets."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, cast

from deployctl.core.models.model_info import KvSpec, LayoutPreset, ModelInfo, ParamsB, QuantBytes  # noqa: F401 - the catalog's types

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory


def _read(name: str) -> Any:
    from deployctl.core.packaged import packaged_yaml

    return packaged_yaml(__package__, name)


@cache
def builtin_models() -> dict[str, ModelInfo]:
    """models.yaml; an entry naming a `checkpoint` takes its architecture numbers from that checkpoint's files
    (catalog/checkpoints/<name>/), its quantizations and workspace from models.yaml."""
    return {k: _from_checkpoint(ModelInfo(key=k, **v)) for k, v in _read("models.yaml").items()}


def _from_checkpoint(info: ModelInfo) -> ModelInfo:
    if not info.checkpoint:
        return info
    from deployctl.core.checkpoint.describe import describe_files
    from deployctl.core.checkpoint.planner import kv_spec, params_b
    from deployctl.core.packaged import packaged_checkpoint

    d = describe_files(packaged_checkpoint(__package__, "checkpoints", info.checkpoint))
    return info.model_copy(update={
        "layers": d.layers, "dense_layers": d.dense_layers, "hidden": d.hidden, "heads": d.heads,
        "routed_experts": d.routed_experts, "shared_experts": d.shared_experts,
        "experts_per_token": d.experts_per_token, "mtp_layers": d.mtp_layers, "params_b": params_b(d),
        "kv": kv_spec(d), "family": d.family,
        "context": d.context.model_copy(update={"source": f"deployctl/core/catalog/checkpoints/{info.checkpoint}/"
                                                          "config.json"}) if d.context else None})


def models() -> dict[str, ModelInfo]:
    """The built-in models (a model described from its checkpoint travels with its inventory: `model_of`)."""
    return builtin_models()


def model_of(inv: Inventory) -> ModelInfo | None:
    """The model an inventory serves: the one described from its checkpoint (model.config_path, attached by
    validation) or the built-in entry of model.name; None when neither exists (validation refuses that)."""
    return inv.checkpoint_model or builtin_models().get(inv.model.name)


def served_model(inv: Inventory) -> ModelInfo:
    """``model_of`` a validated inventory, which always has one (the same object, typed without None)."""
    return cast(ModelInfo, model_of(inv))


@cache
def layouts() -> dict[str, LayoutPreset]:
    return {k: LayoutPreset(key=k, **v) for k, v in _read("layouts.yaml").items()}
