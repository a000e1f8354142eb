"""Tests of the fake Kubernetes API server, through the clients deployctl uses against a real one: the
official `kubernetes` Python client (kubeconfig from write_kubeconfig) and the real helm binary."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest
from kubernetes import client, config, watch

from fakek8s.patch import json_patch, merge_patch, strategic_merge_patch
from fakek8s.selectors import fields_match, labels_match, parse_field_selector, parse_label_selector
from fakek8s.server import FakeKubeAPI

NPU = "huawei.com/Ascend910"


# ------------------------------------------------------------------------------------------ helpers

@pytest.fixture
def k8s(kubeconfig):
    """(CoreV1Api, AppsV1Api) configured from the generated kubeconfig, as deployctl would do it."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    api_client = client.ApiClient(configuration)
    yield client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    api_client.close()


def statefulset(name="engine", replicas=2, *, npus="8", labels=None, extra_spec=None, pod_spec=None) -> dict:
    labels = labels or {"app": name}
    spec = {"containers": [{"name": "mindie", "image": "mindie:2.0",
                            "resources": {"limits": {NPU: npus}, "requests": {NPU: npus}}}]}
    spec.update(pod_spec or {})
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"serviceName": name, "replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": spec}, **(extra_spec or {})}}


def namespace(core, name="mindie"):
    core.create_namespace({"metadata": {"name": name}})
    return name


def http(api: FakeKubeAPI, method: str, path: str, body=None, content_type="application/json"):
    """A raw request: (status code, parsed JSON body)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(api.url + path, data=data, method=method,
                                     headers={"Content-Type": content_type} if data is not None else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def pods(core, ns, selector):
    return sorted(core.list_namespaced_pod(ns, label_selector=selector).items, key=lambda p: p.metadata.name)


def ready(pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


# ------------------------------------------------------------------------------------------ discovery

def test_discovery_and_version(fake_kube, k8s, kubeconfig):
    core, _ = k8s
    version = client.VersionApi(core.api_client).get_code()
    assert (version.major, version.minor, version.git_version) == ("1", "28", "v1.28.4")
    kube_cfg = json.loads(kubeconfig.read_text())
    assert kube_cfg["current-context"] == "fake" and kube_cfg["clusters"][0]["cluster"]["server"] == fake_kube.url
    assert kubeconfig.stat().st_mode & 0o077 == 0
    with_ns = json.loads(fake_kube.write_kubeconfig(kubeconfig.with_name("kc-ns"), namespace="mindie").read_text())
    assert with_ns["contexts"][0]["context"]["namespace"] == "mindie"
    assert http(fake_kube, "GET", "/api")[1]["versions"] == ["v1"]
    groups = {g["name"] for g in http(fake_kube, "GET", "/apis")[1]["groups"]}
    assert {"apps", "batch", "policy", "rbac.authorization.k8s.io", "networking.k8s.io", "autoscaling"} <= groups
    core_resources = {r["name"]: r for r in http(fake_kube, "GET", "/api/v1")[1]["resources"]}
    assert core_resources["pods"]["kind"] == "Pod" and core_resources["pods"]["namespaced"] is True
    assert core_resources["namespaces"]["namespaced"] is False
    assert "statefulsets/scale" in {r["name"] for r in http(fake_kube, "GET", "/apis/apps/v1")[1]["resources"]}
    code, status = http(fake_kube, "GET", "/apis/example.com/v1/widgets")
    assert (code, status["kind"], status["reason"]) == (404, "Status", "NotFound")
    assert {ns.metadata.name for ns in core.list_namespace().items} == {"default", "kube-system"}


# ------------------------------------------------------------------------------------------ CRUD

def test_namespace_configmap_statefulset_pods_ready(fake_kube, k8s):
    core, apps = k8s
    ns = namespace(core)
    assert core.read_namespace(ns).status.phase == "Active"
    cm = core.create_namespaced_config_map(ns, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="engine-config", labels={"app": "engine"}), data={"config.json": "{}"}))
    assert cm.metadata.uid and int(cm.metadata.resource_version) > 0 and cm.metadata.creation_timestamp
    sts = apps.create_namespaced_stateful_set(ns, client.V1StatefulSet(
        metadata=client.V1ObjectMeta(name="engine"),
        spec=client.V1StatefulSetSpec(
            service_name="engine", replicas=2, selector=client.V1LabelSelector(match_labels={"app": "engine"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "engine", "role": "worker"}),
                spec=client.V1PodSpec(containers=[client.V1Container(
                    name="mindie", image="mindie:2.0",
                    resources=client.V1ResourceRequirements(limits={NPU: "8"}, requests={NPU: "8"}))])))))
    assert sts.metadata.generation == 1 and sts.spec.update_strategy.type == "RollingUpdate"

    found = pods(core, ns, "app=engine,role in (worker,leader),tier!=router")
    assert [p.metadata.name for p in found] == ["engine-0", "engine-1"]
    for index, pod in enumerate(found):
        assert pod.status.phase == "Running" and ready(pod)
        assert pod.status.container_statuses[0].ready is True
        assert pod.status.pod_ip.startswith("10.244.") and pod.spec.node_name == "fake-node"
        assert pod.metadata.labels["statefulset.kubernetes.io/pod-name"] == pod.metadata.name
        assert pod.metadata.labels["apps.kubernetes.io/pod-index"] == str(index)
        assert pod.metadata.owner_references[0].kind == "StatefulSet"
        assert pod.metadata.owner_references[0].uid == sts.metadata.uid
    status = apps.read_namespaced_stateful_set("engine", ns).status
    assert (status.replicas, status.ready_replicas, status.updated_replicas, status.available_replicas) == (2, 2, 2, 2)
    assert status.observed_generation == 1 and status.current_revision == status.update_revision
    assert found[0].metadata.labels["controller-revision-hash"] == status.update_revision
    assert pods(core, ns, "app notin (engine)") == []
    assert [p.metadata.name for p in core.list_namespaced_pod(ns, field_selector="metadata.name=engine-1").items] \
        == ["engine-1"]
    names = [c["metadata"]["name"] for c in fake_kube.objects("configmaps", ns)]
    assert names == ["engine-config", "kube-root-ca.crt"]
    assert fake_kube.get_object("statefulsets", ns, "engine")["status"]["readyReplicas"] == 2


def test_errors_look_like_the_real_api(fake_kube, k8s):
    core, apps = k8s
    ns = namespace(core)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    cases = []
    for call in (lambda: core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}}),
                 lambda: core.read_namespaced_config_map("missing", ns),
                 lambda: core.create_namespaced_config_map("nowhere", {"metadata": {"name": "c"}}),
                 lambda: apps.read_namespaced_stateful_set("missing", ns)):
        with pytest.raises(client.ApiException) as e:
            call()
        body = json.loads(e.value.body)
        cases.append((e.value.status, body["reason"], body["message"]))
    assert cases == [(409, "AlreadyExists", 'configmaps "c" already exists'),
                     (404, "NotFound", 'configmaps "missing" not found'),
                     (404, "NotFound", 'namespaces "nowhere" not found'),
                     (404, "NotFound", 'statefulsets.apps "missing" not found')]

    stale = core.read_namespaced_config_map("c", ns)
    core.patch_namespaced_config_map("c", ns, {"data": {"a": "2"}})
    with pytest.raises(client.ApiException) as e:
        core.replace_namespaced_config_map("c", ns, stale)
    assert e.value.status == 409 and json.loads(e.value.body)["reason"] == "Conflict"

    bad_replicas = statefulset(replicas=1)
    bad_replicas["spec"]["replicas"] = "two"
    unknown_field = statefulset()
    unknown_field["spec"]["template"]["spec"]["containers"][0]["npus"] = 8
    mismatched = statefulset()
    mismatched["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    bad_name = statefulset(name="Engine_1")
    invalid = []
    for body in (bad_replicas, unknown_field, mismatched, bad_name):
        code, status = http(fake_kube, "POST", f"/apis/apps/v1/namespaces/{ns}/statefulsets", body)
        invalid.append((code, status["reason"], status["details"]["causes"][0]["field"]))
    assert invalid == [(422, "Invalid", "spec.replicas"),
                       (422, "Invalid", "spec.template.spec.containers[0].npus"),
                       (422, "Invalid", "spec.template.metadata.labels"),
                       (422, "Invalid", "metadata.name")]
    assert fake_kube.objects("statefulsets", ns) == [] and fake_kube.objects("pods", ns) == []

    sts = apps.create_namespaced_stateful_set(ns, statefulset(replicas=1))
    patch = {"spec": {"serviceName": "renamed"}}
    with pytest.raises(client.ApiException) as e:
        apps.patch_namespaced_stateful_set(sts.metadata.name, ns, patch)
    assert e.value.status == 422 and "Forbidden: updates to statefulset spec" in json.loads(e.value.body)["message"]
    # as on a real server, switching to OnDelete must drop the defaulted rollingUpdate
    with pytest.raises(client.ApiException) as e:
        apps.patch_namespaced_stateful_set(sts.metadata.name, ns, {"spec": {"updateStrategy": {"type": "OnDelete"}}})
    assert json.loads(e.value.body)["details"]["causes"][0]["field"] == "spec.updateStrategy.rollingUpdate"


def test_dry_run_is_not_persisted(fake_kube, k8s):
    core, apps = k8s
    ns = namespace(core)
    created = core.create_namespaced_config_map(ns, {"metadata": {"name": "dry"}}, dry_run="All")
    assert created.metadata.name == "dry"
    apps.create_namespaced_stateful_set(ns, statefulset(), dry_run="All")
    assert fake_kube.get_object("configmaps", ns, "dry") is None
    assert fake_kube.objects("statefulsets", ns) == [] and fake_kube.objects("pods", ns) == []
    core.create_namespaced_config_map(ns, {"metadata": {"name": "real"}, "data": {"a": "1"}})
    core.patch_namespaced_config_map("real", ns, {"data": {"a": "2"}}, dry_run="All")
    core.delete_namespaced_config_map("real", ns, dry_run="All")
    assert fake_kube.get_object("configmaps", ns, "real")["data"] == {"a": "1"}
    assert [r["query"].get("dryRun") for r in fake_kube.requests_to("DELETE")] == ["All"]


def test_patch_content_types(fake_kube, k8s):
    core, apps = k8s
    ns = namespace(core)
    apps.create_namespaced_stateful_set(ns, statefulset(replicas=1, pod_spec={"containers": [
        {"name": "mindie", "image": "mindie:2.0", "env": [{"name": "A", "value": "1"}]},
        {"name": "sidecar", "image": "busybox:1"}]}))
    path = f"/apis/apps/v1/namespaces/{ns}/statefulsets/engine"
    code, obj = http(fake_kube, "PATCH", path, {"spec": {"template": {"spec": {"containers": [
        {"name": "mindie", "image": "mindie:2.1", "env": [{"name": "B", "value": "2"}]}]}}}},
        "application/strategic-merge-patch+json")
    containers = obj["spec"]["template"]["spec"]["containers"]
    assert code == 200 and [c["name"] for c in containers] == ["mindie", "sidecar"]
    assert containers[0]["image"] == "mindie:2.1" and [e["name"] for e in containers[0]["env"]] == ["A", "B"]
    assert obj["metadata"]["generation"] == 2

    code, obj = http(fake_kube, "PATCH", path, {"metadata": {"labels": {"tier": "engine"}}},
                     "application/merge-patch+json")
    assert code == 200 and obj["metadata"]["labels"] == {"tier": "engine"} and obj["metadata"]["generation"] == 2
    code, obj = http(fake_kube, "PATCH", path, [{"op": "test", "path": "/spec/replicas", "value": 1},
                                                {"op": "replace", "path": "/spec/replicas", "value": 3},
                                                {"op": "remove", "path": "/metadata/labels/tier"}],
                     "application/json-patch+json")
    assert code == 200 and obj["spec"]["replicas"] == 3 and "tier" not in obj["metadata"].get("labels", {})
    assert len(fake_kube.objects("pods", ns)) == 3
    code, status = http(fake_kube, "PATCH", path, [{"op": "test", "path": "/spec/replicas", "value": 9}],
                        "application/json-patch+json")
    assert (code, status["reason"]) == (422, "Invalid")
    code, status = http(fake_kube, "PATCH", path, {"spec": {}}, "application/apply-patch+yaml")
    assert code == 415
    assert [r["content_type"] for r in fake_kube.requests_to("PATCH", "/statefulsets/engine")] == [
        "application/strategic-merge-patch+json", "application/merge-patch+json", "application/json-patch+json",
        "application/json-patch+json", "application/apply-patch+yaml"]
    # the kubernetes client sends a dict patch as a strategic merge patch
    apps.patch_namespaced_stateful_set("engine", ns, {"spec": {"replicas": 1}})
    assert fake_kube.requests[-1]["content_type"] == "application/strategic-merge-patch+json"
    assert [p["metadata"]["name"] for p in fake_kube.objects("pods", ns)] == ["engine-0"]


def test_patch_functions():
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None, "d": 3}, "l": [2]}) == \
        {"a": {"c": 2, "d": 3}, "l": [2]}
    base = {"containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 80, "name": "http"}]},
                           {"name": "b", "image": "y"}],
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}
    patched = strategic_merge_patch(base, {
        "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
        "containers": [{"name": "a", "ports": [{"containerPort": 81}]}, {"name": "b", "$patch": "delete"}],
        "strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": None}})
    assert patched == {"containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 80, "name": "http"},
                                                                         {"containerPort": 81}]}],
                       "strategy": {"type": "Recreate"}}
    assert json_patch({"a": [1, 2]}, [{"op": "add", "path": "/a/-", "value": 3},
                                      {"op": "move", "from": "/a/0", "path": "/b"},
                                      {"op": "copy", "from": "/b", "path": "/c~1d"}]) == {"a": [2, 3], "b": 1, "c/d": 1}


def test_selectors():
    requirements = parse_label_selector("app=engine,role!=router,tier in (a, b),!canary,zone,gpu notin (x)")
    assert labels_match(requirements, {"app": "engine", "tier": "b", "zone": "z1"})
    assert not labels_match(requirements, {"app": "engine", "tier": "c", "zone": "z1"})
    assert not labels_match(requirements, {"app": "engine", "tier": "a", "zone": "z1", "canary": "1"})
    assert not labels_match(requirements, {"app": "engine", "tier": "a"})
    fields = parse_field_selector("involvedObject.name=engine-0,type!=Normal")
    assert fields_match(fields, {"involvedObject": {"name": "engine-0"}, "type": "Warning"})
    assert not fields_match(fields, {"involvedObject": {"name": "engine-0"}, "type": "Normal"})


# ------------------------------------------------------------------------------------------ controllers

def test_statefulset_controller_updates_scales_and_recreates(fake_kube, k8s):
    core, apps = k8s
    ns = namespace(core)
    apps.create_namespaced_stateful_set(ns, statefulset(replicas=2))
    uids = {p.metadata.name: p.metadata.uid for p in pods(core, ns, "app=engine")}
    # RollingUpdate: a template change replaces every pod
    apps.patch_namespaced_stateful_set("engine", ns, {"spec": {"template": {"metadata": {"annotations": {"v": "2"}}}}})
    after = {p.metadata.name: p for p in pods(core, ns, "app=engine")}
    assert set(after) == set(uids) and all(after[n].metadata.uid != uids[n] for n in uids)
    assert all(p.metadata.annotations == {"v": "2"} and ready(p) for p in after.values())
    status = apps.read_namespaced_stateful_set("engine", ns).status
    assert status.current_revision == status.update_revision and status.updated_replicas == 2
    assert len(fake_kube.objects("controllerrevisions", ns)) == 2
    # OnDelete: a template change leaves the pods until they are deleted
    apps.patch_namespaced_stateful_set("engine", ns, {"spec": {"updateStrategy": {"type": "OnDelete",
                                                                                    "rollingUpdate": None},
                                                               "template": {"metadata": {"annotations": {"v": "3"}}}}})
    kept = {p.metadata.name: p for p in pods(core, ns, "app=engine")}
    assert all(kept[n].metadata.uid == after[n].metadata.uid for n in kept)
    status = apps.read_namespaced_stateful_set("engine", ns).status
    assert status.current_revision != status.update_revision and status.updated_replicas is None
    core.delete_namespaced_pod("engine-1", ns)
    recreated = core.read_namespaced_pod("engine-1", ns)
    assert recreated.metadata.uid != kept["engine-1"].metadata.uid and recreated.metadata.annotations == {"v": "3"}
    assert apps.read_namespaced_stateful_set("engine", ns).status.updated_replicas == 1
    # scaling through the scale subresource and through the spec
    apps.patch_namespaced_stateful_set_scale("engine", ns, {"spec": {"replicas": 4}})
    assert [p.metadata.name for p in pods(core, ns, "app=engine")] == [f"engine-{i}" for i in range(4)]
    apps.patch_namespaced_stateful_set("engine", ns, {"spec": {"replicas": 1}})
    assert [p.metadata.name for p in pods(core, ns, "app=engine")] == ["engine-0"]
    # deleting the StatefulSet deletes its pods, unless orphaned
    apps.delete_namespaced_stateful_set("engine", ns)
    assert fake_kube.objects("pods", ns) == []
    apps.create_namespaced_stateful_set(ns, statefulset(name="other", replicas=1))
    apps.delete_namespaced_stateful_set("other", ns, propagation_policy="Orphan")
    orphan = core.read_namespaced_pod("other-0", ns)
    assert orphan.metadata.owner_references is None


def test_ordered_ready_stops_at_the_first_unready_pod(fake_kube, k8s):
    core, apps = k8s
    ns = namespace(core)
    fake_kube.never_ready("ordered-0")
    apps.create_namespaced_stateful_set(ns, statefulset(name="ordered", replicas=3))
    apps.create_namespaced_stateful_set(ns, statefulset(name="parallel", replicas=3,
                                                        extra_spec={"podManagementPolicy": "Parallel"}))
    assert [p.metadata.name for p in pods(core, ns, "app=ordered")] == ["ordered-0"]
    assert len(pods(core, ns, "app=parallel")) == 3
    fake_kube.clear_faults("ordered-0")
    assert [p.metadata.name for p in pods(core, ns, "app=ordered")] == ["ordered-0", "ordered-1", "ordered-2"]
    assert apps.read_namespaced_stateful_set("ordered", ns).status.ready_replicas == 3


def test_deployment_replicaset_and_pods(fake_kube, k8s):
    core, apps = k8s
    ns = namespace(core)
    body = {"metadata": {"name": "router"}, "spec": {
        "replicas": 2, "selector": {"matchLabels": {"app": "router"}},
        "template": {"metadata": {"labels": {"app": "router"}},
                     "spec": {"containers": [{"name": "router", "image": "router:1"}]}}}}
    apps.create_namespaced_deployment(ns, body)
    replica_sets = apps.list_namespaced_replica_set(ns, label_selector="app=router").items
    assert len(replica_sets) == 1 and replica_sets[0].status.ready_replicas == 2
    found = pods(core, ns, "app=router")
    assert len(found) == 2 and all(p.metadata.name.startswith(replica_sets[0].metadata.name + "-") for p in found)
    status = apps.read_namespaced_deployment("router", ns).status
    assert (status.replicas, status.ready_replicas, status.available_replicas, status.updated_replicas) == (2, 2, 2, 2)
    apps.patch_namespaced_deployment("router", ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "router", "image": "router:2"}]}}}})
    found = pods(core, ns, "app=router")
    assert len(found) == 2 and {p.spec.containers[0].image for p in found} == {"router:2"}
    assert len(apps.list_namespaced_replica_set(ns).items) == 2
    apps.delete_namespaced_deployment("router", ns)
    assert fake_kube.objects("replicasets", ns) == [] and fake_kube.objects("pods", ns) == []


def test_job_pod_succeeds_or_fails(fake_kube, k8s):
    core, _ = k8s
    batch = client.BatchV1Api(core.api_client)
    ns = namespace(core)
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "probe", "image": "busybox:1"}]}}
    batch.create_namespaced_job(ns, {"metadata": {"name": "ok"}, "spec": {"template": template}})
    fake_kube.crash_loop("bad-*", exit_code=2, message="no NPU visible")
    batch.create_namespaced_job(ns, {"metadata": {"name": "bad"}, "spec": {"template": template}})
    ok, bad = batch.read_namespaced_job("ok", ns).status, batch.read_namespaced_job("bad", ns).status
    assert ok.succeeded == 1 and [c.type for c in ok.conditions] == ["Complete"]
    assert bad.failed == 1 and [(c.type, c.reason) for c in bad.conditions] == [("Failed", "BackoffLimitExceeded")]
    pod = pods(core, ns, "job-name=bad")[0]
    assert pod.status.phase == "Failed" and pod.status.container_statuses[0].state.terminated.exit_code == 2


def test_scheduler_uses_registered_nodes(fake_kube, k8s):
    core, apps = k8s
    ns = namespace(core)
    fake_kube.add_node("node-a", "192.168.1.10", {"accelerator": "ascend"}, {NPU: "8"})
    fake_kube.add_node("node-b", "192.168.1.11", {"accelerator": "ascend"}, {NPU: "8"})
    node = core.read_node("node-a")
    assert node.status.allocatable[NPU] == "8" and node.status.addresses[0].address == "192.168.1.10"
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                               "values": ["node-a", "node-b", "node-c"]}]}]}}}
    apps.create_namespaced_stateful_set(ns, statefulset(replicas=3, extra_spec={"podManagementPolicy": "Parallel"},
                                                        pod_spec={"hostNetwork": True, "affinity": affinity}))
    placed = {p.metadata.name: p for p in pods(core, ns, "app=engine")}
    assert {placed["engine-0"].spec.node_name, placed["engine-1"].spec.node_name} == {"node-a", "node-b"}
    for name in ("engine-0", "engine-1"):
        ip = {"node-a": "192.168.1.10", "node-b": "192.168.1.11"}[placed[name].spec.node_name]
        assert placed[name].status.pod_ip == placed[name].status.host_ip == ip
    pending = placed["engine-2"]
    assert pending.status.phase == "Pending" and pending.spec.node_name is None
    condition = pending.status.conditions[0]
    message = "0/2 nodes are available: 2 Insufficient huawei.com/Ascend910."
    assert (condition.type, condition.status, condition.reason, condition.message) == \
        ("PodScheduled", "False", "Unschedulable", message)
    events = core.list_namespaced_event(ns, field_selector="involvedObject.name=engine-2,reason=FailedScheduling")
    assert [e.message for e in events.items] == [message]
    # a node the pod may not use changes only the message; one it may use gets the pod
    fake_kube.add_node("cpu-node", "192.168.1.20")
    assert core.read_namespaced_pod("engine-2", ns).status.conditions[0].message == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "2 Insufficient huawei.com/Ascend910.")
    fake_kube.add_node("node-c", "192.168.1.12", {"accelerator": "ascend"}, {NPU: "8"})
    assert core.read_namespaced_pod("engine-2", ns).status.host_ip == "192.168.1.12"
    assert apps.read_namespaced_stateful_set("engine", ns).status.ready_replicas == 3


def test_scheduler_pod_anti_affinity_and_host_ports(fake_kube, k8s):
    core, apps = k8s
    ns = namespace(core)
    for i in range(3):
        fake_kube.add_node(f"node-{i}", f"192.168.1.{10 + i}")
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "spread"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    apps.create_namespaced_stateful_set(ns, statefulset(name="spread", replicas=4, npus="0",
                                                        extra_spec={"podManagementPolicy": "Parallel"},
                                                        pod_spec={"affinity": anti}))
    placed = pods(core, ns, "app=spread")
    assert sorted(p.spec.node_name for p in placed[:3]) == ["node-0", "node-1", "node-2"]
    assert placed[3].status.conditions[0].message == \
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    host_port = {"hostNetwork": True, "containers": [{"name": "router", "image": "router:1",
                                                      "ports": [{"containerPort": 1025}]}]}
    apps.create_namespaced_stateful_set(ns, statefulset(name="hostnet", replicas=4, pod_spec=host_port,
                                                        extra_spec={"podManagementPolicy": "Parallel"}))
    placed = pods(core, ns, "app=hostnet")
    assert len({p.spec.node_name for p in placed[:3]}) == 3 and placed[3].status.phase == "Pending"
    assert placed[3].status.conditions[0].message == \
        "0/3 nodes are available: 3 node(s) didn't have free ports for the requested pod ports."


# ------------------------------------------------------------------------------------------ faults

def test_never_ready_pod_and_warning_event(fake_kube, k8s):
    core, apps = k8s
    ns = namespace(core)
    fake_kube.never_ready("engine-1")
    apps.create_namespaced_stateful_set(ns, statefulset(replicas=2, extra_spec={"podManagementPolicy": "Parallel"}))
    pod = core.read_namespaced_pod("engine-1", ns)
    assert pod.status.phase == "Running" and not ready(pod)
    assert pod.status.container_statuses[0].ready is False and pod.status.container_statuses[0].state.running
    ready_condition = next(c for c in pod.status.conditions if c.type == "Ready")
    assert (ready_condition.reason, ready_condition.message) == ("ContainersNotReady",
                                                                 "containers with unready status: [mindie]")
    assert ready(core.read_namespaced_pod("engine-0", ns))
    events = core.list_namespaced_event(ns, field_selector="involvedObject.name=engine-1").items
    warning = [e for e in events if e.type == "Warning"]
    assert len(warning) == 1
    assert (warning[0].reason, warning[0].message) == ("Unhealthy", "Readiness probe failed: HTTP probe failed "
                                                                    "with statuscode: 503")
    assert warning[0].involved_object.kind == "Pod" and warning[0].involved_object.uid == pod.metadata.uid
    assert warning[0].count == 1 and warning[0].first_timestamp and warning[0].last_timestamp
    assert apps.read_namespaced_stateful_set("engine", ns).status.ready_replicas == 1
    # on an existing pod, by glob
    fake_kube.never_ready("engine-*", reason="Readiness probe failed: connection refused")
    assert not ready(core.read_namespaced_pod("engine-0", ns))
    assert apps.read_namespaced_stateful_set("engine", ns).status.ready_replicas is None
    fake_kube.clear_faults()
    assert all(ready(p) for p in pods(core, ns, "app=engine"))


def test_crash_loop_and_unschedulable(fake_kube, k8s):
    core, apps = k8s
    ns = namespace(core)
    apps.create_namespaced_stateful_set(ns, statefulset(replicas=2, extra_spec={"podManagementPolicy": "Parallel"}))
    fake_kube.crash_loop("engine-0", exit_code=137, message="npu device 3 init failed")
    pod = core.read_namespaced_pod("engine-0", ns)
    container = pod.status.container_statuses[0]
    assert pod.status.phase == "Running" and not ready(pod) and container.restart_count == 5
    assert container.state.waiting.reason == "CrashLoopBackOff"
    assert (container.last_state.terminated.exit_code, container.last_state.terminated.message) == \
        (137, "npu device 3 init failed")
    backoff = core.list_namespaced_event(ns, field_selector="involvedObject.name=engine-0,type=Warning").items
    assert [e.reason for e in backoff] == ["BackOff"]
    assert backoff[0].message.startswith("Back-off restarting failed container mindie in pod engine-0")

    fake_kube.unschedulable("engine-1")
    pod = core.read_namespaced_pod("engine-1", ns)
    scheduled = pod.status.conditions[0]
    assert pod.status.phase == "Pending" and (scheduled.type, scheduled.status, scheduled.reason) == \
        ("PodScheduled", "False", "Unschedulable")
    events = core.list_namespaced_event(ns, field_selector="involvedObject.name=engine-1,reason=FailedScheduling")
    assert [e.message for e in events.items] == ["0/4 nodes are available: 4 Insufficient huawei.com/Ascend910."]
    status = apps.read_namespaced_stateful_set("engine", ns).status
    assert status.replicas == 2 and status.ready_replicas is None


# ------------------------------------------------------------------------------------------ misc

def test_namespace_deletion_and_watch(fake_kube, k8s):
    core, apps = k8s
    ns = namespace(core)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    listed = core.list_namespaced_config_map(ns)
    seen = []

    def watch_configmaps():
        stream = watch.Watch()
        for event in stream.stream(core.list_namespaced_config_map, ns,
                                   resource_version=listed.metadata.resource_version, timeout_seconds=5):
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 2:
                stream.stop()

    watcher = threading.Thread(target=watch_configmaps)
    watcher.start()
    core.patch_namespaced_config_map("c", ns, {"data": {"a": "2"}})
    core.delete_namespaced_config_map("c", ns)
    watcher.join(timeout=5)
    assert seen == [("MODIFIED", "c"), ("DELETED", "c")]

    apps.create_namespaced_stateful_set(ns, statefulset(replicas=1))
    core.delete_namespace(ns)
    assert fake_kube.get_object("namespaces", None, ns) is None
    assert fake_kube.objects("pods", ns) == fake_kube.objects("statefulsets", ns) == []
    with pytest.raises(client.ApiException) as e:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}})
    assert e.value.status == 404


def test_requests_are_recorded(fake_kube, k8s):
    core, _ = k8s
    core.create_namespaced_config_map("default", {"metadata": {"name": "c", "labels": {"a": "b"}}})
    core.list_namespaced_config_map("default", label_selector="a=b")
    post, get = fake_kube.requests[-2:]
    assert (post["method"], post["path"]) == ("POST", "/api/v1/namespaces/default/configmaps")
    assert post["content_type"] in (None, "application/json")   # the Python client sends none
    assert post["body"]["metadata"]["name"] == "c" and post["status"] == 201
    assert (get["method"], get["query"], get["body"]) == ("GET", {"labelSelector": "a=b"}, None)


# ------------------------------------------------------------------------------------------ helm

CHART_YAML = "apiVersion: v2\nname: tiny\nversion: 0.1.0\n"
VALUES_YAML = "greeting: hello\nreplicas: 2\n"
CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  greeting: {{ .Values.greeting | quote }}
"""
STATEFULSET = """\
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .Release.Name }}-engine
spec:
  serviceName: {{ .Release.Name }}-engine
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels: {app: engine}
  template:
    metadata:
      labels: {app: engine}
    spec:
      containers:
      - name: mindie
        image: mindie:2.0
        {{- with .Values.extraContainerField }}
        {{ . }}
        {{- end }}
        resources:
          limits: {huawei.com/Ascend910: "8"}
"""


@pytest.fixture
def chart(tmp_path):
    root = tmp_path / "tiny"
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text(CHART_YAML)
    (root / "values.yaml").write_text(VALUES_YAML)
    (root / "templates" / "configmap.yaml").write_text(CONFIGMAP)
    (root / "templates" / "statefulset.yaml").write_text(STATEFULSET)
    return root


def release_secrets(api, ns):
    return {s["metadata"]["name"]: s["metadata"]["labels"] for s in api.objects("secrets", ns)
            if s.get("type") == "helm.sh/release.v1"}


def test_helm_install_upgrade_status_uninstall(fake_kube, helm, chart):
    install = helm("upgrade", "--install", "rel", chart, "--namespace", "ns", "--create-namespace", "--wait",
                   "--timeout", "30s")
    assert install.returncode == 0, install.stderr
    assert fake_kube.get_object("configmaps", "ns", "rel-config")["data"] == {"greeting": "hello"}
    sts = fake_kube.get_object("statefulsets", "ns", "rel-engine")
    assert sts["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert sts["metadata"]["annotations"]["meta.helm.sh/release-name"] == "rel"
    assert [p["metadata"]["name"] for p in fake_kube.objects("pods", "ns")] == ["rel-engine-0", "rel-engine-1"]
    assert release_secrets(fake_kube, "ns")["sh.helm.release.v1.rel.v1"]["status"] == "deployed"

    upgrade = helm("upgrade", "--install", "rel", chart, "--namespace", "ns", "--set", "greeting=bye")
    assert upgrade.returncode == 0, upgrade.stderr
    assert fake_kube.get_object("configmaps", "ns", "rel-config")["data"] == {"greeting": "bye"}
    patches = fake_kube.requests_to("PATCH", "/configmaps/rel-config")
    assert [(p["content_type"], p["body"]) for p in patches] == [
        ("application/strategic-merge-patch+json", {"data": {"greeting": "bye"}})]
    secrets = release_secrets(fake_kube, "ns")
    assert {name: labels["status"] for name, labels in secrets.items()} == {
        "sh.helm.release.v1.rel.v1": "superseded", "sh.helm.release.v1.rel.v2": "deployed"}
    v2 = secrets["sh.helm.release.v1.rel.v2"]
    assert (v2["owner"], v2["name"], v2["version"]) == ("helm", "rel", "2")

    status = helm("status", "rel", "-n", "ns")
    assert status.returncode == 0 and "STATUS: deployed" in status.stdout and "REVISION: 2" in status.stdout
    manifest = helm("get", "manifest", "rel", "-n", "ns")
    assert manifest.returncode == 0 and 'greeting: "bye"' in manifest.stdout and "kind: StatefulSet" in manifest.stdout

    uninstall = helm("uninstall", "rel", "-n", "ns")
    assert uninstall.returncode == 0, uninstall.stderr
    assert [c["metadata"]["name"] for c in fake_kube.objects("configmaps", "ns")] == ["kube-root-ca.crt"]
    assert fake_kube.objects("statefulsets", "ns") == [] and fake_kube.objects("pods", "ns") == []
    assert release_secrets(fake_kube, "ns") == {}


def test_helm_surfaces_server_validation(fake_kube, helm, chart):
    """The fake's /openapi/v2 has no schemas, so helm's client-side validation passes and the server's 422
    is what rejects a wrong manifest (as an admission/validation failure on a real cluster would)."""
    result = helm("upgrade", "--install", "rel", chart, "-n", "default", "--set", "extraContainerField=gpus: 8")
    assert result.returncode == 1
    assert 'StatefulSet.apps "rel-engine" is invalid' in result.stderr and 'unknown field' in result.stderr
    assert fake_kube.objects("statefulsets", "default") == []
