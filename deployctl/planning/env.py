"""Merge the env presets (catalog/env.yaml) for one hardware kind and role."""

from __future__ import annotations

from deployctl import catalog


def env_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def preset_env(hardware: str, role: str, user_env: dict | None = None) -> dict[str, str]:
    """common -> hardware -> role -> hardware_role -> engine.env (user wins)."""
    p = catalog.env_presets()
    out: dict[str, str] = {}
    for layer in (p["common"], p["hardware"].get(hardware, {}), p["role"].get(role, {}),
                  p["hardware_role"].get(f"{hardware}-{role}", {}), user_env or {}):
        out.update({k: env_value(v) for k, v in layer.items()})
    return out
