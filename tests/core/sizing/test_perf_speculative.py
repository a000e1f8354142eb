"""Speculative decoding in the estimate: the drafted tokens a step accepts depend on the method (issue 24 item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from deployctl.core.input.raw import parse_yaml
from deployctl.app.inventory import validate_inventory
from deployctl.core.sizing.estimate import context
from deployctl.core.sizing.speculative import acceptance
from deployctl.core.sizing.planner import plan_layout

EXAMPLE = Path(__file__).parents[3] / "inventories" / "examples" / "vllm-a3-pd-roles-qwen3.yaml"


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


def test_measured_acceptance_replaces_the_published_figure_and_lowers_tpot():
    from deployctl.core.input.raw import parse_yaml as parse
    from deployctl.core.sizing.estimate import estimate_plan
    from deployctl.core.sizing.estimate_types import Workload

    spec = {"method": "eagle3", "tokens": 2, "draft_weights_path": "/data/models/Qwen3-eagle3"}
    published = ctx_with(spec)
    measured = ctx_with({**spec, "acceptance": [0.9, 0.8]})
    assert measured.mtp.accepted_per_step == pytest.approx(1.7)
    assert "as measured" in measured.mtp.source
    w = Workload(input_len=2048, output_len=256, concurrency=16)
    assert (estimate_plan(measured.plan, w, ctx=measured).tpot_ms
            < estimate_plan(published.plan, w, ctx=published).tpot_ms)
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["model"]["speculative"] = {**spec, "acceptance": [1.5]}
    from deployctl.core.errors import InventoryError

    with pytest.raises(InventoryError) as exc:
        validate_inventory(parse(yaml.safe_dump(doc), "spec.yaml", EXAMPLE.parent))
    [problem] = exc.value.problems
    assert problem.path == "model.speculative.acceptance" and "between 0 and 1" in problem.message
