"""MindIE's Prometheus switch, MIES_SERVICE_MONITOR_MODE: on in the env preset (env.yaml `common`, with its source),
so a deployment can be scraped from the first `up`; when engine.env or layout.<role>.env turns it off, `plan` says so
(a note; a value MindIE cannot read as a number, a warning) and `observe render` marks the targets.

MindIE reads it once at start: ``std::stoi(value) == 1`` turns the metrics on (leading blanks and digits count,
"1abc" is 1); empty leaves them off, and a value without leading digits throws, is logged and leaves them off
(MindIE-LLM@8b4871ad src/server/endpoint/http_wrapper/prometheus_metrics.cpp L58-69); GET /metrics then answers
500 (http_handler.cpp L960-967).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from deployctl.core.engine_spec.protocol import Finding

if TYPE_CHECKING:
    from deployctl.core.models.plan import Plan

MONITOR_ENV = "MIES_SERVICE_MONITOR_MODE"
SOURCE = ("LLM30 docs/zh/user_guide/user_manual/environment_variable.md L51, "       # support.py REPOS expands LLM30
          "src/server/endpoint/http_wrapper/prometheus_metrics.cpp L58-69")
_STOI = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")


def stoi(value: str) -> int | None:
    """``std::stoi``: leading whitespace, a sign and the leading digits; None where it throws (no digits)."""
    m = _STOI.match(value)
    return int(m.group(1)) if m else None


def role_value(plan: Plan, role: str) -> str | None:
    """The value a role's env file sets: the preset, engine.env over it, layout.<role>.env over that."""
    from deployctl.core.engines.mindie.presets import preset_env
    from deployctl.core.render.env import user_env

    env = preset_env(plan.hardware, role, user_env(plan.inventory, role), model=plan.inventory.model.name)
    return env.get(MONITOR_ENV)


def is_on(value: str | None) -> bool:
    return value is not None and stoi(value) == 1


def _where(plan: Plan, role: str) -> str:
    """The inventory key that turned it off: the role's own env (pd-split) or engine.env."""
    block = getattr(plan.inventory.layout, role, None) if role in ("prefill", "decode") else None
    if block is not None and MONITOR_ENV in block.env:
        return f"layout.{role}.env.{MONITOR_ENV}"
    return f"engine.env.{MONITOR_ENV}"


def _shown(plan: Plan, value: str | None) -> str:
    """The value as messages show it: *** when engine.secret_env names the variable (it never leaves the hosts)."""
    from deployctl.core.input.secrets import MASK, declared

    return MASK if MONITOR_ENV in declared(plan.inventory) else repr(value)


def needs(plan: Plan, role: str) -> str:
    """What a metrics target of ``role`` needs to answer ("" when the switch is on), for `observe render`."""
    value = role_value(plan, role)
    if is_on(value):
        return ""
    return (f"{_where(plan, role)} is {_shown(plan, value)}: MindIE answers /metrics with 500 unless it is 1 "
            "(remove it, deployctl's preset sets 1, and redeploy)")


def findings(plan: Plan) -> list[Finding]:
    """A note per role whose env turns the metrics off (a warning when MindIE cannot read the value as a number)."""
    out = []
    for role in dict.fromkeys(inst.role for inst in plan.instances):
        value = role_value(plan, role)
        if is_on(value):
            continue
        where = _where(plan, role)
        said = f"{where} is {_shown(plan, value)}"
        off = (f"MindIE's Prometheus metrics are off on the {role} nodes (GET /metrics answers 500: the targets of "
               "`observe render` stay down)")
        if value and stoi(value) is None:       # empty is off without a word; other text throws in stoi
            out.append(Finding("warning", where, f"{said}, not a number MindIE can read: {off}; set it to 1 or "
                               "remove it (deployctl's preset sets 1)", SOURCE))
        else:
            out.append(Finding("note", where, f"{said}: {off}; remove it to have them (deployctl's preset sets 1)",
                               SOURCE))
    return out
