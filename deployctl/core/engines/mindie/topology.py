"""Which MindIE instances run as distributed DP servers (no import from the rest of the driver: the support matrix,
renderers and acceptance checks all ask it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deployctl.core.models.plan import Instance, Plan


def distributed(plan: Plan, inst: Instance) -> bool:
    """A pd-split decode runs distributed DP: one MindIE server per DP rank (Ascend/MindIE-Motor@5dfb024e
    mindie_motor/src/example/deploy_scripts/user_config.json L185-201, user_config_base_A3.json L203-219: decode
    distDPServerEnabled true, multiNodesInferEnabled false)."""
    return inst.role == "decode" and plan.preset == "pd-split"
