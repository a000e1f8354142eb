"""The purge script `down --purge` runs on each host (deployctl/backends/hosts/purge.py), run here on a local directory
a hostile or careless host could hold: it removes what deployctl's own manifests, links, history entries and
lock name, nothing else, follows no link, leaves the cluster directory never, and never blocks on a FIFO."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from deployctl.backends.hosts.hosts import DownChanges
from deployctl.backends.hosts.purge import SCRIPT, parse
from deployctl.core.engine_spec.container import container_name

REV = "0123456789abcdef"
RUN = "20250101T000000.000000Z-up"


def _run(cdir, run="20250102T000000.000000Z-down"):
    res = subprocess.run([sys.executable, "-c", SCRIPT, str(cdir), run], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return parse(res.stdout)


def _deployed(tmp_path):
    cdir = tmp_path / "c"
    rev = cdir / "revisions" / REV
    rev.mkdir(parents=True)
    for name in ("env", "start.sh", "config.json"):
        (rev / name).write_text("x")
    (rev / ".deployctl.json").write_text(json.dumps({"generator": "deployctl", "revision": REV,
                                                     "files": {"env": "", "start.sh": "", "config.json": ""}}))
    os.symlink(f"revisions/{REV}", cdir / "current")
    (cdir / "history").mkdir()
    (cdir / "history" / f"{RUN}.json").write_text(json.dumps({"run_id": RUN, "revision": 1}))
    (cdir / "lock").write_text('{"run_id": "20250102T000000.000000Z-down"}\n')
    return cdir


def test_everything_of_deployctls_goes_with_the_directory(tmp_path):
    cdir = _deployed(tmp_path)
    r = _run(cdir)
    assert not cdir.exists() and r.left == [] and r.removed >= 8 and not r.error


def test_hostile_manifest_and_links_touch_nothing_outside(tmp_path):
    cdir = _deployed(tmp_path)
    outside = tmp_path / "weights"
    outside.mkdir()
    (outside / "model.safetensors").write_text("w")
    rev = cdir / "revisions" / REV
    # a manifest naming paths outside, a revision file that is a link to a directory outside, a revision dir
    # that is a link, previous pointing elsewhere, a history entry that is another run's, a FIFO manifest
    (rev / ".deployctl.json").write_text(json.dumps({"generator": "deployctl", "files": {
        "../../../weights/model.safetensors": "", "/etc/passwd": "", "env": "", "sub": ""}}))
    os.symlink(outside, rev / "sub")
    os.symlink(outside, cdir / "revisions" / "fedcba9876543210")
    os.symlink(str(outside), cdir / "previous")
    (cdir / "history" / "20250101T000001.000000Z-up.json").write_text(json.dumps({"run_id": "other"}))
    fifo_rev = cdir / "revisions" / "1111111111111111"
    fifo_rev.mkdir()
    os.mkfifo(fifo_rev / ".deployctl.json")
    (cdir / "lock").write_text('{"run_id": "someone-else"}\n')
    r = _run(cdir)
    assert (outside / "model.safetensors").read_text() == "w"
    assert os.path.isdir(outside)
    left = dict(r.left)
    assert left["previous"] == "not a link to a deployctl revision"
    assert left["lock"] == "another run's lock"
    assert left["history/20250101T000001.000000Z-up.json"] == "not a deployctl history entry"
    assert "revisions/fedcba9876543210" in left          # a link, not a revision directory
    assert left["revisions/1111111111111111/.deployctl.json"] == "not listed in a deployctl manifest"
    assert not os.path.lexists(rev / "sub")               # listed: the link itself goes, not what it names
    assert not (rev / "env").exists() and (rev / "start.sh").exists()   # listed in the old manifest only


def test_a_linked_cluster_directory_is_not_followed(tmp_path):
    real = _deployed(tmp_path)
    link = tmp_path / "link"
    os.symlink(real, link)
    r = _run(link)
    assert r.left == [(".", "the cluster directory is a symbolic link: not followed")]
    assert (real / "current").is_symlink()


def test_host_answer_is_checked_and_escapes_are_neutralised():
    assert parse("garbage").error.startswith("unexpected answer")
    r = parse(json.dumps({"removed": 1, "left": [["a\x1b]0;pwned\x07", "x"]], "more": 0}))
    assert r.left == [("a?]0;pwned?", "x")]


def test_purge_after_a_down_still_has_work_when_files_remain():
    assert DownChanges({"node1": []}, True).nothing_to_do
    assert not DownChanges({"node1": []}, True, purge="/var/lib/deployctl/c", files_left=True).nothing_to_do


def test_container_names_are_unambiguous_per_cluster():
    """The cluster name ([a-z0-9-]) ends at the first '_' after the prefix: no two clusters share a name."""
    class Inv:
        class cluster:
            name = ""
    roles = ["mindie", "mindie-ms-controller", "vllm", "vllm-proxy", "router", "x-mindie"]
    seen = {}
    for cluster in ("a", "a-mindie", "a-mindie-ms", "a-vllm", "a-x", "x"):
        Inv.cluster.name = cluster
        for role in roles:
            name = container_name(Inv, role)
            assert name.split("_")[1] == cluster
            assert seen.setdefault(name, cluster) == cluster
