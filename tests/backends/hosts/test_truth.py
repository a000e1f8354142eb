"""Issue 10 on the simulated hosts: what `up`, `status`, `history` and `rollback` report is what the hosts
show. Real CLI, real ansible-runner over SSH, stand-in MindIE in the fake docker."""

from __future__ import annotations

import json
import os
import signal
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import DEPLOYCTL, run_cli
from fakecluster import default_cluster
from test_up_cluster import chat, fc_cluster, inventory
from test_up_more import JOIN_TIMEOUT, make_cluster, tagged_inventory


@pytest.fixture(scope="module")
def fc(tmp_path_factory):
    fc = make_cluster(tmp_path_factory, default_cluster(2))
    try:
        yield fc
    finally:
        fc.stop()


def st(inv: Path, *extra: str) -> tuple[int, dict]:
    res = run_cli("status", "-i", str(inv), "--output", "json", *extra)
    assert res.stdout.strip().startswith("{"), res.stdout + res.stderr
    return res.returncode, json.loads(res.stdout)


def wait_status(inv: Path, cond, timeout: float = 90) -> dict:
    """Poll `status` until cond(doc) (the stand-in engine takes a few seconds to become ready)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        doc = st(inv)[1]
        if cond(doc) or time.monotonic() > deadline:
            return doc
        time.sleep(1)


def up(inv: Path, runs: Path, *extra: str, cwd: Path | None = None):
    res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "60", "--skip-preflight",
                  "--output", "json", *extra, cwd=cwd)
    assert res.stdout.strip().startswith("{"), res.stdout + res.stderr
    return res, json.loads(res.stdout)


def reset(fc, inv: Path) -> None:
    res = run_cli("down", "-i", str(inv), "--purge", "--run-dir", str(inv.parent / "runs"))
    assert res.returncode == 0, res.stdout + res.stderr


def test_default_relative_run_dir_from_the_inventory_directory_deploys_for_real(fc, tmp_path):
    """Observation 1: `up -i inv.yaml -y` with the default (relative) --run-dir, from the inventory's own
    directory, must deploy (it used to print ✓ serving while ansible matched no host)."""
    work = tmp_path / "work"
    work.mkdir()
    inventory(fc, work / "inv.yaml")
    reset(fc, work / "inv.yaml")
    res = run_cli("up", "-i", "inv.yaml", "-y", "--skip-preflight", "--ready-timeout", "60", cwd=work)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "✓ serving (verified on every node)" in res.stdout
    assert (work / ".deployctl" / "runs").is_dir()
    assert chat(fc.node("node1").ip)["choices"][0]["message"]["content"]
    rc, doc = st(work / "inv.yaml")
    assert rc == 0 and doc["state"] == "serving", doc
    # down from another working directory, relative inventory path: the containers really go
    res = run_cli("down", "-i", "work/inv.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    for n in ("node1", "node2"):
        assert fc.ssh(n, "docker ps -aq").stdout.strip() == "", n
    rc, doc = st(work / "inv.yaml")
    assert rc == 0 and doc["state"] == "down"
    assert st(work / "inv.yaml", "--expect-up")[0] == 1


def test_two_operators_at_once_one_is_refused_and_the_cluster_stays_consistent(fc, tmp_path):
    """Observation 2: two `up -y` started together on the same inventory."""
    reset(fc, inventory(fc, tmp_path / "inv.yaml"))
    invs = [tagged_inventory(fc, tmp_path / f"op{i}.yaml", f"op{i}") for i in (1, 2)]
    env = {"COLUMNS": "120", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    procs = [subprocess.Popen([str(DEPLOYCTL), "up", "-i", str(inv), "-y", "--skip-preflight", "--ready-timeout",
                               "60", "--run-dir", str(tmp_path / f"runs{i}"), "--output", "json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for i, inv in enumerate(invs)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 1], outs
    loser = outs[codes.index(1)]
    error = json.loads(loser[0])
    assert "locked on" in error["message"] and "since" in error["message"], error
    winner = invs[codes.index(0)]
    tag = winner.stem
    # the hosts run the winner's revision, status agrees, and no lock is left behind
    rc, doc = st(winner)
    assert rc == 0 and doc["state"] == "serving", doc
    for n in ("node1", "node2"):
        env_file = fc.ssh(n, f"cat /var/lib/fakedocker/deployctl_{fc_cluster(winner)}_mindie/env").stdout
        assert f"TEST_REVISION={tag}" in env_file.splitlines()
        assert fc.ssh(n, f"test -e /var/lib/deployctl/{fc_cluster(winner)}/lock").returncode == 1


def test_status_reads_the_containers_not_the_current_link(fc, tmp_path):
    """Observation 3: a container killed behind deployctl's back; a node running another revision."""
    inv_a = tagged_inventory(fc, tmp_path / "a.yaml", "a")
    reset(fc, inv_a)
    res, first = up(inv_a, tmp_path / "runs")
    assert res.returncode == 0, res.stderr
    rev_a = {h["node"]: h["rev"] for h in first["changes"]["hosts"]}
    res, second = up(tagged_inventory(fc, tmp_path / "b.yaml", "b"), tmp_path / "runs")
    assert res.returncode == 0, res.stderr
    rev_b = {h["node"]: h["rev"] for h in second["changes"]["hosts"]}
    cdir = f"/var/lib/deployctl/{fc_cluster(inv_a)}"
    name = f"deployctl_{fc_cluster(inv_a)}_mindie"

    # someone restarts both nodes by hand from revision a's files while `current` names b: drift, named
    for n in ("node1", "node2"):
        fc.ssh(n, f"docker rm -f {name} && {cdir}/revisions/{rev_a[n]}/start.sh", check=True)
    doc = wait_status(inv_a, lambda d: all(r["engine"] == "running" and r["ready"] for r in d["nodes"]))
    assert doc["state"] == "degraded"
    for row in doc["nodes"]:
        n = row["node"]
        assert row["revision"] == rev_a[n] and row["current"] == rev_b[n]
        assert row["problem"].startswith(f"drift: the container runs revision {rev_a[n]}, `current` names "
                                         f"{rev_b[n]}"), row
    assert st(inv_a)[0] == 1
    # the engine of node1 is killed behind deployctl's back: degraded, with the exit code
    fc.ssh("node1", f"docker kill {name}", check=True)
    rc, doc = st(inv_a)
    row = {r["node"]: r for r in doc["nodes"]}["node1"]
    assert rc == 1 and row["engine"] == "exited" and "engine container exited" in row["problem"], row
    # up repairs both (the whole instance restarts on revision b)
    res, fixed = up(tmp_path / "b.yaml", tmp_path / "runs")
    assert res.returncode == 0 and fixed["status"] == "successful", res.stderr
    rc, doc = st(inv_a)
    assert rc == 0 and {r["revision"] for r in doc["nodes"]} == set(rev_b.values())


def test_history_and_rollback_to_the_oldest_on_the_hosts(fc, tmp_path):
    """Observation 4: history after three ups and a failed one; rollback to the oldest; previous kept."""
    reset(fc, inventory(fc, tmp_path / "inv.yaml"))
    revs = []
    for tag in ("one", "two", "three"):
        res, doc = up(tagged_inventory(fc, tmp_path / f"{tag}.yaml", tag), tmp_path / "runs")
        assert res.returncode == 0, res.stderr
        revs.append({h["node"]: h["rev"] for h in doc["changes"]["hosts"]})
    fc.update_node("node2", engine_crash_on="TEST_REVISION=bad")
    try:
        res, doc = up(tagged_inventory(fc, tmp_path / "bad.yaml", "bad"), tmp_path / "runs")
    finally:
        fc.update_node("node2", engine_crash_on="")
    assert res.returncode == 1 and sorted(doc["restored"]) == ["node1", "node2"]

    inv = tmp_path / "one.yaml"
    hist = run_cli("history", "-i", str(inv), "--output", "json")
    assert hist.returncode == 0, hist.stderr
    rows = json.loads(hist.stdout)["revisions"]
    assert [(r["revision"], r["result"], r["live"]) for r in rows] == [
        (1, "successful", False), (2, "successful", False), (3, "successful", True), (4, "failed", False)]
    assert rows[1]["changed"] == "env on node1, node2"
    text = run_cli("history", "-i", str(inv)).stdout
    assert "live" in text and "failed" in text

    rb = run_cli("rollback", "-i", str(inv), "--to", "1", "-y", "--ready-timeout", "60", "--output", "json")
    assert rb.returncode == 0, rb.stdout + rb.stderr
    assert json.loads(rb.stdout)["status"] == "successful"
    rc, doc = st(inv)
    assert rc == 0 and doc["state"] == "serving" and doc["live_revision"] == 5
    assert {r["node"]: r["revision"] for r in doc["nodes"]} == revs[0]
    cdir = f"/var/lib/deployctl/{fc_cluster(inv)}"
    # `previous` names what was live before the rollback (revision 3), not the same as `current`
    assert fc.ssh("node1", f"readlink {cdir}/previous").stdout.strip() == f"revisions/{revs[2]['node1']}"
    # and the default rollback goes back to it
    rb = run_cli("rollback", "-i", str(inv), "-y", "--ready-timeout", "60", "--output", "json")
    assert rb.returncode == 0, rb.stdout + rb.stderr
    assert {r["node"]: r["revision"] for r in st(inv)[1]["nodes"]} == revs[2]


@pytest.mark.alone           # stress-ng on every core: the other worker waits, its tests keep their timing
def test_launch_under_full_cpu_load(fc, tmp_path):
    """Observation 7: the launch path keeps its margins while another process keeps both CPUs busy."""
    stress = shutil.which("stress-ng")
    assert stress, "stress-ng is missing: the README test command installs it (apt-get install stress-ng)"
    reset(fc, inventory(fc, tmp_path / "inv.yaml"))
    load = subprocess.Popen([stress, "--cpu", str(os.cpu_count() or 2), "--timeout", "300"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for n in ("node1", "node2"):
            fc.update_node(n, engine_join_timeout=JOIN_TIMEOUT * 5)
        res, doc = up(tagged_inventory(fc, tmp_path / "load.yaml", "load"), tmp_path / "runs")
        assert res.returncode == 0 and doc["status"] == "successful", res.stderr
        assert all(u["ok"] for u in doc["verified"])
    finally:
        os.killpg(load.pid, signal.SIGKILL)        # stress-ng and its workers
        load.wait()
        for n in ("node1", "node2"):
            fc.update_node(n, engine_join_timeout=JOIN_TIMEOUT)


def test_a_stale_lock_left_by_a_killed_run_is_reported_and_broken(fc, tmp_path):
    """A run killed with -9 leaves its lock: the next `up` is refused (exit 1) naming the holder and that it
    is stale; `--break-lock -y` removes it and deploys; read-only commands never look at it."""
    from deployctl.backends.common.lockinfo import LockOwner

    inv = inventory(fc, tmp_path / "inv.yaml")
    reset(fc, inv)
    cdir = f"/var/lib/deployctl/{fc_cluster(inv)}"
    dead = LockOwner("ops", "laptop-7", 999999, "deployctl up -i prod.yaml -y", "20260101T000000.000000Z-up",
                     "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00+00:00")
    fc.ssh("node1", f"mkdir -p {cdir} && cat > {cdir}/lock", input=dead.to_json() + "\n", check=True)
    res = run_cli("up", "-i", str(inv), "-y", "--skip-preflight", "--run-dir", str(tmp_path / "runs"))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "locked on node1" in res.stderr and "ops@laptop-7 (pid 999999" in res.stderr
    assert "stale lock" in res.stderr and "--break-lock" in res.stderr
    assert fc.ssh("node1", "docker ps -aq").stdout.strip() == ""          # nothing was started
    assert st(inv)[1]["state"] == "down"                                  # status does not lock
    res = run_cli("up", "-i", str(inv), "-y", "--skip-preflight", "--break-lock", "--ready-timeout", "60",
                  "--run-dir", str(tmp_path / "runs"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "lock on node1: ops@laptop-7" in res.stdout and "lock removed on node1" in res.stdout
    assert fc.ssh("node1", f"test -e {cdir}/lock").returncode == 1
