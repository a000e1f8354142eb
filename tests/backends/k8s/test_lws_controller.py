"""The LeaderWorkerSet controller on the test control plane (scripts/k8s-test-cluster up --lws): the real
lws-manager built from its Go module, with its CRDs and webhooks, placing the pods of a LeaderWorkerSet on
kwok's simulated Ascend nodes and restarting a whole group when one of its pods is deleted
(docs/dev/k8s-test-cluster.md). These tests never skip.
"""

from __future__ import annotations

import subprocess

import pytest

from k8scluster import NPU, KubeCluster, cluster_fixture, tool

# the module starts a control plane of its own: e2e
pytestmark = pytest.mark.e2e

LWS_API = "/apis/leaderworkerset.x-k8s.io/v1"
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
WAIT = 120          # seconds: the machine is small and may be busy


@pytest.fixture(scope="module")
def cluster():
    yield from cluster_fixture(lws=True)


@pytest.fixture(scope="module")
def ns(cluster: KubeCluster) -> str:
    cluster.add_nodes([{"name": "lws-node1", "ip": "10.210.0.2", "accelerator_type": "module-910b-8"},
                       {"name": "lws-node2", "ip": "10.210.0.3", "accelerator_type": "module-910b-8"}])
    return cluster.create_namespace("t-lws")


def engine_template(role: str) -> dict:
    npus = {NPU: "8"}
    return {"metadata": {"labels": {"role": role}},
            "spec": {"containers": [{"name": "engine", "image": "registry.local/vllm-ascend:v0.9.1",
                                     "command": ["sh", "-c", "sleep infinity"],
                                     "resources": {"requests": npus, "limits": npus}}]}}


def leader_worker_set(name: str) -> dict:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": name},
            "spec": {"replicas": 1,
                     "rolloutStrategy": {"type": "RollingUpdate",
                                         "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0}},
                     "leaderWorkerTemplate": {"size": 2, "restartPolicy": "RecreateGroupOnPodRestart",
                                              "leaderTemplate": engine_template("leader"),
                                              "workerTemplate": engine_template("worker")}}}


def ready(p: dict) -> bool:
    st = p.get("status", {})
    return st.get("phase") == "Running" and any(c["type"] == "Ready" and c["status"] == "True"
                                                for c in st.get("conditions") or [])


def settled_group(cluster: KubeCluster, ns: str, name: str, old_uids: set[str] = frozenset()) -> dict | None:
    """{pod name: pod} when the group is whole: the leader and its worker Running and Ready, none of them
    being deleted or one of old_uids, and the worker made by the worker StatefulSet of the current leader
    (the old leader's StatefulSet, of the same name, may still recreate a worker while it is deleted)."""
    pods = {p["metadata"]["name"]: p for p in cluster.pods(ns, f"{NAME_LABEL}={name}")}
    if set(pods) != {f"{name}-0", f"{name}-0-1"}:
        return None
    if any(p["metadata"].get("deletionTimestamp") or p["metadata"]["uid"] in old_uids or not ready(p)
           for p in pods.values()):
        return None
    sts = cluster.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/{name}-0")
    leader_uid = pods[f"{name}-0"]["metadata"]["uid"]
    worker_owner = [o["uid"] for o in pods[f"{name}-0-1"]["metadata"].get("ownerReferences", [])]
    if not sts or [o["uid"] for o in sts["metadata"].get("ownerReferences", [])] != [leader_uid] \
            or worker_owner != [sts["metadata"]["uid"]]:
        return None
    return pods


def lws_available(cluster: KubeCluster, ns: str, name: str) -> dict | None:
    obj = cluster.get(f"{LWS_API}/namespaces/{ns}/leaderworkersets/{name}") or {}
    st = obj.get("status") or {}
    ok = st.get("readyReplicas") == 1 and any(c["type"] == "Available" and c["status"] == "True"
                                              for c in st.get("conditions") or [])
    return obj if ok else None


def test_the_manager_is_the_pinned_release(cluster: KubeCluster):
    pinned = tool.pins()["lws"]
    assert cluster.lws == pinned == "v0.9.0"
    out = subprocess.run([str(cluster.bin_dir / "lws-manager"), "--version"], capture_output=True, text=True)
    assert f"Version: {pinned}" in out.stdout + out.stderr
    for crd in ("leaderworkersets.leaderworkerset.x-k8s.io", "disaggregatedsets.disaggregatedset.x-k8s.io"):
        assert cluster.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}"), crd


def test_pods_of_a_group_are_placed_and_recreated_together(cluster: KubeCluster, ns: str):
    created = cluster.create(f"{LWS_API}/namespaces/{ns}/leaderworkersets", leader_worker_set("inst0"))
    # the LeaderWorkerSet mutating webhook defaulted what the object left out
    assert created["spec"]["networkConfig"] == {"subdomainPolicy": "Shared"}

    pods = cluster.wait_for("the group Running and Ready", lambda: settled_group(cluster, ns, "inst0"), WAIT)
    assert {p["spec"]["nodeName"] for p in pods.values()} == {"lws-node1", "lws-node2"}
    for name, index in (("inst0-0", "0"), ("inst0-0-1", "1")):
        p = pods[name]
        # the pod mutating webhook: the worker index label and the LWS_* environment
        assert p["metadata"]["labels"][INDEX_LABEL] == index
        env = {e["name"]: e.get("value") for e in p["spec"]["containers"][0]["env"]}
        assert env["LWS_WORKER_INDEX"] == index
        assert env["LWS_GROUP_SIZE"] == "2"
        assert env["LWS_LEADER_ADDRESS"] == f"inst0-0.inst0.{ns}"
    assert pods["inst0-0"]["metadata"]["labels"]["role"] == "leader"
    assert pods["inst0-0-1"]["metadata"]["labels"]["role"] == "worker"
    obj = cluster.wait_for("the LeaderWorkerSet Available", lambda: lws_available(cluster, ns, "inst0"), WAIT)
    assert obj["status"]["readyReplicas"] == 1

    # deleting the worker restarts the whole group (the leader too), every time
    for attempt in range(3):
        old = {p["metadata"]["uid"] for p in pods.values()}
        status, body = cluster.delete(f"/api/v1/namespaces/{ns}/pods/inst0-0-1")
        assert status == 200, body
        pods = cluster.wait_for(f"the group recreated (delete {attempt + 1})",
                                lambda: settled_group(cluster, ns, "inst0", old), WAIT)
        assert not {p["metadata"]["uid"] for p in pods.values()} & old
    # the controller says why (event reason RecreateGroup: "Worker pod inst0-0-1 failed, deleted leader pod ...")
    events = (cluster.get(f"/api/v1/namespaces/{ns}/events?fieldSelector=reason%3DRecreateGroup") or {})["items"]
    assert any("inst0-0-1" in e.get("message", "") for e in events), events
    cluster.wait_for("the LeaderWorkerSet Available again", lambda: lws_available(cluster, ns, "inst0"), WAIT)
