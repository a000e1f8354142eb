"""The engine registry: engine.kind -> its EngineSpec (deployctl/core/engine_spec/protocol.py), found by folder.

Every package under deployctl/core/engines/ whose ``__init__`` defines ``SPEC`` is one engine: a new engine adds
its folder there and its settings model under deployctl/core/models/engine_settings/, and changes no file that
exists (CONTRIBUTING.md; tests/architecture/test_engine_plugins.py shows it). Only the composition root
(deployctl/app/) resolves an engine: it reads engine.kind once, hands the spec to validation (which attaches it to
the inventory: ``inv.engine_spec``, ``plan.engine_spec``) and everything below receives it from there. Each spec
imports its engine's modules when a method needs them, so importing this registry stays cheap.
"""

from __future__ import annotations

from types import ModuleType

from deployctl.core import engines as _engines_package
from deployctl.core.engine_spec.protocol import Chart, EngineSpec
from deployctl.core.errors import UsageError
from deployctl.core.models.engine_settings import SETTINGS
from deployctl.core.plugins import plugin_modules


def discover(package: ModuleType = _engines_package) -> dict[str, EngineSpec]:
    """engine.kind -> spec of every engine folder in ``package`` (a sub-package with SPEC), in the settings
    models' order (the default engine first)."""
    found: dict[str, EngineSpec] = {}
    for module in plugin_modules(package.__name__, package.__path__, packages=True):
        spec = getattr(module, "SPEC", None)
        if spec is None:
            continue
        if spec.kind in found:
            raise RuntimeError(f"engine.kind {spec.kind!r} is declared by two engine folders")
        found[spec.kind] = spec
    order = list(SETTINGS)
    return dict(sorted(found.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))


SPECS: dict[str, EngineSpec] = discover()
KINDS = tuple(SPECS)
assert set(SPECS) == set(SETTINGS), (
    f"every engine folder needs its settings model and the other way round: folders {sorted(SPECS)}, "
    f"settings {sorted(SETTINGS)} (core/models/engine_settings/)")


def resolve(kind: str) -> EngineSpec:
    """The spec of one engine kind; an unknown kind is a usage error naming the known ones."""
    try:
        return SPECS[kind]
    except KeyError:
        raise UsageError(f"unknown engine.kind {kind!r}", hint=f"use one of: {', '.join(sorted(SPECS))}") from None


def charts() -> tuple[Chart, ...]:
    """Every engine's part of the chart, in registry order (the chart's values hold every engine's block)."""
    return tuple(spec.chart for spec in SPECS.values())
