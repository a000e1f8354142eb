"""`up | status | diff | down --target k8s` end to end: the deployctl CLI, helm v3.22 and the official
kubernetes client against a real control plane (tests/k8scluster.py: kube-apiserver, controller-manager
and scheduler v1.36, etcd, kwok playing the kubelets of simulated Ascend nodes). What deployctl and helm
wrote is read from the API server's audit log; a pod is made to fail by the kwok fault stages
(docs/dev/k8s-test-cluster.md), the scheduler's refusals are the scheduler's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kube_e2e import (FAULT_PODS, NPU, READY, WAIT, cli, created, get, helm_revisions, inventory, leases,
                          objects, rendered_objects, resource_versions, servers)

STEM = "a2-2x8-tp-pp"
PREFIX = "ds32-2x8-ascend-llm"
MASTER, WORKER = f"{PREFIX}-mixed-master-0", f"{PREFIX}-mixed-worker-0"


def test_up_creates_exactly_the_rendered_objects_then_status_diff_rerun_down(k8s_cluster, k8s_ns, tmp_path):
    cluster, ns = k8s_cluster, k8s_ns
    servers(cluster, STEM)
    inv = inventory(tmp_path, STEM, cluster, ns)
    expected = rendered_objects(tmp_path, cluster, inv)
    assert ("StatefulSet", f"{PREFIX}-mixed-master") in expected

    mark = cluster.audit_mark()
    res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(inv), "-y", "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"✓ serving through Service {PREFIX}.{ns}:1025" in res.stdout
    writes = cluster.writes(mark)
    assert created(writes) == expected
    # every write succeeded, but clearing the run notes of an older install of that name (there was none)
    assert [(w["verb"], w["kind"], w["name"], w["code"]) for w in writes if w["code"] not in (200, 201)] == [
        ("delete", "ConfigMap", "deployctl-ds32-2x8-runs", 404)]
    namespace = cluster.get(f"/api/v1/namespaces/{ns}")   # created by deployctl, for hostNetwork/hostPath pods
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert ("create", "Namespace", ns) in {(w["verb"], w["kind"], w["name"]) for w in writes}
    pods = {p["metadata"]["name"]: p for p in objects(cluster, "Pod", ns)}
    assert set(pods) == {MASTER, WORKER}
    assert pods[MASTER]["spec"]["nodeName"] == "node1"          # the rank table's master, placed by the scheduler
    assert pods[WORKER]["spec"]["nodeName"] == "node2"
    assert pods[WORKER]["status"]["podIP"] == "10.200.2.3"      # hostNetwork: the node's InternalIP
    files = get(cluster, "ConfigMap", ns, f"{PREFIX}-mixed-files")["data"]
    assert files["ranktable.json"].encode() == (
        Path(__file__).parents[2] / "golden" / STEM / "node1" / "ranktable.json").read_bytes()
    assert files["config.json"].encode() == (
        Path(__file__).parents[2] / "golden" / STEM / "node1" / "config.json").read_bytes()
    assert leases(cluster, ns) == []                              # the lock is released

    res = cli(tmp_path, cluster, "status", "-t", "k8s", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["degraded"] is False and doc["ready"] == {"mixed": 2}
    # a cluster serving no PodGroup API: status says the pods are scheduled one by one
    assert len(doc["gang"]) == 1 and doc["gang"][0].startswith("gang: none")

    # the objects as the API server stores them (defaults, managedFields, status) are the rendered ones
    res = cli(tmp_path, cluster, "diff", "-t", "k8s", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stderr
    assert {o["change"] for o in json.loads(res.stdout)["objects"]} == {"unchanged"}

    # a second up writes nothing: no request in the audit log, every object at the same resourceVersion
    # and generation, no new helm revision, no Lease taken
    before, revisions = resource_versions(cluster, ns), helm_revisions(cluster, ns)
    mark = cluster.audit_mark()
    res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(inv), "-y")
    assert res.returncode == 0 and "nothing to do" in res.stdout, res.stdout + res.stderr
    assert cluster.writes(mark) == []
    assert resource_versions(cluster, ns) == before
    assert helm_revisions(cluster, ns) == revisions == [1]

    mark = cluster.audit_mark()
    res = cli(tmp_path, cluster, "down", "-t", "k8s", "-i", str(inv))
    assert res.returncode == 0, res.stderr
    assert objects(cluster, "StatefulSet", ns) == [] and objects(cluster, "Pod", ns) == []
    deleted = {(w["kind"], w["name"]) for w in cluster.writes(mark) if w["verb"] == "delete" and w["code"] == 200}
    assert expected <= deleted
    assert helm_revisions(cluster, ns) == [] and leases(cluster, ns) == []


def test_pod_that_never_becomes_ready_is_named_and_the_install_is_undone(k8s_cluster, k8s_ns, tmp_path):
    """One pod of the two never passes its readiness probe: kwok's never-ready fault, selected for that pod
    by name (annotation deployctl.test/fault-pods through the chart's podAnnotations)."""
    cluster, ns = k8s_cluster, k8s_ns
    servers(cluster, STEM)
    inv = inventory(tmp_path, STEM, cluster, ns, values={"podAnnotations": {FAULT_PODS: f"{WORKER}=never-ready"}})
    # the timeout the never-ready worker waits out: the master, Ready in about a second when the machine is idle, and
    # kwok's first failed probe of the worker (Unhealthy) come well within it on a loaded one too
    res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(inv), "-y", "--ready-timeout", "30")
    assert res.returncode == 1, res.stdout + res.stderr
    out = res.stdout
    assert f"pod {WORKER} (mixed) on node2: Running, not ready" in out
    assert "Unhealthy: Readiness probe failed: HTTP probe failed with statuscode: 503" in out
    assert MASTER not in out.split("not ready", 1)[1].split("uninstall")[0]     # the Ready master is not blamed
    assert "✗ up failed; the release was uninstalled" in out
    assert objects(cluster, "StatefulSet", ns) == [] and helm_revisions(cluster, ns) == []
    cluster.wait_for("the pods gone", lambda: objects(cluster, "Pod", ns) == [], WAIT)
    assert leases(cluster, ns) == []
    record = next((tmp_path / ".deployctl" / "runs").glob("*-up-k8s"))
    assert (record / "status").read_text() == "failed\n"
    assert WORKER in (record / "rollout.json").read_text()


@pytest.mark.parametrize("case", ["node-has-fewer-npus", "npus-held-by-another-pod"])
def test_the_scheduler_refusing_a_pod_is_named_with_its_own_event(k8s_cluster, k8s_ns, tmp_path, case):
    """The real scheduler's resource fit: node2 cannot give the worker its 8 huawei.com/Ascend910, so the pod
    stays Pending and `up` fails naming it with the scheduler's FailedScheduling event.

    node-has-fewer-npus: node2 offers 4 (deployctl's Node check would refuse first: --skip-preflight).
    npus-held-by-another-pod: node2 offers 8, but another team's pod holds 6 of them; deployctl's Node check
    (allocatable) passes, only the scheduler knows (the in-repo fake API server these tests used to run against could not show it)."""
    cluster, ns = k8s_cluster, k8s_ns
    other = f"{ns}-other"
    extra: tuple[str, ...] = ()
    if case == "node-has-fewer-npus":
        servers(cluster, STEM, npus={"node2": 4})
        extra = ("--skip-preflight",)
    else:
        servers(cluster, STEM)
        cluster.create_namespace(other)
        cluster.create(f"/api/v1/namespaces/{other}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "holder"},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": "node2"}, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "registry.local/other:1",
                                     "resources": {"limits": {NPU: "6"}, "requests": {NPU: "6"}}}]}})
        cluster.wait_for("the other pod running on node2", lambda: (cluster.pod(other, "holder") or {}).get(
            "status", {}).get("phase") == "Running", WAIT)
    try:
        inv = inventory(tmp_path, STEM, cluster, ns)
        # waited out (the scheduler's refusal is final only after up's 120 s grace): the master is Ready and the
        # scheduler's event written well within it on a loaded machine too
        res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(inv), "-y", "--ready-timeout", "30", *extra)
        assert res.returncode == 1, res.stdout + res.stderr
        out = res.stdout
        failing = out.split(f"✗ pod {WORKER} (mixed)", 1)
        assert len(failing) == 2, out
        block = failing[1].split("· undo", 1)[0]
        assert block.startswith(": Pending, not ready: Unschedulable:"), block
        assert f"Insufficient {NPU}" in block.splitlines()[0]
        assert "FailedScheduling: 0/" in block and f"Insufficient {NPU}" in block.split("FailedScheduling", 1)[1]
        assert MASTER not in block
        assert "✗ up failed; the release was uninstalled" in out
        assert objects(cluster, "StatefulSet", ns) == []
        # the text is the scheduler's own: its event on the pod (kept after the pod went) says the same
        events = [e for e in cluster.events_for(ns, WORKER, "Pod") if e["reason"] == "FailedScheduling"]
        assert events and all(e.get("reportingComponent") == "default-scheduler" or
                              (e.get("source") or {}).get("component") == "default-scheduler" for e in events)
        assert any(e["message"] in block for e in events), (block, [e["message"] for e in events])
    finally:
        if case != "node-has-fewer-npus":
            cluster.delete_namespace(other, wait=True)
        else:
            servers(cluster, STEM)          # node2 back to 8 NPUs for the next tests


def test_pd_split_up_on_kubernetes_places_every_instance_and_mindie_ms(k8s_cluster, k8s_ns, tmp_path):
    """MindIE pd-split on Kubernetes (issue 22 item 6): `up` installs the P and D instances (the decode pods run
    one server per DP rank) and MindIE-MS's controller and coordinator, each pod on the server the rank tables
    name; clients go through the coordinator (tests/backends/k8s/test_chart_mindie_pd.py compares files, env, scripts)."""
    cluster, ns = k8s_cluster, k8s_ns
    stem = "a3-pd-2p1d"
    servers(cluster, stem)
    inv = inventory(tmp_path, stem, cluster, ns)
    res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(inv), "-y", "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    pods = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in objects(cluster, "Pod", ns)}
    prefix = "v32-2p1d-ascend-llm"
    assert {n: pods[n] for n in pods if "-ms-" not in n} == {
        f"{prefix}-prefill-0-master-0": "p1", f"{prefix}-prefill-0-worker-0": "p2",
        f"{prefix}-prefill-1-master-0": "p3", f"{prefix}-prefill-1-worker-0": "p4",
        f"{prefix}-decode-master-0": "d1", f"{prefix}-decode-worker-0": "d2"}
    ms = {n.split("-ms-")[1].split("-")[0]: node for n, node in pods.items() if "-ms-" in n}
    assert ms == {"controller": "p1", "coordinator": "p1"}
    res = cli(tmp_path, cluster, "down", "-t", "k8s", "-i", str(inv))
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("case, expect", [
    ("missing", "no Kubernetes Node named 'node2'"),
    ("wrong-ip", "Node node2 has InternalIP 10.9.9.9, but the rank table names it 10.200.2.3"),
])
def test_node_checks_refuse_before_changing_anything(k8s_cluster, k8s_ns, tmp_path, case, expect):
    cluster, ns = k8s_cluster, k8s_ns
    try:
        if case == "missing":
            servers(cluster, STEM, skip=("node2",))
        else:
            servers(cluster, STEM, ip_of={"node2": "10.9.9.9"})
        inv = inventory(tmp_path, STEM, cluster, ns)
        mark = cluster.audit_mark()
        res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(inv), "-y")
        assert res.returncode == 1
        assert expect in res.stderr + res.stdout
        assert cluster.writes(mark) == []                 # not even the namespace or the Lease
    finally:
        servers(cluster, STEM)
