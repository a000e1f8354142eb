"""`deployctl init`: the sample inventory and the examples, written from the package into the user's directory.

The package carries a copy of inventories/ (deployctl/samples/inventories/: the wheel ships no repository
folder); the first test keeps the copy byte-identical. test_packaging.py runs init + plan from the built wheel.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import ROOT, run_cli

PACKAGED = ROOT / "deployctl" / "samples" / "inventories"
REPO = ROOT / "inventories"


def _tree(top: Path) -> dict[str, bytes]:
    return {p.relative_to(top).as_posix(): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()}


def test_the_packaged_samples_are_the_repository_inventories_byte_for_byte():
    repo, packaged = _tree(REPO), _tree(PACKAGED)
    differ = sorted(k for k in repo.keys() | packaged.keys() if repo.get(k) != packaged.get(k))
    assert not differ, (f"deployctl/samples/inventories/ differs from inventories/ in {differ}: copy the tree "
                        "(rm -r deployctl/samples/inventories && cp -r inventories deployctl/samples/)")
    assert "sample.yaml" in repo and "examples/hccn/a2-2x8-node1.conf" in repo


def test_init_writes_the_tree_with_a_schema_editors_find_and_says_what_next(tmp_path):
    r = run_cli("init", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    written = _tree(tmp_path / "inventories")
    assert written.keys() == _tree(REPO).keys() | {"inventory.schema.json"}
    assert written["inventory.schema.json"] == (ROOT / "deployctl" / "schema" / "inventory.schema.json").read_bytes()
    for rel, data in written.items():
        if rel.endswith(".yaml"):        # line 1 names the schema written beside them, the rest is the sample's
            first, _, rest = data.partition(b"\n")
            schema = first.split(b"$schema=", 1)[1].decode()
            assert (tmp_path / "inventories" / Path(rel).parent / schema).resolve() == \
                tmp_path / "inventories" / "inventory.schema.json", rel
            assert rest == (REPO / rel).read_bytes().partition(b"\n")[2], rel
        elif rel != "inventory.schema.json":
            assert data == (REPO / rel).read_bytes(), rel
    assert "inventories/sample.yaml" in r.stdout and "inventories/examples/hccn/a2-2x8-node1.conf" in r.stdout
    assert "next: deployctl plan -i inventories/sample.yaml" in r.stdout
    plan = run_cli("plan", "-i", "inventories/sample.yaml", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    example = run_cli("validate", "-i", "inventories/examples/a2-2x8-tp-pp.yaml", cwd=tmp_path)  # hccn.conf copies
    assert example.returncode == 0, example.stderr


def test_init_into_a_directory_with_json_output(tmp_path):
    r = run_cli("init", "site", "--output", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["directory"] == "site" and doc["sample"] == "site/inventories/sample.yaml"
    assert doc["next"] == "deployctl plan -i site/inventories/sample.yaml"
    assert doc["files"][0] == "site/inventories/sample.yaml" and len(doc["files"]) == len(_tree(REPO)) + 1
    assert all((tmp_path / f).is_file() for f in doc["files"])


def test_init_refuses_every_existing_file_in_one_message_and_writes_nothing(tmp_path):
    mine = tmp_path / "inventories" / "sample.yaml"
    mine.parent.mkdir()
    mine.write_text("my own\n")
    (tmp_path / "inventories" / "inventory.schema.json").write_text("{}\n")
    r = run_cli("init", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "2 file(s)" in r.stderr and "inventories/sample.yaml: exists already" in r.stderr
    assert "inventories/inventory.schema.json: exists already" in r.stderr and "--force" in r.stderr
    assert mine.read_text() == "my own\n" and not (tmp_path / "inventories" / "examples").exists()
    j = run_cli("init", "-O", "json", cwd=tmp_path)
    assert j.returncode == 2 and json.loads(j.stdout)["problem_count"] == 2


def test_force_replaces_files_and_links_without_writing_through_a_link(tmp_path):
    outside = tmp_path / "outside.yaml"
    outside.write_text("not deployctl's\n")
    top = tmp_path / "work" / "inventories"
    top.mkdir(parents=True)
    (top / "sample.yaml").symlink_to(outside)
    (top / "inventory.schema.json").write_text("old\n")
    r = run_cli("init", "--force", cwd=tmp_path / "work")
    assert r.returncode == 0, r.stderr
    assert outside.read_text() == "not deployctl's\n"
    assert not (top / "sample.yaml").is_symlink() and (top / "sample.yaml").read_bytes().endswith(
        (REPO / "sample.yaml").read_bytes().partition(b"\n")[2])
    assert (top / "inventory.schema.json").read_text() != "old\n"


def test_a_directory_in_the_way_is_refused_even_with_force(tmp_path):
    (tmp_path / "inventories" / "sample.yaml").mkdir(parents=True)
    r = run_cli("init", "--force", cwd=tmp_path)
    assert r.returncode == 2 and "a directory is in the way" in r.stderr, r.stderr
    assert os.listdir(tmp_path / "inventories") == ["sample.yaml"]
