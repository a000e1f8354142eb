"""Shared helpers of the performance-model tests: the example inventories, validated and planned once."""

from __future__ import annotations

from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "inventories" / "examples"
EXAMPLE_NAMES = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))


@cache
def inventory(name: str):
    from deployctl.io.inventory_file import load_inventory
    from deployctl.app.inventory import validate_inventory

    return validate_inventory(load_inventory(EXAMPLES / f"{name}.yaml"))


@cache
def plan(name: str):
    from deployctl.core.sizing.planner import plan_layout

    return plan_layout(inventory(name))


def setup(**kw):
    """A core.Setup of DeepSeek-R1 W8A8 on A2 910B3 unless told otherwise."""
    from deployctl.core.sizing.step import Setup
    from deployctl.core.sizing.hardware import skus

    args = dict(model="deepseek-r1", quant="w8a8", sku=skus()[kw.pop("sku", "910B3")], dies=32, dies_per_node=8,
                tp=8, dp=4, moe_ep=32)
    args.update(kw)
    return Setup(**args)
