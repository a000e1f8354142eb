"""The k8s lock (a Lease), history and rollback end to end: the deployctl CLI, helm v3.22 and the official
kubernetes client against a real control plane (tests/k8scluster.py). A revision is made to crash-loop by
its image tag (kwok's crash fault: the tag ends in "fault-crash"); writes are read from the API server's
audit log."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from kube_e2e import READY, cli, get, helm_revisions, inventory, leases, objects, servers

STEM = "a2-1x8-single"
RELEASE = "r1-single"
LEASE = f"deployctl-{RELEASE}"
FILES = "r1-single-ascend-llm-mixed-files"
POD = "r1-single-ascend-llm-mixed-master-0"
CRASHING_TAG = "2.2.RC1-800I-A2-py311-openeuler24.03-lts-fault-crash"


def hand_made_lease(cluster, ns: str, holder: str, renewed_ago_s: float) -> dict:
    """A Lease as another deployctl (or a person with kubectl) would leave it."""
    t = (datetime.now(timezone.utc) - timedelta(seconds=renewed_ago_s)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return cluster.create(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": LEASE},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 120, "acquireTime": t, "renewTime": t}})


def with_batch(inv: Path, size: int) -> None:
    text = inv.read_text()
    old = next(line for line in text.splitlines() if line.strip().startswith("max_batch_size:"))
    inv.write_text(text.replace(old, f"  max_batch_size: {size}"))


def up(tmp_path: Path, cluster, inv: Path, *extra: str):
    return cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(inv), "-y", "--ready-timeout", READY, *extra)


def test_the_lease_refuses_a_second_operator_until_break_lock_and_is_never_left_behind(k8s_cluster, k8s_ns,
                                                                                        tmp_path):
    cluster, ns = k8s_cluster, k8s_ns
    servers(cluster, STEM)
    inv = inventory(tmp_path, STEM, cluster, ns)
    mark = cluster.audit_mark()
    res = up(tmp_path, cluster, inv)
    assert res.returncode == 0, res.stdout + res.stderr
    assert leases(cluster, ns) == []                              # released after a successful up
    lease_writes = [(w["verb"], w["code"]) for w in cluster.writes(mark, namespace=ns) if w["kind"] == "Lease"]
    assert lease_writes[0] == ("create", 201) and lease_writes[-1] == ("delete", 200)   # it was taken, once
    assert [v for v, _ in lease_writes].count("create") == 1
    assert helm_revisions(cluster, ns) == [1]

    with_batch(inv, 32)
    hand_made_lease(cluster, ns, "alice@ws1:4242:run-7", renewed_ago_s=5)
    before = get(cluster, "ConfigMap", ns, FILES)
    mark = cluster.audit_mark()
    res = up(tmp_path, cluster, inv)
    assert res.returncode == 1, res.stdout + res.stderr
    err = res.stderr
    assert f"locked on namespace {ns} Lease {LEASE} by alice@ws1 (pid 4242" in err, err
    assert "since " in err and "run run-7" in err and "stale" not in err
    assert "`deployctl up --target k8s --break-lock`" in err
    assert helm_revisions(cluster, ns) == [1]                     # nothing changed:
    assert get(cluster, "ConfigMap", ns, FILES) == before         # same object, same resourceVersion
    # the only write was the refused attempt to take the Lease (409 AlreadyExists)
    assert [(w["verb"], w["kind"], w["name"], w["code"]) for w in cluster.writes(mark)] == [
        ("create", "Lease", LEASE, 409)]
    assert [x["spec"]["holderIdentity"] for x in leases(cluster, ns)] == ["alice@ws1:4242:run-7"]  # not ours

    res = up(tmp_path, cluster, inv, "--break-lock")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "the lock is held by alice@ws1" in res.stdout
    assert "removed the lock held by alice@ws1" in res.stdout
    assert helm_revisions(cluster, ns) == [1, 2]
    assert get(cluster, "ConfigMap", ns, FILES)["data"] != before["data"]
    assert leases(cluster, ns) == []
    good = objects(cluster, "Pod", ns)[0]["spec"]["containers"][0]["image"]

    # a failing up releases the lock too: revision 3's image crash-loops (kwok's crash fault by image tag),
    # deployctl names the pod and rolls back to revision 2, whose pod comes back Ready
    inv = inventory(tmp_path, STEM, cluster, ns, values={"image": {"tag": CRASHING_TAG}})
    with_batch(inv, 64)
    res = up(tmp_path, cluster, inv)
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"pod {POD} (mixed) on a2-node1: Running, not ready, 3 restarts: CrashLoopBackOff" in res.stdout
    assert "BackOff: Back-off restarting failed container" in res.stdout
    assert "rolled back to revision 2" in res.stdout
    assert leases(cluster, ns) == []
    assert helm_revisions(cluster, ns) == [1, 2, 3, 4]
    (pod,) = objects(cluster, "Pod", ns)
    assert pod["spec"]["containers"][0]["image"] == good and not good.endswith("fault-crash")
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "True"
    res = cli(tmp_path, cluster, "history", "-t", "k8s", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    rows = json.loads(res.stdout)["revisions"]
    assert [(r["revision"], r["live"]) for r in rows][-2:] == [(3, False), (4, True)]
    assert rows[2]["result"] == "failed" and rows[3]["operation"] == "undo"


def test_stale_lease_is_reported_stale(k8s_cluster, k8s_ns, tmp_path):
    cluster, ns = k8s_cluster, k8s_ns
    servers(cluster, STEM)
    inv = inventory(tmp_path, STEM, cluster, ns)
    assert up(tmp_path, cluster, inv).returncode == 0
    with_batch(inv, 32)
    owner = {"user": "bob", "host": "ci-7", "pid": 99, "command": "deployctl up", "run_id": "run-old",
             "started": "2020-01-01T00:00:00+00:00", "heartbeat": ""}
    hand_made_lease(cluster, ns, json.dumps(owner), renewed_ago_s=600)
    mark = cluster.audit_mark()
    res = cli(tmp_path, cluster, "down", "-t", "k8s", "-i", str(inv))
    assert res.returncode == 1
    assert "by bob@ci-7 (pid 99, `deployctl up`, run run-old)" in res.stderr
    assert "a stale lock" in res.stderr and "`deployctl down --target k8s --break-lock`" in res.stderr
    assert objects(cluster, "StatefulSet", ns) != []          # down changed nothing
    assert [(w["verb"], w["kind"], w["code"]) for w in cluster.writes(mark)] == [("create", "Lease", 409)]
    res = cli(tmp_path, cluster, "down", "-t", "k8s", "-i", str(inv), "--break-lock")
    assert res.returncode == 0, res.stdout + res.stderr
    assert objects(cluster, "StatefulSet", ns) == [] and objects(cluster, "Pod", ns) == []
    assert leases(cluster, ns) == [] and helm_revisions(cluster, ns) == []


def history(tmp_path: Path, cluster, inv: Path) -> list[dict]:
    res = cli(tmp_path, cluster, "history", "-t", "k8s", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout)["revisions"]


def test_history_after_three_ups_and_rollback_to_revision_one(k8s_cluster, k8s_ns, tmp_path):
    cluster, ns = k8s_cluster, k8s_ns
    servers(cluster, STEM)
    inv = inventory(tmp_path, STEM, cluster, ns)
    files = {}
    for rev, size in ((1, 16), (2, 32), (3, 48)):
        with_batch(inv, size)
        res = up(tmp_path, cluster, inv)
        assert res.returncode == 0, res.stdout + res.stderr
        files[rev] = get(cluster, "ConfigMap", ns, FILES)["data"]
    assert files[1] != files[2] != files[3]

    rows = history(tmp_path, cluster, inv)
    assert [r["revision"] for r in rows] == [1, 2, 3]
    assert [r["live"] for r in rows] == [False, False, True]
    assert [r["result"] for r in rows] == ["superseded", "superseded", "deployed"]
    assert all(r["run_id"].endswith("-up-k8s") and "@" in r["user"] for r in rows)
    assert len({r["run_id"] for r in rows}) == 3
    assert rows[0]["changed"] == "" and "instances[mixed].files" in rows[1]["changed"]

    uid = objects(cluster, "Pod", ns)[0]["metadata"]["uid"]
    res = cli(tmp_path, cluster, "rollback", "-t", "k8s", "-i", str(inv), "--to", "1", "-y", "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "✓ rolled back to revision 1 (now helm revision 4)" in res.stdout
    assert get(cluster, "ConfigMap", ns, FILES)["data"] == files[1]
    assert leases(cluster, ns) == []
    (pod,) = objects(cluster, "Pod", ns)
    assert pod["metadata"]["uid"] != uid                 # the instance restarted on the rolled-back files
    res = cli(tmp_path, cluster, "status", "-t", "k8s", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["degraded"] is False

    rows = history(tmp_path, cluster, inv)
    assert [(r["revision"], r["live"]) for r in rows] == [(1, False), (2, False), (3, False), (4, True)]
    assert rows[3]["operation"] == "rollback" and rows[3]["run_id"].endswith("-rollback-k8s")
    assert "Rollback to 1" in rows[3]["summary"]

    # a revision to a revision helm does not have is bad input
    res = cli(tmp_path, cluster, "rollback", "-t", "k8s", "-i", str(inv), "--to", "9", "-y")
    assert res.returncode == 2 and "no revision 9" in res.stdout + res.stderr


def test_lease_lock_through_the_official_client(k8s_cluster, k8s_ns):
    """The Lease calls as the kubernetes client makes them against the real API server: create (409
    AlreadyExists for the second), renewals carrying resourceVersion (a stale one is a 409 Conflict), delete
    with a precondition."""
    import time

    from deployctl.backends.common.lockinfo import LockHeld, LockOwner
    from deployctl.io.kube import KubeApi, KubeTarget
    from deployctl.backends.k8s.lease import LeaseLock, holder

    cluster, ns = k8s_cluster, k8s_ns
    cluster.create_namespace(ns)
    groups = cluster.get("/apis")
    assert "coordination.k8s.io" in {g["name"] for g in groups["groups"]}
    resources = cluster.get("/apis/coordination.k8s.io/v1")
    assert {"name": "leases", "kind": "Lease", "namespaced": True}.items() <= \
        next(r for r in resources["resources"] if r["name"] == "leases").items()
    api = KubeApi(KubeTarget(str(cluster.kubeconfig), None, ns, "rel"))
    me, other = LockOwner.me("run-a"), LockOwner("eve", "elsewhere", 7, "deployctl up", "run-b", "", "")
    lock = LeaseLock(api, ns, "rel", me, renew_every=0.05)
    mark = cluster.audit_mark()
    with lock.acquire():
        first = api.get_lease("deployctl-rel")
        assert holder(first).run_id == "run-a" and first["spec"]["leaseDurationSeconds"] == 120
        with pytest.raises(LockHeld) as err:
            LeaseLock(api, ns, "rel", other).acquire()
        assert err.value.owner.run_id == "run-a" and not err.value.stale
        deadline = time.monotonic() + 10.0              # renewals every 0.05 s: 200x margin
        while lock.renewals < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert lock.renewals >= 2
        now = api.get_lease("deployctl-rel")
        assert now["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
        assert now["spec"]["acquireTime"] == first["spec"]["acquireTime"]
        assert api.replace_lease("deployctl-rel", first) is None          # stale resourceVersion: 409
        assert api.delete_lease("deployctl-rel", first["metadata"]["resourceVersion"]) is False
    assert api.get_lease("deployctl-rel") is None
    writes = [w for w in cluster.writes(mark, namespace=ns) if w["kind"] == "Lease"]
    assert {w["name"] for w in writes} == {"deployctl-rel"}
    assert [w["verb"] for w in writes if w["code"] == 200 and w["verb"] == "update"]        # renewals are PUTs
    assert ("create", 409) in {(w["verb"], w["code"]) for w in writes}                      # the second operator
    assert ("update", 409) in {(w["verb"], w["code"]) for w in writes}                      # the stale renewal
    assert ("delete", 409) in {(w["verb"], w["code"]) for w in writes}                      # the stale delete
    assert all(w["code"] in (200, 201, 404, 409) for w in writes), writes
