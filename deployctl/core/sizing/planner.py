"""The planner's entry point: the plan of a validated inventory, or a refusal whose hint the planner itself accepted.

plan.py builds the plan; fixes.py searches the smallest change that plans (through recommend.py, which plans each
candidate with ``plan_without_hints``): kept apart so that no module of sizing imports one that imports it back.
"""

from __future__ import annotations

from deployctl.core.errors import LayoutError
from deployctl.core.models.inventory import Inventory
from deployctl.core.models.plan import Plan
from deployctl.core.sizing.fixes import with_verified_hint
from deployctl.core.sizing.plan import plan_without_hints


def plan_layout(inv: Inventory, *, checked: bool = True, fixes: bool = True, accept: bool = True) -> Plan:
    """Build the plan for a validated inventory; a refusal carries a hint the planner itself accepted
    (fixes.py; ``fixes=False`` inside that search and in `recommend`; ``accept``: plan_without_hints')."""
    try:
        return plan_without_hints(inv, checked=checked, accept=accept)
    except LayoutError as exc:
        raise (with_verified_hint(exc, inv) if fixes and checked else exc) from None
