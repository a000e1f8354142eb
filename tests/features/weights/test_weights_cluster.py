"""`deployctl weights check|sync` and preflight's per-file rule end to end: the real CLI, real SSH, simulated hosts.

One 3-node cluster: a shard of another size planted on node2 (and later one of the same size, other bytes, on
node3, with half a copy left from an interrupted sync on node2) is named by preflight and `weights check` (node
and file), repaired by `weights sync`, and the check after it is clean. Then a shard missing on every node, and
the whole directory: the advice says no node holds the checkpoint and what to do instead; followed, it repairs
them.
"""

from __future__ import annotations

import hashlib
import json
import shutil

from conftest import run_cli
from fakecluster import default_cluster
from fakecluster.spec import DEFAULT_WEIGHTS_DIR
from support.inventory import on_cluster

SHARD = "model-00001-of-00002.safetensors"
PATH = f"{DEFAULT_WEIGHTS_DIR}/{SHARD}"
AWAY = f"{DEFAULT_WEIGHTS_DIR}-{SHARD}"          # beside the checkpoint, on the node


def cli(*args: str):
    res = run_cli(*args)
    assert "Traceback" not in res.stderr, res.stderr
    return res


def check(inv, *extra: str):
    res = cli("weights", "check", "-i", str(inv), "--output", "json", *extra)
    doc = json.loads(res.stdout)
    assert doc["ok"] is (res.returncode == 0), res.stdout
    return res.returncode, doc, [(d["node"], d["file"], d["kind"]) for d in doc["differences"]]


def sha(fc, node: str, path: str) -> str:
    return hashlib.sha256(fc.node(node).host_path(path).read_bytes()).hexdigest()


def test_check_names_the_node_sync_repairs_it(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(3))
    inv = tmp_path / "inventory.yaml"
    on_cluster(fc, inv)
    assert check(inv)[0] == 0                                   # the simulated hosts start identical

    fc.ssh("node2", f"truncate -s 1000 {PATH}", check=True)    # a half-copied shard
    pre = cli("preflight", "-i", str(inv), "--output", "json", "--run-dir", str(tmp_path / "runs"),
              "--connect-timeout", "5")
    found = [f for f in json.loads(pre.stdout)["findings"] if f["rule"] == "weights"]
    assert [(f["host"], f["severity"]) for f in found if PATH in f["message"]] == [("node2", "FAIL")], found
    assert pre.returncode == 1

    rc, doc, diffs = check(inv)
    assert rc == 1 and diffs == [("node2", SHARD, "size")]
    assert doc["index_from"] == "node1" and doc["files"] == 4
    text = cli("weights", "check", "-i", str(inv))
    assert text.returncode == 1 and "node2" in text.stdout and SHARD in text.stdout and "node3" not in text.stdout

    res = cli("weights", "sync", "-i", str(inv), "--from", "node1", "--output", "json")
    doc = json.loads(res.stdout)
    assert res.returncode == 0, res.stdout + res.stderr
    assert [(c["node"], c["file"]) for c in doc["copied"]] == [("node2", SHARD)]
    assert doc["after"]["ok"] and doc["ok"]
    assert check(inv, "--hash")[0] == 0
    assert sha(fc, "node2", PATH) == sha(fc, "node1", PATH)

    # same size, other bytes on node3: only --hash sees it; an interrupted copy on node2 is resumed
    fc.ssh("node3", f"printf X | dd of={PATH} bs=1 seek=4096 conv=notrunc status=none", check=True)
    # (as deployctl leaves one: mode 600, the SSH user's, its bytes the source's first bytes)
    fc.ssh("node2", f"umask 077 && head -c 300000 {PATH} > {PATH}.deployctl-part && rm {PATH}", check=True)
    rc, _, diffs = check(inv)
    assert rc == 1 and diffs == [("node2", SHARD, "missing")]
    rc, _, diffs = check(inv, "--hash")            # node1 and node3 disagree, node2 has none: no majority
    assert rc == 1 and diffs == [("node1", SHARD, "hash"), ("node2", SHARD, "missing"), ("node3", SHARD, "hash")]
    res = cli("weights", "sync", "-i", str(inv), "--from", "node1", "--hash")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "every node holds the source's 4 files" in res.stdout
    assert f"node2: {SHARD} resumed at byte 300,000" in res.stdout
    assert check(inv, "--hash")[0] == 0
    assert sha(fc, "node3", PATH) == sha(fc, "node2", PATH) == sha(fc, "node1", PATH)
    assert not fc.node("node2").host_path(PATH + ".deployctl-part").exists()

    # no node has them: the advice says so and what to do instead, never `sync --from NODE`
    for node in ("node1", "node2", "node3"):
        fc.ssh(node, f"mv {PATH} {AWAY}", check=True)
    rc, doc, diffs = check(inv)
    assert rc == 1 and diffs == [(n, SHARD, "missing") for n in ("node1", "node2", "node3")]
    assert doc["advice"]["kind"] == "no-complete-copy" and doc["advice"]["sources"] == []
    for node in ("node1", "node2", "node3"):
        fc.ssh(node, f"mv {DEFAULT_WEIGHTS_DIR} {DEFAULT_WEIGHTS_DIR}.elsewhere", check=True)
    rc, doc, diffs = check(inv)
    assert rc == 1 and doc["files"] == 0 and doc["advice"]["kind"] == "no-checkpoint", doc
    text = cli("weights", "check", "-i", str(inv))
    said = " ".join(text.stdout.split())          # the advice as one line, however the terminal wraps it
    assert text.returncode == 1 and f"no node holds the checkpoint in {DEFAULT_WEIGHTS_DIR}" in said, said
    assert "copy the checkpoint onto one node" in said and "--from NODE" not in said
    # the advice, followed: the checkpoint back on one node, then synced from it (the others' directory made)
    fc.ssh("node1", f"mv {DEFAULT_WEIGHTS_DIR}.elsewhere {DEFAULT_WEIGHTS_DIR} && mv {AWAY} {PATH}",
           check=True)
    rc, doc, _ = check(inv)
    assert rc == 1 and doc["advice"]["kind"] == "sync" and doc["advice"]["sources"] == ["node1"], doc
    res = cli("weights", "sync", "-i", str(inv), "--from", "node1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert check(inv, "--hash")[0] == 0


def test_sync_from_this_machine_and_a_bad_source(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(2))
    inv = tmp_path / "inventory.yaml"
    on_cluster(fc, inv)
    local = tmp_path / "ckpt"
    shutil.copytree(fc.node("node1").host_path(DEFAULT_WEIGHTS_DIR), local)
    (local / SHARD).write_bytes(b"a checkpoint of another revision")
    res = cli("weights", "sync", "-i", str(inv), "--from", str(local), "--output", "json")
    doc = json.loads(res.stdout)
    assert res.returncode == 0 and sorted((c["node"], c["file"]) for c in doc["copied"]) == [
        ("node1", SHARD), ("node2", SHARD)]
    assert fc.node("node2").host_path(PATH).read_bytes() == b"a checkpoint of another revision"

    res = cli("weights", "sync", "-i", str(inv), "--from", "node9")
    assert res.returncode == 2 and "neither a node" in res.stderr
    res = cli("weights", "sync", "-i", str(inv), "--from", "node1", "--to", "node1")
    assert res.returncode == 2 and "names the source" in res.stderr
    fc.ssh("node1", f"rm {PATH}", check=True)
    res = cli("weights", "sync", "-i", str(inv), "--from", "node1")
    assert res.returncode == 2 and "source lacks 1 of" in res.stderr and SHARD in res.stderr
