"""Golden-file tests: every example inventory renders the whole tree byte for byte."""

from __future__ import annotations

import filecmp
import os

import pytest

from conftest import EXAMPLES, ROOT, check_golden, run_cli
from deployctl.io.inventory_file import load_inventory
from deployctl.app.inventory import validate_inventory
from deployctl.core.sizing.planner import plan_layout
from deployctl.core.render import render_artifacts

GOLDEN = ROOT / "tests" / "golden"
CASES = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))


def render_example(stem: str):
    # a relative inventory path keeps file names in plan.json independent of the checkout location
    rel = os.path.relpath(EXAMPLES / f"{stem}.yaml")
    return render_artifacts(plan_layout(validate_inventory(load_inventory(rel))))


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_every_example_has_a_golden_tree():
    assert CASES, "no example inventories found"
    assert sorted(p.name for p in GOLDEN.iterdir() if p.is_dir()) == CASES


@pytest.mark.parametrize("stem", CASES)
def test_rendered_tree_matches_golden(stem, update_golden):
    artifacts = render_example(stem)
    folder = GOLDEN / stem
    for art in artifacts:
        check_golden(folder / art.path, art.content, update_golden)
    on_disk = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert on_disk == sorted(a.path for a in artifacts), "golden tree has files the renderer no longer writes"


@pytest.mark.parametrize("stem", CASES)
def test_render_is_deterministic_through_the_cli(stem, tmp_path):
    inv = f"inventories/examples/{stem}.yaml"
    for out in ("a", "b"):
        res = run_cli("render", "-i", inv, "-o", str(tmp_path / out))
        assert res.returncode == 0, res.stderr
    cmp = filecmp.dircmp(tmp_path / "a", tmp_path / "b")
    assert not cmp.diff_files and not cmp.left_only and not cmp.right_only
    for sub in cmp.subdirs.values():
        assert not sub.diff_files and not sub.left_only and not sub.right_only
    for path in (tmp_path / "a").rglob("*"):
        twin = tmp_path / "b" / path.relative_to(tmp_path / "a")
        assert path.stat().st_mode == twin.stat().st_mode


@pytest.mark.parametrize("stem", CASES)
def test_cli_tree_equals_in_process_render(stem, tmp_path):
    res = run_cli("render", "-i", f"inventories/examples/{stem}.yaml", "-o", str(tmp_path / "t"))
    assert res.returncode == 0, res.stderr
    for art in render_example(stem):
        written = tmp_path / "t" / art.path
        assert written.read_bytes() == art.content
        assert written.stat().st_mode & 0o777 == art.mode
