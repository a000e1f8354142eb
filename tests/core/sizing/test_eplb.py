"""EPLB's redundant experts where the engine has them (issue 40): the engine's own settings name the redundant expert
slots of each MoE layer; each die then holds its share of them (memory and the expert terms of the step), and the
estimate says so. Routing stays uniform: the imbalance EPLB removes has no published Ascend figure."""

from __future__ import annotations

import pytest
import yaml

from perflib import EXAMPLES


def _plan(tmp_path, example: str, engine: dict):
    from deployctl.app.inventory import validate_inventory
    from deployctl.core.input.raw import parse_yaml
    from deployctl.core.sizing.planner import plan_layout

    doc = yaml.safe_load((EXAMPLES / example).read_text())
    for key, value in engine.items():
        doc["engine"][key] = (list(doc["engine"].get(key) or []) + value if key == "args"
                              else {**(doc["engine"].get(key) or {}), **value})
    return plan_layout(validate_inventory(parse_yaml(yaml.safe_dump(doc), str(tmp_path / "i.yaml"), tmp_path)))


@pytest.mark.parametrize("additional, args, slots", [
    ({"eplb_config": {"dynamic_eplb": True, "num_redundant_experts": 16}}, [], 16),
    ({"eplb_config": {"num_redundant_experts": 16}}, [], 0),           # counted only with dynamic_eplb
    ({}, ["--enable-eplb", "--eplb-config.num_redundant_experts", "32"], 32),
    ({}, ["--enable-eplb", '--eplb-config={"num_redundant_experts": 8, "use_async": false}'], 8),
    ({}, ["--eplb-config.num_redundant_experts", "32"], 0),            # without --enable-eplb: no EPLB
])
def test_vllm_ascend_reads_both_model_runners_eplb_settings(additional, args, slots):
    from deployctl.core.engines.vllm_ascend.eplb import redundant_experts

    assert redundant_experts(additional, args)[0] == slots


def test_redundant_experts_take_memory_on_every_die_and_say_so(tmp_path):
    from deployctl.core.sizing.estimate import estimate_plan
    from deployctl.core.sizing.estimate_types import Workload

    base = _plan(tmp_path, "vllm-a2-2x8-v32-dp-ep.yaml", {})
    eplb = _plan(tmp_path, "vllm-a2-2x8-v32-dp-ep.yaml",
                 {"additional_config": {"eplb_config": {"dynamic_eplb": True, "num_redundant_experts": 16}}})
    b, e = base.instances[0].memory, eplb.instances[0].memory
    ep = eplb.instances[0].degrees.moe_ep
    assert 256 % ep == 0 and (256 + 16) / ep == 256 / ep + 1          # one more expert slot per die
    per_expert = b.weights_breakdown_gb["routed_experts"] / (256 / ep)
    assert e.weights_breakdown_gb["routed_experts"] == pytest.approx(b.weights_breakdown_gb["routed_experts"] + per_expert, rel=1e-3)
    assert e.kv_budget_gb < b.kv_budget_gb
    w = Workload(input_len=2048, output_len=256, concurrency=8)
    est = estimate_plan(eplb, w)
    assert any("mixed 16 (additional_config.eplb_config.num_redundant_experts)" in a for a in est.assumptions)
    assert any("no redundant experts" in a for a in estimate_plan(base, w).assumptions)


def test_sglang_reads_its_flag_and_mindie_sets_none(tmp_path):
    from perflib import inventory

    sgl = _plan(tmp_path, "sglang-a3-2p1d-deepseek-r1.yaml", {"args": ["--enable-eplb",
                                                                      "--ep-num-redundant-experts", "32"]})
    assert sgl.engine_spec.redundant_experts(sgl.inventory) == (32, "--ep-num-redundant-experts")
    mindie = inventory("a2-4x8-dp-ep")
    assert mindie.engine_spec.redundant_experts(mindie) == (0, "")
