"""vLLM-Ascend's EPLB settings as the sizing reads them: how many redundant expert slots each MoE layer gets (the
engine spec's `redundant_experts`; sources in its docstring)."""

from __future__ import annotations

import json
from typing import Any


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def redundant_experts(additional: dict, args: list[str]) -> tuple[int, str]:
    """(redundant expert slots per MoE layer, where they are set); (0, "") when none are."""
    nested = additional.get("eplb_config")
    if isinstance(nested, dict) and nested.get("dynamic_eplb") and _count(nested.get("num_redundant_experts")):
        return nested["num_redundant_experts"], "additional_config.eplb_config.num_redundant_experts"
    if additional.get("dynamic_eplb") and _count(additional.get("init_redundancy_expert")):
        return additional["init_redundancy_expert"], "additional_config.init_redundancy_expert"
    if "--enable-eplb" not in args:
        return 0, ""
    for i, a in enumerate(args):
        flag, eq, value = a.partition("=")
        value = value if eq else (args[i + 1] if i + 1 < len(args) else "")
        if flag == "--eplb-config.num_redundant_experts" and value.isdigit() and int(value) > 0:
            return int(value), "--eplb-config.num_redundant_experts"
        if flag == "--eplb-config":
            try:
                n = _count(json.loads(value).get("num_redundant_experts"))
            except (ValueError, AttributeError):
                n = 0
            if n:
                return n, "--eplb-config num_redundant_experts"
    return 0, ""
