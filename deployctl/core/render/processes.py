"""What runs on each node of a plan, and where clients go: the engine spec's processes, plus deployctl's
router in front of a fleet of mixed instances (fleet/router.py). Pure: the plan in, no host touched."""

from __future__ import annotations

from typing import TYPE_CHECKING

from deployctl.core.models.plan import Plan

if TYPE_CHECKING:
    from deployctl.core.engine_spec.protocol import NodeProcesses


def processes(plan: Plan, node: str) -> NodeProcesses:
    """What the engine spec says runs on this node (engine container, router containers, readiness)."""
    from dataclasses import replace


    procs = plan.engine_spec.processes(plan, plan.node(node))
    if plan.router is not None and plan.router.node == node:     # several mixed instances: the router in front
        from deployctl.core.render.router import process

        return replace(procs, router=process(plan), serves=plan.router.url, smoke=True)
    if plan.router is not None:
        return replace(procs, smoke=False)        # clients (and the smoke request) go through the router
    return procs


def has_router(plan: Plan, node: str) -> bool:
    """This node runs the router in front of the instances (the engine's P/D router, or deployctl's)."""
    return plan.node(node).runs_router or (plan.router is not None and plan.router.node == node)


def entry_url(plan: Plan) -> str:
    """Where clients go: the endpoint `up` sends its smoke request to (the router, else the first instance's
    master), as the engine spec says."""
    return next((p.serves for p in (processes(plan, n.name) for n in plan.nodes) if p.smoke and p.serves), "")
