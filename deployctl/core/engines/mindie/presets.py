"""Merge MindIE's env presets (env.yaml) for one node: hardware, role, model and engine version.

Order (later wins): common -> hardware.<hw> -> role.<role> -> hardware_role.<hw>-<role>
-> models.<model>.<role> (when the model's entry covers the engine version) -> engine.env.
The variables deployctl computes per node (env.py) are added between the presets and engine.env.
"""

from __future__ import annotations

from functools import cache

from deployctl.core.engine_spec.protocol import read_data
from deployctl.core.render.env import env_value


@cache
def presets() -> dict:
    return read_data(__package__, "env.yaml", words_for_booleans=False)


def _layers(hardware: str, role: str, model: str | None) -> list[dict]:
    p = presets()
    layers = [p["common"], p["hardware"].get(hardware, {}), p["role"].get(role, {}),
              p["hardware_role"].get(f"{hardware}-{role}", {})]
    entry = p.get("models", {}).get(model or "", {})
    layers.append(entry.get(role, {}))
    layers.append(entry.get(f"{hardware}-{role}", {}))
    return layers


def preset_env(hardware: str, role: str, user_env: dict | None = None, model: str | None = None) -> dict[str, str]:
    """The preset variables of one role (engine.env last, user wins); `unset: [...]` entries remove keys."""
    out: dict[str, str] = {}
    for layer in _layers(hardware, role, model) + [user_env or {}]:
        for key in layer.get("unset", ()) if layer is not user_env else ():
            out.pop(key, None)
        out.update({k: env_value(v) for k, v in layer.items() if k != "unset"})
    return out
