"""`weights check`'s advice: sync from a node that holds the checkpoint right when one does; when none does (the
path is missing everywhere, every node lacks a shard, the copies disagree with no majority, no node answered),
say so and what to do instead. Over nodes that are local directories (test_listing.DirExecutor), and the CLI's
last line and JSON field."""

from __future__ import annotations

import pytest

import json
import shutil

from weights.test_listing import DirExecutor, make_nodes, targets

from deployctl.features.weights.advice import KINDS, advise
from deployctl.features.weights.check import check_weights

SHARD = "model-00001-of-00001.safetensors"


def check(roots, **kw):
    result = check_weights(DirExecutor(roots, **kw), targets(roots), "/data/w")
    return result, advise(result)


def test_a_node_with_every_file_right_is_named_as_the_source(tmp_path):
    roots = make_nodes(tmp_path)
    (roots["node2"] / SHARD).write_bytes(b"01234")
    result, advice = check(roots)
    assert advice.kind == "sync" and advice.sources == ("node1", "node3")
    assert "`deployctl weights sync --from node1`" in advice.text and "to node2" in advice.text
    assert "has them right" in advice.text


def test_the_directory_missing_on_every_node(tmp_path):
    roots = {f"node{i}": tmp_path / f"absent{i}" for i in range(1, 4)}
    result, advice = check(roots)
    assert not result.ok and not result.files
    assert advice.kind == "no-checkpoint" and advice.sources == ()
    assert "no node holds the checkpoint in /data/w" in advice.text
    assert "node1, node2, node3" in advice.text and "nothing to sync from" in advice.text
    # what to do instead: get it onto one node, or sync from this machine, or point weights_path elsewhere
    for step in ("copy the checkpoint onto one node", "model hub or shared storage",
                 "`deployctl weights sync --from THAT_NODE`", "`deployctl weights sync --from /path/to/checkpoint`",
                 "model.weights_path"):
        assert step in advice.text, step
    assert "--from node" not in advice.text


def test_the_directory_without_its_index_everywhere(tmp_path):
    roots = make_nodes(tmp_path, 2)
    for d in roots.values():
        (d / "model.safetensors.index.json").unlink()
    assert check(roots)[1].kind == "no-checkpoint"


def test_every_node_lacks_a_file_no_complete_copy(tmp_path):
    roots = make_nodes(tmp_path, 2)
    (roots["node1"] / SHARD).unlink()
    (roots["node2"] / "config.json").unlink()
    _, advice = check(roots)
    assert advice.kind == "no-complete-copy" and advice.sources == ()
    assert "no node holds every file" in advice.text and "copy the checkpoint onto one node" in advice.text
    # a shard missing on every node, the rest alike: no node to sync from either
    (tmp_path / "b").mkdir()
    roots = make_nodes(tmp_path / "b", 3)
    for d in roots.values():
        (d / SHARD).unlink()
    assert check(roots)[1].kind == "no-complete-copy"


def test_complete_copies_that_disagree_without_a_majority(tmp_path):
    roots = make_nodes(tmp_path, 2)
    (roots["node2"] / SHARD).write_bytes(b"0123456789AB")
    _, advice = check(roots)
    assert advice.kind == "choose-source" and advice.sources == ()
    assert "node1, node2 hold every file" in advice.text and "THAT_NODE" in advice.text


@pytest.mark.slow
def test_nodes_that_could_not_be_checked(tmp_path):
    roots = make_nodes(tmp_path)
    _, advice = check(roots, down={"node3"})
    assert advice.kind == "unreachable" and "node3 could not be checked" in advice.text
    assert "sync" not in advice.text
    _, advice = check(roots, down={"node1", "node2", "node3"})
    assert advice.kind == "unreachable" and "no node could be checked" in advice.text
    # a node down and another one different: sync from a right one, and the one down is named
    (roots["node2"] / SHARD).write_bytes(b"01234")
    _, advice = check(roots, down={"node3"})          # node1 and node2 left: a tie
    assert advice.kind == "choose-source" and "node3 could not be checked" in advice.text
    (tmp_path / "four").mkdir()
    roots = make_nodes(tmp_path / "four", 4)
    (roots["node2"] / SHARD).write_bytes(b"01234")
    _, advice = check(roots, down={"node4"})
    assert advice.kind == "sync" and advice.sources == ("node1", "node3") and "node4 could not be checked" in \
        advice.text


def test_identical_nodes_need_nothing(tmp_path):
    result, advice = check(make_nodes(tmp_path))
    assert result.ok and advice.kind == "none" and advice.kind in KINDS


def test_the_cli_prints_the_advice_and_names_its_kind_in_json(tmp_path, monkeypatch):
    """`weights check` itself, its executor replaced by the local directories (no SSH)."""
    from typer.testing import CliRunner

    from deployctl.cli import weights as cli
    from deployctl.io.executor import HostTarget

    roots = {"node1": tmp_path / "absent1", "node2": tmp_path / "absent2"}
    monkeypatch.setattr(cli, "_load", lambda inventory: (None, [HostTarget(n, "127.0.0.1") for n in roots],
                                                         "/data/w"))

    class Ex:
        def __enter__(self):
            return DirExecutor(roots)

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(cli, "_executor", lambda trust: Ex())
    runner = CliRunner()
    res = runner.invoke(cli.weights_app, ["check", "-i", "inv.yaml", "--output", "json"])
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["advice"]["kind"] == "no-checkpoint" and doc["advice"]["sources"] == []
    assert "copy the checkpoint onto one node" in doc["advice"]["text"]
    res = runner.invoke(cli.weights_app, ["check", "-i", "inv.yaml"], env={"COLUMNS": "400"})
    assert res.exit_code == 1
    last = res.stdout.strip().splitlines()[-1]
    assert last.startswith("✗ no node holds the checkpoint") and "sync --from NODE" not in res.stdout, res.stdout
    # some node has them right: the advice stays sync --from that node
    (tmp_path / "n").mkdir()
    shutil.copytree(make_nodes(tmp_path / "n", 1)["node1"], roots["node1"])
    res = runner.invoke(cli.weights_app, ["check", "-i", "inv.yaml"], env={"COLUMNS": "400"})
    assert "✗ differs on node2: `deployctl weights sync --from node1` copies the files to node2 from node1, a node " \
           "that has them right" in res.stdout, res.stdout
