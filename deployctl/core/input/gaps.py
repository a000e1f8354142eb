"""What an inventory may leave to preflight: device IPs, A3 SDIDs, super pod ids and network interfaces.

`validate`, `plan` and `recommend` plan without them (they say what preflight still has to tell); `render`, `up`
and `diff` refuse an inventory with such gaps unless the facts of a preflight run (the latest one of the inventory,
or --facts) fill them; `preflight` accepts it (the gaps become "needs facts" notes) because it is the command that
reads them from the hosts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from deployctl.core.errors import Problem

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.input.raw import RawInventory

What = Literal["ip", "sdid", "super_pod_id", "interface"]
NOUNS = {"ip": "device IPs", "sdid": "SDIDs", "super_pod_id": "super pod id",
         "interface": "network interfaces (`ip -o addr`)"}


@dataclass(frozen=True)
class NeedsFacts(Problem):
    """A problem that preflight's facts solve: ``what`` of ``node`` (of its ``device``, or all when None)."""

    node: str = ""
    device: int | None = None
    what: What = "ip"

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "path": self.path, "node": self.node, "device": self.device,
                "what": self.what, "message": self.message}


def needs_facts(raw: RawInventory, key: tuple, message: str, hint: str, *, node: str, device: int | None = None,
                what: What = "ip") -> NeedsFacts:
    """Like ``RawInventory.problem``, for a gap preflight can fill."""
    from deployctl.core.input.raw import format_path

    return NeedsFacts(message=message, path=format_path(key), file=raw.file, line=raw.line_of(key), hint=hint,
                      node=node, device=device, what=what)


def interface_gaps(inv: Inventory, raw: RawInventory, needs: str | None) -> list[NeedsFacts]:
    """Every node without `interface` when the engine needs one per node (``needs`` says why, None: it does not)."""
    if needs is None:
        return []
    return [needs_facts(raw, ("nodes", i), f"node '{n.name}' has no known network interface for {n.server_ip}: "
                        f"{needs}", discovery_hint(raw.file, "interface") + f"; or set nodes[{i}].interface",
                        node=n.name, what="interface")
            for i, n in enumerate(inv.nodes) if n.interface is None]


def discovery_hint(inventory_file: str, what: What = "ip", *, facts_given: bool = False) -> str:
    """How to get ``what`` from the hosts: the one path that works for up/diff and for plan/render."""
    noun = NOUNS[what]
    if facts_given:
        return (f"the facts file has no {noun} for it (host unreachable or probe failed?): fix that and run "
                f"`deployctl preflight -i {inventory_file}` again")
    return (f"run `deployctl preflight -i {inventory_file}` first: every command then uses the {noun} it "
            "discovers (or pass --facts FILE)")
