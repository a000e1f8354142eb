"""model.speculative beyond MTP/EAGLE: DFlash drafts (vLLM-Ascend 0.23+) and a pd-split role's own draft tokens
(layout.<role>.model.speculative_tokens), as vLLM-Ascend's CI runs Kimi-K2.6 (corpus c27): what renders, what each
engine version refuses with its source, and what the estimate counts."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from conftest import run_cli

ROOT = Path(__file__).resolve().parents[3]
C27 = ROOT / "tests" / "conformance" / "vllm" / "configs" / "c27.yaml"


def c27_inventory(**changes) -> dict:
    inv = copy.deepcopy(yaml.safe_load(C27.read_text())["inventory"])
    inv["model"]["config_path"] = str(ROOT / inv["model"]["config_path"])
    for dotted, value in changes.items():
        node, *path, last = dotted.split(".")
        target = inv[node]
        for key in path:
            target = target.setdefault(key, {})
        if value is None:
            target.pop(last, None)
        else:
            target[last] = value
    return inv


def cli(tmp: Path, inv: dict, *args: str):
    src = tmp / "inventory.yaml"
    src.write_text(yaml.safe_dump(inv, sort_keys=False))
    return run_cli(*args[:1], "-i", str(src), *args[1:])


def drafts(out: Path, node: str) -> set[int]:
    """num_speculative_tokens of every vllm serve process rendered for a node (its serve-<rank>.args files)."""
    found = set()
    for args in sorted((out / node).glob("serve-*.args")):
        lines = args.read_text().splitlines()
        spec = json.loads(lines[lines.index("--speculative-config") + 1])
        assert spec["method"] == "dflash" and spec["model"] == "/data/models/Kimi-K2.5-DFlash", spec
        found.add(spec["num_speculative_tokens"])
    return found


def test_each_role_drafts_its_own_tokens(tmp_path):
    r = cli(tmp_path, c27_inventory(), "render", "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert drafts(tmp_path / "out", "n0") == {1}       # prefill: layout.prefill.model.speculative_tokens
    assert drafts(tmp_path / "out", "n1") == {7}       # decode: model.speculative.tokens


def test_dflash_is_refused_before_vllm_ascend_0_23_naming_the_dispatch(tmp_path):
    inv = c27_inventory(**{"engine.version": "0.18", "engine.image": "quay.io/ascend/vllm-ascend:v0.18.0-a3"})
    r = cli(tmp_path, inv, "plan")
    text = r.stdout + r.stderr
    assert r.returncode == 2, text
    assert "no dflash drafter" in text and "spec_decode/__init__.py@v0.18.0" in text, text


def test_role_tokens_need_model_speculative(tmp_path):
    inv = c27_inventory(**{"model.speculative": None})
    r = cli(tmp_path, inv, "validate")
    text = r.stdout + r.stderr
    assert r.returncode == 2, text
    assert "layout.prefill.model.speculative_tokens" in text and "model.speculative" in text, text
    assert "Traceback" not in text


def test_the_estimate_counts_the_decode_roles_drafts_at_the_published_accept_length():
    from deployctl.core.input.raw import parse_yaml
    from deployctl.app.inventory import validate_inventory
    from deployctl.core.sizing.estimate import context
    from deployctl.core.sizing.planner import plan_layout

    def ctx(**changes):
        text = yaml.safe_dump(c27_inventory(**changes))
        return context(plan_layout(validate_inventory(parse_yaml(text, "c27.yaml", ROOT))))

    seven = ctx()
    # the card's mean accept length 5.3 at block 8 (7 drafts): 4.3 drafts accepted per step at 7 drafts
    assert seven.mtp.drafts == 7 and seven.mtp.accepted_per_step == pytest.approx(4.3, abs=0.01)
    assert "z-lab/Kimi-K2.5-DFlash" in seven.mtp.source
    assert seven.setups[seven.prefiller.name].mtp_drafts == 0          # prefill's own drafts do not decode
    # the decode role's tokens decide: 3 drafts at the same per-position rate accept fewer than 7
    three = ctx(**{"layout.decode.model.speculative_tokens": 3})
    assert three.mtp.drafts == 3 and 0 < three.mtp.accepted_per_step < seven.mtp.accepted_per_step
