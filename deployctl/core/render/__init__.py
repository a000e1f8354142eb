"""Render a plan: plan.json plus every file the engine spec renders. Pure: Plan -> [Artifact]."""

from __future__ import annotations

from deployctl.core.models.artifact import Artifact
from deployctl.core.models.plan import Plan


def render_plan(plan: Plan) -> list[Artifact]:
    """plan.json: the plan with its secret env values masked (deployctl.core.input.secrets), readable by its owner only."""
    from deployctl.core.input.secrets import plan_json

    return [Artifact(kind="plan", path="plan.json", content=plan_json(plan) + b"\n", mode=0o600)]


def render_artifacts(plan: Plan) -> list[Artifact]:
    """Every file of the rendered tree, sorted by path (byte-stable for the same plan)."""
    from deployctl.core.heap import bulk
    from deployctl.core.render.router import render_router

    with bulk():
        out = render_plan(plan) + plan.engine_spec.render(plan) + render_router(plan)
        return sorted(out, key=lambda a: a.path)
