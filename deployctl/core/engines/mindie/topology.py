"""Which MindIE instances run as distributed DP servers (no import from the rest of the driver: the support matrix,
renderers and acceptance checks all ask it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deployctl.core.models.plan import Instance, Plan


def distributed(plan: Plan, inst: Instance) -> bool:
    """A pd-split decode runs distributed DP: one MindIE server per DP rank (mindie-upstream-rules.md §1.1)."""
    return inst.role == "decode" and plan.preset == "pd-split"
