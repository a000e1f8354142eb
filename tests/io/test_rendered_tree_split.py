"""A large rendered tree is written by two processes (io/rendered_tree.py _write_split): every file arrives with its
bytes and mode, the marker lists them all, and a failure on either side leaves nothing behind."""

from __future__ import annotations

import hashlib
import json
import os
import stat

import pytest

from deployctl.core.models.artifact import Artifact
from deployctl.io import rendered_tree
from deployctl.io.rendered_tree import MARKER, write_tree


def _tree(folders: int = 20, per: int = 5) -> list[Artifact]:
    shared = b'{"same": "bytes for every folder"}\n'
    out = []
    for f in range(folders):
        for i in range(per):
            content = shared if i == 0 else f"node{f} file{i}\n".encode()
            out.append(Artifact(kind="x", path=f"n{f:02}/file{i}", content=content, mode=0o600 if i % 2 else 0o755))
    out.append(Artifact(kind="plan", path="plan.json", content=b"{}\n", mode=0o600))
    return sorted(out, key=lambda a: a.path)


@pytest.fixture
def split(monkeypatch):
    monkeypatch.setattr(rendered_tree, "SPLIT_FILES", 10)
    forks = []
    real = os.fork

    def fork():
        pid = real()
        if pid:
            forks.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    return forks


def test_every_file_with_its_bytes_and_mode(tmp_path, split):
    arts = _tree()
    write_tree(tmp_path / "out", arts)
    assert len(split) == 1                                   # the second half was written by a child
    for a in arts:
        path = tmp_path / "out" / a.path
        assert path.read_bytes() == a.content
        assert stat.S_IMODE(path.stat().st_mode) == a.mode
    marker = json.loads((tmp_path / "out" / MARKER).read_text())
    assert marker["files"] == {a.path: hashlib.sha256(a.content).hexdigest() for a in arts}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with pytest.raises(ChildProcessError):
        os.waitpid(split[0], os.WNOHANG)                     # reaped


@pytest.mark.parametrize("half", ["first", "second"])
def test_a_failure_on_either_side_leaves_nothing(tmp_path, split, half):
    arts = _tree()
    clash = arts[3] if half == "first" else arts[-3]          # the same path twice: O_EXCL refuses the second
    arts = sorted(arts + [Artifact(kind="x", path=clash.path, content=b"other\n", mode=0o600)], key=lambda a: a.path)
    with pytest.raises(OSError, match="File exists|FileExistsError"):
        write_tree(tmp_path / "out", arts)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ChildProcessError):
        os.waitpid(split[0], os.WNOHANG)


def test_a_small_tree_is_written_by_this_process(tmp_path, split, monkeypatch):
    monkeypatch.setattr(rendered_tree, "SPLIT_FILES", 4096)
    write_tree(tmp_path / "out", _tree())
    assert split == []


def test_the_previous_tree_is_removed_by_two_processes(tmp_path, split, monkeypatch):
    monkeypatch.setattr(rendered_tree, "SPLIT_FILES", 32)             # 32 // 16: trees of 2 entries or more
    write_tree(tmp_path / "out", _tree())
    (tmp_path / "out" / "n03" / "link").symlink_to(tmp_path / "keep")    # a link in the old tree: not followed
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "precious").write_text("x")
    newer = [Artifact(kind="x", path=f"m{i}/f", content=b"new\n", mode=0o600) for i in range(3)]
    write_tree(tmp_path / "out", newer, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep", "out"]            # the old tree is gone
    assert sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*")) == [
        ".deployctl.json", "m0", "m0/f", "m1", "m1/f", "m2", "m2/f"]
    assert (tmp_path / "keep" / "precious").read_text() == "x"
    assert len(split) >= 2                                            # a writer and a remover child


def test_a_large_trees_marker_is_still_ours(tmp_path):
    """An 8,192-server tree's marker lists 32,772 digests (3 MB): rendering over it needs no --force."""
    from deployctl.io.rendered_tree import check_target

    out = tmp_path / "out"
    write_tree(out, _tree())
    marker = json.loads((out / MARKER).read_text())
    marker["files"].update({f"n{i:05}/config.json": "0" * 64 for i in range(40_000)})
    (out / MARKER).write_text(json.dumps(marker, indent=2))
    assert (out / MARKER).stat().st_size > 3_000_000
    check_target(out, force=False)                     # ours: no refusal
    write_tree(out, _tree())
