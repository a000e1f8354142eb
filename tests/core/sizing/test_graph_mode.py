"""The graph mode a vLLM-Ascend plan's decode runs, against the one its deratings were fitted on (issue 40): every
published fit point runs its decode as a full graph (perf.yaml graph_mode), so a plan whose decode runs eager is
told its host-side step costs were never measured on that mode."""

from __future__ import annotations

import pytest
import yaml

from perflib import EXAMPLES


def _plan(tmp_path, args: list[str]):
    from deployctl.app.inventory import validate_inventory
    from deployctl.core.input.raw import parse_yaml
    from deployctl.core.sizing.planner import plan_layout

    doc = yaml.safe_load((EXAMPLES / "vllm-a2-2x8-v32-dp-ep.yaml").read_text())
    doc["engine"]["args"] = list(doc["engine"].get("args") or []) + args
    return plan_layout(validate_inventory(parse_yaml(yaml.safe_dump(doc), str(tmp_path / "inv.yaml"), tmp_path)))


@pytest.mark.parametrize("args, mode, warned", [
    ([], "full_and_piecewise", False),
    (["--enforce-eager"], "eager", True),
    (["--compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY"}'], "full_decode_only", False),
    (['--compilation-config={"cudagraph_mode": "PIECEWISE"}'], "piecewise", True),
])
def test_a_decode_mode_the_fit_never_ran_is_said(tmp_path, args, mode, warned):
    from deployctl.core.sizing.estimate import estimate_plan
    from deployctl.core.sizing.estimate_types import Workload

    p = _plan(tmp_path, args)
    assert p.engine_spec.graph_mode(p.inventory) == mode
    assert p.engine_spec.perf_fit_record["graph_mode"] == "full_decode"
    est = estimate_plan(p, Workload(input_len=2048, output_len=256, concurrency=4))
    assert any(f"decode runs {mode} here" in w for w in est.warnings) is warned


def test_a_users_calibration_measured_the_mode_itself(tmp_path):
    from deployctl.core.sizing.estimate import context, estimate_plan
    from deployctl.core.sizing.estimate_types import Workload

    p = _plan(tmp_path, ["--enforce-eager"])
    mine = {"consts": {"k_hbm": 2.0, "k_compute": 1.5, "k_prefill": 2.0, "k_fixed": 1.0}, "file": "x.json",
            "runs": 2, "date": "2026-11-29", "cluster": p.inventory.cluster.name, "rms_error": 0.1, "points": []}
    est = estimate_plan(p, Workload(input_len=2048, output_len=256, concurrency=4), ctx=context(p, calibration=mine))
    assert not any("decode runs eager" in w for w in est.warnings)
