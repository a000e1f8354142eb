"""Small pure helpers for structured files: deep merge of user overrides, JSON as engines read it."""

from __future__ import annotations

import copy
import json
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
    """Indented UTF-8 JSON with a trailing newline (byte-stable for the same document)."""
    return (json.dumps(doc, indent=4, ensure_ascii=False) + "\n").encode()
