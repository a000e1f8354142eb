"""The engine registry: engine.kind -> its EngineSpec (deployctl/core/engine_spec/protocol.py).

Only the composition root (deployctl/app/) resolves an engine: it reads engine.kind once, hands the spec to
validation (which attaches it to the inventory: ``inv.engine_spec``, ``plan.engine_spec``) and everything below
receives it from there. A new engine adds its folder under deployctl/core/engines/, its settings model under
deployctl/core/models/engine_settings/ and one line here (CONTRIBUTING.md). Each spec imports its engine's
modules when a method needs them, so importing this registry stays cheap.
"""

from __future__ import annotations

from deployctl.core.engine_spec.protocol import Chart, EngineSpec
from deployctl.core.engines.mindie import SPEC as MINDIE
from deployctl.core.engines.vllm_ascend import SPEC as VLLM_ASCEND
from deployctl.core.errors import UsageError
from deployctl.core.models.engine_settings import DEFAULT_KIND, SETTINGS

SPECS: dict[str, EngineSpec] = {spec.kind: spec for spec in (MINDIE, VLLM_ASCEND)}
KINDS = tuple(SPECS)
assert set(SPECS) == set(SETTINGS), "every engine needs its settings model (core/models/engine_settings/)"
assert DEFAULT_KIND in SPECS


def resolve(kind: str) -> EngineSpec:
    """The spec of one engine kind; an unknown kind is a usage error naming the known ones."""
    try:
        return SPECS[kind]
    except KeyError:
        raise UsageError(f"unknown engine.kind {kind!r}", hint=f"use one of: {', '.join(sorted(SPECS))}") from None


def charts() -> tuple[Chart, ...]:
    """Every engine's part of the chart, in registry order (the chart's values hold every engine's block)."""
    return tuple(spec.chart for spec in SPECS.values())
