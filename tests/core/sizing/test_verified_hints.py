"""Refusals name a change the planner accepts (issue 23 item 4).

A held-out set of infeasible inventories (none of them is an example or an error-golden case): for each, the
first message a user sees (`deployctl plan`, exit 2) carries a hint, and every change that hint names, applied to
the inventory and written back as YAML, is planned by `deployctl plan` with exit 0. A facts gap preflight would
fill (a missing interface) is reported together with the refusal behind it, not instead of it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, run_cli


def _variant(tmp_path: Path, example: str, **edits) -> Path:
    doc = yaml.safe_load((EXAMPLES / example).read_text())
    for key, value in edits.items():
        section, _, field = key.partition("__")
        if field:
            doc[section][field] = value
        else:
            doc[section] = value
    if doc.get("nodes") == "first":
        doc["nodes"] = yaml.safe_load((EXAMPLES / example).read_text())["nodes"][:1]
    if edits.get("drop_interfaces"):
        doc.pop("drop_interfaces", None)
        for node in doc["nodes"]:
            node.pop("interface", None)
    path = tmp_path / f"held-out-{example}"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    if not (tmp_path / "hccn").exists():
        (tmp_path / "hccn").symlink_to(EXAMPLES / "hccn")
    return path


HELD_OUT = [
    ("v32-bf16-2xa2-no-interfaces", "a2-2x8-v32-dp-ep.yaml",
     dict(model__quant="bf16", layout={"preset": "tp-pp"}, drop_interfaces=True)),
    ("v32-bf16-2xa2", "a2-2x8-v32-dp-ep.yaml", dict(model__quant="bf16")),
    ("r1-bf16-2xa2", "a2-2x8-tp-pp.yaml", dict(model__quant="bf16")),
    ("r1-bf16-1xa3", "a3-2x16-superpod.yaml", dict(model__quant="bf16", layout={"preset": "single"},
                                                       nodes="first")),
    ("r1-w8a8-1xa2", "a2-1x8-single.yaml", dict(model__quant="w8a8")),
    ("v32-w8a8-pp-2xa2", "a2-2x8-v32-dp-ep.yaml", dict(layout={"preset": "tp-pp"})),
]


@pytest.mark.parametrize("name, example, edits", HELD_OUT, ids=[h[0] for h in HELD_OUT])
def test_the_first_message_names_a_change_the_planner_accepts(tmp_path, name, example, edits):
    from deployctl.app.inventory import read_inventory as load_and_validate
    from deployctl.core.errors import InventoryError
    from deployctl.io.inventory_file import load_inventory
    from deployctl.app.inventory import validate_for_discovery
    from deployctl.core.sizing.fixes import suggestions

    inv_path = _variant(tmp_path, example, **edits)
    refused = run_cli("plan", "-i", str(inv_path), "--output", "json")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    doc = json.loads(refused.stdout)
    assert doc["hint"], doc
    try:
        inv = load_and_validate(inv_path)
    except InventoryError:          # the gaps preflight fills: the refusal behind them is planned as filled
        inv, _ = validate_for_discovery(load_inventory(inv_path))
        inv = inv.model_copy(update={"nodes": [n.model_copy(update={"interface": "eth0"}) for n in inv.nodes]})
        assert any(p["path"].startswith("layout") for p in doc["problems"]), doc   # said together, not after
    found = suggestions(inv)
    assert found and doc["hint"] == ", or ".join(text for text, _ in found), (doc["hint"], found)
    for i, (text, changed) in enumerate(found):
        out = tmp_path / f"fixed-{i}.yaml"
        data = changed.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
        data.setdefault("model", {})["quant"] = changed.model.quant
        data.setdefault("engine", {})["kind"] = changed.engine.kind
        per = 16 if changed.cluster.hardware == "a3" else 8
        for k, node in enumerate(data["nodes"]):       # servers a user adds come with their NPUs' IPs
            node.setdefault("devices", [{"id": d} for d in range(per)])
            for dev in node["devices"]:
                dev.setdefault("ip", f"29.99.{k}.{dev['id'] + 1}")
                if changed.cluster.hardware == "a3" and node["name"].startswith("added-"):
                    dev["sdid"] = 900000 + 100 * k + dev["id"]
        out.write_text(yaml.safe_dump(data, sort_keys=False))
        ok = run_cli("plan", "-i", str(out))
        assert ok.returncode == 0, f"{name}: the hint {text!r} does not plan:\n{ok.stdout[-1500:]}{ok.stderr[-2500:]}"
