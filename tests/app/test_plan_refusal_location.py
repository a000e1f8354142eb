"""Issue 11: a plan refusal (the layout does not fit in memory) points at the inventory key to change, with
file and line, in text and in JSON, from plan, render and up alike."""

from __future__ import annotations

import json

from conftest import ROOT, run_cli

CASE = ROOT / "tests" / "errors" / "plan-r1-w8a8-one-a2" / "inventory.yaml"


def test_plan_refusal_names_file_line_and_key_in_json(tmp_path):
    for cmd in (["plan"], ["render", "-o", str(tmp_path / "out")]):
        res = run_cli(*cmd, "-i", str(CASE), "--output", "json")
        assert res.returncode == 2, res.stdout + res.stderr
        doc = json.loads(res.stdout)
        (p,) = doc["problems"]
        assert p["file"] == str(CASE) and p["path"] == "layout" and isinstance(p["line"], int) and p["line"] > 0
        assert CASE.read_text().splitlines()[p["line"] - 1].startswith("layout:")
        assert "w4a8" in doc["hint"]


def test_up_refuses_the_same_way_before_touching_a_host(tmp_path):
    res = run_cli("up", "-i", str(CASE), "-y", "--run-dir", str(tmp_path / "runs"))
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{CASE}:" in res.stderr and " layout: mixed instance" in res.stderr and "Traceback" not in res.stderr
