"""Renderers, one module per artifact kind, found through RENDERERS. All pure: Plan -> [Artifact]."""

from __future__ import annotations

from typing import Callable

from deployctl.models.artifact import Artifact
from deployctl.models.plan import Plan


def render_plan(plan: Plan) -> list[Artifact]:
    return [Artifact(kind="plan", path="plan.json", content=(plan.model_dump_json(indent=2) + "\n").encode())]


def _registry() -> dict[str, Callable[[Plan], list[Artifact]]]:
    from deployctl.render.engine_config import render_configs
    from deployctl.render.env import render_envs
    from deployctl.render.ms import render_ms
    from deployctl.render.ranktable import render_ranktables
    from deployctl.render.start import render_starts

    return {"plan": render_plan, "config": render_configs, "env": render_envs, "start": render_starts,
            "ranktable": render_ranktables, "ms": render_ms}


def render_artifacts(plan: Plan) -> list[Artifact]:
    """Every file of the rendered tree, sorted by path (byte-stable for the same plan)."""
    out: list[Artifact] = []
    for render in _registry().values():
        out += render(plan)
    return sorted(out, key=lambda a: a.path)
