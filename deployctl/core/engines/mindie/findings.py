"""What MindIE refuses for a plan, with engine.assume applied: the support matrix's findings (support.py) and
the refusals of MindIE's own config checks on the rendered files (acceptance.py); an assumed refusal becomes a
warning (assume.py). The driver's ``check`` and ``accept`` answer from here."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from deployctl.core.engine_spec.protocol import Finding
from deployctl.core.engines.mindie import assume
from deployctl.core.engines.mindie.acceptance import plan_refusals
from deployctl.core.engines.mindie.support import expand_source, matrix_findings

if TYPE_CHECKING:
    from deployctl.core.models.plan import Plan


def check(plan: Plan) -> list[Finding]:
    """The support matrix's findings, engine.assume applied (assume.py); the acceptance refusals an assumption
    turned into warnings are listed here too, so that plan shows them (the driver adds rules.py's layout
    findings)."""
    hit: set[str] = set()
    out = []
    for refusal, f in matrix_findings(plan):
        if refusal is not None and f.level == "error":
            hit.add(refusal)
            f = assume.apply(plan.inventory, refusal, f)
        out.append(replace(f, source=expand_source(f.source)))
    if getattr(plan.inventory.engine, "assume", None):
        for refusal, f in plan_refusals(plan):
            hit.add(refusal)
            f = assume.apply(plan.inventory, refusal, f)
            if f.level == "warning":
                out.append(f)
        out += assume.unused(plan.inventory, hit)
    return out


def plan_findings(plan: Plan) -> list[Finding]:
    """MindIE's refusals of every config file deployctl renders for this plan (Finding, level error); a refusal
    engine.assume names is left out here (check lists it as a warning)."""
    return [f for refusal, f in plan_refusals(plan) if assume.apply(plan.inventory, refusal, f).level == "error"]
