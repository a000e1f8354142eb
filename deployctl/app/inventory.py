"""Read and validate an inventory: the composition root's one way to turn a file into a validated Inventory.

The inventory's engine.kind is resolved here, once, to its EngineSpec (app/engines.py); the files the inventory
names on this machine (hccn.conf copies, model.config_path's checkpoint) are read here (io/inventory_file.py);
then the core validates data only (core/inventory/validate.py) and hands back an inventory that carries the spec
(``inv.engine_spec``) to everything below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from deployctl.core.input.raw import RawInventory


def _engine_and_files(raw: RawInventory, read_text: Callable[[Path], str] | None) -> tuple:
    from deployctl.app import engines
    from deployctl.core.inventory.validate import engine_kind
    from deployctl.io.inventory_file import read_local_files

    spec = engines.SPECS.get(engine_kind(raw))    # unknown: the model refuses the kind, naming its line
    return spec, engines.charts, read_local_files(raw, read_text)


def validate_inventory(raw: RawInventory, read_text: Callable[[Path], str] | None = None, facts: Any = None):
    """The inventory validated in full (core/inventory/validate.py validate_inventory), carrying its engine spec.

    Raises:
        InventoryError: every problem, each naming file, line and key path.
    """
    from deployctl.core.inventory import validate

    return validate.validate_inventory(raw, *_engine_and_files(raw, read_text), facts)


def validate_for_discovery(raw: RawInventory, read_text: Callable[[Path], str] | None = None,
                           facts: Any = None) -> tuple:
    """(inventory, the NeedsFacts notes): preflight's validation (core/inventory/validate.py)."""
    from deployctl.core.inventory import validate

    return validate.validate_for_discovery(raw, *_engine_and_files(raw, read_text), facts)


def inventory_problems(raw: RawInventory, read_text: Callable[[Path], str] | None = None,
                       facts: Any = None) -> tuple:
    """(inventory, every value problem, NeedsFacts included) (core/inventory/validate.py)."""
    from deployctl.core.inventory import validate

    return validate.inventory_problems(raw, *_engine_and_files(raw, read_text), facts)


def read_inventory(path: str | Path, facts: Any = None):
    """The inventory in ``path``, read once and validated in full."""
    from deployctl.io.inventory_file import load_inventory

    return validate_inventory(load_inventory(path), facts=facts)


def with_engine(inv):
    """An Inventory model built without validation (``Inventory.model_validate``), carrying its engine spec."""
    from deployctl.app import engines

    return inv.with_engine(engines.resolve(inv.engine.kind), engines.charts)
