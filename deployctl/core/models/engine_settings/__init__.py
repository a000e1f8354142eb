"""Each engine's inventory block (the `engine` key), one pydantic model per engine kind.

The inventory's ``engine`` block is the union of these models, discriminated on ``engine.kind``
(core/models/inventory.py). The union is static: importing the inventory model imports these settings models and
nothing of the engines' code (deployctl/core/engines/<kind>/), which the composition root (deployctl/app/) hands down.
A new engine adds its model here and its folder under core/engines/ (CONTRIBUTING.md).
"""

from __future__ import annotations

from deployctl.core.models.engine import EngineBase
from deployctl.core.models.engine_settings.mindie import MindieSettings
from deployctl.core.models.engine_settings.vllm_ascend import VllmAscendSettings




def kind_of(settings: type[EngineBase]) -> str:
    """The engine.kind a settings model is for: the default of its `kind` literal, the one place a kind is named
    (the engine's spec takes it from here too)."""
    return str(settings.model_fields["kind"].default)


# engine.kind -> the model of its block
AnySettings = MindieSettings | VllmAscendSettings   # the union SETTINGS makes, for the type checker
SETTINGS: dict[str, type[EngineBase]] = {kind_of(m): m for m in (MindieSettings, VllmAscendSettings)}
DEFAULT_KIND = kind_of(MindieSettings)   # an inventory without engine.kind: the first engine deployctl supported

