"""The k8s lock (a Lease), history and rollback end to end: the deployctl CLI, the real helm binary and the
official kubernetes client against the fake API server (tests/fakek8s)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from k8s.test_up_k8s import NS, add_servers, cli, created, inventory

STEM = "a2-1x8-single"
RELEASE = "r1-single"
LEASE = f"deployctl-{RELEASE}"
FILES = "r1-single-ascend-llm-mixed-files"


def http(api, method: str, path: str, body=None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(api.url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data is not None else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def hand_made_lease(api, holder: str, renewed_ago_s: float) -> dict:
    """A Lease as another deployctl (or a person with kubectl) would leave it."""
    t = (datetime.now(timezone.utc) - timedelta(seconds=renewed_ago_s)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    code, body = http(api, "POST", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases", {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": LEASE},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 120, "acquireTime": t, "renewTime": t}})
    assert code == 201, body
    return body


def revisions(api) -> list[int]:
    """helm's release records (Secrets sh.helm.release.v1.<release>.v<N>)."""
    return sorted(int(s["metadata"]["labels"]["version"]) for s in api.objects("secrets", NS)
                  if s["metadata"].get("labels", {}).get("owner") == "helm")


def with_batch(inv: Path, size: int) -> None:
    text = inv.read_text()
    old = next(line for line in text.splitlines() if line.strip().startswith("max_batch_size:"))
    inv.write_text(text.replace(old, f"  max_batch_size: {size}"))


def up(tmp_path: Path, inv: Path, *extra: str):
    return cli(tmp_path, "up", "-t", "k8s", "-i", str(inv), "-y", "--ready-timeout", "30", *extra)


def test_the_lease_refuses_a_second_operator_until_break_lock_and_is_never_left_behind(fake_kube, kubeconfig,
                                                                                        tmp_path):
    add_servers(fake_kube, STEM)
    inv = inventory(tmp_path, STEM, kubeconfig)
    res = up(tmp_path, inv)
    assert res.returncode == 0, res.stdout + res.stderr
    assert fake_kube.objects("leases", NS) == []                  # released after a successful up
    assert len(fake_kube.requests_to("POST", f"/namespaces/{NS}/leases")) == 1   # and it was taken
    assert revisions(fake_kube) == [1]

    with_batch(inv, 32)
    hand_made_lease(fake_kube, "alice@ws1:4242:run-7", renewed_ago_s=5)
    before = fake_kube.get_object("configmaps", NS, FILES)
    objects_before = created(fake_kube)
    res = up(tmp_path, inv)
    assert res.returncode == 1, res.stdout + res.stderr
    err = res.stderr
    assert f"locked on namespace {NS} Lease {LEASE} by alice@ws1 (pid 4242" in err, err
    assert "since " in err and "run run-7" in err and "stale" not in err
    assert "`deployctl up --target k8s --break-lock`" in err
    assert revisions(fake_kube) == [1]                            # nothing changed
    assert fake_kube.get_object("configmaps", NS, FILES) == before
    assert created(fake_kube) == objects_before
    lease = fake_kube.objects("leases", NS)
    assert [x["spec"]["holderIdentity"] for x in lease] == ["alice@ws1:4242:run-7"]   # not ours to remove

    res = up(tmp_path, inv, "--break-lock")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "the lock is held by alice@ws1" in res.stdout
    assert "removed the lock held by alice@ws1" in res.stdout
    assert revisions(fake_kube) == [1, 2]
    assert fake_kube.get_object("configmaps", NS, FILES) != before
    assert fake_kube.objects("leases", NS) == []

    # a failing up releases the lock too (the pod never becomes ready: rolled back to revision 2)
    with_batch(inv, 64)
    fake_kube.never_ready("r1-single-ascend-llm-mixed-master-0")
    res = cli(tmp_path, "up", "-t", "k8s", "-i", str(inv), "-y", "--ready-timeout", "3")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "rolled back to revision 2" in res.stdout
    assert fake_kube.objects("leases", NS) == []


def test_stale_lease_is_reported_stale(fake_kube, kubeconfig, tmp_path):
    add_servers(fake_kube, STEM)
    inv = inventory(tmp_path, STEM, kubeconfig)
    assert up(tmp_path, inv).returncode == 0
    with_batch(inv, 32)
    owner = {"user": "bob", "host": "ci-7", "pid": 99, "command": "deployctl up", "run_id": "run-old",
             "started": "2020-01-01T00:00:00+00:00", "heartbeat": ""}
    hand_made_lease(fake_kube, json.dumps(owner), renewed_ago_s=600)
    res = cli(tmp_path, "down", "-t", "k8s", "-i", str(inv))
    assert res.returncode == 1
    assert "by bob@ci-7 (pid 99, `deployctl up`, run run-old)" in res.stderr
    assert "a stale lock" in res.stderr and "`deployctl down --target k8s --break-lock`" in res.stderr
    assert fake_kube.objects("statefulsets", NS) != []          # down changed nothing
    res = cli(tmp_path, "down", "-t", "k8s", "-i", str(inv), "--break-lock")
    assert res.returncode == 0, res.stdout + res.stderr
    assert fake_kube.objects("statefulsets", NS) == [] and fake_kube.objects("pods", NS) == []
    assert fake_kube.objects("leases", NS) == []


def history(tmp_path: Path, inv: Path) -> list[dict]:
    res = cli(tmp_path, "history", "-t", "k8s", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout)["revisions"]


def test_history_after_three_ups_and_rollback_to_revision_one(fake_kube, kubeconfig, tmp_path):
    add_servers(fake_kube, STEM)
    inv = inventory(tmp_path, STEM, kubeconfig)
    files = {}
    for rev, size in ((1, 16), (2, 32), (3, 48)):
        with_batch(inv, size)
        res = up(tmp_path, inv)
        assert res.returncode == 0, res.stdout + res.stderr
        files[rev] = fake_kube.get_object("configmaps", NS, FILES)["data"]
    assert files[1] != files[2] != files[3]

    rows = history(tmp_path, inv)
    assert [r["revision"] for r in rows] == [1, 2, 3]
    assert [r["live"] for r in rows] == [False, False, True]
    assert [r["result"] for r in rows] == ["superseded", "superseded", "deployed"]
    assert all(r["run_id"].endswith("-up-k8s") and "@" in r["user"] for r in rows)
    assert len({r["run_id"] for r in rows}) == 3
    assert rows[0]["changed"] == "" and "instances[mixed].files" in rows[1]["changed"]

    res = cli(tmp_path, "rollback", "-t", "k8s", "-i", str(inv), "--to", "1", "-y", "--ready-timeout", "30")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "✓ rolled back to revision 1 (now helm revision 4)" in res.stdout
    assert fake_kube.get_object("configmaps", NS, FILES)["data"] == files[1]
    assert fake_kube.objects("leases", NS) == []
    res = cli(tmp_path, "status", "-t", "k8s", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["degraded"] is False

    rows = history(tmp_path, inv)
    assert [(r["revision"], r["live"]) for r in rows] == [(1, False), (2, False), (3, False), (4, True)]
    assert rows[3]["operation"] == "rollback" and rows[3]["run_id"].endswith("-rollback-k8s")
    assert "Rollback to 1" in rows[3]["summary"]

    # a revision to a revision helm does not have is bad input
    res = cli(tmp_path, "rollback", "-t", "k8s", "-i", str(inv), "--to", "9", "-y")
    assert res.returncode == 2 and "no revision 9" in res.stdout + res.stderr


def test_lease_lock_through_the_official_client(fake_kube, kubeconfig):
    """The Lease calls as the kubernetes client makes them: create (409 AlreadyExists for the second),
    renewals carrying resourceVersion (a stale one is a 409 Conflict), delete with a precondition."""
    import time

    from deployctl.deploy.lockinfo import LockHeld, LockOwner
    from deployctl.k8s.api import KubeApi, KubeTarget
    from deployctl.k8s.lease import LeaseLock, holder

    code, groups = http(fake_kube, "GET", "/apis")
    assert "coordination.k8s.io" in {g["name"] for g in groups["groups"]}
    code, resources = http(fake_kube, "GET", "/apis/coordination.k8s.io/v1")
    assert code == 200 and {"name": "leases", "kind": "Lease", "namespaced": True}.items() <= \
        next(r for r in resources["resources"] if r["name"] == "leases").items()
    api = KubeApi(KubeTarget(str(kubeconfig), None, "default", "rel"))
    me, other = LockOwner.me("run-a"), LockOwner("eve", "elsewhere", 7, "deployctl up", "run-b", "", "")
    lock = LeaseLock(api, "default", "rel", me, renew_every=0.05)
    with lock.acquire():
        first = api.get_lease("deployctl-rel")
        assert holder(first).run_id == "run-a" and first["spec"]["leaseDurationSeconds"] == 120
        with pytest.raises(LockHeld) as err:
            LeaseLock(api, "default", "rel", other).acquire()
        assert err.value.owner.run_id == "run-a" and not err.value.stale
        deadline = time.monotonic() + 5.0               # renewals every 0.05 s: 100x margin
        while lock.renewals < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert lock.renewals >= 2
        now = api.get_lease("deployctl-rel")
        assert now["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
        assert now["spec"]["acquireTime"] == first["spec"]["acquireTime"]
        assert api.replace_lease("deployctl-rel", first) is None          # stale resourceVersion: 409
        assert api.delete_lease("deployctl-rel", first["metadata"]["resourceVersion"]) is False
    assert api.get_lease("deployctl-rel") is None
    assert fake_kube.requests_to("PUT", "/leases/deployctl-rel")
    assert all(r["status"] in (200, 201, 404, 409) for r in fake_kube.requests_to(None, "/leases"))
