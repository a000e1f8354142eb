"""The inventory's model.config_path: the checkpoint described as the catalog's ModelInfo, under model.name."""

from __future__ import annotations

from pathlib import Path

from deployctl.core.errors import InventoryError, Problem


def describe_model(directory: Path, name: str):
    """(ModelInfo of the checkpoint in `directory` named `name`, []) or (None, the problems when it cannot be read)."""
    from deployctl.core.checkpoint.describe import describe
    from deployctl.core.checkpoint.planner import arch_extras, model_info

    try:
        desc = describe(Path(directory))
    except InventoryError as exc:
        return None, exc.problems or [Problem(message=exc.message, hint=exc.hint)]
    info = model_info(desc, name, display=f"{name} ({desc.architecture})")
    return info.model_copy(update={"family": desc.family, "arch": arch_extras(desc)}), []
