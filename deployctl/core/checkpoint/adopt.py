"""The inventory's model.config_path: the checkpoint described as the catalog's ModelInfo, under model.name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from deployctl.core.errors import InventoryError, Problem

if TYPE_CHECKING:
    from deployctl.core.checkpoint.files import CheckpointFiles
    from deployctl.core.models.model_info import ModelInfo


def describe_model(files: CheckpointFiles | InventoryError, name: str) -> tuple[ModelInfo | None, list[Problem]]:
    """(ModelInfo of the checkpoint read into ``files`` named ``name``, []) or (None, the problems when it cannot
    be read: ``files`` is then the InventoryError reading it raised)."""
    from deployctl.core.checkpoint.describe import describe_files
    from deployctl.core.checkpoint.planner import arch_extras, model_info

    try:
        if isinstance(files, InventoryError):
            raise files
        desc = describe_files(files)
    except InventoryError as exc:
        return None, exc.problems or [Problem(message=exc.message, hint=exc.hint)]
    info = model_info(desc, name, display=f"{name} ({desc.architecture})")
    return info.model_copy(update={"family": desc.family, "arch": arch_extras(desc)}), []
