"""Small pure helpers for structured files: deep merge of user overrides, JSON as engines read it."""

from __future__ import annotations

import copy
import json
import re
from typing import Any


def deep_merge(base: dict, override: dict) -> dict:
    """Return base with override merged in: mappings recurse, everything else replaces."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merge_by_position(base: Any, override: Any) -> Any:
    """Merge override into base key by key, lists of objects element by element (entry i of the override
    merges into entry i of base; extra entries are appended); any other value replaces. So
    `{ModelConfig: [{plugin_params: ...}]}` adds plugin_params to ModelConfig[0] and keeps the rest of it,
    while a list of scalars (npuDeviceIds, tlsCaFile) is replaced whole."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = copy.deepcopy(base)
        for key, value in override.items():
            out[key] = merge_by_position(base[key], value) if key in base else copy.deepcopy(value)
        return out
    if (isinstance(base, list) and isinstance(override, list) and override
            and all(isinstance(v, dict) for v in override) and all(isinstance(v, dict) for v in base)):
        merged = [merge_by_position(b, o) for b, o in zip(base, override)]
        return merged + copy.deepcopy(base[len(override):]) + copy.deepcopy(override[len(base):])
    return copy.deepcopy(override)


def to_json(doc: object) -> bytes:
    """Indented UTF-8 JSON with a trailing newline (byte-stable for the same document): the text of
    ``json.dumps(doc, indent=4, ensure_ascii=False)``, written by pydantic-core (Rust, ~14x faster: an
    8,192-server render writes 512 rank tables). Its one difference is a float below 1e-4 (Rust 0.00001 and
    1e-7, Python 1e-05 and 1e-07; checked on 400,000 random floats): a text that may hold one is written again
    by json.dumps."""
    from pydantic_core import to_json as rust_json

    text = rust_json(doc, indent=4) + b"\n"
    if _small_float(text):
        return (json.dumps(doc, indent=4, ensure_ascii=False) + "\n").encode()
    return text


_SMALL = re.compile(rb"0\.0000|[0-9]e-")          # how Rust writes a float below 1e-4 (0.00001, 1e-7)
_NUMBER = frozenset(b"0123456789.-+eE")


def _small_float(text: bytes) -> bool:
    """Whether the indented JSON ``text`` may hold a float below 1e-4: a match that is part of a number token (one
    first on its line, or after a key's ": "; a string starts with a quote). A false alarm costs only the slower
    writer."""
    if b"0.0000" not in text and b"e-" not in text:        # the common case, at memchr's speed
        return False
    for m in _SMALL.finditer(text):
        start = m.start()
        while start and text[start - 1] in _NUMBER:
            start -= 1
        before = text[:start].rsplit(b"\n", 1)[-1]
        if before.endswith(b": ") or not before.strip(b" "):
            return True
    return False
