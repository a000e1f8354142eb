"""engine.assume: what a custom or patched image runs that the support matrix or MindIE's published checks refuse.

Each refusal deployctl can be told about has an id: the support matrix's (``MATRIX``, support.py) and every
acceptance check's (acceptance.yaml ``id``). An ``engine.assume`` entry names one and says why the image runs it;
that refusal then becomes a warning naming the risk and the assumption (shown by ``deployctl plan``), and an
entry that matches no refusal of the plan is a warning too, so stale assumptions show.

Example (a published two-server A2 guide, https://ai6s.net/6953e139836da3214488e6da.html: DeepSeek-V3.2 on a
MindIE 2.2 test image with atb-models patched)::

    engine:
      version: "2.2"
      assume:
        - refusal: model-version
          reason: "2.2 test image with atb-models patched for DeepSeek-V3.2"
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from deployctl.core.engine_spec.protocol import Finding

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory

# the support matrix's refusals an image can be said to lift (support.py _check)
MATRIX = {
    "model-version": "the model on this MindIE version",
    "backend-version": "the model's runtime (atb/torch) on this MindIE version",
    "quant": "the quantization on MindIE",
}


def apply(inv: Inventory, refusal: str, finding: Finding) -> Finding:
    """The finding as the inventory's assumptions leave it: an error an entry names becomes a warning."""
    for i, a in enumerate(getattr(inv.engine, "assume", ()) or ()):
        if a.refusal == refusal and finding.level == "error":
            return replace(finding, level="warning", message=(
                f"assumed (engine.assume[{i}]: {a.reason}): {finding.message} — risk: a stock image refuses "
                "this; if the image does not run what is assumed, MindIE fails at start or at load"),
                hint="")
    return finding


def unused(inv: Inventory, hit: set[str]) -> list[Finding]:
    """Warnings for entries that match no refusal of this plan."""
    return [Finding("warning", f"engine.assume[{i}]", f"engine.assume[{i}] ({a.refusal}) matches no refusal of "
                    "this plan: nothing is assumed", hint="remove the entry")
            for i, a in enumerate(getattr(inv.engine, "assume", ()) or ()) if a.refusal not in hit]
