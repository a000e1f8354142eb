"""Preflight's per-file `weights` rule: the same check, sizes only, as findings naming node and file."""

from __future__ import annotations

from deployctl.core.models.facts import WeightsDir
from deployctl.core.models.host_facts import HostFacts
from deployctl.features.preflight.weights_files import weights_findings

from weights.test_listing import DirExecutor, make_nodes, targets


def facts(roots, missing=(), down=()):
    out = {}
    for n in roots:
        if n in down:
            out[n] = HostFacts(name=n, address="x", error_kind="timeout", error="down")
        else:
            out[n] = HostFacts(name=n, address="x", weights=WeightsDir(exists=n not in missing, readable=True))
    return out


def test_a_shard_of_another_size_is_a_fail_naming_node_and_file(tmp_path):
    roots = make_nodes(tmp_path)
    (roots["node3"] / "model-00001-of-00001.safetensors").write_bytes(b"short")
    found, notes = weights_findings("/data/w", targets(roots), DirExecutor(roots), facts(roots), 30)
    assert [(f.rule, f.severity, f.host) for f in found] == [("weights", "FAIL", "node3")]
    assert "/data/w/model-00001-of-00001.safetensors: 5 bytes, expected 10 bytes" in found[0].message
    assert "weights sync" in found[0].hint and notes == []


def test_nodes_without_the_directory_or_down_are_left_to_the_other_rules(tmp_path):
    roots = make_nodes(tmp_path)
    (roots["node1"] / "config.json").unlink()
    ex = DirExecutor(roots, down={"node2"})
    found, _ = weights_findings("/data/w", targets(roots), ex, facts(roots, missing={"node1"}, down={"node2"}), 30)
    assert found == []              # node1 (no directory) and node2 (down) are not listed again
    found, _ = weights_findings("/data/w", targets(roots), DirExecutor(roots), facts(roots), 30)
    assert [(f.host, f.message.split(":")[0]) for f in found] == [("node1", "/data/w/config.json")]


def test_identical_nodes_and_no_index(tmp_path):
    roots = make_nodes(tmp_path)
    assert weights_findings("/data/w", targets(roots), DirExecutor(roots), facts(roots), 30) == ([], [])
    for d in roots.values():
        (d / "model.safetensors.index.json").unlink()
    found, notes = weights_findings("/data/w", targets(roots), DirExecutor(roots), facts(roots), 30)
    assert found == [] and "no node has a readable" in notes[0] and "No such file" in notes[0]


def test_per_file_findings_replace_the_total_size_one_on_that_node():
    from deployctl.core.models.host_facts import Finding
    from deployctl.features.preflight.weights_files import merge

    total = Finding(rule="weights", severity="FAIL", host="node1", message="/w holds 5 bytes, the other nodes 10")
    other = Finding(rule="weights", severity="FAIL", host="node2", message="/w holds 7 bytes, the other nodes 10")
    missing = Finding(rule="weights", severity="FAIL", host="node1", message="/w missing")
    per_file = Finding(rule="weights", severity="FAIL", host="node1", message="/w/a: 5 bytes, expected 10 bytes")
    assert merge([total, other, missing], [per_file], "/w") == [other, missing, per_file]
