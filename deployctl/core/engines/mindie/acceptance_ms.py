"""MindIE-MS's own refusals of ms_controller.json / ms_coordinator.json (acceptance_ms.yaml), evaluated on the
files deployctl renders for pd-split: ``evaluate(doc, "controller"|"coordinator", version)`` -> [Refusal].

Like acceptance.py for MindIE-LLM's config manager: each check carries the Motor source file:line; a value the
user set in engine.ms is reported at that key, anything else is deployctl's own bug. Never raises on junk."""

from __future__ import annotations

from functools import cache
from typing import Any

from deployctl.core.engine_spec.protocol import read_data

MOT = "Ascend/MindIE-Motor@5dfb024e"
MULTI = ("p_node_config", "d_node_config")     # ControllerConfig.cpp L246-253


@cache
def data() -> dict:
    return read_data(__package__, "acceptance_ms.yaml")


def checks(side: str) -> list[dict]:
    block = data()[side]
    return [dict(c, src=f"{MOT} {block['file']} {c['line']}") for c in block["checks"]]


def _at(doc: Any, path: str) -> list[tuple[str, object]]:
    """(key, value) pairs at a dot path; '*' walks the two node configs; missing keys give (key, MISSING)."""
    out = [("", doc)]
    for step in [s for s in path.split(".") if s]:
        nxt = []
        for key, node in out:
            names = MULTI if step == "*" else (step,)
            for name in names:
                here = f"{key}.{name}" if key else name
                nxt.append((here, node.get(name, MISSING) if isinstance(node, dict) else MISSING))
        out = nxt
    return out


MISSING = object()


def _int(value: object, c: dict[str, Any]) -> str | None:
    if value is MISSING:
        return "missing"
    if isinstance(value, bool) or not isinstance(value, int):
        return "not an integer"
    if not c["min"] <= value <= c["max"]:
        return f"{value} is outside [{c['min']}, {c['max']}]"
    return None


def _one(kind: str, value: object, c: dict[str, Any]) -> str | None:
    if kind == "int":
        return _int(value, c)
    if value is MISSING:
        return "missing"
    if kind == "str":
        return None if isinstance(value, str) and value else "not a non-empty string"
    if kind == "bool":
        return None if isinstance(value, bool) else "not a boolean"
    if kind == "enum":
        return None if value in c["values"] else f"{value!r} is not one of {', '.join(c['values'])}"
    if kind == "portstr":
        ok = isinstance(value, str) and value.isdigit() and c["min"] <= int(value) <= c["max"]
        return None if ok else f"{value!r} is not a port string in [{c['min']}, {c['max']}]"
    if kind == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and c["min"] <= value <= c["max"]
        return None if ok else f"{value!r} is outside [{c['min']}, {c['max']}]"
    return None


def _sections(c: dict[str, Any], doc: Any) -> list[tuple[str, str]]:
    return [(k, "missing section") for k in c["keys"] if not isinstance(doc.get(k), dict)]


def _scheduler(c: dict[str, Any], doc: Any) -> list[tuple[str, str]]:
    sch = doc.get("digs_scheduler_config")
    if not isinstance(sch, dict):
        return []
    mode, stype, algo = sch.get("deploy_mode"), sch.get("scheduler_type"), sch.get("algorithm_type")
    key = "digs_scheduler_config.scheduler_type"
    if mode == "single_node":
        if stype != "default_scheduler" or algo not in ("cache_affinity", "round_robin"):
            return [(key, "single_node takes default_scheduler with cache_affinity or round_robin")]
        return []
    allowed = {"digs_scheduler": "load_balance", "default_scheduler": "round_robin"}
    if stype not in allowed:
        return [(key, f"{stype!r}: pd modes take digs_scheduler or default_scheduler")]
    if algo != allowed[stype]:
        return [("digs_scheduler_config.algorithm_type", f"{stype} takes algorithm_type {allowed[stype]}")]
    return []


def _rates(c: dict[str, Any], doc: Any) -> list[tuple[str, str]]:
    p, d = doc.get("default_p_rate"), doc.get("default_d_rate")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (p, d)):
        return []
    if (p == 0) != (d == 0):
        return [("default_p_rate", f"default_p_rate {p} and default_d_rate {d} must both be 0 or both not 0")]
    if p + d > 768:
        return [("default_p_rate", f"default_p_rate + default_d_rate = {p + d} is over 768")]
    return []


CUSTOM = {"sections": _sections, "scheduler": _scheduler, "rates": _rates}


def evaluate(doc: Any, side: str, version: str | None) -> list[tuple[str, str, str, str]]:
    """(check id, key, message, source) of every refusal of one MindIE-MS file."""
    if version not in data()["versions"] or not isinstance(doc, dict):
        return []
    out = []
    for c in checks(side):
        if c.get("when") and c["when"] not in doc:
            continue
        if c["kind"] == "custom":
            out += [(c["id"], k, m, c["src"]) for k, m in CUSTOM[c["fn"]](c, doc)]
            continue
        paths = [f"{c['path']}.{k}" if c["path"] else k for k in c["keys"]] if "keys" in c else [c["path"]]
        for path in paths:
            for key, value in _at(doc, path):
                problem = _one(c["kind"], value, c)
                if problem:
                    out.append((c["id"], key, problem, c["src"]))
    return out
