"""Render a plan: plan.json plus every file the engine spec renders. Pure: Plan -> [Artifact]."""

from __future__ import annotations

from typing import Callable

from deployctl.core.models.artifact import Artifact
from deployctl.core.models.plan import Plan


def render_plan(plan: Plan) -> list[Artifact]:
    """plan.json: the plan with its secret env values masked (deployctl.core.input.secrets), readable by its owner only."""
    from deployctl.core.input.secrets import plan_json

    return [_plan_file(plan_json(plan))]


def _plan_file(text: bytes) -> Artifact:
    return Artifact(kind="plan", path="plan.json", content=text + b"\n", mode=0o600)


def render_artifacts(plan: Plan, plan_json: Callable[[], bytes] | None = None) -> list[Artifact]:
    """Every file of the rendered tree, sorted by path (byte-stable for the same plan). ``plan_json``: plan.json's
    text (secrets.plan_json) made elsewhere, asked for after the engine's files (`render` has it serialised by the
    child that checks the plan, while this process renders)."""
    from deployctl.core.heap import bulk
    from deployctl.core.render.router import render_router

    with bulk():
        out = plan.engine_spec.render(plan) + render_router(plan)
        out += render_plan(plan) if plan_json is None else [_plan_file(plan_json())]
        return sorted(out, key=lambda a: a.path)
