"""SSH targets: one per inventory node, the node's ssh overrides on top of the inventory's defaults."""

from __future__ import annotations

import os
from pathlib import Path

from typing import TYPE_CHECKING

from deployctl.io.executor import HostTarget

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory


def _path(value: str | None, base: Path) -> str | None:
    """Inventory paths are relative to the inventory file; ~ is the user's home."""
    if not value:
        return None
    p = Path(os.path.expanduser(value))
    return str(p if p.is_absolute() else base / p)


def ssh_targets(inv: Inventory, base_dir: Path) -> list[HostTarget]:
    """One target per node: the node's ssh overrides on top of the inventory's ssh defaults."""
    out = []
    for n in inv.nodes:
        o = n.ssh
        d = inv.ssh
        out.append(HostTarget(
            name=n.name, address=n.address,
            user=(o and o.user) or d.user, port=(o and o.port) or d.port,
            key=_path((o and o.key) or d.key, base_dir),
            known_hosts=_path((o and o.known_hosts) or d.known_hosts, base_dir)))
    return out
