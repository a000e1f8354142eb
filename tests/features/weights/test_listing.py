"""The weights check's boundaries: names from an untrusted index, the weights path, and what hosts answer."""

from __future__ import annotations

import hashlib
import json
import subprocess

import pytest
from support import FakeExecutor

from deployctl.io.executor import HostTarget
from deployctl.features.weights.check import Difference, check_weights, compare
from deployctl.features.weights.listing import (MAX_FILES, SCRIPT, FileState, files_of, listing_argv, parse_listing,
                                       safe_dir, safe_name)

NAMES = ["config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors"]


# --------------------------------------------------------------------------- names and paths

@pytest.mark.parametrize("name", ["model-00001-of-000163.safetensors", "config.json", "sub/part_1.bin",
                                  "quant_model_weight_w8a8.safetensors", "a+b=c.safetensors"])
def test_plain_names_pass(name):
    assert safe_name(name) == name


@pytest.mark.parametrize("name", ["", "..", "../etc/passwd", "a/../b", "/etc/shadow", ".hidden", "a//b", "a/",
                                  "x\ny.safetensors", "x\x1b[2Jy", "x y", "$(touch /tmp/pwned)", "a;rm -rf /",
                                  "`id`", "a\\b", "x" * 600, 7, None, "ü.safetensors"])
def test_unsafe_names_refused(name):
    with pytest.raises(ValueError):
        safe_name(name)


@pytest.mark.parametrize("path", ["relative/path", "/data/../etc", "/data/./x", "/data/a b", "/data/x\ny", "",
                                  "/data/$(id)", "/"])
def test_unsafe_weights_path_refused(path):
    with pytest.raises(ValueError):
        safe_dir(path)


def test_weights_path_trailing_slash():
    assert safe_dir("/data/models/DeepSeek-R1/") == "/data/models/DeepSeek-R1"


def test_files_of_lists_config_index_then_shards_once():
    wm = {"a": "model-00002-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
          "c": "model-00001-of-00002.safetensors"}
    assert files_of(wm) == ["config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
                            "model-00002-of-00002.safetensors"]
    with pytest.raises(ValueError, match="plain relative"):
        files_of({"a": "../../root/.ssh/id_rsa"})
    with pytest.raises(ValueError, match="more than"):
        files_of({str(i): f"s{i}.safetensors" for i in range(MAX_FILES)})


def test_names_are_arguments_never_script_text():
    argv = listing_argv("/data/w", NAMES, hashes=True)
    assert argv[:4] == ["python3", "-c", SCRIPT, "deployctl-weights"] and argv[4:7] == ["/data/w", "1", "4"]
    assert argv[7:] == NAMES
    with pytest.raises(ValueError):
        listing_argv("/data/w", ["ok.bin", "x'; reboot; '"], hashes=False)


# --------------------------------------------------------------------------- what a host answers

def test_parse_a_plain_answer():
    text = "0 ok 1234\n1 ok 99\n2 missing\nend 3\n"
    assert parse_listing(text, NAMES, False) == {
        "config.json": FileState("ok", 1234), "model.safetensors.index.json": FileState("ok", 99),
        "model-00001-of-00002.safetensors": FileState("missing")}


def test_parse_hashes_in_any_order():
    h = "ab" * 32
    text = f"2 ok 5 {h}\n0 notfile\n1 unreadable\nend 3\n"
    got = parse_listing(text, NAMES, True)
    assert got["model-00001-of-00002.safetensors"] == FileState("ok", 5, h)
    assert got["config.json"].state == "notfile" and got["model.safetensors.index.json"].state == "unreadable"


def test_a_failed_read_is_unreadable_not_a_size():
    got = parse_listing(f"0 ok -\n1 ok 3 -\n2 ok 4 {'0' * 64}\nend 3\n", NAMES, True)
    assert [s.state for s in got.values()] == ["unreadable", "unreadable", "ok"]


@pytest.mark.parametrize("text, why", [
    ("", "cut short"),
    ("0 ok 1\n1 ok 2\n", "cut short"),                                   # no end line
    ("0 ok 1\n1 ok 2\n2 ok 3\nend 4\n", "cut short"),                    # end count is not ours
    ("0 ok 1\n1 ok 2\nend 3\n", "no answer for model-00001"),            # a file not answered
    ("0 ok 1\n0 ok 1\n1 ok 2\n2 ok 3\nend 3\n", "answered twice"),
    ("0 ok 1\n1 ok 2\n7 ok 3\nend 3\n", "only 3 were asked"),
    ("0 ok 1\n1 ok 2\n2 ok 3\n/etc/passwd: 0 ok\nend 3\n", "unexpected line"),
    ("0 ok 1\n1 ok 2\n2 ok 1.5e9\nend 3\n", "unexpected line"),
    ("0 ok -12\n1 ok 2\n2 ok 3\nend 3\n", "unexpected line"),
    ("0 ok 99999999999999999999\n1 ok 2\n2 ok 3\nend 3\n", "unexpected line"),   # > 16 digits
    ("0 ok 1 " + "a" * 64 + "\n1 ok 2\n2 ok 3\nend 3\n", "none was asked"),
    ("0 ok 1\x1b[31m\n1 ok 2\n2 ok 3\nend 3\n", "unexpected line"),
    ("0 ok 1\n1 ok 2\n2 ok 3\nend 3\nend 3\n", "unexpected line"),
])
def test_junk_answers_are_refused(text, why):
    with pytest.raises(ValueError, match=why):
        parse_listing(text, NAMES, False)


def test_a_path_with_a_newline_in_the_answer_is_junk():
    # a host that prints the name back (with a newline planted in it) cannot shift the answers
    with pytest.raises(ValueError, match="unexpected line"):
        parse_listing("0 ok 1\nmodel\n1 ok 2\n2 ok 3\nend 3\n", NAMES, False)


def test_huge_answers_are_refused_before_parsing():
    with pytest.raises(ValueError, match="at most"):
        parse_listing("0 ok 1\n" * 200_000 + "end 3\n", NAMES, False)


# --------------------------------------------------------------------------- the script itself, run here

def run_here(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def test_the_script_answers_what_the_parser_reads(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors.index.json").mkdir()
    shard = tmp_path / "model-00001-of-00002.safetensors"
    shard.write_bytes(b"x" * 5000)
    for hashes in (False, True):
        r = run_here(listing_argv(str(tmp_path), NAMES, hashes))
        assert r.returncode == 0, r.stderr
        got = parse_listing(r.stdout, NAMES, hashes)
        assert got["config.json"].size == 2
        assert got["model.safetensors.index.json"].state == "notfile"
        assert got[NAMES[2]].size == 5000
        assert got[NAMES[2]].sha256 == (hashlib.sha256(b"x" * 5000).hexdigest() if hashes else None)
    many = [f"s{i}.bin" for i in range(11)]              # more than HASH_WIDTH: the batches and the last wait
    for n in many[::2]:
        (tmp_path / n).write_bytes(n.encode())
    got = parse_listing(run_here(listing_argv(str(tmp_path), many, True)).stdout, many, True)
    assert [s.state for s in got.values()] == ["ok", "missing"] * 5 + ["ok"]


def test_the_script_reports_a_link_and_never_reads_through_it(tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"root only")
    secret.chmod(0o600)
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "config.json").symlink_to(secret)
    (tmp_path / "w" / "sub").symlink_to(tmp_path)
    names = ["config.json", "sub/secret", "model.safetensors.index.json"]
    r = run_here(listing_argv(str(tmp_path / "w"), names, True))
    got = parse_listing(r.stdout, names, True)
    assert [s.state for s in got.values()] == ["link", "link", "missing"]
    assert hashlib.sha256(b"root only").hexdigest() not in r.stdout
    assert got["config.json"].describe() == "a symbolic link (not followed)"


# --------------------------------------------------------------------------- comparing nodes

def ok(size, h=None):
    return FileState("ok", size, h)


def test_majority_names_the_odd_node():
    listings = {"n1": {"a": ok(1)}, "n2": {"a": ok(2)}, "n3": {"a": ok(1)}}
    ref, diffs = compare(listings, ["a"])
    assert ref == {"a": ok(1)} and diffs == [Difference("n2", "a", "size", "2 bytes", "1 bytes")]


def test_hash_difference_and_missing():
    listings = {"n1": {"a": ok(1, "a" * 64)}, "n2": {"a": ok(1, "b" * 64)}, "n3": {"a": ok(1, "a" * 64)},
                "n4": {"a": FileState("missing")}}
    _, diffs = compare(listings, ["a"])
    assert [(d.node, d.kind) for d in diffs] == [("n2", "hash"), ("n4", "missing")]


def test_a_tie_names_every_node_and_a_reference_breaks_it():
    listings = {"n1": {"a": ok(1)}, "n2": {"a": ok(2)}}
    _, diffs = compare(listings, ["a"])
    assert {d.node for d in diffs} == {"n1", "n2"} and "no majority" in diffs[0].want
    _, diffs = compare(listings, ["a"], reference="n1")
    assert [(d.node, d.kind) for d in diffs] == [("n2", "size")]


def test_missing_everywhere_is_named_on_every_node():
    listings = {"n1": {"a": FileState("missing")}, "n2": {"a": FileState("missing")}}
    assert [d.node for d in compare(listings, ["a"])[1]] == ["n1", "n2"]


# --------------------------------------------------------------------------- check over fake hosts

def DirExecutor(roots, answers=None, down=()):
    """Each node is a local directory standing in for /data/w; ``answers`` replaces a node's listing."""
    answers = answers or {}

    def listing(target, argv):
        if argv[3:4] == ["deployctl-weights"] and target.name in answers:
            return 0, answers[target.name]
        return None

    return FakeExecutor(listing, here=True, roots=roots, root="/data/w", down=down, timeout=30)


def make_nodes(tmp_path, n=3):
    roots = {}
    index = {"metadata": {"total_size": 10}, "weight_map": {"w": "model-00001-of-00001.safetensors"}}
    for i in range(1, n + 1):
        d = tmp_path / f"node{i}"
        d.mkdir()
        (d / "config.json").write_text('{"architectures": ["X"]}')
        (d / "model.safetensors.index.json").write_text(json.dumps(index))
        (d / "model-00001-of-00001.safetensors").write_bytes(b"0123456789")
        roots[f"node{i}"] = d
    return roots


def targets(roots):
    return [HostTarget(n, "127.0.0.1") for n in roots]


@pytest.mark.slow
def test_check_names_the_node_and_file(tmp_path):
    roots = make_nodes(tmp_path)
    (roots["node2"] / "model-00001-of-00001.safetensors").write_bytes(b"0123456789AB")
    r = check_weights(DirExecutor(roots), targets(roots), "/data/w")
    assert r.index_from == "node1" and len(r.files) == 3
    assert [(d.node, d.file, d.kind) for d in r.differences] == [
        ("node2", "model-00001-of-00001.safetensors", "size")]
    (roots["node2"] / "model-00001-of-00001.safetensors").write_bytes(b"0123456780")   # same size
    assert check_weights(DirExecutor(roots), targets(roots), "/data/w").ok
    r = check_weights(DirExecutor(roots), targets(roots), "/data/w", hashes=True)
    assert [(d.node, d.kind) for d in r.differences] == [("node2", "hash")]


def test_a_hostile_or_dead_host_is_a_finding_about_it(tmp_path):
    roots = make_nodes(tmp_path)
    ex = DirExecutor(roots, answers={"node2": "0 ok 1\n\x1b]0;owned\x07\nend 3\n"}, down={"node1"})
    r = check_weights(ex, targets(roots), "/data/w")
    assert r.index_from == "node2"              # node1 is down: the next node's index is read
    kinds = {(d.node, d.kind) for d in r.differences}
    assert kinds == {("node1", "host"), ("node2", "host")}
    assert all("\x1b" not in d.have and "\x07" not in d.have for d in r.differences)


def test_a_bad_index_moves_on_to_the_next_node(tmp_path):
    roots = make_nodes(tmp_path)
    (roots["node1"] / "model.safetensors.index.json").write_text('{"weight_map": {"w": "../../etc/shadow"}}')
    r = check_weights(DirExecutor(roots), targets(roots), "/data/w")
    # node1's index parses, but names an unsafe file: refused, and the check says so about node1
    assert r.index_from == "node1" and not r.files
    assert [(d.node, d.kind) for d in r.differences] == [("node1", "index")]
    (roots["node1"] / "model.safetensors.index.json").write_text("[1, 2]")
    r = check_weights(DirExecutor(roots), targets(roots), "/data/w")
    assert r.index_from == "node2"
    assert ("node1", "model.safetensors.index.json", "index") in {(d.node, d.file, d.kind) for d in r.differences}
