"""A spare server (deploy.scaling.spares) can be pre-staged before scale needs it: `weights` works on every node of
the inventory as written, spares included, while planning leaves them out."""

from __future__ import annotations

import json

from conftest import run_cli
from support.inventory import synthetic


def test_weights_targets_the_spares_and_plan_leaves_them_out(tmp_path):
    from deployctl.cli.weights import _load

    inv = tmp_path / "inv.yaml"
    inv.write_text(synthetic("deepseek-r1", "w8a8", 3, "tp-pp") + "deploy:\n  scaling:\n    spares: [n2]\n")
    _inv, targets, _dir = _load(inv)
    assert [t.name for t in targets] == ["n0", "n1", "n2"]
    res = run_cli("plan", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    plan = json.loads(res.stdout)
    assert [n["name"] for n in plan["nodes"]] == ["n0", "n1"]
