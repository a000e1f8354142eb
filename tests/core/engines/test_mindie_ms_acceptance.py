"""MindIE-MS's own refusals of ms_controller.json / ms_coordinator.json as rules (issue 22: acceptance_ms.yaml).

(a) every refusing check found in the Motor readers (file:line below, read at MindIE-Motor@5dfb024e) is encoded
by a rule whose line range covers it; (b) the files deployctl renders for the pd-split examples pass; (c) a value
set in engine.ms that MindIE-MS refuses is refused by validate at that key with the source, and the boundary value
is accepted; (d) junk never crashes the evaluator."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from conftest import ROOT, run_cli
from deployctl.core.engines.mindie.acceptance_ms import checks, evaluate

# the lines of every check that can refuse the file (IsJson*Valid / explicit comparison), per reader
UPSTREAM = {
    "coordinator": [70, 71, 72, 73, 74, 75, 77, 214, 218, 219, 220, 221, 223, 242, 246, 266, 267, 279, 290, 291,
                    292, 293, 294, 389, 395, 408, 415, 442, 593, 594, 595, 646],
    "controller": [44, 48, 56, 57, 70, 76, 87, 91, 95, 99, 102, 110, 113, 120, 122, 123, 124, 125, 126, 127, 128,
                   129, 191, 196, 245, 297, 302, 307],
}
CORPUS = ROOT / "tests" / "conformance" / "mindie" / "inventories"


def _covered(side: str) -> set[int]:
    lines = set()
    for c in checks(side):
        for a, b in re.findall(r"L(\d+)(?:-(\d+))?", c["line"]):
            lines.update(range(int(a), int(b or a) + 1))
    return lines


@pytest.mark.parametrize("side", ["coordinator", "controller"])
def test_every_refusal_found_in_the_reader_has_a_rule(side):
    missing = sorted(set(UPSTREAM[side]) - _covered(side))
    assert not missing, f"ms_{side}.json checks at these lines of the Motor source have no rule: {missing}"


@pytest.mark.parametrize("name", ["d5-a2-pd-1p2-1d8", "d6-a3-pd-4p1-1d4"])
def test_rendered_ms_files_pass(name, tmp_path):
    r = run_cli("render", "-i", str(CORPUS / f"{name}.yaml"), "-o", str(tmp_path / "o"))
    assert r.returncode == 0, r.stdout + r.stderr
    for side in ("controller", "coordinator"):
        doc = json.loads((tmp_path / "o" / "p1" / f"ms_{side}.json").read_text())
        assert evaluate(doc, side, "3.0") == []


def _inv(tmp_path, side: str, patch: dict) -> str:
    doc = yaml.safe_load((CORPUS / "d6-a3-pd-4p1-1d4.yaml").read_text())
    block = doc["engine"]["ms"].setdefault(side, {})
    for k, v in patch.items():
        block[k] = {**block.get(k, {}), **v} if isinstance(v, dict) else v
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


@pytest.mark.parametrize("side, patch, key, ok", [
    ("coordinator", {"exception_config": {"infer_timeout": 65535}}, "exception_config.infer_timeout", True),
    ("coordinator", {"exception_config": {"infer_timeout": 65536}}, "exception_config.infer_timeout", False),
    ("coordinator", {"request_limit": {"max_requests": 90001}}, "request_limit.max_requests", False),
    ("coordinator", {"request_limit": {"single_node_max_requests": 15000}}, "request_limit.single_node_max_requests",
     True),
    ("coordinator", {"string_token_rate": 0.5}, "string_token_rate", False),
    ("controller", {"digs_prefill_slo": 0}, "digs_prefill_slo", False),
])
def test_engine_ms_values_are_checked_at_their_key(tmp_path, side, patch, key, ok):
    r = run_cli("validate", "-i", _inv(tmp_path, side, patch))
    text = r.stdout + r.stderr
    if ok:
        assert r.returncode == 0, text
    else:
        assert r.returncode == 2, text
        assert f"engine.ms.{side}.{key}" in text and "MindIE-Motor@5dfb024e" in text


def test_scheduler_and_rate_pairs():
    base = {"deploy_mode": "pd_separate", "scheduler_type": "digs_scheduler", "algorithm_type": "round_robin"}
    found = evaluate({"digs_scheduler_config": base}, "coordinator", "3.0")
    assert any(c == "ms.coordinator.scheduler" and "load_balance" in m for c, _, m, _ in found)
    found = evaluate({"default_p_rate": 0, "default_d_rate": 3}, "controller", "3.0")
    assert any(c == "ms.controller.default_rates-pair" for c, _, _, _ in found)
    assert evaluate({}, "controller", "2.2") == []        # the 2.x readers were not read: not checked


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                           lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids,
                                                                                     max_size=4), max_leaves=12)


@settings(max_examples=examples(60), deadline=None)
@given(doc=st.dictionaries(st.sampled_from(["http_config", "request_limit", "digs_scheduler_config",
                                            "multi_node_infer_config", "default_p_rate", "string_token_rate"]),
                           json_values, max_size=6))
def test_junk_never_crashes(doc):
    for side in ("controller", "coordinator"):
        for check, key, message, src in evaluate(doc, side, "3.0"):
            assert check and isinstance(message, str) and src.startswith("Ascend/MindIE-Motor")
