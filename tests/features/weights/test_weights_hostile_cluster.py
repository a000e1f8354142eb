"""Issue 34: `weights sync` against hostile files on real (simulated) hosts, one observation of the review each.

2. a part file planted on the destination as a link is never written through, and is not trusted;
3. a link on the source node is named and not copied (nor read);
4. a link in a local checkpoint (`--from PATH`) likewise;
5. a source larger than its index says, or a destination without the room, is refused before a byte moves;
and a copy is never readable by more users than its source.
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
INDEX = "model.safetensors.index.json"
PATH = f"{DEFAULT_WEIGHTS_DIR}/{SHARD}"
PART = PATH + ".deployctl-part"
VICTIM = b"victim: 19 bytes..\n"


def cli(*args: str):
    res = run_cli(*args)
    assert "Traceback" not in res.stderr, res.stderr
    return res


def cluster(factory, tmp_path, n=2):
    fc = factory(default_cluster(n))
    inv = tmp_path / "inventory.yaml"
    on_cluster(fc, inv)
    return fc, inv


def sync(inv, *extra: str):
    res = cli("weights", "sync", "-i", str(inv), "--output", "json", *extra)
    return res, json.loads(res.stdout)


def refused(inv, *extra: str) -> str:
    """A sync refused as bad input: exit 2, what the user reads (stderr)."""
    res = cli("weights", "sync", "-i", str(inv), *extra)
    assert res.returncode == 2, res.stdout + res.stderr
    return res.stderr


def digest(fc, node: str, path: str = PATH) -> str:
    return hashlib.sha256(fc.node(node).host_path(path).read_bytes()).hexdigest()


def untouched(fc, node: str, before: str) -> None:
    """The node's shard is what it was, and sync left no part file behind."""
    assert digest(fc, node) == before
    assert not fc.node(node).host_path(PART).is_symlink() and not fc.node(node).host_path(PART).exists()


def test_obs2_a_planted_part_link_is_never_written_through(fake_cluster_factory, tmp_path):
    fc, inv = cluster(fake_cluster_factory, tmp_path)
    fc.ssh("node2", f"printf 'victim: 19 bytes..\\n' > /root/victim && chmod 600 /root/victim && "
                    f"truncate -s 1000 {PATH} && ln -s /root/victim {PART}", check=True)
    res, doc = sync(inv, "--from", "node1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert fc.node("node2").host_path("/root/victim").read_bytes() == VICTIM          # not appended to
    shard = fc.node("node2").host_path(PATH)
    assert not shard.is_symlink() and digest(fc, "node2") == digest(fc, "node1")     # a file, not the link
    assert not fc.node("node2").host_path(PART).is_symlink()
    assert [(d["node"], d["file"]) for d in doc["distrusted"]] == [("node2", SHARD)]
    assert "symbolic link" in doc["distrusted"][0]["have"]

    # a part file deployctl did not make (another owner) or whose bytes are not the source's: not resumed
    fc.ssh("node2", f"umask 077 && head -c 300000 {PATH} > {PART} && chown 65534 {PART} && rm {PATH}",
           check=True)
    res = cli("weights", "sync", "-i", str(inv), "--from", "node1")
    assert res.returncode == 0 and "resumed" not in res.stdout, res.stdout
    assert "not owned by" in res.stdout and digest(fc, "node2") == digest(fc, "node1")
    fc.ssh("node2", f"umask 077 && head -c 299990 {PATH} > {PART} && printf 0123456789 >> {PART} && rm {PATH}",
           check=True)
    res = cli("weights", "sync", "-i", str(inv), "--from", "node1")
    assert res.returncode == 0 and "resumed" not in res.stdout, res.stdout
    assert "not the source's" in res.stdout and digest(fc, "node2") == digest(fc, "node1")


def test_obs3_a_link_on_the_source_node_is_named_and_not_copied(fake_cluster_factory, tmp_path):
    fc, inv = cluster(fake_cluster_factory, tmp_path)
    before = digest(fc, "node2")
    fc.ssh("node1", f"printf 'root-only secret' > /root/secret && chmod 600 /root/secret && rm {PATH} && "
                    f"ln -s /root/secret {PATH}", check=True)
    err = refused(inv, "--from", "node1")
    assert "node1" in err and SHARD in err and "symbolic link" in err, err
    untouched(fc, "node2", before)
    assert b"secret" not in fc.node("node2").host_path(PATH).read_bytes()[:64]


def test_obs4_a_link_in_a_local_checkpoint_is_named_and_not_pushed(fake_cluster_factory, tmp_path):
    fc, inv = cluster(fake_cluster_factory, tmp_path)
    before = {n: digest(fc, n) for n in ("node1", "node2")}
    local = tmp_path / "ckpt"
    shutil.copytree(fc.node("node1").host_path(DEFAULT_WEIGHTS_DIR), local)
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key\n")
    key.chmod(0o600)
    (local / SHARD).unlink()
    (local / SHARD).symlink_to(key)
    err = refused(inv, "--from", str(local))
    assert SHARD in err and "symbolic link" in err, err
    for n in ("node1", "node2"):
        untouched(fc, n, before[n])

    # the index itself as a link (to a copy of the right one): not read, not pushed
    (local / SHARD).unlink()
    shutil.copy(fc.node("node1").host_path(PATH), local / SHARD)
    (local / SHARD).write_bytes(b"a checkpoint of another revision")
    shutil.move(local / INDEX, tmp_path / "index.json")
    (local / INDEX).symlink_to(tmp_path / "index.json")
    err = refused(inv, "--from", str(local))
    assert INDEX in err and "symbolic link" in err, err
    for n in ("node1", "node2"):
        untouched(fc, n, before[n])


def test_obs5_a_source_larger_than_its_index_says_is_refused_before_a_byte_moves(fake_cluster_factory, tmp_path):
    fc, inv = cluster(fake_cluster_factory, tmp_path)
    before = digest(fc, "node2")
    # sparse, as in the review (1.1 TB there); big enough to be far past what the index allows, small
    # enough that a sync without the check finishes (and fails this test) in seconds
    fc.ssh("node1", f"truncate -s 300M {PATH}", check=True)
    err = refused(inv, "--from", "node1")
    assert "node1" in err and "total_size" in err and INDEX in err, err
    untouched(fc, "node2", before)


def test_obs5_a_destination_without_room_is_refused_before_a_byte_moves(fake_cluster_factory, tmp_path):
    fc, inv = cluster(fake_cluster_factory, tmp_path, 3)
    # node2's weights directory: an empty 3 MB file system (the checkpoint is 4 MB)
    fc.ssh("node2", f"mount -t tmpfs -o size=3m deployctl-test {DEFAULT_WEIGHTS_DIR}", check=True)
    fc.ssh("node3", f"truncate -s 1000 {PATH}", check=True)
    try:
        res, doc = sync(inv, "--from", "node1", "--to", "node2,node3")
        assert res.returncode == 1, res.stdout + res.stderr
        failed = [(d["node"], d["kind"]) for d in doc["failed"]]
        assert failed == [("node2", "space")], doc["failed"]
        assert digest(fc, "node3") == digest(fc, "node1")           # the other node got its copy
        assert DEFAULT_WEIGHTS_DIR in doc["failed"][0]["have"] and "free" in doc["failed"][0]["have"]
        listed = fc.ssh("node2", f"ls -A {DEFAULT_WEIGHTS_DIR}", check=True).stdout
        assert listed == "", listed                          # not a byte written, no part file left
    finally:
        fc.ssh("node2", f"umount {DEFAULT_WEIGHTS_DIR}")


def test_a_copy_is_never_readable_by_more_users_than_its_source(fake_cluster_factory, tmp_path):
    fc, inv = cluster(fake_cluster_factory, tmp_path)
    fc.ssh("node1", f"chmod 600 {PATH}", check=True)
    fc.ssh("node2", f"rm {PATH}", check=True)
    res, _ = sync(inv, "--from", "node1")
    assert res.returncode == 0, res.stdout + res.stderr
    mode = fc.ssh("node2", f"stat -c %a {PATH}", check=True).stdout.strip()
    assert mode == "600" and digest(fc, "node2") == digest(fc, "node1")
