"""A simulated host that lies about its deployment state (issue 21, observations 1 (parsing), 3 and 4), planted from
the host's side over SSH: a `current` link to a Jinja template, history copies marked revision 0 or steering another
host, entries without "time", fresh entries only it holds, a lock whose pid is "abc", a `docker inspect` answering
`[]`. `history`, `rollback`, `up`, `status` and `down` keep working for the honest host, name the liar in their
findings, use no forged copy and prune nothing on the honest host because of it. Never skips (see
tests/fakecluster/README.md)."""

from __future__ import annotations

import json
import shlex
import socket
import sys
from pathlib import Path

from conftest import run_cli
from deployctl.core.models.hostdata import seal
from fakecluster import default_cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends" / "hosts"))
from test_up_cluster import inventory as up_inventory  # noqa: E402

PWNED = Path("/tmp/deployctl-issue21-state-pwned")


def inventory(fc, path: Path, level: str) -> Path:
    """test_up_cluster's two-node inventory, keeping 3 revisions (so a third `up` prunes)."""
    up_inventory(fc, path, level=level)
    path.write_text(path.read_text() + "deploy: {keep_revisions: 3}\n")
    return path


def cli(*args: str):
    res = run_cli(*args)
    assert "deployctl bug" not in res.stderr and "Traceback" not in res.stdout + res.stderr, res.stdout + res.stderr
    return res


def up(inv: Path, runs: Path):
    res = cli("up", "-i", str(inv), "-y", "--skip-preflight", "--run-dir", str(runs), "--ready-timeout", "60",
              "--output", "json")
    return res, (json.loads(res.stdout) if res.stdout.strip().startswith("{") else {})


def put(fc, node: str, path: str, text: str) -> None:
    r = fc.ssh(node, f"cat > {shlex.quote(path)} <<'DEPLOYCTL_EOF'\n{text}\nDEPLOYCTL_EOF")
    assert r.returncode == 0, r.stderr


def listing(fc, node: str, path: str) -> set[str]:
    return set(fc.ssh(node, f"ls {path}").stdout.split())


def test_a_lying_host_changes_nothing_for_the_honest_one(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(2))
    runs = tmp_path / "runs"
    PWNED.unlink(missing_ok=True)
    revs = []
    for level in ("info", "debug"):
        res, doc = up(inventory(fc, tmp_path / "inv.yaml", level), runs)
        assert res.returncode == 0 and doc["status"] == "successful", res.stdout + res.stderr
        revs.append({h["node"]: h["rev"] for h in doc["changes"]["hosts"]})
    inv = tmp_path / "inv.yaml"
    cdir = "/var/lib/deployctl/" + __import__("yaml").safe_load(inv.read_text())["cluster"]["name"]
    honest_history = listing(fc, "node2", f"{cdir}/history")
    first, second = sorted(honest_history)

    # node1 lies about the history: revision 0, a copy steering node2 to revision 1's files, four fresh entries
    # naming revision 1's files, an entry without "time"
    e1 = json.loads(fc.ssh("node1", f"cat {cdir}/history/{first}").stdout)
    e2 = json.loads(fc.ssh("node1", f"cat {cdir}/history/{second}").stdout)
    put(fc, "node1", f"{cdir}/history/{first}", json.dumps({**e1, "revision": 0}))
    put(fc, "node1", f"{cdir}/history/{second}", json.dumps(seal({**e2, "nodes": e1["nodes"], "files": e1["files"]})))
    for i in range(4):
        fake = {**e1, "revision": 100 + i, "run_id": f"20990101T00000{i}.000000Z-up"}
        put(fc, "node1", f"{cdir}/history/{fake['run_id']}.json", json.dumps(seal(fake)))
    put(fc, "node1", f"{cdir}/history/notime.json", json.dumps({k: v for k, v in e2.items() if k != "time"}))

    res = cli("history", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert [r["revision"] for r in doc["revisions"]] == [1, 100, 101, 102, 103]   # 1: node2's copy; 2: disputed
    assert any(f.startswith("node1: history/notime.json is not a deployctl history entry") for f in doc["findings"])
    assert any(f.startswith("node1: its copy of history entry") and "(revision 2) differs" in f
               for f in doc["findings"])
    assert any(f.startswith("node2: its copy of history entry") for f in doc["findings"])

    res = cli("rollback", "-i", str(inv), "--to", "2", "--run-dir", str(runs))
    assert res.returncode == 2 and "no revision 2" in res.stderr, res.stdout + res.stderr
    res = cli("rollback", "-i", str(inv), "--to", "103", "--run-dir", str(runs))
    assert res.returncode == 2 and "node2 (its own history does not hold this entry)" in res.stderr, res.stderr

    # the next successful up prunes nothing on node2 because of node1 (keep_revisions 3: its own 3 deployments)
    res, doc = up(inventory(fc, inv, "warning"), runs)
    assert res.returncode == 0 and doc["status"] == "successful", res.stdout + res.stderr
    revs.append({h["node"]: h["rev"] for h in doc["changes"]["hosts"]})
    assert honest_history <= listing(fc, "node2", f"{cdir}/history")
    assert {r["node2"] for r in revs} <= listing(fc, "node2", f"{cdir}/revisions")

    # node1 lies about what runs: `current` names a template, docker inspect answers [], the lock's pid is "abc"
    assert fc.ssh("node1", f"cd {cdir} && ln -sfn 'revisions/{{{{ lookup(\"pipe\", \"touch {PWNED}\") }}}}' "
                           "current").returncode == 0
    assert fc.ssh("node1", "mv /usr/local/bin/docker /usr/local/bin/docker.real && printf '%s\\n' '#!/bin/sh' "
                           "'[ \"$1\" = inspect ] && { printf \"[]\\n[]\\n[]\\n\"; exit 0; }' "
                           "'exec /usr/local/bin/docker.real \"$@\"' > /usr/local/bin/docker && "
                           "chmod 755 /usr/local/bin/docker").returncode == 0
    res = cli("status", "-i", str(inv), "--output", "json")
    assert res.returncode == 1, res.stdout + res.stderr
    st = json.loads(res.stdout)
    assert [(r["node"], r["engine"]) for r in st["nodes"]] == [("node1", "unknown"), ("node2", "running")]
    assert st["nodes"][1]["revision"] == st["nodes"][1]["current"] == revs[-1]["node2"]
    assert any(f.startswith("node1: `current` points at") for f in st["findings"])
    assert any(f.startswith("node1: `docker inspect") for f in st["findings"])

    lock = {"user": "x", "host": socket.gethostname(), "pid": "abc", "command": "x", "run_id": "x",
            "started": "2026-01-01T00:00:00+00:00"}
    put(fc, "node1", f"{cdir}/lock", json.dumps(lock))
    res = cli("up", "-i", str(inv), "-y", "--skip-preflight", "--run-dir", str(runs))
    assert res.returncode == 1 and "by an unreadable lock" in res.stderr, res.stdout + res.stderr
    fc.ssh("node1", f"rm -f {cdir}/lock")

    res = cli("down", "-i", str(inv), "--run-dir", str(runs))
    assert res.returncode in (0, 1), res.stdout + res.stderr
    assert fc.ssh("node2", "docker ps -q").stdout.strip() == ""        # the honest host is down
    assert not PWNED.exists()
