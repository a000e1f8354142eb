"""The commands that need no host (validate, plan, recommend, render, observe render) before and after preflight:
planned without device IPs (and said), the latest successful preflight run of the inventory used unasked."""

from __future__ import annotations

import json
import sys

from conftest import ROOT, run_cli

sys.path.insert(0, str(ROOT / "tests" / "features" / "preflight"))
from test_discovery import NODES, facts_file, fake_run, inv  # noqa: E402,F401 - inv: the discovery tests' fixture


def test_plan_and_render_use_the_latest_preflight_run_without_being_told(inv, tmp_path):
    """Before any run: planned without the IPs (said), render refuses; after a run: both use its facts and name it;
    --facts still wins."""
    root = tmp_path / ".deployctl"
    res = run_cli("plan", "-i", str(inv), cwd=tmp_path)
    assert res.returncode == 0 and "left to preflight: device IPs of every device of 2 node(s)" in res.stderr, res.stderr
    assert run_cli("render", "-i", str(inv), "-o", str(tmp_path / "o0"), cwd=tmp_path).returncode == 2
    run = fake_run(root, 1)
    for cmd in (["validate"], ["plan"], ["recommend"], ["render", "-o", str(tmp_path / "o1")],
                ["observe", "render", "-o", str(tmp_path / "mon")]):
        res = run_cli(*cmd, "-i", str(inv), cwd=tmp_path)
        assert res.returncode == 0, (cmd, res.stderr)
        assert f"using device IPs and SDIDs from preflight run {run.name}" in res.stderr or cmd[0] == "observe", \
            (cmd, res.stderr)
        assert "left to preflight" not in res.stderr, (cmd, res.stderr)
    assert '"device_ip": "29.1.7.1"' in (tmp_path / "o1" / "n2" / "ranktable.json").read_text()
    doc = json.loads(run_cli("plan", "-i", str(inv), "--output", "json", cwd=tmp_path).stdout)
    assert doc["facts"] == str(run / "facts.json") and doc["needs_facts"] == []
    other = tmp_path / "other.json"
    other.write_text(facts_file(NODES, cluster="elsewhere").model_dump_json())
    res = run_cli("plan", "-i", str(inv), "--facts", str(other), cwd=tmp_path)
    assert res.returncode == 2 and "cluster 'elsewhere'" in res.stderr      # --facts overrides the run
    res = run_cli("plan", "-i", str(inv), "--run-dir", str(tmp_path / "none"), cwd=tmp_path)
    assert res.returncode == 0 and "left to preflight" in res.stderr         # --run-dir says where runs are


def test_a_stale_run_is_named_and_planning_goes_on_without_it(inv, tmp_path):
    old = fake_run(tmp_path / ".deployctl", 30)
    res = run_cli("plan", "-i", str(inv), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert f"not using preflight facts: the latest successful preflight run of cluster 'c1', {old.name}" in res.stderr
    assert "30.0 h old (the limit is 24 h)" in res.stderr and "left to preflight" in res.stderr
    res = run_cli("render", "-i", str(inv), "-o", str(tmp_path / "o"), cwd=tmp_path)
    assert res.returncode == 2 and "not using preflight facts" in res.stderr and "30.0 h old" in res.stderr
