"""The Infer Operator stand-in (tests/k8s_standins/infer_operator.py) against the real control plane: MindCluster's
CRDs (tests/fixtures/crds/, mind-cluster 22bb3d98 = v26.1) in the real API server, the workloads' pods made by the
real kube-controller-manager and run by kwok, the children removed by the real garbage collector.

What each assertion expects is what upstream's operator writes (component/infer-operator at 22bb3d98; the file and
line of each behaviour are in the stand-in)."""

from __future__ import annotations

import copy
import secrets

import pytest
import yaml

from conftest import ROOT
from kube_e2e import install_crds, remove_crds
from k8s_standins.infer_operator import (GANG_SCHEDULE_LABEL, GROUP_NAME_ANNOTATION, INFERSERVICE_INDEX_LABEL,
                                         INFERSERVICE_NAME_LABEL, INFERSERVICESET_NAME_LABEL, INSTANCE_INDEX_LABEL,
                                         INSTANCESET_NAME_LABEL, OPERATOR_LABEL, SCHEDULING_STRATEGY_LABEL,
                                         InferOperator)

# uses the session's control plane (k8s_cluster): e2e
pytestmark = pytest.mark.e2e

CRDS = ROOT / "tests" / "fixtures" / "crds" / "mindcluster-infer-operator-v26.1-crds.yaml"
VOLCANO_CRD = ROOT / "tests" / "fixtures" / "crds" / "volcano-v1.15.1-podgroups.yaml"
MC = "/apis/mindcluster.huawei.com/v1/namespaces/{ns}/{plural}"


@pytest.fixture(scope="module")
def infer_cluster(k8s_cluster):
    """The session's control plane with the Infer Operator's CRDs and two simulated nodes of this module."""
    cluster = k8s_cluster
    suffix = secrets.token_hex(2)
    crds = install_crds(cluster, CRDS)
    nodes = [f"iop-node1-{suffix}", f"iop-node2-{suffix}"]
    cluster.add_nodes([{"name": nodes[0], "ip": "10.239.0.2"}, {"name": nodes[1], "ip": "10.239.0.3"}])
    try:
        yield cluster
    finally:
        cluster.remove_nodes(nodes)
        remove_crds(cluster, crds)


@pytest.fixture
def ns(infer_cluster, k8s_ns):
    return infer_cluster.create_namespace(k8s_ns)


def container(name: str, image: str = "registry.local/vllm-ascend:v0.9.1") -> dict:
    return {"name": name, "image": image, "env": [{"name": "ROLE_ENV", "value": name}]}


def iss_manifest(name: str, *, prefill_instances: int = 2, gang: str | None = None) -> dict:
    """Two roles as MindCluster's vLLM example lays them out (docs/zh/.../01_deploying_infer_operator_inference_job_
    with_vllm_proxy.md L47-159): prefill a StatefulSet (2 instances x 2 pods), router a Deployment with a Service."""
    prefill_labels = {"team": "llm"} | ({GANG_SCHEDULE_LABEL: gang} if gang is not None else {})
    return {
        "apiVersion": "mindcluster.huawei.com/v1", "kind": "InferServiceSet",
        "metadata": {"name": name},
        "spec": {"replicas": 1, "template": {"roles": [
            {"name": "prefill", "replicas": prefill_instances,
             "workload": {"apiVersion": "apps/v1", "kind": "StatefulSet"},
             "metadata": {"labels": prefill_labels, "annotations": {"note": "prefill"}},
             "spec": {"replicas": 2, "podManagementPolicy": "Parallel",
                      "selector": {"matchLabels": {"app": "prefill"}},
                      "template": {"metadata": {"labels": {"app": "prefill", "fault-scheduling": "grace"}},
                                   "spec": {"containers": [container("engine") | {
                                       "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}}}},
            {"name": "router", "replicas": 1,
             "workload": {"apiVersion": "apps/v1", "kind": "Deployment"},
             "services": [{"name": "vllm-router-service",
                           "spec": {"type": "ClusterIP", "selector": {"app": "router"},
                                    "ports": [{"name": "http", "port": 1026, "targetPort": 1026}]}}],
             "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "router"}},
                      "template": {"metadata": {"labels": {"app": "router"}},
                                   "spec": {"containers": [container("router")]}}}}]}}}


def _ready(obj: dict | None) -> dict | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready":
            return c
    return None


def _pods_ready(cluster, ns, selector, n) -> bool:
    pods = cluster.pods(ns, selector)
    return len(pods) == n and all(any(c["type"] == "Ready" and c["status"] == "True"
                                      for c in (p.get("status") or {}).get("conditions") or []) for p in pods)


def _owner(obj: dict) -> dict:
    (ref,) = obj["metadata"]["ownerReferences"]
    return ref


def test_an_inferserviceset_gets_its_children_ready_pods_and_status(infer_cluster, ns):
    cluster = infer_cluster
    with InferOperator(cluster, ns) as op:
        iss = cluster.create(MC.format(ns=ns, plural="inferservicesets"), iss_manifest("demo"))
        apps = f"/apis/apps/v1/namespaces/{ns}"
        core = f"/api/v1/namespaces/{ns}"
        cluster.wait_for("the ISS Ready", lambda: (_ready(cluster.get(
            MC.format(ns=ns, plural="inferservicesets") + "/demo")) or {}).get("status") == "True", timeout=90)

        # InferService demo-0 (ISS L404-416)
        svc = cluster.get(MC.format(ns=ns, plural="inferservices") + "/demo-0")
        assert svc["metadata"]["labels"] == {INFERSERVICESET_NAME_LABEL: "demo", INFERSERVICE_INDEX_LABEL: "0"}
        assert _owner(svc) == {"apiVersion": "mindcluster.huawei.com/v1", "kind": "InferServiceSet", "name": "demo",
                               "uid": iss["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
        assert svc["spec"] == iss["spec"]["template"]

        # InstanceSets <is>-<role> (IS L478-527)
        ists = {i["metadata"]["name"]: i for i in cluster.get(MC.format(ns=ns, plural="instancesets"))["items"]}
        assert set(ists) == {"demo-0-prefill", "demo-0-router"}
        assert ists["demo-0-prefill"]["metadata"]["labels"] == {
            "team": "llm", INFERSERVICE_NAME_LABEL: "demo-0", INSTANCESET_NAME_LABEL: "prefill",
            SCHEDULING_STRATEGY_LABEL: "Parallel"}
        assert ists["demo-0-prefill"]["metadata"]["annotations"] == {"note": "prefill"}
        assert ists["demo-0-prefill"]["spec"] == iss["spec"]["template"]["roles"][0]
        assert _owner(ists["demo-0-router"])["name"] == "demo-0" and _owner(ists["demo-0-router"])["controller"]

        # workloads <is>-<role>-<idx> (STS L157-226, DEP L179-242)
        stss = {s["metadata"]["name"]: s for s in cluster.get(f"{apps}/statefulsets")["items"]}
        assert set(stss) == {"demo-0-prefill-0", "demo-0-prefill-1"}
        sts = stss["demo-0-prefill-1"]
        indexer = {INFERSERVICE_NAME_LABEL: "demo-0", INSTANCESET_NAME_LABEL: "prefill", INSTANCE_INDEX_LABEL: "1",
                   OPERATOR_LABEL: "true"}
        assert sts["metadata"]["labels"] == {"team": "llm", SCHEDULING_STRATEGY_LABEL: "Parallel",
                                             "fault-scheduling": "grace", **indexer}
        assert sts["metadata"]["annotations"] == {"note": "prefill"}
        assert _owner(sts)["kind"] == "InstanceSet" and _owner(sts)["name"] == "demo-0-prefill"
        assert sts["spec"]["serviceName"] == "service-demo-0-prefill-1"
        assert sts["spec"]["selector"] == {"matchLabels": {"app": "prefill"}}       # the role's, unchanged
        assert sts["spec"]["podManagementPolicy"] == "Parallel" and sts["spec"]["replicas"] == 2
        tmpl = sts["spec"]["template"]
        assert tmpl["metadata"]["labels"] == {"app": "prefill", "fault-scheduling": "grace", **indexer}
        assert GROUP_NAME_ANNOTATION not in (tmpl["metadata"].get("annotations") or {})
        assert tmpl["spec"]["containers"][0]["env"] == [
            {"name": "ROLE_ENV", "value": "engine"}, {"name": "INSTANCE_INDEX", "value": "1"},
            {"name": "INSTANCE_ROLE", "value": "prefill"}, {"name": "INFER_SERVICE_INDEX", "value": "0"},
            {"name": "INFER_SERVICE_NAME", "value": "demo"}]
        (dep,) = cluster.get(f"{apps}/deployments")["items"]
        assert dep["metadata"]["name"] == "demo-0-router-0"
        assert dep["spec"]["template"]["metadata"]["labels"] == {
            "app": "router", INFERSERVICE_NAME_LABEL: "demo-0", INSTANCESET_NAME_LABEL: "router",
            INSTANCE_INDEX_LABEL: "0", OPERATOR_LABEL: "true"}

        # Services: headless per StatefulSet instance, the role's service, none per instance of the router (it has one)
        services = {s["metadata"]["name"]: s for s in cluster.get(f"{core}/services")["items"]}
        assert set(services) == {"service-demo-0-prefill-0", "service-demo-0-prefill-1",
                                 "vllm-router-service-demo-0-router"}
        head = services["service-demo-0-prefill-0"]
        assert head["spec"]["clusterIP"] == "None"
        assert head["spec"]["selector"] == {**indexer, INSTANCE_INDEX_LABEL: "0"}
        assert [(p["name"], p["port"]) for p in head["spec"]["ports"]] == [("infer", 8080)]
        role_svc = services["vllm-router-service-demo-0-router"]
        assert role_svc["spec"]["selector"] == {"app": "router"} and role_svc["spec"]["ports"][0]["port"] == 1026
        assert role_svc["metadata"]["labels"] == {
            INFERSERVICE_NAME_LABEL: "demo-0", INSTANCESET_NAME_LABEL: "router", SCHEDULING_STRATEGY_LABEL: "Parallel",
            INSTANCE_INDEX_LABEL: "", OPERATOR_LABEL: "true"}

        # pods made by the real controllers, run by kwok
        assert _pods_ready(cluster, ns, f"{INSTANCESET_NAME_LABEL}=prefill", 4)
        assert _pods_ready(cluster, ns, f"{INSTANCESET_NAME_LABEL}=router", 1)
        assert {p["metadata"]["name"] for p in cluster.pods(ns, f"{INSTANCESET_NAME_LABEL}=prefill")} == {
            "demo-0-prefill-0-0", "demo-0-prefill-0-1", "demo-0-prefill-1-0", "demo-0-prefill-1-1"}

        # status as upstream writes it (IST L362-398, IS L306-352, ISS L268-313)
        for name in ists:
            ist = cluster.get(MC.format(ns=ns, plural="instancesets") + f"/{name}")
            assert {k: ist["status"][k] for k in ("replicas", "readyReplicas", "observedGeneration")} == {
                "replicas": 2 if name.endswith("prefill") else 1, "readyReplicas": 2 if name.endswith("prefill") else 1,
                "observedGeneration": ist["metadata"]["generation"]}
            assert {k: _ready(ist)[k] for k in ("status", "reason", "message")} == {
                "status": "True", "reason": "AllWorkLoadReady", "message": "All WorkLoad replicas are ready"}
        svc = cluster.get(MC.format(ns=ns, plural="inferservices") + "/demo-0")
        assert (svc["status"]["replicas"], svc["status"]["readyReplicas"]) == (2, 2)
        assert {k: _ready(svc)[k] for k in ("status", "reason", "message")} == {
            "status": "True", "reason": "AllInstanceSetsReady", "message": "All InstanceSet replicas are ready"}
        iss = cluster.get(MC.format(ns=ns, plural="inferservicesets") + "/demo")
        assert (iss["status"]["replicas"], iss["status"]["readyReplicas"]) == (1, 1)
        assert iss["status"]["observedGeneration"] == iss["metadata"]["generation"]
        assert {k: _ready(iss)[k] for k in ("status", "reason", "message")} == {
            "status": "True", "reason": "AllInferServicesReady", "message": "All InferService replicas are ready"}
        assert not [e for e in op.errors if "requeue" not in e], op.errors

        # the operator sets no selector of its own (STS L157-226): a role without one gets a workload the API server
        # refuses (a RequeueError, STS L220-224), and its InstanceSet stays not ready
        bad = iss_manifest("nosel", prefill_instances=1)
        bad["spec"]["template"]["roles"] = bad["spec"]["template"]["roles"][:1]
        del bad["spec"]["template"]["roles"][0]["spec"]["selector"]
        cluster.create(MC.format(ns=ns, plural="inferservicesets"), bad)
        ist = cluster.wait_for("the InstanceSet's status", lambda: _ready(cluster.get(
            MC.format(ns=ns, plural="instancesets") + "/nosel-0-prefill")))
        assert {k: ist[k] for k in ("status", "reason", "message")} == {
            "status": "False", "reason": "ReplicasNotReady", "message": "0 of 1 InferService replicas are ready"}
        assert cluster.get(f"{apps}/statefulsets/nosel-0-prefill-0") is None
        assert any("nosel-0-prefill (requeue)" in e and "selector" in e for e in op.errors), op.errors


def test_gang_schedule_needs_volcano_and_then_gets_a_podgroup_per_instance(infer_cluster, ns):
    """IST L239-247: gang-schedule "true" without Volcano's PodGroup CRD at the operator's start is a ValidateError
    event and no workload; with it, a PodGroup pg-<is>-<role>-<idx> per instance with minMember = the pods of the
    instance (WR L75-96, PG L109-138) and the pods' group-name annotation (STS L186-189)."""
    cluster = infer_cluster
    apps = f"/apis/apps/v1/namespaces/{ns}"
    with InferOperator(cluster, ns) as op:
        assert not op.support_podgroup
        cluster.create(MC.format(ns=ns, plural="inferservicesets"), iss_manifest("nogang", gang="true"))
        events = cluster.wait_for("the ValidateError event", lambda: cluster.events_for(ns, "nogang-0-prefill",
                                                                                        "InstanceSet"))
        assert [(e["type"], e["reason"], e["message"]) for e in events] == [(
            "Warning", "ValidateError",
            "label gang-schedule is true, but PodGroup not supported now, please check if volcano installed in k8s")]
        cluster.wait_for("the router's Deployment", lambda: cluster.get(f"{apps}/deployments/nogang-0-router-0"))
        assert not cluster.get(f"{apps}/statefulsets")["items"]
        assert not (cluster.get(MC.format(ns=ns, plural="instancesets") + "/nogang-0-prefill").get("status") or {})
        iss = cluster.get(MC.format(ns=ns, plural="inferservicesets") + "/nogang")
        assert _ready(iss)["status"] == "False" and _ready(iss)["message"] == "0 of 1 InferService replicas are ready"

    volcano = install_crds(cluster, VOLCANO_CRD)
    try:
        with InferOperator(cluster, ns) as op:
            assert op.support_podgroup
            cluster.create(MC.format(ns=ns, plural="inferservicesets"), iss_manifest("gang", gang="true"))
            pgs = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups"
            # the InstanceSet refused before now goes on too: the CRD is checked when the operator starts (IST L480)
            cluster.wait_for("a PodGroup per instance of both", lambda: {p["metadata"]["name"] for p in cluster.get(
                pgs)["items"]} == {f"pg-{iss}-0-prefill-{i}" for iss in ("gang", "nogang") for i in (0, 1)})
            pg = cluster.get(f"{pgs}/pg-gang-0-prefill-1")
            assert pg["spec"]["minMember"] == 2
            assert pg["spec"]["minResources"] == {"cpu": "1", "memory": "2Gi"}
            assert pg["metadata"]["labels"][INSTANCE_INDEX_LABEL] == "1"
            assert pg["metadata"]["labels"][GANG_SCHEDULE_LABEL] == "true"
            assert _owner(pg)["name"] == "gang-0-prefill"
            sts = cluster.wait_for("the StatefulSet", lambda: cluster.get(f"{apps}/statefulsets/gang-0-prefill-1"))
            assert sts["spec"]["template"]["metadata"]["annotations"] == {GROUP_NAME_ANNOTATION: "pg-gang-0-prefill-1"}
            cluster.wait_for("the pods carry the group name", lambda: sorted(
                p["metadata"]["annotations"].get(GROUP_NAME_ANNOTATION, "") for p in cluster.pods(
                    ns, f"{INFERSERVICE_NAME_LABEL}=gang-0,{INSTANCESET_NAME_LABEL}=prefill")) == [
                "pg-gang-0-prefill-0", "pg-gang-0-prefill-0", "pg-gang-0-prefill-1", "pg-gang-0-prefill-1"])
            # no wait for the garbage collector here: it sees a new CRD's objects only after its next discovery
            # (kube-controller-manager resyncs every 30 s); the namespace's deletion removes the PodGroups
    finally:
        remove_crds(cluster, volcano)


def test_a_role_change_reaches_the_instanceset_new_instances_only_and_deleting_the_iss_removes_everything(
        infer_cluster, ns):
    """Upstream updates the InstanceSet's spec (IS L369-405) but never an existing workload (STS L111-155 only
    creates): a changed pod template reaches instances created afterwards; role.replicas adds and removes instances
    (STS L268-306); deleting the InferServiceSet removes every child through the garbage collector (last in the
    module: the collector follows owners of a new CRD's kinds only after its next discovery, every 30 s)."""
    cluster = infer_cluster
    iss_path = MC.format(ns=ns, plural="inferservicesets") + "/demo"
    ist_path = MC.format(ns=ns, plural="instancesets") + "/demo-0-prefill"
    apps = f"/apis/apps/v1/namespaces/{ns}"
    core = f"/api/v1/namespaces/{ns}"
    with InferOperator(cluster, ns):
        cluster.create(MC.format(ns=ns, plural="inferservicesets"), iss_manifest("demo"))
        cluster.wait_for("the ISS Ready", lambda: (_ready(cluster.get(iss_path)) or {}).get("status") == "True",
                         timeout=90)
        before = cluster.get(f"{apps}/statefulsets/demo-0-prefill-0")

        iss = cluster.get(iss_path)
        template = copy.deepcopy(iss["spec"]["template"])
        template["roles"][0]["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.local/vllm-ascend:v2"
        template["roles"][0]["replicas"] = 3
        cluster.patch(iss_path, {"spec": {"template": template}})
        cluster.wait_for("a third prefill instance", lambda: cluster.get(f"{apps}/statefulsets/demo-0-prefill-2"))
        cluster.wait_for("the InstanceSet's spec updated", lambda: cluster.get(ist_path)["spec"] == template["roles"][0])
        assert cluster.get(f"{MC.format(ns=ns, plural='inferservices')}/demo-0")["spec"] == template

        def image(name):
            return cluster.get(f"{apps}/statefulsets/{name}")["spec"]["template"]["spec"]["containers"][0]["image"]
        assert image("demo-0-prefill-2") == "registry.local/vllm-ascend:v2"
        assert image("demo-0-prefill-0") == "registry.local/vllm-ascend:v0.9.1"
        assert cluster.get(f"{apps}/statefulsets/demo-0-prefill-0")["metadata"]["generation"] == \
            before["metadata"]["generation"]
        assert cluster.get(f"{core}/services/service-demo-0-prefill-2")
        cluster.wait_for("the InstanceSet Ready with 3 instances", lambda: (
            (cluster.get(ist_path).get("status") or {}).get("readyReplicas") == 3
            and _ready(cluster.get(ist_path))["status"] == "True"), timeout=90)

        template["roles"][0]["replicas"] = 1
        cluster.patch(iss_path, {"spec": {"template": template}})
        cluster.wait_for("instances 1 and 2 removed", lambda: {s["metadata"]["name"] for s in cluster.get(
            f"{apps}/statefulsets")["items"]} == {"demo-0-prefill-0"})
        cluster.wait_for("their Services removed", lambda: {s["metadata"]["name"] for s in cluster.get(
            f"{core}/services")["items"]} == {"service-demo-0-prefill-0", "vllm-router-service-demo-0-router"})

        cluster.delete(iss_path)
        gone = [MC.format(ns=ns, plural="inferservices"), MC.format(ns=ns, plural="instancesets"),
                f"{apps}/statefulsets", f"{apps}/deployments", f"{core}/services", f"{core}/pods"]
        cluster.wait_for("every child gone", lambda: all(not cluster.get(p)["items"] for p in gone), timeout=120)
