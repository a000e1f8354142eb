"""Each engine's inventory block (the `engine` key), one pydantic model per engine kind, found by file.

The inventory's ``engine`` block is the union of these models, discriminated on ``engine.kind``
(core/models/inventory.py). Every module of this package that defines ``MODEL`` (a subclass of EngineBase) is one
engine's block: a new engine adds its module here and its folder under deployctl/core/engines/, and changes no
file that exists (CONTRIBUTING.md; tests/architecture/test_engine_plugins.py). Importing this package imports
these settings models and nothing of the engines' code (deployctl/core/engines/<kind>/), which the composition
root (deployctl/app/) hands down.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deployctl.core.models.engine import EngineBase
from deployctl.core.plugins import plugin_modules

# the engine an inventory without engine.kind means: the first engine deployctl supported (its module name)
_DEFAULT_MODULE = "mindie"


def kind_of(settings: type[EngineBase]) -> str:
    """The engine.kind a settings model is for: the default of its `kind` literal, the one place a kind is named
    (the engine's spec takes it from here too)."""
    return str(settings.model_fields["kind"].default)


def _discover() -> dict[str, type[EngineBase]]:
    """engine.kind -> model, from every module of this package that defines MODEL, the default kind first and
    the others in module-name order (the schema and `deployctl engines` list them in this order)."""
    modules = sorted(plugin_modules(__name__, __path__, packages=False),
                     key=lambda m: m.__name__.rsplit(".", 1)[1] != _DEFAULT_MODULE)
    out: dict[str, type[EngineBase]] = {}
    for module in modules:
        model = getattr(module, "MODEL", None)
        if isinstance(model, type) and issubclass(model, EngineBase):
            kind = kind_of(model)
            if kind in out:
                raise RuntimeError(f"engine.kind {kind!r} is declared by two settings modules")
            out[kind] = model
    return out


# engine.kind -> the model of its block
SETTINGS: dict[str, type[EngineBase]] = _discover()
# an inventory without engine.kind means this one (inventory spec: MindIE), installed or not: a deployctl without it
# refuses such an inventory rather than read it as another engine's
DEFAULT_KIND = next((kind_of(m) for m in SETTINGS.values() if m.__module__.rsplit(".", 1)[1] == _DEFAULT_MODULE),
                    _DEFAULT_MODULE)

if TYPE_CHECKING:
    # for the type checker only: the union SETTINGS makes is open (an engine adds a module); code that reads an
    # engine's own keys casts inv.engine to its model (core/engines/<kind>/)
    AnySettings = EngineBase
