"""Which MindIE instances run as distributed DP servers (no import from the rest of the driver: the support matrix,
renderers and acceptance checks all ask it)."""

from __future__ import annotations


def distributed(plan, inst) -> bool:
    """A pd-split decode runs distributed DP: one MindIE server per DP rank (mindie-upstream-rules.md §1.1)."""
    return inst.role == "decode" and plan.preset == "pd-split"
