"""The inventory's model.config_path: describe the checkpoint and make it known to the catalog under model.name."""

from __future__ import annotations

from pathlib import Path

from deployctl.errors import InventoryError, Problem


def adopt(directory: Path, name: str) -> list[Problem]:
    """Describe the checkpoint in `directory` and register it as `name`; the problems when it cannot be read."""
    from deployctl import catalog
    from deployctl.checkpoint.describe import describe
    from deployctl.checkpoint.planner import arch_extras, model_info

    try:
        desc = describe(Path(directory))
    except InventoryError as exc:
        return exc.problems or [Problem(message=exc.message, hint=exc.hint)]
    catalog.register(model_info(desc, name, display=f"{name} ({desc.architecture})"), arch_extras(desc), desc.family)
    return []
