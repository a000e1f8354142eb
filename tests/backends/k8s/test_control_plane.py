"""The test cluster of tests/k8scluster.py is a real control plane: the real scheduler, controllers,
admission, validation, RBAC and helm, with kwok playing the kubelets (docs/dev/k8s-test-cluster.md).

These tests need the binaries of scripts/k8s-test-cluster build (built by the fixture when missing: about
10 minutes the first time on 2 cores). They never skip.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from k8scluster import FAULT_LABEL, NPU, KubeCluster, cluster_fixture, tool

cluster = pytest.fixture(scope="module")(cluster_fixture)

A2 = {"accelerator_type": "module-910b-8"}
A3 = {"accelerator_type": "module-a3-16"}
WAIT = 240          # seconds: the machine is small and may be busy


@pytest.fixture(scope="module")
def nodes(cluster: KubeCluster) -> list[dict]:
    return cluster.add_nodes([{"name": "cp-a2-node1", "ip": "10.200.0.2", **A2},
                              {"name": "cp-a2-node2", "ip": "10.200.0.3", **A2},
                              {"name": "cp-a3-node1", "ip": "10.201.0.2", **A3}])


def pod(name: str, *, npus: int = 0, image: str = "registry.local/vllm-ascend:v0.9.1", labels=None,
        node: str | None = None) -> dict:
    res = {"limits": {NPU: str(npus)}, "requests": {NPU: str(npus)}} if npus else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "engine", "image": image, "resources": res}],
                     **({"nodeSelector": {"kubernetes.io/hostname": node}} if node else {}),
                     "terminationGracePeriodSeconds": 5}}


def condition(obj: dict | None, ctype: str) -> dict:
    for c in (obj or {}).get("status", {}).get("conditions", []) or []:
        if c["type"] == ctype:
            return c
    return {}


def waiting_reason(p: dict | None) -> str | None:
    statuses = (p or {}).get("status", {}).get("containerStatuses") or []
    return (statuses[0].get("state", {}).get("waiting") or {}).get("reason") if statuses else None


def test_versions_are_stamped(cluster: KubeCluster):
    pinned = tool.pins()
    version = cluster.get("/version")
    assert version["gitVersion"] == pinned["kubernetes"] == cluster.version
    assert (version["major"], version["minor"]) == ("1", pinned["kubernetes"].split(".")[1])
    r = cluster.helm_run("version", "--short")
    assert r.returncode == 0 and r.stdout.startswith(pinned["helm"]), r.stdout + r.stderr
    lines = "\n".join(tool.versions(cluster.bin_dir))
    for b in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert f"{b}: Kubernetes {pinned['kubernetes']}" in lines
    assert pinned["etcd"].lstrip("v") in lines and pinned["kwok"].lstrip("v") in lines


def test_ascend_nodes_registered_ready(cluster: KubeCluster, nodes):
    a3 = cluster.get("/api/v1/nodes/cp-a3-node1")
    assert a3["metadata"]["labels"]["accelerator-type"] == "module-a3-16"
    assert a3["metadata"]["labels"]["kubernetes.io/hostname"] == "cp-a3-node1"
    assert a3["metadata"]["labels"]["type"] == "kwok"
    assert a3["status"]["allocatable"][NPU] == a3["status"]["capacity"][NPU] == "16"
    assert {"type": "InternalIP", "address": "10.201.0.2"} in a3["status"]["addresses"]
    assert condition(a3, "Ready")["status"] == "True"
    a2 = cluster.get("/api/v1/nodes/cp-a2-node1")
    assert a2["status"]["allocatable"][NPU] == "8"
    # kwok renews each node's Lease, as a kubelet does, so the node lifecycle controller keeps it Ready
    cluster.wait_for("node lease", lambda: cluster.get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/"
                                                        "leases/cp-a2-node1"), WAIT)


def test_scheduler_refuses_more_npus_than_allocatable(cluster: KubeCluster, nodes):
    ns = cluster.create_namespace("cp-sched")
    cluster.create(f"/api/v1/namespaces/{ns}/pods", pod("too-big", npus=17))
    cluster.create(f"/api/v1/namespaces/{ns}/pods", pod("fits", npus=16))
    fits = cluster.wait_for("pod fits Ready", lambda: condition(cluster.pod(ns, "fits"), "Ready").get("status") == "True"
                            and cluster.pod(ns, "fits"), WAIT)
    assert fits["spec"]["nodeName"] == "cp-a3-node1"           # the only node with 16 NPUs
    assert fits["status"]["hostIP"] == "10.201.0.2"

    sched = cluster.wait_for("too-big unschedulable",
                             lambda: condition(cluster.pod(ns, "too-big"), "PodScheduled").get("reason") == "Unschedulable"
                             and condition(cluster.pod(ns, "too-big"), "PodScheduled"), WAIT)
    assert sched["status"] == "False"
    events = cluster.wait_for("FailedScheduling event", lambda: [
        e for e in cluster.events_for(ns, "too-big", "Pod") if e["reason"] == "FailedScheduling"], WAIT)
    assert f"Insufficient {NPU}" in events[0]["message"], events[0]["message"]
    assert events[0]["type"] == "Warning"
    assert events[0].get("reportingComponent") == "default-scheduler" or \
        events[0].get("source", {}).get("component") == "default-scheduler"
    assert cluster.pod(ns, "too-big")["status"]["phase"] == "Pending"
    assert not cluster.pod(ns, "too-big")["spec"].get("nodeName")


def test_statefulset_on_delete_pdb_and_garbage_collection(cluster: KubeCluster, nodes):
    ns = cluster.create_namespace("cp-sts")
    labels = {"app": "engine"}
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "engine"},
           "spec": {"replicas": 2, "serviceName": "engine", "selector": {"matchLabels": labels},
                    "updateStrategy": {"type": "OnDelete"}, "podManagementPolicy": "Parallel",
                    "template": {"metadata": {"labels": labels}, "spec": {
                        "nodeSelector": {"accelerator-type": "module-910b-8"},
                        "terminationGracePeriodSeconds": 5,
                        "containers": [{"name": "engine", "image": "registry.local/vllm-ascend:v1",
                                        "resources": {"limits": {NPU: "8"}, "requests": {NPU: "8"}}}]}}}}
    cluster.create(f"/apis/apps/v1/namespaces/{ns}/statefulsets", sts)
    path = f"/apis/apps/v1/namespaces/{ns}/statefulsets/engine"

    def ready(want_revision: str | None = None):
        s = cluster.get(path)
        st = s.get("status", {})
        ok = st.get("readyReplicas") == 2 and st.get("observedGeneration") == s["metadata"]["generation"]
        return s if ok and (want_revision is None or st.get("updatedReplicas") == 2) else None

    first = cluster.wait_for("StatefulSet ready", ready, WAIT)
    rev1 = first["status"]["currentRevision"]
    pods = {p["metadata"]["name"]: p for p in cluster.pods(ns, "app=engine")}
    assert set(pods) == {"engine-0", "engine-1"}
    assert {p["spec"]["nodeName"] for p in pods.values()} == {"cp-a2-node1", "cp-a2-node2"}   # 8 NPUs each
    uid1 = pods["engine-1"]["metadata"]["uid"]

    # PodDisruptionBudget: the disruption controller computes it, the eviction API enforces it
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "engine"},
           "spec": {"minAvailable": 2, "selector": {"matchLabels": labels}}}
    cluster.create(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", pdb)
    pdb_now = cluster.wait_for("PDB status", lambda: (lambda p: p if p.get("status", {}).get("currentHealthy") == 2
                                                      else None)(cluster.get(
                                f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/engine")), WAIT)
    assert pdb_now["status"]["disruptionsAllowed"] == 0
    status, body = cluster.request("POST", f"/api/v1/namespaces/{ns}/pods/engine-0/eviction",
                                   {"apiVersion": "policy/v1", "kind": "Eviction",
                                    "metadata": {"name": "engine-0", "namespace": ns}})
    assert status == 429 and "disruption budget" in json.dumps(body), (status, body)

    # OnDelete: a template change makes a new revision but replaces nothing by itself
    cluster.patch(path, {"spec": {"template": {"spec": {"containers": [
        {"name": "engine", "image": "registry.local/vllm-ascend:v2"}]}}}}, kind="strategic")
    updated = cluster.wait_for("new update revision", lambda: (lambda s: s if s["status"].get("updateRevision")
                               not in (None, rev1) and s["status"].get("observedGeneration") == 2 else None)(
                               cluster.get(path)), WAIT)
    rev2 = updated["status"]["updateRevision"]
    time.sleep(3)
    pods = {p["metadata"]["name"]: p for p in cluster.pods(ns, "app=engine")}
    assert {p["metadata"]["labels"]["controller-revision-hash"] for p in pods.values()} == {rev1}
    # deleting one pod recreates only that one, at the new revision; the other keeps running untouched
    cluster.delete(f"/api/v1/namespaces/{ns}/pods/engine-0")

    def recreated():
        p = cluster.pod(ns, "engine-0")
        if p and p["metadata"]["labels"].get("controller-revision-hash") == rev2 and \
                condition(p, "Ready").get("status") == "True":
            return p
        return None

    p0 = cluster.wait_for("engine-0 recreated at the new revision and Ready", recreated, WAIT)
    assert p0["spec"]["containers"][0]["image"] == "registry.local/vllm-ascend:v2"
    p1 = cluster.pod(ns, "engine-1")
    assert p1["metadata"]["uid"] == uid1 and p1["metadata"]["labels"]["controller-revision-hash"] == rev1
    cluster.wait_for("status counts one updated replica",
                     lambda: cluster.get(path)["status"].get("updatedReplicas") == 1, WAIT)

    # garbage collector: deleting the StatefulSet (background propagation) removes its pods
    cluster.delete(path, {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"})
    cluster.wait_for("pods garbage-collected", lambda: not cluster.pods(ns, "app=engine"), WAIT)
    cluster.wait_for("controller revisions garbage-collected", lambda: not cluster.get(
        f"/apis/apps/v1/namespaces/{ns}/controllerrevisions")["items"], WAIT)


def test_fault_crash_loop_by_label(cluster: KubeCluster, nodes):
    ns = cluster.create_namespace("cp-crash")
    cluster.create(f"/api/v1/namespaces/{ns}/pods", pod("crasher", labels={FAULT_LABEL: "crash"}))
    p = cluster.wait_for("CrashLoopBackOff", lambda: waiting_reason(cluster.pod(ns, "crasher")) == "CrashLoopBackOff"
                         and cluster.pod(ns, "crasher"), WAIT)
    cs = p["status"]["containerStatuses"][0]
    assert p["status"]["phase"] == "Running" and cs["ready"] is False and cs["restartCount"] > 0
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    assert condition(p, "Ready")["status"] == "False"
    events = cluster.wait_for("BackOff event", lambda: [e for e in cluster.events_for(ns, "crasher")
                                                        if e["reason"] == "BackOff"], WAIT)
    assert events[0]["type"] == "Warning"


def test_fault_never_ready_by_image_tag(cluster: KubeCluster, nodes):
    ns = cluster.create_namespace("cp-never-ready")
    cluster.create(f"/api/v1/namespaces/{ns}/pods", pod("stuck", image="registry.local/vllm-ascend:v2-fault-never-ready"))
    cluster.wait_for("running", lambda: (cluster.pod(ns, "stuck") or {}).get("status", {}).get("phase") == "Running",
                     WAIT)
    deadline = time.monotonic() + 8                            # and it stays not Ready
    while time.monotonic() < deadline:
        p = cluster.pod(ns, "stuck")
        assert condition(p, "Ready")["status"] == "False"
        assert p["status"]["containerStatuses"][0]["ready"] is False
        assert "running" in p["status"]["containerStatuses"][0]["state"]
        time.sleep(1)
    cluster.wait_for("an Unhealthy event",
                     lambda: any(e["reason"] == "Unhealthy" for e in cluster.events_for(ns, "stuck")), WAIT)


def test_fault_image_pull(cluster: KubeCluster, nodes):
    ns = cluster.create_namespace("cp-pull")
    cluster.create(f"/api/v1/namespaces/{ns}/pods", pod("nopull", labels={FAULT_LABEL: "image-pull"}))
    cluster.create(f"/api/v1/namespaces/{ns}/pods", pod("nopull-tag", image="registry.local/x:v3-fault-image-pull"))
    seen: set[str] = set()

    def backoff():
        reason = waiting_reason(cluster.pod(ns, "nopull"))
        if reason:
            seen.add(reason)
        return reason == "ImagePullBackOff"

    cluster.wait_for("ImagePullBackOff", backoff, WAIT, interval=0.1)
    assert seen <= {"ErrImagePull", "ImagePullBackOff"}
    assert cluster.pod(ns, "nopull")["status"]["phase"] == "Pending"
    cluster.wait_for("ImagePullBackOff by tag", lambda: waiting_reason(cluster.pod(ns, "nopull-tag")) ==
                     "ImagePullBackOff", WAIT)
    reasons = {e["reason"] for e in cluster.events_for(ns, "nopull")}
    assert {"Failed", "BackOff"} <= reasons, reasons


def test_server_side_validation_and_defaulting(cluster: KubeCluster):
    ns = cluster.create_namespace("cp-validate")
    bad = pod("Bad_Name")
    bad["spec"]["containers"][0]["resources"] = {"limits": {NPU: "1.5"}}
    status, body = cluster.request("POST", f"/api/v1/namespaces/{ns}/pods", bad)
    assert status == 422 and body["reason"] == "Invalid", body
    fields = {c["field"] for c in body["details"]["causes"]}
    assert "metadata.name" in fields
    assert any(NPU in f for f in fields), fields                 # extended resources must be whole numbers
    status, body = cluster.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments",
                                   {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                                    "spec": {"replicas": "two"}})
    assert status == 400, (status, body)
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ok"},
           "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
               "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}}
    status, body = cluster.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All", dep)
    assert status == 201, body
    assert body["spec"]["replicas"] == 1 and body["spec"]["strategy"]["type"] == "RollingUpdate"
    assert body["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] == "/dev/termination-log"
    assert cluster.get(f"/apis/apps/v1/namespaces/{ns}/deployments/ok") is None      # dry run stored nothing


def test_rbac_and_service_account_tokens(cluster: KubeCluster):
    ns = cluster.create_namespace("cp-rbac")
    cluster.create(f"/api/v1/namespaces/{ns}/serviceaccounts",
                   {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}})
    tr = cluster.create(f"/api/v1/namespaces/{ns}/serviceaccounts/reader/token",
                        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                         "spec": {"expirationSeconds": 600}})
    token = tr["status"]["token"]
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["sub"] == f"system:serviceaccount:{ns}:reader"
    import ssl
    import urllib.error
    import urllib.request

    ctx = ssl.create_default_context(cafile=str(cluster.dir / "pki" / "ca.crt"))

    def as_reader(path: str) -> int:
        req = urllib.request.Request(cluster.server + path, headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
                return r.status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert as_reader(f"/api/v1/namespaces/{ns}/pods") == 403
    cluster.create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
                   {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "read-pods"},
                    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]})
    cluster.create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                   {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "r"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-pods"},
                    "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}]})
    cluster.wait_for("RBAC grant effective", lambda: as_reader(f"/api/v1/namespaces/{ns}/pods") == 200, WAIT)
    assert as_reader("/api/v1/namespaces/default/pods") == 403
    # the root CA publisher (controller-manager) put the cluster CA in every namespace
    cm = cluster.wait_for("kube-root-ca.crt", lambda: cluster.get(f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"),
                          WAIT)
    assert cm["data"]["ca.crt"].strip() == (cluster.dir / "pki" / "ca.crt").read_text().strip()


def test_kubeconfig_works_with_the_kubernetes_client(cluster: KubeCluster, nodes):
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    try:
        names = {n.metadata.name for n in client.CoreV1Api(api).list_node().items}
        assert {"cp-a2-node1", "cp-a3-node1"} <= names
    finally:
        api.close()


def test_helm_release_rolls_back_from_a_crashing_revision(cluster: KubeCluster, nodes, tmp_path: Path):
    ns = cluster.create_namespace("cp-helm")
    chart = tmp_path / "engine"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: engine\nversion: 0.1.0\nkubeVersion: '>=1.30.0-0'\n")
    (chart / "values.yaml").write_text("image: registry.local/vllm-ascend:v1\n")
    (chart / "templates" / "deploy.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: 1\n"
        "  selector:\n    matchLabels: {app: {{ .Release.Name }}}\n  template:\n    metadata:\n"
        "      labels: {app: {{ .Release.Name }}}\n    spec:\n      terminationGracePeriodSeconds: 5\n"
        "      containers:\n      - name: engine\n        image: {{ .Values.image | quote }}\n")
    r = cluster.helm_run("upgrade", "--install", "eng", chart, "-n", ns, "--wait", "--timeout", "4m")
    assert r.returncode == 0, r.stdout + r.stderr
    assert cluster.get(f"/api/v1/namespaces/{ns}/secrets/sh.helm.release.v1.eng.v1")
    r = cluster.helm_run("upgrade", "eng", chart, "-n", ns, "--set", "image=registry.local/vllm-ascend:v2-fault-crash",
                         "--wait", "--timeout", "25s")
    assert r.returncode != 0, r.stdout + r.stderr
    crashing = cluster.wait_for("a crash-looping pod of revision 2", lambda: [
        p for p in cluster.pods(ns, "app=eng") if waiting_reason(p) == "CrashLoopBackOff"], WAIT)
    assert crashing[0]["spec"]["containers"][0]["image"].endswith("fault-crash")
    r = cluster.helm_run("rollback", "eng", "1", "-n", ns, "--wait", "--timeout", "4m")
    assert r.returncode == 0, r.stdout + r.stderr

    def healthy():
        ps = cluster.pods(ns, "app=eng")
        return ps and all(p["spec"]["containers"][0]["image"].endswith(":v1") and
                          condition(p, "Ready").get("status") == "True" for p in ps)

    cluster.wait_for("only revision-1 pods, Ready", healthy, WAIT)
    r = cluster.helm_run("history", "eng", "-n", ns, "-o", "json")
    assert [h["status"] for h in json.loads(r.stdout)] == ["superseded", "failed", "deployed"], r.stdout
