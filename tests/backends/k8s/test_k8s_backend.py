"""K8sBackend's logic with a fake KubeApi and a fake helm (no API server, no helm binary): the lock (a
Lease), pending helm operations, the read back, undo and the rollback target."""

from __future__ import annotations

import copy
import json
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from deployctl.backends.common.lockinfo import LockHeld, LockOwner
from deployctl.backends.common.pipeline import Options, run_pipeline
from deployctl.io.records import RunRecord
from deployctl.core.errors import ExecutionError, UsageError
from deployctl.backends.k8s import history as hist
from deployctl.io.kube import KubeTarget
from deployctl.backends.k8s.diff import ObjectChange
from deployctl.backends.k8s.lease import LeaseLock, break_lock, holder, is_stale, lease_name, micro_time
from deployctl.backends.k8s.render import Release
from deployctl.backends.k8s.backend import K8sBackend, K8sChanges, K8sOptions
from recording import RecordingReporter

NS, REL = "ns", "r"
TARGET = KubeTarget("/dev/null", None, NS, REL)
INST = "deployctl.io/instance"


# ------------------------------------------------------------------------------------------ fakes

def sts(name: str, inst: str, checksum: str, replicas: int = 1) -> dict:
    labels = {"app.kubernetes.io/instance": REL, INST: inst}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "labels": dict(labels)},
            "spec": {"replicas": replicas, "template": {
                "metadata": {"labels": dict(labels), "annotations": {"checksum/instance": checksum}},
                "spec": {"hostNetwork": True}}}}


def cm(name: str, data: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/instance": REL}}, "data": data}


def manifest(checksum: str, config: str = "{}") -> list[dict]:
    return [cm("r-mixed-files", {"config.json": config}), sts("r-mixed-master", "mixed", checksum),
            sts("r-mixed-worker", "mixed", checksum, replicas=2)]


class FakeApi:
    """The release's objects as the API server would hold them, with a StatefulSet controller that recreates
    deleted pods on the update revision, and Leases/ConfigMaps with resourceVersions."""

    def __init__(self):
        self.objects: list[dict] = []
        self.pod_map: dict[str, dict] = {}
        self.never_ready: set[str] = set()
        self.stuck_on_old: set[str] = set()      # pods the controller recreates on the old revision
        self.leases: dict[str, dict] = {}
        self.config_maps: dict[str, dict] = {}
        self.rv = 0
        self.calls: list[str] = []
        self.lock = threading.Lock()

    # -- the cluster
    def deploy(self, docs: list[dict]) -> None:
        """What helm + the controllers do with a manifest (pods of changed StatefulSets stay: OnDelete)."""
        objects = []
        for d in docs:
            live = copy.deepcopy(d)
            live["metadata"].update(namespace=NS, uid=f"uid-{d['metadata']['name']}", generation=1)
            if d["kind"] == "StatefulSet":
                ann = d["spec"]["template"]["metadata"]["annotations"]
                live["status"] = {"observedGeneration": 1, "updateRevision": f"{d['metadata']['name']}-"
                                                                              f"{ann['checksum/instance']}"}
            objects.append(live)
        self.objects = objects
        for s in self.statefulsets():
            for i in range(s["spec"]["replicas"]):
                if f"{s['metadata']['name']}-{i}" not in self.pod_map:
                    self._start(s, i)
        wanted = {f"{s['metadata']['name']}-{i}" for s in self.statefulsets() for i in range(s["spec"]["replicas"])}
        self.pod_map = {k: v for k, v in self.pod_map.items() if k in wanted}

    def clear(self) -> None:
        self.objects, self.pod_map = [], {}

    def _start(self, s: dict, i: int) -> None:
        name = f"{s['metadata']['name']}-{i}"
        template = s["spec"]["template"]["metadata"]
        revision = s["status"]["updateRevision"]
        checksum = template["annotations"]["checksum/instance"]
        if name in self.stuck_on_old and name in self.pod_map:
            revision = self.pod_map[name]["metadata"]["labels"]["controller-revision-hash"]
            checksum = self.pod_map[name]["metadata"]["annotations"]["checksum/instance"]
        ready = name not in self.never_ready
        self.pod_map[name] = {
            "metadata": {"name": name, "labels": {**template["labels"], "controller-revision-hash": revision},
                         "annotations": {"checksum/instance": checksum},
                         "ownerReferences": [{"kind": "StatefulSet", "name": s["metadata"]["name"]}]},
            "spec": {"nodeName": f"node{i}"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}}

    # -- KubeApi's reads and pod deletes
    def release_objects(self):
        return copy.deepcopy(self.objects)

    def statefulsets(self):
        return [copy.deepcopy(o) for o in self.objects if o["kind"] == "StatefulSet"]

    def replicasets(self):
        return []

    def pods(self, selector=None):
        pods = list(self.pod_map.values())
        if selector and INST in selector:
            inst = selector.split(f"{INST}=")[1]
            pods = [p for p in pods if p["metadata"]["labels"].get(INST) == inst]
        return copy.deepcopy(pods)

    def pod_events(self, name):
        return [{"type": "Warning", "reason": "Unhealthy", "message": "Readiness probe failed"}]

    def delete_pods(self, selector):
        names = [p["metadata"]["name"] for p in self.pods(selector)]
        sets = {s["metadata"]["name"]: s for s in self.statefulsets()}
        for name in names:
            owner = self.pod_map[name]["metadata"]["ownerReferences"][0]["name"]
            self._start(sets[owner], int(name.rsplit("-", 1)[1]))
        self.calls.append(f"delete pods {selector}")
        return names

    def nodes(self):
        return []

    def ensure_namespace(self):
        return False

    # -- Leases and ConfigMaps: create (409 when it exists), replace/delete with resourceVersion checks
    def _store(self, kind):
        return self.leases if kind == "Lease" else self.config_maps

    def _get(self, kind, name):
        got = self._store(kind).get(name)
        return copy.deepcopy(got) if got else None

    def _create(self, kind, body):
        with self.lock:
            store, name = self._store(kind), body["metadata"]["name"]
            if name in store:
                return None
            self.rv += 1
            obj = copy.deepcopy(body)
            obj["metadata"]["resourceVersion"] = str(self.rv)
            store[name] = obj
            self.calls.append(f"create {kind} {name}")
            return copy.deepcopy(obj)

    def _replace(self, kind, name, body):
        with self.lock:
            store = self._store(kind)
            rv = body["metadata"].get("resourceVersion")
            if name not in store or (rv and rv != store[name]["metadata"]["resourceVersion"]):
                return None
            self.rv += 1
            obj = copy.deepcopy(body)
            obj["metadata"]["resourceVersion"] = str(self.rv)
            store[name] = obj
            return copy.deepcopy(obj)

    def _delete(self, kind, name, rv=None):
        with self.lock:
            store = self._store(kind)
            if name not in store or (rv and rv != store[name]["metadata"]["resourceVersion"]):
                return False
            del store[name]
            self.calls.append(f"delete {kind} {name}")
            return True

    def get_lease(self, name):
        return self._get("Lease", name)

    def create_lease(self, body):
        return self._create("Lease", body)

    def replace_lease(self, name, body):
        return self._replace("Lease", name, body)

    def delete_lease(self, name, resource_version=None):
        return self._delete("Lease", name, resource_version)

    def get_config_map(self, name):
        return self._get("ConfigMap", name)

    def create_config_map(self, body):
        return self._create("ConfigMap", body)

    def replace_config_map(self, name, body):
        return self._replace("ConfigMap", name, body)

    def delete_config_map(self, name):
        return self._delete("ConfigMap", name)


class FakeHelm:
    """helm's release records: revisions with a manifest, status and description."""

    def __init__(self, api: FakeApi):
        self.api = api
        self.revisions: list[dict] = []
        self.calls: list[str] = []
        self.next_docs: list[dict] = []
        self.pending: str = ""
        self.fail_upgrade = ""

    def install(self, docs: list[dict], description: str = "Install complete", status: str = "deployed"):
        for r in self.revisions:
            if r["status"] == "deployed":
                r["status"] = "superseded"
        self.revisions.append({"revision": len(self.revisions) + 1, "status": status, "description": description,
                               "chart": "mindie-0.1.0", "app_version": "2.2", "docs": copy.deepcopy(docs),
                               "updated": "2025-01-01T10:00:00.123456789+08:00"})
        if status == "deployed":
            self.api.deploy(docs)

    def status(self):
        if not self.revisions:
            return None
        r = self.revisions[-1]
        return {"name": REL, "version": r["revision"], "info": {
            "status": self.pending or r["status"], "description": r["description"],
            "last_deployed": "2025-01-01T10:00:00Z"}}

    def history(self, max_revisions=256):
        return [{k: v for k, v in r.items() if k != "docs"} for r in self.revisions]

    def upgrade_install(self, chart, values_file, description):
        self.calls.append(f"upgrade {description}")
        if self.fail_upgrade:
            raise ExecutionError(f"helm upgrade --install failed: {self.fail_upgrade}")
        self.install(self.next_docs, description)

    def rollback(self, revision):
        self.calls.append(f"rollback {revision}")
        self.install(self.revisions[revision - 1]["docs"], f"Rollback to {revision}")

    def uninstall(self):
        self.calls.append("uninstall")
        self.revisions = []
        self.api.clear()

    def manifest(self, revision):
        return yaml.safe_dump_all(self.revisions[revision - 1]["docs"])

    def values(self, revision):
        return {"docs": self.revisions[revision - 1]["docs"]}


def owner(user="me", run="run-me") -> LockOwner:
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return LockOwner(user, "here", 4242, "deployctl up", run, now, now)


def backend(tmp_path: Path, api: FakeApi, helm: FakeHelm, operation="up", docs=None, to=None, **opts):
    record = RunRecord.create(tmp_path / ".deployctl", f"{operation}-k8s")
    docs = docs if docs is not None else manifest("new")
    helm.next_docs = docs
    release = Release(values=None, values_text="x: 1\n", manifests=yaml.safe_dump_all(docs))
    o = K8sOptions(yes=True, skip_preflight=True, ready_timeout=1.0, poll=0.02, verify_settle=0,
                   gone_timeout=1.0, run_root=tmp_path / ".deployctl", **opts)
    return K8sBackend(operation, TARGET, api, helm, record, o, RecordingReporter(), release=lambda: release, to=to,
                      owner=owner(), chart=Path("/chart"))


def run(b: K8sBackend):
    return run_pipeline(b, b.run_record, Options(yes=True, skip_preflight=True), b.reporter, lambda c: True)


def lease_of(holder_identity: str, renewed_ago_s: float, duration: int = 120) -> dict:
    t = micro_time(datetime.now(timezone.utc) - timedelta(seconds=renewed_ago_s))
    return {"metadata": {"name": lease_name(REL)},
            "spec": {"holderIdentity": holder_identity, "leaseDurationSeconds": duration, "acquireTime": t,
                     "renewTime": t}}


# ------------------------------------------------------------------------------------------ up

def test_up_applies_restarts_the_changed_instance_verifies_and_leaves_no_lease(tmp_path):
    api, helm = FakeApi(), FakeHelm(FakeApi())
    helm.api = api
    helm.install(manifest("old"), "deployctl run first by me@here")
    b = backend(tmp_path, api, helm, docs=manifest("new", '{"a": 1}'))
    out = run(b)
    assert out.status == "successful", b.reporter.text()
    assert helm.calls == [f"upgrade deployctl run {b.run_record.run_id} by me@here"]
    assert "delete pods app.kubernetes.io/instance=r,deployctl.io/instance=mixed" in api.calls
    assert [u.unit for u in out.verification.units] == [
        "pod r-mixed-master-0 (mixed)", "pod r-mixed-worker-0 (mixed)", "pod r-mixed-worker-1 (mixed)", "release r"]
    assert out.verification.ok and b.applied_revision == 2
    assert api.leases == {}                                     # released
    assert f"create Lease {lease_name(REL)}" in api.calls
    assert api.config_maps == {}                                # a successful up needs no note


def test_changes_compare_equal_and_know_when_there_is_nothing_to_do(tmp_path):
    api, helm = FakeApi(), FakeHelm(FakeApi())
    helm.api = api
    helm.install(manifest("same"))
    b = backend(tmp_path, api, helm, docs=manifest("same"))
    observed = b.read()
    desired = b.render(observed)
    first, again = b.diff(desired, observed), b.diff(desired, b.read())
    assert first == again and first.nothing_to_do
    assert run(b).status == "nothing-to-do" and helm.calls == [] and api.leases == {}
    assert K8sChanges("up", REL, (ObjectChange("ConfigMap", "x", "changed", ("data",)),)) != \
        K8sChanges("up", REL, (ObjectChange("ConfigMap", "x", "changed", ("data",)),), live_revision=3)
    assert not K8sChanges("down", REL, live_revision=1).nothing_to_do
    assert K8sChanges("down", REL, live_revision=None).nothing_to_do


def test_a_pod_that_never_gets_ready_is_named_and_the_release_rolls_back_then_history_marks_it_failed(tmp_path):
    api, helm = FakeApi(), FakeHelm(FakeApi())
    helm.api = api
    helm.install(manifest("old"), "deployctl run first by me@here")
    b = backend(tmp_path, api, helm, docs=manifest("new", '{"a": 1}'))
    api.never_ready = {"r-mixed-worker-1"}
    helm_install = helm.install

    def install_then_recover(docs, description="", status="deployed"):
        if description.startswith("Rollback"):
            api.never_ready = set()                 # the old revision's pods are fine
        helm_install(docs, description, status)

    helm.install = install_then_recover
    out = run(b)
    assert out.status == "failed"
    assert "pod r-mixed-worker-1 (mixed) on node1: Running, not ready" in out.failure
    assert "Unhealthy: Readiness probe failed" in out.failure
    assert helm.calls[1:] == ["rollback 1"]
    assert b.restored_to == "revision 1" and out.restored.ok, b.reporter.text()
    assert api.leases == {}
    rows = hist.history_rows(helm.history(), hist.read_notes(api, REL))
    assert [(r.revision, r.operation, r.result, r.live) for r in rows] == [
        (1, "up", "superseded", False), (2, "up", "failed", False), (3, "undo", "deployed", True)]
    assert rows[2].run_id == b.run_record.run_id and rows[2].user == "me@here"


def test_a_failed_helm_upgrade_is_undone_and_a_first_install_is_uninstalled(tmp_path):
    api, helm = FakeApi(), FakeHelm(FakeApi())
    helm.api = api
    helm.fail_upgrade = "admission webhook denied the request"
    b = backend(tmp_path, api, helm)
    out = run(b)
    assert out.status == "failed" and "admission webhook denied" in out.failure
    assert b.restored_to == "uninstalled" and out.restored.ok
    assert [u.unit for u in out.restored.units] == ["release r"]
    assert api.leases == {}


def test_verify_names_the_pod_on_an_old_template(tmp_path):
    api, helm = FakeApi(), FakeHelm(FakeApi())
    helm.api = api
    helm.install(manifest("old"), "deployctl run first by me@here")
    api.stuck_on_old = {"r-mixed-worker-0"}
    b = backend(tmp_path, api, helm, docs=manifest("new", '{"a": 1}'))
    helm.install(manifest("new", '{"a": 1}'), "deployctl run second by me@here")
    b.applied_revision = 2
    api.delete_pods("app.kubernetes.io/instance=r,deployctl.io/instance=mixed")
    result = b.verify(b.render(b.read()), None)
    assert not result.ok
    [bad] = result.failures
    assert bad.unit == "pod r-mixed-worker-0 (mixed)"
    assert bad.cause == "runs an old template (r-mixed-worker-old; the current one is r-mixed-worker-new)"
    assert "✗ pod r-mixed-worker-0 (mixed): Ready (Running) on node0, template r-mixed-worker-old" in bad.line()


def test_verify_names_a_missing_pod_and_a_release_at_another_revision(tmp_path):
    api, helm = FakeApi(), FakeHelm(FakeApi())
    helm.api = api
    helm.install(manifest("new"), "deployctl run first by me@here")
    del api.pod_map["r-mixed-worker-1"]
    b = backend(tmp_path, api, helm, docs=manifest("new"))
    b.applied_revision = 7
    result = b.verify(b.render(b.read()), None)
    causes = {u.unit: u.cause for u in result.failures}
    assert causes == {"pod r-mixed-worker-1 (mixed)": "no such pod",
                      "release r": "revision 1 is live, not 7 (another operator?)"}


# ------------------------------------------------------------------------------------------ the lock

def test_a_lease_held_by_someone_else_refuses_with_who_and_since(tmp_path):
    api, helm = FakeApi(), FakeHelm(FakeApi())
    helm.api = api
    helm.install(manifest("old"))
    theirs = owner("alice", "run-7")
    api.create_lease(lease_of(theirs.to_json(), renewed_ago_s=30))
    b = backend(tmp_path, api, helm)
    with pytest.raises(LockHeld) as err:
        run(b)
    assert not err.value.stale
    assert err.value.owner.user == "alice" and err.value.owner.run_id == "run-7"
    msg = err.value.render()
    assert f"locked on namespace {NS} Lease deployctl-{REL} by alice@here (pid 4242, `deployctl up`, run run-7)" in msg
    assert "since " in msg and "stale" not in msg
    assert "`deployctl up --target k8s --break-lock`" in msg
    assert helm.calls == []                                      # nothing changed
    assert holder(api.get_lease(lease_name(REL))).user == "alice"


def test_a_stale_lease_is_reported_stale_and_break_lock_takes_it(tmp_path):
    api, helm = FakeApi(), FakeHelm(FakeApi())
    helm.api = api
    helm.install(manifest("old"))
    api.create_lease(lease_of("bob@ci:17:run-3", renewed_ago_s=600))
    with pytest.raises(LockHeld) as err:
        run(backend(tmp_path, api, helm))
    assert err.value.stale and "a stale lock" in err.value.message
    assert "no sign of life for 10 min" in err.value.message
    b = backend(tmp_path, api, helm, break_lock=True)
    assert run(b).status == "successful"
    assert "removed the lock held by bob@ci (pid 17, `unknown command`, run run-3) (--break-lock)" in b.reporter.text()
    assert api.leases == {}


@pytest.mark.parametrize("state", ["pending-upgrade", "pending-rollback", "pending-install"])
def test_a_pending_helm_operation_refuses_and_releases_the_lease(tmp_path, state):
    api, helm = FakeApi(), FakeHelm(FakeApi())
    helm.api = api
    helm.install(manifest("old"), "deployctl run first by me@here")
    helm.pending = state
    b = backend(tmp_path, api, helm)
    with pytest.raises(ExecutionError) as err:
        run(b)
    text = err.value.render()
    assert f"has a helm operation in progress: {state} of revision 1 since 2025-01-01T10:00:00Z" in text
    assert f"`helm rollback {REL} 1 -n {NS}` ends it" in text and "wait for it to finish" in text
    assert helm.calls == [] and api.leases == {}


def test_lease_renewal_and_release_never_remove_someone_elses_lease():
    api = FakeApi()
    t = [datetime(2025, 1, 1, tzinfo=timezone.utc)]
    lost = []
    lock = LeaseLock(api, NS, REL, owner(), renew_every=0.02, now=lambda: t[0], on_lost=lost.append)
    lock.acquire()
    lease = api.get_lease(lease_name(REL))
    assert json.loads(lease["spec"]["holderIdentity"])["run_id"] == "run-me"
    assert lease["spec"]["leaseDurationSeconds"] == 120 and lease["spec"]["acquireTime"] == \
        "2025-01-01T00:00:00.000000Z"
    with lock:
        t[0] += timedelta(seconds=20)
        deadline = time.monotonic() + 3.0           # renewals every 0.02 s: 150x margin
        while lock.renewals < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert lock.renewals >= 2
        spec = api.get_lease(lease_name(REL))["spec"]
        assert spec["renewTime"] == "2025-01-01T00:00:20.000000Z" and spec["acquireTime"] == \
            "2025-01-01T00:00:00.000000Z"
        assert not is_stale(api.get_lease(lease_name(REL)), t[0] + timedelta(seconds=100))
        assert is_stale(api.get_lease(lease_name(REL)), t[0] + timedelta(seconds=121))
        # someone breaks it and takes it: our renewal notices, our release leaves theirs alone
        assert break_lock(api, NS, REL).run_id == "run-me"
        api.create_lease(lease_of("carol@box:1:run-9", renewed_ago_s=0))
        deadline = time.monotonic() + 3.0
        while not lock.lost and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "taken by carol@box" in lock.lost and lost
    assert holder(api.get_lease(lease_name(REL))).user == "carol"


def test_holder_identity_formats():
    assert holder(lease_of("alice@ws1:4242:run-7", 0)).who() == "alice@ws1 (pid 4242, `unknown command`, run run-7)"
    assert holder(lease_of("some-controller", 0)).user == "some-controller"
    assert holder(lease_of("", 0)) is None
    assert holder({"spec": {"holderIdentity": owner().to_json(),
                            "renewTime": "2025-01-01T00:00:00.000000Z"}}).heartbeat == "2025-01-01T00:00:00+00:00"


# ------------------------------------------------------------------------------------------ rollback and history

def entry(rev: int, status: str, description: str) -> dict:
    return {"revision": rev, "status": status, "description": description, "chart": "mindie-0.1.0",
            "app_version": "2.2", "updated": "2025-01-01T10:00:00.5+00:00"}


def test_rollback_target_is_the_last_deployctl_revision_that_served_before_the_live_one():
    entries = [entry(1, "superseded", "deployctl run a by me@h"), entry(2, "superseded", "deployctl run b by me@h"),
               entry(3, "superseded", "Upgrade complete"), entry(4, "superseded", "deployctl run c by me@h"),
               entry(5, "deployed", "Rollback to 2")]
    notes = {4: {"run_id": "c", "user": "me@h", "operation": "up", "result": "failed"},
             5: {"run_id": "d", "user": "me@h", "operation": "undo", "result": "successful"}}
    rows = hist.history_rows(entries, notes)
    # 4 failed (deployctl rolled it back), 3 was not made by deployctl: 2
    assert hist.choose_target(rows, None, REL) == 2
    assert [r.result for r in rows] == ["superseded", "superseded", "superseded", "failed", "deployed"]
    assert [r.operation for r in rows] == ["up", "up", "upgrade", "up", "undo"]
    assert rows[0].time == "2025-01-01T10:00:00+00:00" and rows[4].live and rows[4].user == "me@h"
    assert hist.choose_target(rows, 3, REL) == 3                  # --to any revision helm keeps
    with pytest.raises(UsageError, match="no revision 9"):
        hist.choose_target(rows, 9, REL)
    with pytest.raises(UsageError, match="no earlier revision made by deployctl"):
        hist.choose_target(hist.history_rows(entries[2:3] + [entry(4, "deployed", "deployctl run c by me@h")]),
                           None, REL)
    with pytest.raises(ExecutionError, match="not installed"):
        hist.choose_target([], None, REL)
    # a note of an older install with the same revision number does not stick to a new revision
    assert hist.history_rows([entry(1, "deployed", "deployctl run z by you@h")],
                             {1: {"run_id": "old", "result": "failed", "operation": "up"}})[0].result == "deployed"


def test_rollback_brings_back_the_target_revision_and_undo_goes_back_to_the_live_one(tmp_path):
    api, helm = FakeApi(), FakeHelm(FakeApi())
    helm.api = api
    for i, checksum in enumerate(("one", "two", "three"), start=1):
        helm.install(manifest(checksum, f'{{"v": {i}}}'), f"deployctl run run-{i} by me@here")
    b = backend(tmp_path, api, helm, operation="rollback")
    out = run(b)
    assert out.status == "successful", b.reporter.text()
    assert out.changes.target_revision == 2 and out.changes.live_revision == 3
    assert helm.calls == ["rollback 2"] and b.applied_revision == 4
    assert api.objects[0]["data"] == {"config.json": '{"v": 2}'}
    assert hist.read_notes(api, REL)[4]["operation"] == "rollback"

    # --to 1 whose pods never get ready: undo rolls back to the revision that was live (4)
    api.never_ready = {"r-mixed-master-0"}
    original = helm.install

    def install(docs, description="", status="deployed"):
        if description == "Rollback to 4":
            api.never_ready = set()
        original(docs, description, status)

    helm.install = install
    b = backend(tmp_path, api, helm, operation="rollback", to=1)
    out = run(b)
    assert out.status == "failed" and helm.calls[-2:] == ["rollback 1", "rollback 4"]
    assert b.restored_to == "revision 4" and out.restored.ok
    assert api.objects[0]["data"] == {"config.json": '{"v": 2}'}
    assert api.leases == {}


def test_down_uninstalls_and_reads_back_that_nothing_is_left(tmp_path):
    api, helm = FakeApi(), FakeHelm(FakeApi())
    helm.api = api
    helm.install(manifest("old"), "deployctl run a by me@here")
    b = backend(tmp_path, api, helm, operation="down", docs=[])
    out = run(b)
    assert out.status == "successful" and helm.calls == ["uninstall"]
    assert [u.line() for u in out.verification.units] == ["✓ release r: not installed, no pod or workload left"]
    assert run(backend(tmp_path, api, helm, operation="down", docs=[])).status == "nothing-to-do"
    assert api.leases == {}


def test_values_changed_names_keys_and_instances():
    old = {"image": {"tag": "a", "repository": "x"}, "instances": [{"name": "p", "files": {"c": 1}, "env": {}},
                                                                   {"name": "d", "files": {"c": 1}}]}
    new = {"image": {"tag": "b", "repository": "x"}, "instances": [{"name": "p", "files": {"c": 1}, "env": {}},
                                                                   {"name": "d", "files": {"c": 2}}], "shmSize": "1G"}
    assert hist.values_changed(old, new) == "image.tag, instances[d].files, shmSize"
    assert hist.values_changed(old, old) == ""
