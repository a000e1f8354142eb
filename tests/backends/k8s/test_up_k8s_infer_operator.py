"""`--target infer-operator` against the real API server with MindCluster's Infer Operator CRDs (v26.1,
tests/fixtures/crds) and the operator's stand-in (tests/k8s_standins/infer_operator.py, written from its source: it
cannot be built here), whose StatefulSets the real kube-controller-manager turns into pods that kwok runs.

Every example renders objects the API server accepts with every rendered field kept, and every role's spec is a
StatefulSet spec the API server accepts as such (the CRD keeps it unvalidated: x-kubernetes-preserve-unknown-fields).
A two-server vLLM-Ascend instance comes up through the operator (`up`, `status`, `diff`, a rerun that changes
nothing); a changed pod template, which the operator never applies to a StatefulSet it made, makes `up` replace the
instance's StatefulSets; `down` leaves nothing."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from conftest import EXAMPLES, ROOT
from kube_e2e import (READY, WAIT, accepted, cli, contains, engine_pods, get, install_crds, inventory, is_ready, objects,
                      remove_crds, servers)
from k8s_standins.infer_operator import InferOperator

# uses the session's control plane (k8s_cluster): e2e
pytestmark = pytest.mark.e2e

CRDS = ROOT / "tests" / "fixtures" / "crds" / "mindcluster-infer-operator-v26.1-crds.yaml"
CASES = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))
STEM = "vllm-a2-2x8-v32-dp-ep"
ISS = "v32-vllm-ascend-llm"


@pytest.fixture(scope="module")
def iop_cluster(k8s_cluster):
    crds = install_crds(k8s_cluster, CRDS)
    try:
        yield k8s_cluster
    finally:
        remove_crds(k8s_cluster, crds)


def test_every_example_renders_objects_and_role_specs_the_api_server_accepts(iop_cluster, k8s_ns, tmp_path):
    cluster = iop_cluster
    cluster.create_namespace(k8s_ns)
    problems = []
    for stem in CASES:
        inv = inventory(tmp_path, stem, cluster, k8s_ns)
        out = tmp_path / f"out-{stem}"
        res = cli(tmp_path, cluster, "render", "--target", "infer-operator", "-i", str(inv), "-o", str(out))
        assert res.returncode == 0, res.stderr
        docs = [d for d in yaml.safe_load_all((out / "manifests.yaml").read_text()) if d]
        problems += [f"{stem}: {p}" for p in accepted(cluster, k8s_ns, docs)]
        (iss,) = [d for d in docs if d["kind"] == "InferServiceSet"]
        for role in iss["spec"]["template"]["roles"]:
            sts = {"apiVersion": "apps/v1", "kind": "StatefulSet",
                   "metadata": {"name": f"{iss['metadata']['name']}-0-{role['name']}-0"}, "spec": role["spec"]}
            status, body = cluster.request(
                "POST", f"/apis/apps/v1/namespaces/{k8s_ns}/statefulsets?dryRun=All&fieldValidation=Strict", sts)
            if status not in (200, 201):
                problems.append(f"{stem}: role {role['name']}: HTTP {status}: {str(body)[:600]}")
            else:
                problems += [f"{stem}: role {role['name']}{d}" for d in contains(body["spec"], role["spec"])]
    assert not problems, "\n".join(problems)


def test_up_status_change_and_down_through_the_operator(iop_cluster, k8s_ns, tmp_path):
    cluster, ns = iop_cluster, k8s_ns
    servers(cluster, STEM)
    inv = inventory(tmp_path, STEM, cluster, ns)
    nodes = [n["name"] for n in yaml.safe_load((EXAMPLES / f"{STEM}.yaml").read_text())["nodes"]]
    with InferOperator(cluster, ns) as op:
        res = cli(tmp_path, cluster, "up", "-t", "infer-operator", "-i", str(inv), "-y", "--ready-timeout", READY)
        assert res.returncode == 0, res.stdout + res.stderr + str(op.errors)
        assert "✓ serving through" in res.stdout
        pods = engine_pods(cluster, ns)
        master, worker = f"{ISS}-0-mixed-0-0", f"{ISS}-0-mixed-w-0-0"
        assert set(pods) == {master, worker}
        assert (pods[master]["spec"]["nodeName"], pods[worker]["spec"]["nodeName"]) == (nodes[0], nodes[1])
        assert pods[worker]["spec"]["containers"][0]["command"][1] == "/opt/deployctl/pick-server.sh"
        # the operator's own env and labels reached the pods it made
        env = {e["name"]: e.get("value") for e in pods[worker]["spec"]["containers"][0]["env"]}
        assert env["INSTANCE_ROLE"] == "mixed-w"
        iss = get(cluster, "InferServiceSet", ns, ISS)
        assert iss["status"]["readyReplicas"] == 1

        res = cli(tmp_path, cluster, "status", "-t", "infer-operator", "-i", str(inv), "--output", "json")
        assert res.returncode == 0, res.stdout + res.stderr
        doc = json.loads(res.stdout)
        assert doc["degraded"] is False and doc["ready"] == {"mixed": 2}
        assert doc["workloads"] == [f"InferServiceSet {ISS}: 1/1 InferService(s) ready, Ready=True "
                                    "(AllInferServicesReady)"]
        res = cli(tmp_path, cluster, "diff", "-t", "infer-operator", "-i", str(inv), "--output", "json")
        diff = json.loads(res.stdout)
        assert {c["change"] for c in diff["objects"]} == {"unchanged"}, diff["objects"]
        res = cli(tmp_path, cluster, "up", "-t", "infer-operator", "-i", str(inv), "-y", "--ready-timeout", READY)
        assert res.returncode == 0 and "nothing to do" in res.stdout, res.stdout + res.stderr

        # a changed pod template: the operator leaves its StatefulSets as they are, `up` replaces them
        changed = inventory(tmp_path, STEM, cluster, ns, values={"podAnnotations": {"example.com/revision": "2"}},
                            name="changed")
        res = cli(tmp_path, cluster, "diff", "-t", "infer-operator", "-i", str(changed), "--output", "json")
        assert [(a["instance"], a["action"]) for a in json.loads(res.stdout)["instances"]] == [("mixed", "restart")]
        sets = {s["metadata"]["name"]: s["metadata"]["uid"] for s in objects(cluster, "StatefulSet", ns)}
        assert set(sets) == {f"{ISS}-0-mixed-0", f"{ISS}-0-mixed-w-0"}
        res = cli(tmp_path, cluster, "up", "-t", "infer-operator", "-i", str(changed), "-y", "--ready-timeout", READY)
        assert res.returncode == 0, res.stdout + res.stderr + str(op.errors)
        assert "replacing its 2 StatefulSet(s)" in res.stdout, res.stdout
        now = {s["metadata"]["name"]: s["metadata"]["uid"] for s in objects(cluster, "StatefulSet", ns)}
        assert set(now) == set(sets) and all(now[n] != sets[n] for n in sets)
        after = engine_pods(cluster, ns)
        assert set(after) == {master, worker}
        assert all(p["metadata"]["annotations"].get("example.com/revision") == "2" and is_ready(p) for p in after.values())
        res = cli(tmp_path, cluster, "status", "-t", "infer-operator", "-i", str(changed), "--output", "json")
        assert res.returncode == 0 and json.loads(res.stdout)["degraded"] is False, res.stdout

        res = cli(tmp_path, cluster, "down", "-t", "infer-operator", "-i", str(changed), "--output", "json")
        assert res.returncode == 0, res.stdout + res.stderr
        assert json.loads(res.stdout)["status"] == "uninstalled"
        assert not objects(cluster, "InferServiceSet", ns)
        cluster.wait_for("no pod left", lambda: not objects(cluster, "Pod", ns), timeout=WAIT)


def test_a_scaling_policy_on_a_role_copies_a_master_without_its_workers_so_up_refuses_it(iop_cluster, k8s_ns,
                                                                                           tmp_path):
    """A user adds `scalingPolicy: {type: HPA, spec}` to the master role of deployctl's InferServiceSet (the path
    spec.template.roles[].scalingPolicy: Ascend/mind-cluster@22bb3d98 component/infer-operator/pkg/api/v1/
    instanceset_types.go L45-60). The operator (its stand-in, written from pkg/controller/scaling/scaling_manager.go)
    makes the HPA `<instanceset>-scaler`, which the API server stores; this control plane's own HPA controller raises
    the InstanceSet to minReplicas through its /scale; the operator makes a second master StatefulSet, without
    workers and pinned to the node the first master holds: it never schedules. `status` names the operator's HPA and
    `up` refuses, saying to remove the policy; once it is removed the operator deletes the HPA and the copy."""
    cluster, ns = iop_cluster, k8s_ns
    servers(cluster, STEM)
    inv = inventory(tmp_path, STEM, cluster, ns)
    iss_path = f"/apis/mindcluster.huawei.com/v1/namespaces/{ns}/inferservicesets/{ISS}"
    hpas = f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers"
    scaler, master_set = f"{ISS}-0-mixed-scaler", f"{ISS}-0-mixed"
    with InferOperator(cluster, ns) as op:
        res = cli(tmp_path, cluster, "up", "-t", "infer-operator", "-i", str(inv), "-y", "--ready-timeout", READY)
        assert res.returncode == 0, res.stdout + res.stderr + str(op.errors)
        roles = [r["name"] for r in get(cluster, "InferServiceSet", ns, ISS)["spec"]["template"]["roles"]]
        policy = {"type": "HPA", "spec": {"minReplicas": 2, "maxReplicas": 2, "metrics": [{"type": "Resource",
                  "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]}}
        at = f"/spec/template/roles/{roles.index('mixed')}/scalingPolicy"
        cluster.patch(iss_path, [{"op": "add", "path": at, "value": policy}], kind="json")

        cluster.wait_for("the operator's HPA", lambda: cluster.get(f"{hpas}/{scaler}") is not None, timeout=WAIT)
        hpa = cluster.get(f"{hpas}/{scaler}")
        assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "mindcluster.huawei.com/v1", "kind": "InstanceSet",
                                                 "name": master_set}
        assert hpa["metadata"]["labels"]["infer.huawei.com/scaling-owned-by"] == master_set
        instance_set = f"/apis/mindcluster.huawei.com/v1/namespaces/{ns}/instancesets/{master_set}"
        cluster.wait_for("the HPA controller scales the master's InstanceSet to 2",
                         lambda: cluster.get(instance_set)["spec"]["replicas"] == 2, timeout=WAIT)
        copy = f"{ISS}-0-mixed-1-0"        # the second workload of the master role: a master without workers

        def unschedulable():
            pod = engine_pods(cluster, ns).get(copy)
            return pod is not None and any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                                           for c in pod["status"].get("conditions") or [])
        cluster.wait_for("the copy unschedulable", unschedulable, timeout=WAIT)

        res = cli(tmp_path, cluster, "status", "-t", "infer-operator", "-i", str(inv))
        text = " ".join(res.stdout.split())
        assert (f"HorizontalPodAutoscaler {scaler} (made by the Infer Operator from a role's scalingPolicy) scales "
                f"InstanceSet {master_set} (min 2, max 2) of instance mixed") in text, res.stdout
        res = cli(tmp_path, cluster, "up", "-t", "infer-operator", "-i", str(inv), "-y", "--ready-timeout", READY)
        out = " ".join((res.stdout + res.stderr).split())
        assert res.returncode == 1 and "nothing was changed" in out, out
        assert "remove the scalingPolicy deployctl did not render from the InferServiceSet's role" in out

        cluster.patch(iss_path, [{"op": "remove", "path": at}], kind="json")
        cluster.wait_for("the HPA and the copy gone", lambda: cluster.get(f"{hpas}/{scaler}") is None and
                         cluster.get(instance_set)["spec"]["replicas"] == 1 and copy not in engine_pods(cluster, ns),
                         timeout=WAIT)
        res = cli(tmp_path, cluster, "up", "-t", "infer-operator", "-i", str(inv), "-y", "--ready-timeout", READY)
        assert res.returncode == 0 and "nothing to do" in res.stdout, res.stdout + res.stderr + str(op.errors)
        res = cli(tmp_path, cluster, "down", "-t", "infer-operator", "-i", str(inv))
        assert res.returncode == 0, res.stdout + res.stderr
        cluster.wait_for("no pod left", lambda: not objects(cluster, "Pod", ns), timeout=WAIT)
