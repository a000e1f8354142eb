"""Files an inventory names on the controller's disk, as data: read by deployctl/io/inventory_file.py before
validation (nodes[].hccn_conf copies, model.config_path's checkpoint), so the core never opens a user's file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class LocalFiles:
    # nodes[].hccn_conf as written in the inventory -> its text, or the error reading it raised (an OSError, or an
    # HccnReadError saying what it is instead of a small text file)
    hccn: Mapping[str, str | Exception] = field(default_factory=dict)
    # model.config_path's checkpoint: its CheckpointFiles, or the InventoryError reading them raised; None: not read
    checkpoint: Any = None
    home: str = ""      # the controller user's home directory (a controller path under ~ is below it)


NOT_READ = FileNotFoundError(2, "not read by deployctl before validation")
