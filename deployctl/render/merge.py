"""Small pure helpers for structured files: deep merge of user overrides, JSON as engines read it."""

from __future__ import annotations

import copy
import json


def deep_merge(base: dict, override: dict) -> dict:
    """Return base with override merged in: mappings recurse, everything else replaces."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def to_json(doc) -> bytes:
    """Indented UTF-8 JSON with a trailing newline (byte-stable for the same document)."""
    return (json.dumps(doc, indent=4, ensure_ascii=False) + "\n").encode()
