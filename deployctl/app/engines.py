"""Engine drivers: everything that depends on which inference engine serves the model.

The core (inventory, plan, preflight, up, status, diff, history, the chart values) asks the driver of
``engine.kind`` and never names an engine. A driver lives in ``deployctl/app/<kind>/`` and exposes
``DRIVER`` (see base.py for the interface). Drivers are imported lazily, on first use.
"""

from __future__ import annotations

from functools import cache
from importlib import import_module

# engine.kind -> the module holding its DRIVER
DEFAULT_KIND = "mindie"   # an inventory without engine.kind
KINDS: dict[str, str] = {
    "mindie": "deployctl.core.engines.mindie",
    "vllm-ascend": "deployctl.core.engines.vllm_ascend",
}


@cache
def driver(kind: str):
    """The driver of one engine kind (an EngineDriver)."""
    try:
        module = KINDS[kind]
    except KeyError:
        from deployctl.core.errors import UsageError

        raise UsageError(f"unknown engine.kind {kind!r}", hint=f"use one of: {', '.join(sorted(KINDS))}") from None
    return import_module(module).DRIVER


def for_inventory(inv):
    return driver(inv.engine.kind)


def chunks_prefill(inv) -> bool:
    """Whether the engine splits a prompt longer than its prefill batch into chunks (then max_prefill_tokens may be
    less than max_input_len, and a decode-only instance is sized for decode steps). A driver says so with
    ``chunked_prefill(inv)``; one without it prefills the longest input in one batch."""
    method = getattr(for_inventory(inv), "chunked_prefill", None)
    return bool(method is not None and method(inv))


def settings_models() -> tuple:
    """The pydantic model of each engine's inventory block (the `engine` union, discriminated on kind).
    Only the settings modules are imported here (the inventory model needs them), not the drivers."""
    return tuple(import_module(f"{module}.settings").SETTINGS for module in KINDS.values())
