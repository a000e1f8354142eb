"""Speculative decoding in the estimate: the drafted tokens a step accepts depend on the method (issue 24 item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from deployctl.inventory.load import parse_yaml
from deployctl.inventory.validate import validate_inventory
from deployctl.perf.model import context
from deployctl.perf.speculative import acceptance
from deployctl.planning.plan import plan_layout

EXAMPLE = Path(__file__).parents[2] / "inventories" / "examples" / "vllm-a3-pd-roles-qwen3.yaml"


def ctx_with(spec: dict):
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["model"]["speculative"] = spec
    inv = validate_inventory(parse_yaml(yaml.safe_dump(doc), "spec.yaml", EXAMPLE.parent))
    return context(plan_layout(inv))


def test_eagle3_counts_vllm_ascends_measured_acceptance_per_position():
    ctx = ctx_with({"method": "eagle3", "tokens": 3, "draft_weights_path": "/data/models/Qwen3-eagle3"})
    assert ctx.mtp.accepted_per_step == pytest.approx(0.68 + 0.40 + 0.18)
    assert "spec_decode/utils.py" in ctx.mtp.source
    decode = ctx.setups[ctx.decoder.name]
    assert decode.accepted == pytest.approx(1.26, abs=1e-3)     # what the step model divides by
    assert ctx.setups[ctx.prefiller.name].mtp_drafts == 0       # prefill drafts nothing


def test_mtp_keeps_the_geometric_default_and_unsourced_positions_count_as_rejected():
    assert acceptance("mtp", 3)[1] == pytest.approx(0.7 + 0.49 + 0.343)
    accept, accepted, why = acceptance("eagle3", 5)
    assert accepted == pytest.approx(1.26) and "no source" in why
