"""Per-role settings (pd-split): the inventory as one role's instances see it.

`layout.<role>.engine` (the keys the engine lets differ per role, its engine_spec's ``role_keys``), `layout.<role>.model`
(request limits) and `layout.<role>.env` are merged over the engine and model blocks. Every consumer that works
for one role (memory fit, renderers, acceptance checks, chart values) reads ``for_role(inv, role)`` and so never
needs to know which keys a role may override.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deployctl.core.errors import Problem

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory, RoleLayout
    from deployctl.core.input.raw import RawInventory

ROLES = ("prefill", "decode")


def role_block(inv: Inventory, role: str) -> RoleLayout | None:
    """layout.<role> of a pd-split inventory, else None (a mixed instance has no role block)."""
    return getattr(inv.layout, role, None) if role in ROLES else None


def merged_engine_data(engine_data: dict, overrides: dict, env: dict) -> dict:
    """The engine block's data with a role's overrides: mappings merge key by key (lists of objects by position,
    as engine.config does), lists are appended (a role's flag comes after engine.args, so the role's wins), other
    values replace; the role's env goes over engine.env."""
    from deployctl.core.input.merge import merge_by_position

    out = dict(engine_data)
    for key, value in overrides.items():
        base = out.get(key)
        if isinstance(base, dict) and isinstance(value, dict):
            out[key] = merge_by_position(base, value)
        elif isinstance(base, list) and isinstance(value, list):
            out[key] = list(base) + list(value)
        else:
            out[key] = value
    if env:
        out["env"] = {**out.get("env", {}), **env}
    return out


def for_role(inv: Inventory, role: str) -> Inventory:
    """The inventory with layout.<role>'s engine keys, request limits and env merged in; ``inv`` itself when the
    role sets none (mixed instances, roles without overrides). Validation has checked the overrides."""
    block = role_block(inv, role)
    if block is None or not (block.engine or block.model or block.env):
        return inv
    cache = inv.__dict__.setdefault("_role_views", {})
    if role in cache:
        return cache[role]
    data = merged_engine_data(inv.engine.model_dump(), block.engine, block.env)
    engine = type(inv.engine).model_validate(data)
    model = inv.model
    if block.model is not None:
        limits = {k: v for k, v in block.model.model_dump().items() if v is not None}
        limits.pop("prefill_budget_tokens", None)          # memory sizing only: limits.workspace_tokens reads it
        tokens = limits.pop("speculative_tokens", None)
        if tokens is not None and model.speculative is not None:      # without model.speculative: refused
            limits["speculative"] = model.speculative.model_copy(update={"tokens": tokens})
        model = model.model_copy(update=limits)
    view = inv.model_copy(update={"engine": engine, "model": model})
    cache[role] = view
    return view


def role_problems(inv: Inventory, raw: RawInventory) -> list[Problem]:
    """layout.<role>.engine: only the keys the engine lets differ per role, with values its settings accept;
    layout.<role>.model/engine outside pd-split are refused by the layout checks (roles exist only there)."""
    from pydantic import ValidationError


    engine_spec = inv.engine_spec
    allowed = tuple(engine_spec.role_keys)
    out: list[Problem] = []
    for role in ROLES:
        block = role_block(inv, role)
        if block is None or not block.engine:
            continue
        base = ("layout", role, "engine")
        bad = [k for k in block.engine if k not in allowed]
        for key in bad:
            hint = (f"{engine_spec.kind} lets these differ per role: {', '.join(allowed)}" if allowed else
                    f"{engine_spec.kind} has no engine settings that differ per role")
            out.append(raw.problem(base + (key,), f"engine.{key} cannot differ per role", hint))
        if bad:
            continue
        data = merged_engine_data(inv.engine.model_dump(), block.engine, {})
        try:
            type(inv.engine).model_validate(data)
        except ValidationError as exc:
            for err in exc.errors():
                loc = tuple(err["loc"])
                out.append(raw.problem(base + loc, f"{'.'.join(map(str, loc))}: {err['msg']}",
                                       f"the same values as engine.{loc[0]} are accepted"))
    return out
