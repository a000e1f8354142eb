"""Numeric engine.env values the planner reads or every rank must agree on, checked before anything uses them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Container

import re

from deployctl.core.errors import Problem

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.input.raw import RawInventory

ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")   # an env variable name (POSIX shell names)

# (low, high, integer?) for HCCL's variables (CANN, every engine): HCCL_BUFFSIZE feeds the memory plan
HCCL_RANGES = {"HCCL_BUFFSIZE": (1, 65536, True), "HCCL_CONNECT_TIMEOUT": (120, 7200, True),
               "HCCL_EXEC_TIMEOUT": (0, 2147483647, True)}
# may differ per role (layout.<role>.env): each role is its own HCCL world and its memory fit reads its own value
# (vLLM-Ascend's PD CI configs set HCCL_BUFFSIZE per role, e.g. tests/e2e/nightly/multi_node/config/*.yaml)
ROLE_ENV = ("HCCL_BUFFSIZE",)


def env_sources(inv: Inventory) -> list[tuple[tuple, dict]]:
    """(key path, env) of every env block: engine.env, then layout.prefill.env / layout.decode.env."""
    out: list[tuple[tuple, dict]] = [(("engine", "env"), inv.engine.env)]
    for role in ("prefill", "decode"):
        rl = getattr(inv.layout, role)
        if rl is not None and rl.env:
            out.append((("layout", role, "env"), rl.env))
    return out


def role_only_problems(inv: Inventory, raw: RawInventory, keys: Container[str]) -> list[Problem]:
    """Variables the plan reads for every role (memory, rank agreement) belong in engine.env, not a role's."""
    out = []
    for path, env in env_sources(inv)[1:]:
        for key in env:
            if key in keys:
                out.append(raw.problem(path + (key,), f"{key} is read by the plan for every role",
                                       f"set it in engine.env instead of {'.'.join(path)}"))
    return out


def env_range_problems(env: dict, raw: RawInventory, ranges: dict[str, tuple],
                       path: tuple = ("engine", "env")) -> list[Problem]:
    """A value outside ``ranges`` (or not a number) is refused at <path>.KEY; fractions are (low, high]."""
    out = []
    for key, (low, high, integer) in ranges.items():
        if key not in env:
            continue
        value = env[key]
        kind = "an integer" if integer else "a number"
        bounds = f"[{low}, {high}]" if integer else f"({low}, {high}]"
        try:
            if isinstance(value, bool):
                raise ValueError
            number = int(value) if integer else float(value)
        except (TypeError, ValueError):
            out.append(raw.problem(path + (key,), f"{key}={value!r} is not {kind}",
                                   f"{key} takes {kind} in {bounds}"))
            continue
        if not ((number >= low if integer else number > low) and number <= high):
            out.append(raw.problem(path + (key,), f"{key}={value!r} is out of range {bounds}",
                                   f"{key} takes {kind} in {bounds}"))
    return out


def secret_env_problems(inv: Inventory, raw: RawInventory) -> list[Problem]:
    """engine.secret_env: variable names (as engine.env keys), each set by an env block, listed once."""
    out: list[Problem] = []
    names = list(getattr(inv.engine, "secret_env", None) or ())
    set_somewhere = {k for _, env in env_sources(inv) for k in env}
    seen: set[str] = set()
    for i, name in enumerate(names):
        key = ("engine", "secret_env", i)
        if not ENV_KEY.match(name):
            out.append(raw.problem(key, f"'{name}' is not a valid environment variable name",
                                   "use letters, digits and '_', not starting with a digit"))
        elif name in seen:
            out.append(raw.problem(key, f"{name} is listed twice", "list each secret variable once"))
        elif name not in set_somewhere:
            out.append(raw.problem(key, f"{name} is not set in engine.env or layout.<role>.env",
                                   "set its value in engine.env, or remove it from engine.secret_env"))
        seen.add(name)
    return out
