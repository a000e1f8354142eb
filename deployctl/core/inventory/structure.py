"""Structure problems: pydantic's errors for the inventory turned into problems that name the file, line and key
(what the value must be, the close key a typo meant)."""

from __future__ import annotations

import difflib
import typing
from typing import TYPE_CHECKING, Any

from deployctl.core.models.engine_settings import DEFAULT_KIND, SETTINGS
from deployctl.core.errors import Problem
from deployctl.core.input.raw import KeyPath, RawInventory

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError
    from pydantic_core import ErrorDetails


# --------------------------------------------------------------------------- structure
def _unwrap(annotation: Any) -> type[BaseModel] | None:
    """Strip Optional/list/dict wrappers down to a pydantic model class (or None)."""
    from pydantic import BaseModel

    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in args:
        found = _unwrap(arg)
        if found is not None:
            return found
    return None


def _model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    cls: type[BaseModel] | None = root
    for part in loc:
        if isinstance(part, int):
            continue
        field = getattr(cls, "model_fields", {}).get(part)
        if field is None:
            return None
        cls = _unwrap(field.annotation)
        if cls is None:
            return None
    return cls


_TYPE_NAMES = {"int_type": "an integer", "string_type": "a string", "bool_type": "true or false",
               "float_type": "a number", "list_type": "a list", "dict_type": "a mapping",
               "model_type": "a mapping", "int_parsing": "an integer", "bool_parsing": "true or false"}
_ABSOLUTE = ("an absolute path of plain characters",
             "start with '/', then letters, digits, '.', '_', '-' and '/' only (it reaches docker's and the "
             "shell's command lines)")
PATTERN_HINTS = {  # key -> (what the value must be, hint) for the models' string patterns
    "container_name": ("a valid container name", "docker names: letters, digits, '_', '.', '-', starting with "
                       "a letter or digit"),
    "user": ("a valid login name", "letters, digits, '_', '.', '-', starting with a letter, digit or '_'"),
    "work_dir": _ABSOLUTE, "deploy_dir": _ABSOLUTE, "daemon": _ABSOLUTE, "ms_home": _ABSOLUTE,
    "interface": ("a network interface name", "the name `ip -o addr` shows for the node's IP, e.g. enp189s0f0 "
                  "(at most 15 letters, digits, '_', '.', '-')"),
    "shm_size": ("a docker size", "a number with an optional unit k, m or g, e.g. 500g"),
    "k8s_node": ("a Kubernetes node name", "lower-case letters, digits, '-' and '.', starting and ending with a "
                 "letter or digit"),
    "namespace": ("a Kubernetes name", "lower-case letters, digits and '-', starting and ending with a letter "
                  "or digit"),
    "release": ("a Helm release name", "lower-case letters, digits and '-', starting and ending with a letter "
                "or digit"),
    "scheduler_name": ("a scheduler name", "lower-case letters, digits and '-', starting and ending with a "
                       "letter or digit"),
    "priority_class": ("a PriorityClass name", "lower-case letters, digits, '-' and '.', starting and ending with "
                       "a letter or digit"),
    "queue": ("a Volcano queue name", "lower-case letters, digits and '-', starting and ending with a letter or "
              "digit"),
    "schedule_policy": ("a MindCluster schedule policy", "e.g. chip8-node8 or chip2-node16-sp (MindCluster's "
                        "huawei.com/schedule_policy values)"),
}
_UNION_TAGS = ("str", "int", "float", "bool", "function-after", "function-before")


def _describe(value: object) -> str:
    kind = {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "mapping",
            type(None): "null"}.get(type(value), type(value).__name__)
    return f"{kind} {value!r}" if not isinstance(value, (dict, list)) or len(repr(value)) < 40 else kind


def _one_problem(raw: RawInventory, loc: KeyPath, errs: list[ErrorDetails]) -> Problem:
    err = errs[0]
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx", {})
    if len(errs) > 1:  # a union: every member refused the value
        wanted = " or ".join(dict.fromkeys(_TYPE_NAMES.get(e["type"], e["type"]) for e in errs))
        return raw.problem(loc, f"expected {wanted}, got {_describe(value)}")
    if kind == "extra_forbidden":
        allowed = _allowed(raw, loc)
        close = _suggestion(raw, loc)
        hint = f"did you mean '{close}'?" if close else (
            f"allowed keys here: {', '.join(allowed)}" if allowed else "")
        return raw.problem(loc, f"unknown key '{loc[-1]}'", hint)
    if kind == "missing":
        return raw.problem(loc, f"missing required key '{loc[-1]}'", "every key: `deployctl schema --markdown`, or the "
                           "commented sample `deployctl init` writes")
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        return raw.problem(loc, f"unknown engine kind {ctx.get('tag', value)!r}",
                           f"use one of: {', '.join(sorted(SETTINGS))}")
    if kind == "literal_error":
        return raw.problem(loc, f"{value!r} is not allowed", f"use one of {ctx.get('expected', '')}")
    if kind == "string_pattern_mismatch" and loc[-1] == "name":
        return raw.problem(loc, f"{value!r} is not a valid name",
                           "use lower-case letters, digits and '-', starting and ending with a letter or digit")
    if kind == "string_pattern_mismatch" and loc and loc[-1] in PATTERN_HINTS:
        what, hint = PATTERN_HINTS[loc[-1]]
        return raw.problem(loc, f"{value!r} is not {what}", hint)
    if kind in ("greater_than", "greater_than_equal", "less_than_equal", "less_than"):
        op = {"greater_than": ">", "greater_than_equal": ">=", "less_than_equal": "<=", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()), "")
        return raw.problem(loc, f"{value!r} is out of range: must be {op} {bound}",
                           "sizes, counts and ports are positive integers within the engine's limits")
    if kind in _TYPE_NAMES:
        return raw.problem(loc, f"expected {_TYPE_NAMES[kind]}, got {_describe(value)}",
                           "quote strings that look like numbers; write numbers without quotes")
    if kind == "too_short":
        return raw.problem(loc, "must not be empty")
    return raw.problem(loc, f"{err['msg']} (got {_describe(value)})")


def _key_path(err: ErrorDetails) -> KeyPath:
    """The key path in the file of one pydantic error (the unions' tags left out)."""
    loc = tuple(p for p in err["loc"] if isinstance(p, (str, int)) and p not in _UNION_TAGS)
    if loc[:1] == ("engine",) and len(loc) > 1 and loc[1] in SETTINGS:   # the union's tag
        loc = loc[:1] + loc[2:]
    if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
        loc += ("kind",)
    return loc


def repaired(raw: RawInventory, exc: ValidationError) -> Any | None:
    """A copy of the file's data with its unknown keys set aside, so the value and cross-field checks can read the
    rest in the same round: an unknown key whose did-you-mean is a missing required key is taken as that key (a
    typo), any other is dropped. None when another kind of structure problem remains (a value of the wrong type,
    a required key no typo explains): the checks need the model those would make."""
    import copy

    errors = [(e["type"], _key_path(e)) for e in exc.errors()]
    missing = {loc for kind, loc in errors if kind == "missing"}
    unknown = [loc for kind, loc in errors if kind == "extra_forbidden"]
    meant = {loc: loc[:-1] + (close,) for loc in unknown
             if (close := _suggestion(raw, loc)) and loc[:-1] + (close,) in missing}
    if any(kind not in ("missing", "extra_forbidden") for kind, _ in errors) or missing - set(meant.values()):
        return None
    data = copy.deepcopy(raw.data)
    for loc in unknown:
        parent = data
        for part in loc[:-1]:
            parent = parent[part]
        value = parent.pop(loc[-1])
        if loc in meant:
            parent[meant[loc][-1]] = value
    return data


def _suggestion(raw: RawInventory, loc: KeyPath) -> str | None:
    """The key an unknown key at ``loc`` most likely meant (None: none is close)."""
    close = difflib.get_close_matches(str(loc[-1]), _allowed(raw, loc), n=1)
    return close[0] if close else None


def _allowed(raw: RawInventory, loc: KeyPath) -> list[str]:
    """The keys allowed beside the key at ``loc``."""
    from deployctl.core.models.inventory import Inventory

    model = _model_at(Inventory, loc[:-1])
    if loc[:1] == ("engine",):     # the engine block is a union: the model of the kind this file names
        block = raw.data.get("engine") if isinstance(raw.data, dict) else None
        kind = block.get("kind", DEFAULT_KIND) if isinstance(block, dict) else DEFAULT_KIND
        if kind in SETTINGS:
            model = _model_at(SETTINGS[kind], loc[1:-1])
    return sorted(model.model_fields) if model else []


def structure_problems(raw: RawInventory, exc: ValidationError) -> list[Problem]:
    grouped: dict[KeyPath, list[ErrorDetails]] = {}
    for err in exc.errors():
        grouped.setdefault(_key_path(err), []).append(err)
    problems = {loc: _one_problem(raw, loc, errs) for loc, errs in grouped.items()}
    # `adress` unknown + `address` missing is one typo: keep the did-you-mean, drop the "missing"
    for loc, prob in list(problems.items()):
        if prob.hint.startswith("did you mean '"):
            twin = loc[:-1] + (prob.hint.split("'")[1],)
            problems.pop(twin, None)
    return list(problems.values())
