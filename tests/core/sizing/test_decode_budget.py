"""A MindIE decode role's prefill budget (issue 40): MindIE refuses a decode instance whose maxPrefillTokens is below
maxInputTokenLen (Ascend/MindIE-LLM@8b4871ad src/config_manager/config_manager_impl.cpp:318-331), and Huawei's
DeepSeek-V3.2 128K P/D decode config sets `"maxPrefillTokens": 128000` only to pass that check
(docs/zh/user_guide/models/deepseek/deepseek_v3.2.md:462-530 there). `layout.decode.model.prefill_budget_tokens`
sizes the decode role's memory for what it runs while the rendered maxPrefillTokens keeps passing MindIE's check."""

from __future__ import annotations

import json

import pytest
import yaml

from perflib import EXAMPLES


def _long_context(tmp_path, budget: int | None = None):
    doc = yaml.safe_load((EXAMPLES / "a3-pd-2p1d.yaml").read_text())
    doc["model"].update(max_seq_len=129024, max_input_len=128000)          # 128K in, 1K out (the published shape)
    if budget is not None:
        doc["layout"]["decode"]["model"] = {"prefill_budget_tokens": budget}
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _plan(path):
    from deployctl.app.inventory import validate_inventory
    from deployctl.core.sizing.planner import plan_layout
    from deployctl.io.inventory_file import load_inventory

    return plan_layout(validate_inventory(load_inventory(path)))


def test_a_128k_decode_role_sized_for_a_128k_prefill_is_refused_with_the_key_that_fits_it(tmp_path):
    from deployctl.core.errors import LayoutError

    with pytest.raises(LayoutError) as exc:
        _plan(_long_context(tmp_path))
    assert "layout.decode.model.prefill_budget_tokens: 64" in exc.value.hint
    assert "workspace 33.00 GB" in exc.value.problems[0].message


def test_the_budget_sizes_the_decode_memory_and_mindie_still_gets_a_valid_max_prefill_tokens(tmp_path):
    from deployctl.core.engines.mindie.config import render_configs

    plan = _plan(_long_context(tmp_path, budget=64))
    dec = next(i for i in plan.instances if i.role == "decode")
    assert dec.memory.fits and dec.memory.workspace_gb < 5          # 33 GB sized for a 128K prefill
    decode_files = [a for a in render_configs(plan) if a.path.startswith(f"{dec.nodes[0]}/config")]
    assert decode_files
    cfg = json.loads(decode_files[0].content)
    sched = cfg["BackendConfig"]["ScheduleConfig"]
    # what MindIE checks: maxPrefillTokens >= maxInputTokenLen, the decode role's budget not rendered
    assert sched["maxPrefillTokens"] >= cfg["BackendConfig"]["ModelDeployConfig"]["maxInputTokenLen"] == 128000
    assert not any(f.level == "error" for f in plan.inventory.engine_spec.check(plan))


def test_a_role_that_sets_no_budget_is_sized_for_its_max_prefill_tokens():
    from deployctl.core.sizing.limits import max_prefill_tokens, workspace_tokens
    from perflib import inventory

    inv = inventory("a3-pd-2p1d")
    for role in ("prefill", "decode"):
        assert workspace_tokens(inv, role) == max_prefill_tokens(inv, role)
