"""Issue 34, observation 6 on simulated hosts: node1's history gets one entry numbered 10^9, planted from the host's
side over SSH. `history`, `up` and `rollback` keep the agreed numbering (3, then 4) on both hosts, every entry is
read back, and node1's entry is named as an outlier with a hint. Before the fix `up` wrote 1000000001 on both hosts,
which deployctl's own parser refuses: no live revision and no rollback target were left. Never skips (see
tests/fakecluster/README.md); the in-memory cases are in test_hostile_numbering.py."""

from __future__ import annotations

import json
import shlex

import yaml

from fakecluster import default_cluster
from deployctl.core.models.hostdata import seal
from test_hostile_state_e2e import cli, inventory, up

FORGED = "20990101T000000.000000Z-up"


def history(inv):
    res = cli("history", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout)


def numbers(fc, node: str, cdir: str) -> list[int]:
    """The revision of every entry in the host's history directory, as the host holds them."""
    out = fc.ssh(node, f"cat {cdir}/history/*.json").stdout
    return sorted(json.loads(line)["revision"] for line in out.splitlines() if line.strip())


def test_one_host_numbered_1e9_leaves_up_rollback_and_history_working(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(2))
    runs, inv = tmp_path / "runs", tmp_path / "inv.yaml"
    for level in ("info", "debug"):
        res, doc = up(inventory(fc, inv, level), runs)
        assert res.returncode == 0 and doc["status"] == "successful", res.stdout + res.stderr
    cdir = "/var/lib/deployctl/" + yaml.safe_load(inv.read_text())["cluster"]["name"]
    assert numbers(fc, "node1", cdir) == numbers(fc, "node2", cdir) == [1, 2]

    last = json.loads(fc.ssh("node1", f"cat {cdir}/history/$(ls {cdir}/history | sort | tail -1)").stdout)
    forged = json.dumps(seal({**last, "revision": 10**9, "run_id": FORGED}))
    r = fc.ssh("node1", f"printf '%s\\n' {shlex.quote(forged)} > {cdir}/history/{FORGED}.json")
    assert r.returncode == 0, r.stderr

    res, doc = up(inventory(fc, inv, "warning"), runs)
    assert res.returncode == 0 and doc["status"] == "successful", res.stdout + res.stderr
    assert numbers(fc, "node2", cdir) == [1, 2, 3]                   # before the fix: [1, 2, 1000000001]
    assert f"node1: history entry {FORGED} is numbered 1000000000" in res.stderr

    doc = history(inv)
    assert [r["revision"] for r in doc["revisions"]] == [1, 2, 3]
    outlier = [f for f in doc["findings"] if f.startswith(f"node1: history entry {FORGED} is numbered 1000000000")]
    assert outlier and f"remove history/{FORGED}.json on node1" in outlier[0], doc["findings"]

    res = cli("rollback", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "60")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = history(inv)                      # keep_revisions 3: revision 1 pruned, on node1 too (the outlier stays)
    rows = [(r["revision"], r["operation"], r["live"]) for r in doc["revisions"]]
    assert rows == [(2, "up", False), (3, "up", False), (4, "rollback", True)], rows
    assert numbers(fc, "node2", cdir) == [2, 3, 4] and numbers(fc, "node1", cdir) == [2, 3, 4, 10**9]
    assert not [f for f in doc["findings"] if "is not a deployctl history entry" in f], doc["findings"]
