"""weights sync without hosts: what it copies, what it will not, and a node's answers about part files."""

from __future__ import annotations

import hashlib

import pytest
from support import FakeExecutor

from deployctl.io.executor import HostError, HostTarget
from deployctl.features.weights.check import CheckResult, Difference
from deployctl.features.weights.listing import FileState
from deployctl.features.weights.sync import Source, copy_file, local_listing, plan

NAMES = ["config.json", "model.safetensors.index.json", "s1.safetensors"]
SRC = Source("node1", "/data/w", target=HostTarget("node1", "10.0.0.1"))


def ok(size, h=None):
    return FileState("ok", size, h)


def test_plan_copies_what_differs_and_names_what_it_cannot_fix():
    ref = {"config.json": ok(2), "model.safetensors.index.json": ok(50), "s1.safetensors": ok(1000)}
    dests = CheckResult("/data/w", NAMES, "node1", False, listings={
        "node2": {**ref, "s1.safetensors": ok(10)},
        "node3": {**ref, "config.json": FileState("missing"), "s1.safetensors": FileState("notfile")},
        "node4": dict(ref)},
        differences=[Difference("node5", "", "host", "unreachable")])
    copies, skipped = plan(SRC, ref, dests)
    assert copies == [("node2", "s1.safetensors", 1000), ("node3", "config.json", 2)]
    assert [(d.node, d.file, d.kind) for d in skipped] == [("node5", "", "host"), ("node3", "s1.safetensors",
                                                                                     "notfile")]


DEST = HostTarget("node2", "10.0.0.2")


@pytest.mark.parametrize("answer", [(0, "junk\n"), (0, "-5\n"), (0, "1" * 40), (3, ""), (0, "10\n\x1b[2J"),
                                    (0, "part -5\n"), (0, "part 10 removed because\n"), (0, "part 1" + "0" * 300),
                                    (3, "no such\n")])
def test_a_junk_part_size_stops_the_copy_of_that_file(answer):
    ex = FakeExecutor({"deployctl-part": answer})
    with pytest.raises(HostError, match="cannot prepare"):
        copy_file(ex, SRC, DEST, "/data/w", "s1.safetensors", 10, 5, lambda n, b: None)
    assert len(ex.calls) == 1           # nothing was moved into place


def test_a_complete_part_is_moved_only_when_the_node_says_so():
    seen = []
    h = hashlib.sha256(b"0123456789").hexdigest()
    answers = {"deployctl-part": (0, "part 10\n"), "deployctl-sha": (0, f"ok 640\n{h}\n"),
               "deployctl-partsha": (0, f"sha {h}\n"), "deployctl-finish": (0, "moved\n")}
    ex = FakeExecutor(answers)
    assert copy_file(ex, SRC, DEST, "/data/w", "s1.safetensors", 10, 5, lambda n, b: seen.append(b)) == 10
    assert seen == [10] and ex.argvs[-1][3:] == ["deployctl-finish", "/data/w", "s1.safetensors", "10", "640"]
    ex = FakeExecutor({**answers, "deployctl-finish": (3, "no size\n"), "deployctl-drop": (0, "dropped\n")})
    with pytest.raises(HostError, match="not moved into place"):
        copy_file(ex, SRC, DEST, "/data/w", "s1.safetensors", 10, 5, lambda n, b: None)
    assert ex.labels()[-1] == "deployctl-drop"             # a copy given up on leaves no part file


def test_unsafe_names_never_reach_the_node():
    ex = FakeExecutor()
    with pytest.raises(ValueError):
        copy_file(ex, SRC, DEST, "/data/w", "../../etc/passwd", 10, 5, lambda n, b: None)
    assert ex.calls == []


def test_local_listing(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "s1.safetensors").mkdir()
    got = local_listing(tmp_path, NAMES, hashes=True)
    assert got["config.json"] == ok(2, hashlib.sha256(b"{}").hexdigest())
    assert got["model.safetensors.index.json"].state == "missing" and got["s1.safetensors"].state == "notfile"


@pytest.mark.parametrize("path", ["/data/models/../../etc", "/data/models/x#y", "/data/models/$(id)"])
def test_a_weights_path_deployctl_will_not_put_in_a_command_is_exit_2_at_its_line(tmp_path, path):
    from conftest import ROOT, run_cli

    text = (ROOT / "inventories" / "sample.yaml").read_text()
    inv = tmp_path / "inv.yaml"
    inv.write_text(text.replace("weights_path: /data/models/DeepSeek-R1-W8A8 ", f"weights_path: '{path}' ", 1))
    line = next(k for k, ln in enumerate(text.splitlines(), 1) if "weights_path: /data/models/DeepSeek-R1-W8A8 " in ln)
    for cmd in (["check"], ["sync", "--from", "node1"]):
        res = run_cli("weights", *cmd, "-i", str(inv))
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert "model.weights_path" in res.stderr and f"inv.yaml:{line} " in res.stderr, res.stderr


def test_a_copy_that_breaks_is_a_failed_copy_not_a_traceback(tmp_path):
    from deployctl.features.weights.sync import sync_weights

    class Broken(FakeExecutor):
        def client(self, target):
            raise EOFError("the channel closed")

    index = '{"metadata": {"total_size": 10}, "weight_map": {"w": "s1.safetensors"}}'
    (tmp_path / "model.safetensors.index.json").write_text(index)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "s1.safetensors").write_bytes(b"x" * 10)
    listing = f"0 ok 2\n1 ok {len(index)}\n2 missing\nend 3\n"
    ex = Broken({"deployctl-weights": (0, listing), "deployctl-part": (0, "part 0\n"),
                   "deployctl-space": (0, f"space {1 << 40}\n")})
    src = Source("local", "/data/w", local=tmp_path)
    result = sync_weights(ex, src, [DEST], "/data/w")
    assert [(d.node, d.file, d.kind) for d in result.failed] == [("node2", "s1.safetensors", "copy")]
    assert "EOFError" in result.failed[0].have and not result.ok
    assert [(d.node, d.kind) for d in result.after.differences] == [("node2", "missing")]
