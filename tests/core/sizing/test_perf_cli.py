"""run_recommend, the body of `deployctl recommend`: table or JSON, --apply writes a validated copy atomically
and never the source, exit status says whether the best layout meets the SLO."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from perflib import EXAMPLES

from deployctl.cli.recommend import run_recommend
from deployctl.core.errors import UsageError
from deployctl.io.inventory_file import load_inventory
from deployctl.app.inventory import validate_inventory


def test_json_output(capsys):
    rc = run_recommend(EXAMPLES / "a2-4x8-dp-ep.yaml", 3500, 1500, 100, None, top=3, output="json")
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["label"] == "estimated"
    assert len(doc["candidates"]) == 3 and doc["total_candidates"] >= 3
    assert doc["candidates"][0]["layout"]["preset"] == "dp-ep"
    assert doc["objective"] == {"input_len": 3500, "output_len": 1500, "slo_tpot_ms": 100.0, "slo_ttft_ms": None,
                                "maximize": "throughput_per_die", "request_rate": None, "arrival": "poisson",
                                "prefix_hit": 0.0}


def test_text_output_and_defaults(capsys):
    rc = run_recommend(EXAMPLES / "vllm-a3-1p1d-qwen3.yaml")        # lengths from the model limits, no SLO
    out = capsys.readouterr().out
    assert rc == 0 and "tok/s/die" in out and "layout:" in out and "estimated" in out


@pytest.mark.slow
def test_apply_writes_a_copy_that_validates(tmp_path, capsys):
    src = tmp_path / "inv.yaml"
    shutil.copy(EXAMPLES / "a2-4x8-dp-ep.yaml", src)
    before = src.read_bytes()
    target = tmp_path / "inv-recommended.yaml"
    run_recommend(src, 3500, 1500, 100, None, apply_to=target, output="json")
    doc = json.loads(capsys.readouterr().out)
    assert src.read_bytes() == before
    inv = validate_inventory(load_inventory(target))
    assert inv.layout.model_dump(exclude_none=True) == doc["candidates"][0]["layout"]
    assert yaml.safe_load(target.read_text())["nodes"] == yaml.safe_load(before)["nodes"]
    assert "# 4 x Atlas 800I A2" in target.read_text()                # comments outside the block stay
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]    # no temporary file left
    with pytest.raises(UsageError):
        run_recommend(src, 3500, 1500, 100, None, apply_to=src)
    with pytest.raises(UsageError):
        run_recommend(src, 3500, 1500, 100, None, apply_to=tmp_path)


def test_unmet_slo_exits_one(capsys):
    assert run_recommend(EXAMPLES / "a2-1x8-single.yaml", 1024, 128, 0.5, None, output="json") == 1
    assert json.loads(capsys.readouterr().out)["notes"]


def test_bad_arguments(capsys):
    with pytest.raises(UsageError):
        run_recommend(EXAMPLES / "a2-1x8-single.yaml", 1024, 128, -5, None)
    with pytest.raises(UsageError):
        run_recommend(EXAMPLES / "a2-1x8-single.yaml", 1024, 128, None, None, sku="910_9391")
