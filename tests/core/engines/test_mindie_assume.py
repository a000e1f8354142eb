"""engine.assume (issue 22 item 4): say what a custom or patched image runs. A refusal an entry names becomes a
warning that names the assumption and the risk (shown by plan); everything else stays refused; an unknown id
is refused at its line and an entry that lifts nothing is reported."""

from __future__ import annotations

import yaml

from conftest import ROOT, run_cli

EXAMPLE = ROOT / "inventories" / "examples" / "a2-2x8-v32-dp-ep.yaml"
GUIDE = "2.2 test image with atb-models patched for DeepSeek-V3.2 (field guide)"
ATB = {"BackendConfig": {"ModelDeployConfig": {"ModelConfig": [{"backendType": "atb"}]}}}


def example() -> dict:
    doc = yaml.safe_load(EXAMPLE.read_text())
    for node in doc["nodes"]:
        if "hccn_conf" in node:
            node["hccn_conf"] = str(EXAMPLE.parent / node["hccn_conf"])
    return doc


def write(tmp_path, **engine) -> str:
    doc = example()
    doc["engine"]["version"] = "2.2"       # the field guide's image: V3.2 is not in the stock 2.2 release
    doc["engine"].update(engine)
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def test_the_stock_refusal_names_the_way_to_state_the_image(tmp_path):
    r = run_cli("plan", "-i", write(tmp_path, config=ATB))
    text = r.stdout + r.stderr
    assert r.returncode == 2, text
    assert "DeepSeek-V3.2 does not run on MindIE 2.2" in text and "refusal: model-version" in text


def test_an_assumed_refusal_is_a_warning_naming_the_assumption_and_the_risk(tmp_path):
    r = run_cli("plan", "-i", write(tmp_path, config=ATB, assume=[{"refusal": "model-version", "reason": GUIDE}]))
    text = r.stdout + r.stderr
    assert r.returncode == 0, text
    warn = next(line for line in text.splitlines() if "assumed (engine.assume[0]" in line)
    assert GUIDE in warn and "does not run on MindIE 2.2" in warn and "risk:" in warn and "WARN" in warn


def test_mindies_own_check_can_be_assumed_too_and_only_the_named_one(tmp_path):
    """The torch runtime on 2.x: 2.x's loader refuses backendType torch (model_deploy_config.cpp@40fb063
    L471-474); an image with a torch backend patched in is stated with the check's id."""
    only_model = write(tmp_path, assume=[{"refusal": "model-version", "reason": GUIDE}])
    r = run_cli("plan", "-i", only_model)
    assert r.returncode == 2 and "refusal: modelconfig.backendType" in r.stdout + r.stderr
    both = write(tmp_path, assume=[{"refusal": "model-version", "reason": GUIDE},
                                   {"refusal": "modelconfig.backendType", "reason": "torch runtime backported"}])
    r = run_cli("plan", "-i", both)
    text = r.stdout + r.stderr
    assert r.returncode == 0, text
    assert "assumed (engine.assume[1]: torch runtime backported)" in text and "backendType" in text


def test_unknown_ids_are_refused_at_their_line_and_unused_entries_are_reported(tmp_path):
    r = run_cli("validate", "-i", write(tmp_path, assume=[{"refusal": "no-such-check", "reason": "x"}]))
    assert r.returncode == 2 and "engine.assume[0].refusal: no refusal is named 'no-such-check'" in r.stdout + r.stderr
    doc = example()
    doc["engine"]["assume"] = [{"refusal": "quant", "reason": "nothing refused"}]
    path = tmp_path / "stock.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = run_cli("plan", "-i", str(path))
    assert r.returncode == 0 and "engine.assume[0] (quant) matches no refusal" in r.stdout + r.stderr
