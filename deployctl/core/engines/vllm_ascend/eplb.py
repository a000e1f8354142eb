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
    from deployctl.core.engine_spec.args import last_value

    if "--enable-eplb" not in args:
        return 0, ""
    dotted = last_value(args, ("--eplb-config.num_redundant_experts",))
    if dotted and dotted.isdigit() and int(dotted) > 0:
        return int(dotted), "--eplb-config.num_redundant_experts"
    try:
        n = _count(json.loads(last_value(args, ("--eplb-config",)) or "{}").get("num_redundant_experts"))
    except (ValueError, AttributeError):
        n = 0
    return (n, "--eplb-config num_redundant_experts") if n else (0, "")
