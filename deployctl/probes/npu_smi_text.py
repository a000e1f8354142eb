"""Text helpers of the npu-smi parsers (npu_smi.py: the `npu-smi info` table; npu_smi_queries.py: `-l`, `-m`,
`-t board`, `-t health`, `-t spod-info`): splitting lines and cells, reading the values npu-smi prints.

Each raises ValueError naming what it expected (the formats' sources: npu_smi.py, npu_smi_queries.py).
"""

from __future__ import annotations

import re

from deployctl.core.models.facts import HEALTH_VALUES, Health

HEADER = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)")
MISSING = frozenset({"-", "NA", "N/A"})              # what npu-smi prints for a value it lacks
_HEALTH = {h.lower(): h for h in HEALTH_VALUES}


def snippet(text: str) -> str:
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return repr(first[:80]) if first else "empty output"


def to_int(value: str, what: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(f"{what}: expected an integer, got {value!r}") from None


def opt_int(value: str, what: str) -> int | None:
    return None if value.strip() in MISSING else to_int(value, what)


def opt_float(value: str, what: str) -> float | None:
    if value.strip() in MISSING:
        return None
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{what}: expected a number or `-`, got {value!r}") from None


def opt_str(value: str) -> str | None:
    return None if value in MISSING or not value else value


def health(value: str, what: str) -> Health:
    canon = _HEALTH.get(value.strip().lower())
    if canon is None:
        raise ValueError(f"{what}: expected a health value ({', '.join(HEALTH_VALUES)}), got {value!r}")
    return canon  # type: ignore[return-value]


def colon_pairs(text: str, what: str) -> list[tuple[str, str]]:
    """The ``key : value`` lines (blank lines skipped, anything else raises); values keep later colons."""
    out = []
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if ":" not in s:
            raise ValueError(f"{what}: expected `key : value` lines, got {s[:80]!r}")
        key, _, value = s.partition(":")
        out.append((key.strip(), value.strip()))
    return out


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]
