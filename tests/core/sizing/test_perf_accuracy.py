"""The accuracy report (issue 27 item 4): the check set is data, the docs' tables are recomputed from it."""

from __future__ import annotations

import re

import pytest

from accuracy_report import plan_of
from perflib import ROOT

import accuracy
from deployctl.app.engines import resolve

DOC = ROOT / "docs" / "performance-model.md"
# one worker computes the check and fit sets' reports once (accuracy.report is cached per process) for every test here
pytestmark = pytest.mark.xdist_group("accuracy-report")


def test_points_are_complete_and_split_by_the_declared_rule():
    from deployctl.core.sizing.calibration import POINTS

    pts = accuracy.points()["points"]
    ids = [p["id"] for p in pts]
    assert len(ids) == len(set(ids))
    fitted = {p.key for p in POINTS}
    for p in pts:
        assert p["id"] not in fitted
        assert re.search(r"@[0-9a-f]{8}|https?://", p["source"]), p["id"]     # repo@commit:path or a URL
        assert p["measured"] and set(p["measured"]) <= {"ttft_ms", "tpot_ms", "throughput"}
        stat = p.get("statistic") or {}           # the statistic the source publishes (the median if not said)
        assert set(stat) <= {"ttft_ms", "tpot_ms"} and set(stat.values()) <= {"mean", "median"}, p["id"]
        assert {"input", "output", "concurrency"} <= set(p["client"])
        assert p["hardware"] in ("a2", "a3") and p["servers"] >= 1
        # the rules (points.yaml header): vLLM-Ascend: tests/e2e/weekly/ -> fit, everything else -> check;
        # SGLang: a DeepSeek-family model -> fit, any other model or a CI threshold -> check
        if accuracy.engine_of(p) == "sglang":
            fit = p["model"].startswith("deepseek-") and "test/registered/ascend/performance/" not in p["source"]
        else:
            fit = p["source"].startswith("vllm-project/vllm-ascend@") and ":tests/e2e/weekly/" in p["source"]
        assert p["set"] == ("fit" if fit else "check"), p["id"]
        assert accuracy.engine_of(p) in dict(accuracy.ENGINES), p["id"]
    assert len(accuracy.in_set("check")) >= 10 and len(accuracy.in_set("fit")) >= 8
    assert len(accuracy.in_set("check", "sglang")) >= 5 and len(accuracy.in_set("fit", "sglang")) >= 5
    assert all(p["id"].startswith("vA-") for p in accuracy.in_set("check") + accuracy.in_set("fit"))
    for u in accuracy.points()["unexpressed"]:
        assert u["source"] and u["why"]


def test_vllm_ascend_runs_with_its_own_deratings_and_mindie_with_the_cloudmatrix_fit():
    import yaml

    from deployctl.core.sizing.calibration import FITTED, fitted_for
    from deployctl.core.sizing.step import Consts

    own = yaml.safe_load((ROOT / "deployctl" / "core" / "engines" / "vllm_ascend" / "perf.yaml").read_text())["consts"]
    assert fitted_for(resolve("vllm-ascend")) == Consts(**own) != FITTED
    assert fitted_for(resolve("mindie")) == FITTED
    sglang = yaml.safe_load((ROOT / "deployctl" / "core" / "engines" / "sglang" / "perf.yaml").read_text())["consts"]
    assert fitted_for(resolve("sglang")) == Consts(**sglang) not in (FITTED, Consts(**own))


def test_the_host_overhead_is_one_batch_independent_time_per_step_and_the_cloudmatrix_fit_has_none():
    from dataclasses import replace

    from deployctl.core.sizing.calibration import FITTED, fitted_for
    from deployctl.core.sizing.step import step
    from perflib import setup

    assert FITTED.host_ms == 0.0 and fitted_for(resolve("mindie")) == FITTED
    su, c = setup(), replace(FITTED, host_ms=7.0)
    for phase, tokens in (("decode", 1), ("decode", 64), ("prefill", 4096)):
        with_host, without = step(su, phase, tokens, 4096, c).total, step(su, phase, tokens, 4096, FITTED).total
        assert with_host - without == pytest.approx(7e-3)
    assert ("host-side step overhead", pytest.approx(7e-3), "fixed") in step(su, "decode", 8, 4096, c).terms()


def test_each_sequential_draft_forward_adds_its_host_time_to_decode_steps_only():
    """host_draft_ms x Setup.draft_passes (MTP/EAGLE: one forward per drafted token; DFlash: one per block)."""
    from dataclasses import replace

    from deployctl.core.sizing.calibration import FITTED
    from deployctl.core.sizing.step import step
    from perflib import setup

    assert FITTED.host_draft_ms == 0.0
    c = replace(FITTED, host_draft_ms=5.0)
    su = setup(mtp_drafts=3, draft_passes=3)
    assert step(su, "decode", 8, 4096, c).total - step(su, "decode", 8, 4096, FITTED).total == pytest.approx(15e-3)
    assert step(su, "prefill", 4096, 4096, c).total == pytest.approx(step(su, "prefill", 4096, 4096, FITTED).total)


@pytest.mark.parametrize(("pid", "passes"), [("vA-K26-1xA3", 1), ("vA-M27-1xA3-c48", 3), ("vA-V32-1xA3", 3),
                                             ("vA-M25-1xA3", 0)])
def test_draft_forwards_per_step_follow_the_method(pid, passes):
    """DFlash drafts its 7-token block in one forward (z-lab/Kimi-K2.5-DFlash: block diffusion); EAGLE3 and MTP
    run the draft once per token."""
    from deployctl.core.sizing.estimate import context

    p = next(x for x in accuracy.points()["points"] if x["id"] == pid)
    ctx = context(plan_of(accuracy.inventory_of(p))[0])
    assert ctx.setups[ctx.decoder.name].draft_passes == passes


def test_the_estimate_names_the_fit_its_deratings_come_from():
    """vLLM-Ascend plans name perf.yaml and its largest fit error; MindIE plans the CloudMatrix fit (calibration.py)."""
    import yaml

    from deployctl.core.sizing.calibration import ERROR_BOUND
    from deployctl.core.sizing.estimate import estimate_plan
    from deployctl.core.sizing.estimate_types import Workload
    from perflib import plan

    own = yaml.safe_load((ROOT / "deployctl" / "core" / "engines" / "vllm_ascend" / "perf.yaml").read_text())
    w = Workload(input_len=1024, output_len=128, concurrency=4)
    vllm = estimate_plan(plan("vllm-a2-2x8-v32-dp-ep"), w).calibration
    assert vllm["source"].startswith("deployctl/core/engines/vllm_ascend/perf.yaml")
    assert vllm["max_error_on_points"] == own["max_error_on_fit_points"] and vllm["host_ms"] == own["consts"]["host_ms"]
    mindie = estimate_plan(plan("a2-2x8-v32-dp-ep"), w).calibration
    assert mindie["source"] == "deployctl/core/sizing/calibration.py" and mindie["max_error_on_points"] == ERROR_BOUND


def test_an_sglang_estimate_runs_with_sglangs_own_fit_and_says_so():
    """SGLang plans name deployctl/core/engines/sglang/perf.yaml, its largest fit error and SGLang's own points."""
    import yaml

    from deployctl.core.sizing.calibration import fitted_source
    from deployctl.core.sizing.estimate import estimate_plan
    from deployctl.core.sizing.estimate_types import Workload

    own = yaml.safe_load((ROOT / "deployctl" / "core" / "engines" / "sglang" / "perf.yaml").read_text())
    p = accuracy.in_set("fit", "sglang")[0]
    est = estimate_plan(plan_of(accuracy.inventory_of(p))[0], Workload(input_len=1024, output_len=128, concurrency=4))
    assert est.calibration["source"].startswith("deployctl/core/engines/sglang/perf.yaml")
    assert est.calibration["max_error_on_points"] == own["max_error_on_fit_points"]
    assert est.calibration["k_hbm"] == own["consts"]["k_hbm"]
    assert "SGLang's own published points" in fitted_source(resolve("sglang"))
    assert est.accuracy["deratings"] == "engine" and est.accuracy["engine"] == "sglang"


@pytest.mark.e2e
@pytest.mark.parametrize("engine", ["vllm-ascend", "sglang"])
def test_perf_yaml_is_fitted_on_the_current_fit_set(engine):
    """The engine's perf.yaml is the optimum of its fit set: one round of fit_engine.py's coordinate refinement
    from perf.yaml's constants improves the RMS error on the fit points by less than half a point (a fit set that
    gained or lost points, or a step model that changed, moves the optimum and fails this: rerun
    `fit_engine.py --engine <kind> --write`). The whole grid search (minutes per engine) is not rerun here."""
    import fit_engine

    from deployctl.core.sizing.calibration import fitted_for

    cases = fit_engine._cases(engine)
    stored = fitted_for(resolve(engine))
    refined = fit_engine.refine(stored, cases, fit_engine.STEPS[engine])
    assert fit_engine.rms(refined, cases) > fit_engine.rms(stored, cases) - 0.005


@pytest.mark.slow
def test_every_point_is_estimated_or_refused_with_a_reason():
    rows, mape = accuracy.report(plan_of)
    for r in rows:
        assert r.refused or {"ttft_ms", "tpot_ms", "throughput"} <= set(r.estimated), r.id
        assert not r.refused or len(r.refused) > 10
    assert set(mape) >= {"tpot_ms", "ttft_ms", "throughput"}


@pytest.mark.slow
def test_the_docs_carry_the_recomputed_tables():
    text = DOC.read_text()
    m = re.search(r"<!-- accuracy:begin -->\n(.*?)\n<!-- accuracy:end -->", text, re.S)
    assert m, "docs/performance-model.md lacks the accuracy markers"
    assert m.group(1).strip() == accuracy.markdown(plan_of).strip(), \
        "the check-set tables drifted: paste `python tests/core/sizing/accuracy_report.py` between the markers"


@pytest.mark.slow
def test_the_error_plan_prints_is_the_recomputed_check_set_error():
    """deployctl/core/sizing/accuracy.yaml (what `plan` says beside its estimate) holds the check set's errors as
    recomputed now: regenerate with `python tests/core/sizing/accuracy_report.py --yaml`."""
    from deployctl.core.packaged import packaged_yaml

    shipped = packaged_yaml("deployctl.core.sizing", "accuracy.yaml")
    recomputed = accuracy.error_summary(plan_of)
    assert {k: shipped[k] for k in recomputed} == recomputed, \
        "the shipped figures drifted: paste `python tests/core/sizing/accuracy_report.py --yaml` under the header"
    assert "none measured by deployctl" in shipped["measured_on"]


@pytest.mark.parametrize("example,deratings,kind", [("vllm-a3-1p1d-qwen3.yaml", "engine", "pd-split"),
                                                    ("a2-4x8-dp-ep.yaml", "cloudmatrix", "mixed")])
def test_plan_says_how_far_off_its_estimate_can_be(example, deratings, kind, tmp_path):
    import json

    from conftest import EXAMPLES, run_cli
    from deployctl.core.packaged import packaged_yaml

    shipped = packaged_yaml("deployctl.core.sizing", "accuracy.yaml")
    entry = shipped["engines"]["vllm-ascend"][kind] if deratings == "engine" else shipped["cloudmatrix"][kind]
    res = run_cli("plan", "-i", str(EXAMPLES / example), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert f"how far off: on {entry['points']} published {kind} deployments it was not fitted on" in res.stdout
    assert f"throughput by {entry['throughput']['mape']:.0%}" in res.stdout, res.stdout
    assert "calibration: none from this cluster" in res.stdout
    doc = json.loads(run_cli("plan", "-i", str(EXAMPLES / example), "--output", "json", cwd=tmp_path).stdout)
    got = doc["estimate"]["accuracy"]
    assert (got["deratings"], got["kind"], got["throughput"], got["calibrated"]) == \
        (deratings, kind, entry["throughput"], None)
