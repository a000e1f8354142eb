"""Plans the check set's inventories for tests/core/sizing/accuracy.py (validation sits above deployctl.perf) and prints
the tables of docs/performance-model.md: `.venv/bin/python tests/core/sizing/accuracy_report.py` (with `--yaml`: the
figures of deployctl/core/sizing/accuracy.yaml)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml


def plan_of(inventory: dict):
    """(plan, None), or (None, the problems deployctl reports for the inventory)."""
    from deployctl.core.errors import DeployctlError
    from deployctl.io.inventory_file import load_inventory
    from deployctl.app.inventory import validate_inventory
    from deployctl.core.sizing.planner import plan_layout

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "check.yaml"
        f.write_text(yaml.safe_dump(inventory, sort_keys=False))
        try:
            return plan_layout(validate_inventory(load_inventory(f)), fixes=False), None
        except DeployctlError as e:
            probs = getattr(e, "problems", None) or []
            return None, "; ".join(getattr(x, "message", str(x)) for x in probs)[:200] or str(e)[:200]


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--yaml"]:       # the figures deployctl/core/sizing/accuracy.yaml ships
        from accuracy import error_summary

        print(yaml.safe_dump(error_summary(plan_of), sort_keys=False), end="")
    else:
        from accuracy import markdown

        print(markdown(plan_of))
