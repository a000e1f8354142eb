"""`deployctl down`: stop and remove this deployment's containers on every host (files kept unless purge),
through the deploy pipeline (locked, read back, recorded in the hosts' history)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deployctl.backends.common.pipeline import Outcome
    from deployctl.backends.hosts.up import UpReporter
    from deployctl.core.models.inventory import Inventory


def down(inv: Inventory, purge: bool, run_root: Path, inventory_dir: Path, reporter: UpReporter,
         break_lock: bool = False) -> Outcome:
    from deployctl.backends.hosts.up import UpOptions, run_hosts_operation

    opts = UpOptions(yes=True, purge=purge, run_root=run_root, inventory_dir=inventory_dir)
    return run_hosts_operation("down", inv, opts, reporter, lambda _c: True)
