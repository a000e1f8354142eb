"""Key-level diff of a deployed file against its re-rendered version (pure: bytes in, changes out).

`deployctl diff` knows from the digests *that* a file differs; this says *what* differs, in the terms of
the file's own format:

* ``*.json`` -> JSON, ``*.yaml`` / ``*.yml`` -> YAML (``yaml.safe_load``): dotted key paths, list items
  as ``[i]`` compared index by index, values JSON-encoded (``"hccl"``, ``32``, ``true``)::

      BackendConfig.ScheduleConfig.maxBatchSize: 32 → 64
      BackendConfig.ModelDeployConfig.ModelConfig[0].tp: 8 → 16

* ``env`` / ``*.env`` -> a docker ``--env-file``, read the way docker reads it (leading whitespace
  dropped, ``#`` comments and blank lines skipped, the value verbatim after the first ``=``: docker
  strips no quotes, so neither does this; a later line for the same name wins; a bare ``NAME`` passes
  the host's value through)::

      env HCCL_BUFFSIZE: 120 → 1050
      env ATB_LLM_NEW: (absent) → 1
      env HTTPS_PROXY: "" → (removed)

* anything else (start.sh, ...), and any file that cannot be decoded or parsed as its format -> a line
  diff (``difflib``), numbered by the new file's lines (a removed line by the old file's)::

      line 7: docker rm -f mindie → docker rm -f mindie-engine

Values under a secret-looking key (:func:`deployctl.core.input.secrets.is_secret`, or an env name the inventory lists
under ``engine.secret_env``: ``file_changes(..., secret_names=...)``) are never shown: both sides read ``***``, the
change itself is still reported (and a line diff masks a whole line that assigns one).

:func:`file_changes` returns:

* ``[]`` when the files do not differ in what the format cares about (JSON key order, YAML comments,
  env comments, line endings),
* the changes, sorted by key path (files in line order); after ``limit`` of them one last marker,
  ``KeyChange(key="…", old=None, new="N more changes")`` (:attr:`KeyChange.is_more`; prints as
  ``… N more changes``),
* ``None`` when no readable summary exists (binary content): say "differ" as before.

It never raises.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import AbstractSet, Any

MORE = "…"
ABSENT = "(absent)"
REMOVED = "(removed)"
INHERITED = "(from the host environment)"
ROOT = "(root)"
MAX_VALUE = 200                 # display characters per value, then "…"
_MAX_NODES = 200_000            # values walked per file (a YAML alias bomb falls back to the line diff)


@dataclass(frozen=True)
class KeyChange:
    key: str            # dotted path (JSON/YAML), 'env NAME' (env files), 'line N' (other files), '…' (marker)
    old: str | None     # display value; None = the key was absent
    new: str | None     # display value; None = the key was removed

    @property
    def is_more(self) -> bool:
        """The final 'N more changes' marker of a list cut at ``limit``."""
        return self.key == MORE

    def __str__(self) -> str:
        if self.is_more:
            return f"{MORE} {self.new}"
        return (f"{self.key}: {ABSENT if self.old is None else self.old} → "
                f"{REMOVED if self.new is None else self.new}")


# ---------------------------------------------------------------------------------------------- secrets
# One definition for the whole tool (deployctl.core.input.secrets); re-exported here for the diff's callers.
from deployctl.core.input.secrets import MASK, is_secret, redact as _redact  # noqa: E402,F401


# --------------------------------------------------------------------------------------------- displays

def _clip(text: str) -> str:
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE - 1] + MORE


def _jsonable(value: object) -> list[Any] | str:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=lambda v: (str(v), type(v).__name__))
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def show_json(value: object) -> str:
    """A JSON/YAML value for display: JSON-encoded scalar, or compact JSON for a container."""
    try:
        text = json.dumps(_redact(value), ensure_ascii=False, separators=(",", ":"), sort_keys=False,
                          default=_jsonable)
    except (TypeError, ValueError):
        text = repr(value)
    return _clip(text)


def show_text(value: str) -> str:
    """A raw string for display (env values, k8s strings): as is, JSON-quoted when it would be ambiguous
    (empty, surrounding whitespace, control characters, quotes around it)."""
    plain = (value and value == value.strip() and value.isprintable() and value[0] not in "\"'"
             and value[-1] not in "\"'" and value not in (ABSENT, REMOVED, MASK, INHERITED))
    return _clip(value if plain else json.dumps(value, ensure_ascii=False))


# ---------------------------------------------------------------------------------------------- parsing

class _Unparsable(Exception):
    pass


def file_format(name: str) -> str:
    """json | yaml | env | lines, from the file name (a path's last component)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1].lower()
    if base.endswith(".json"):
        return "json"
    if base.endswith((".yaml", ".yml")):
        return "yaml"
    if base == "env" or base.endswith(".env"):
        return "env"
    return "lines"


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _Unparsable("not UTF-8") from exc


_PASS = object()                # an env line without '=': docker passes the host's value through


def parse_env(text: str) -> dict[str, object]:
    """A docker --env-file (docker/cli opts/envfile.go): NAME -> the verbatim value (the last line wins),
    or the pass-through marker for a bare ``NAME``. Raises _Unparsable where docker refuses the file."""
    out: dict[str, object] = {}
    for raw in text.split("\n"):
        line = raw[:-1] if raw.endswith("\r") else raw
        line = line.lstrip()
        if not line or line.startswith("#"):
            continue
        name, eq, value = line.partition("=")
        name = name.lstrip(" \t")
        if not name or " " in name or "\t" in name:
            raise _Unparsable(f"bad env line {line!r}")
        out[name] = value if eq else _PASS
    return out


def _parse(fmt: str, data: bytes) -> Any:
    text = _text(data)
    if fmt == "json":
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise _Unparsable(str(exc)) from exc
    if fmt == "yaml":
        import yaml

        try:
            return yaml.safe_load(text)
        except (yaml.YAMLError, RecursionError, ValueError) as exc:
            raise _Unparsable(str(exc)) from exc
    return parse_env(text)


# ------------------------------------------------------------------------------------------------ trees

class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_NONE = _Absent()
_SEGMENT = re.compile(r"[^.\[\]\s](?:[^.\[\]]*[^.\[\]\s])?")


def segment(key: object) -> str:
    """A dict key as a path segment: as is, or ``["..."]`` when it has dots, brackets, surrounding
    whitespace, or is empty or '…'."""
    text = key if isinstance(key, str) else str(key)
    if _SEGMENT.fullmatch(text) and text != MORE:
        return text
    return "[" + json.dumps(text, ensure_ascii=False) + "]"


def _join(path: str, seg: str) -> str:
    if not path:
        return seg
    return path + seg if seg.startswith("[") else f"{path}.{seg}"


def _same_scalar(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


class _Walk:
    def __init__(self) -> None:
        self.out: list[KeyChange] = []
        self.nodes = 0

    def leaf(self, path: str, secret: bool, old: Any, new: Any) -> None:
        def show(v: Any) -> str | None:
            if v is _NONE:
                return None
            return MASK if secret else show_json(v)

        self.out.append(KeyChange(path or ROOT, show(old), show(new)))

    def walk(self, path: str, secret: bool, old: Any, new: Any) -> None:
        self.nodes += 1
        if self.nodes > _MAX_NODES:
            raise _Unparsable("too many values")
        if isinstance(old, dict) and isinstance(new, dict) or \
                (old is _NONE and isinstance(new, dict) and new) or (new is _NONE and isinstance(old, dict) and old):
            a = old if isinstance(old, dict) else {}
            b = new if isinstance(new, dict) else {}
            for k in sorted(set(a) | set(b), key=lambda k: (str(k), type(k).__name__)):
                self.walk(_join(path, segment(k)), secret or is_secret(str(k)), a.get(k, _NONE), b.get(k, _NONE))
            return
        if isinstance(old, list) and isinstance(new, list) or \
                (old is _NONE and isinstance(new, list) and new) or (new is _NONE and isinstance(old, list) and old):
            xs = old if isinstance(old, list) else []
            ys = new if isinstance(new, list) else []
            for i in range(max(len(xs), len(ys))):
                self.walk(f"{path}[{i}]", secret, xs[i] if i < len(xs) else _NONE, ys[i] if i < len(ys) else _NONE)
            return
        if old is _NONE and new is _NONE:
            return
        # absent vs a value or an empty container, a type change (dict / list / scalar), or two scalars
        if old is _NONE or new is _NONE or isinstance(old, (dict, list)) or isinstance(new, (dict, list)) \
                or not _same_scalar(old, new):
            self.leaf(path, secret, old, new)


def tree_changes(old: Any, new: Any, *, absent_old: bool = False, absent_new: bool = False,
                 secret: bool = False) -> list[KeyChange]:
    """Leaf-level changes between two parsed JSON/YAML documents (sorted by path)."""
    w = _Walk()
    w.walk("", secret, _NONE if absent_old else old, _NONE if absent_new else new)
    return w.out


def _env_changes(old: dict | None, new: dict | None, extra: AbstractSet[str] = frozenset()) -> list[KeyChange]:
    a, b = old or {}, new or {}

    def show(name: str, v: Any) -> str | None:
        if v is _NONE:
            return None
        if is_secret(name) or name in extra:
            return MASK
        return INHERITED if v is _PASS else show_text(v)

    out = []
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name, _NONE), b.get(name, _NONE)
        if x is not y and x != y:
            out.append(KeyChange(f"env {name}", show(name, x), show(name, y)))
    return out


# ------------------------------------------------------------------------------------------------ lines

_ASSIGNED = re.compile(r"(?:^|[^\w-])(--?[A-Za-z][\w-]*|[A-Za-z_][\w-]*)[\"']?\s*[:=]|(?:^|\s)(--?[A-Za-z][\w-]*)")


def secret_line(line: str, extra: AbstractSet[str] = frozenset()) -> bool:
    """A line that assigns a secret-looking name (``X_TOKEN=..``, ``"password": ..``, ``--api-key ..``)
    or one of the names in ``extra``."""
    return any(is_secret(name.lstrip("-")) or name.lstrip("-") in extra
               for m in _ASSIGNED.finditer(line) for name in m.groups() if name)


def _line_changes(old: bytes | None, new: bytes | None,
                  extra: AbstractSet[str] = frozenset()) -> list[KeyChange] | None:
    import difflib

    if b"\x00" in (old or b"") or b"\x00" in (new or b""):
        return None
    a = (old or b"").decode("utf-8", "replace").splitlines() if old is not None else []
    b = (new or b"").decode("utf-8", "replace").splitlines() if new is not None else []

    def show(line: str, other: str | None) -> str:
        if secret_line(line, extra) or (other is not None and secret_line(other, extra)):
            return MASK
        if other is not None and line.strip() == other.strip():     # a whitespace-only change
            return _clip(json.dumps(line, ensure_ascii=False))
        return _clip(line.strip() or "(blank line)")

    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        pairs = min(i2 - i1, j2 - j1)
        for k in range(pairs):
            x, y = a[i1 + k], b[j1 + k]
            out.append(KeyChange(f"line {j1 + k + 1}", show(x, y), show(y, x)))
        for k in range(i1 + pairs, i2):
            out.append(KeyChange(f"line {k + 1}", show(a[k], None), None))
        for k in range(j1 + pairs, j2):
            out.append(KeyChange(f"line {k + 1}", None, show(b[k], None)))
    return out


# -------------------------------------------------------------------------------------------------- API

def _cut(changes: list[KeyChange], limit: int | None) -> list[KeyChange]:
    if limit is None or len(changes) <= max(limit, 0):
        return changes
    keep = max(limit, 0)
    more = len(changes) - keep
    return changes[:keep] + [KeyChange(MORE, None, f"{more} more change{'s' if more != 1 else ''}")]


def file_changes(name: str, old: bytes | None, new: bytes | None, *, limit: int = 50,
                 secret_names: AbstractSet[str] = frozenset()) -> list[KeyChange] | None:
    """What differs between the deployed (``old``) and the rendered (``new``) content of file ``name``.

    ``old=None``: the file is new (every key added); ``new=None``: it goes (every key removed). See the
    module docstring for the formats, secrets, the ``limit`` marker and what ``[]``/``None`` mean;
    ``secret_names``: env names masked besides the secret-looking ones (``engine.secret_env``).
    """
    try:
        old, new = (v.encode() if isinstance(v, str) else v for v in (old, new))
        if old is None and new is None:
            return []
        if old == new:
            return []
        fmt = file_format(name)
        changes = None
        if fmt != "lines":
            try:
                a = _parse(fmt, old) if old is not None else None
                b = _parse(fmt, new) if new is not None else None
                if fmt == "env":
                    changes = _env_changes(a, b, secret_names)
                else:
                    changes = tree_changes(a, b, absent_old=old is None, absent_new=new is None)
            except (_Unparsable, RecursionError):
                changes = None
        if changes is None:
            changes = _line_changes(old, new, secret_names)
        return None if changes is None else _cut(changes, limit)
    except Exception:  # noqa: BLE001 - a diff summary must never break `deployctl diff`
        try:
            changes = _line_changes(old, new, secret_names)
            return None if changes is None else _cut(changes, limit)
        except Exception:  # noqa: BLE001
            return None
