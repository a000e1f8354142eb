"""Two-microbatch overlap (dual batch overlap) in vLLM-Ascend's settings, for the performance model."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deployctl.core.models.engine import EngineBase

DBO_DECODE_TOKENS = 32     # vLLM ParallelConfig.dbo_decode_token_threshold default (vllm/config/parallel.py)


def overlap_of(engine: EngineBase, env: dict | None = None) -> tuple[int, str]:
    """(decode token threshold, where) when the engine settings turn on two-microbatch overlap, else (0, "").

    vLLM's dual batch overlap: `--enable-dbo` / `enable_dbo` (vllm/config/parallel.py ParallelConfig.enable_dbo,
    with `dbo_decode_token_threshold`, default 32); vLLM-Ascend's own DBO model variants: the environment
    variable VLLM_ASCEND_ENABLE_DBO=1 (vllm_ascend/envs.py; its decode threshold assumed the same). MindIE: no
    setting was found (not expressible)."""
    found: list[tuple[int, str]] = []
    threshold = [DBO_DECODE_TOKENS]

    def on(v: Any) -> bool:
        return v is True or str(v).strip().lower() in ("1", "true", "yes", "on")

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                key = str(k).lower().lstrip("-").replace("-", "_")
                if key == "dbo_decode_token_threshold":
                    threshold[0] = int(v)
                elif key in ("enable_dbo", "vllm_ascend_enable_dbo") and on(v):
                    found.append((0, f"{path}.{k}"))
                else:
                    walk(v, f"{path}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")
        elif isinstance(node, str) and re.search(r"--enable-dbo\b", node):
            found.append((0, path))
            m = re.search(r"--dbo-decode-token-threshold[ =](\d+)", node)
            if m:
                threshold[0] = int(m.group(1))

    walk(engine.model_dump(), "engine")
    walk(env or {}, "env")
    return (threshold[0], found[0][1]) if found else (0, "")
