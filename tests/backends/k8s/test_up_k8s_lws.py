"""`--target lws` against the real LeaderWorkerSet controller: kubernetes-sigs/lws v0.9.0 built from its Go module
and run with its webhooks against the test control plane (scripts/k8s-test-cluster up --lws, the release's CRDs from
the module), its pods run by kwok.

Every example inventory renders objects the API server (and LWS's admission webhooks) accept with every rendered
field kept; an example comes up through the controller (`up`, `status`, `diff`, a rerun that changes nothing), is
recreated as a group when one of its pods is deleted, rolled by the controller when its pod template changes
(deployctl deleting no pod itself), and `down` leaves nothing."""

from __future__ import annotations

import json
import os
import time

import pytest
import yaml

from conftest import EXAMPLES
from kube_e2e import (READY, WAIT, accepted, cli, engine_pods, get, helm_revisions, inventory, is_ready, objects,
                      servers)

# the module starts a control plane of its own (with the LWS controller): e2e; one worker runs all of the module's
# tests (--dist loadgroup), so the control plane is started once
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("lws-up")]

CASES = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))
VLLM = "vllm-a2-2x8-v32-dp-ep"        # one instance over two servers: a leader and a worker with its own files
VLLM_LWS = "v32-vllm-ascend-llm-mixed"
MINDIE = "a2-2x8-tp-pp"


@pytest.fixture(scope="module")
def lws_cluster():
    from k8scluster import start_cluster

    cluster = start_cluster(watch_pid=os.getpid(), lws=True)
    try:
        yield cluster
    finally:
        cluster.stop()


def _ns(cluster, base: str) -> str:
    import secrets

    name = f"{base}-{secrets.token_hex(2)}"
    cluster.create_namespace(name)
    return name


def _docs(path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_every_example_renders_objects_the_api_server_and_lws_webhooks_accept(lws_cluster, tmp_path):
    cluster = lws_cluster
    ns = _ns(cluster, "lws-accept")
    problems, kinds = [], set()
    for stem in CASES:
        inv = inventory(tmp_path, stem, cluster, ns)
        out = tmp_path / f"out-{stem}"
        res = cli(tmp_path, cluster, "render", "--target", "lws", "-i", str(inv), "-o", str(out))
        assert res.returncode == 0, res.stderr
        docs = _docs(out / "manifests.yaml")
        kinds |= {d["kind"] for d in docs}
        problems += [f"{stem}: {p}" for p in accepted(cluster, ns, docs)]
    assert not problems, "\n".join(problems)
    assert "LeaderWorkerSet" in kinds and "StatefulSet" not in kinds
    cluster.delete_namespace(ns)


def _env(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or []}


def test_vllm_instance_up_group_restart_roll_and_down_through_the_lws_controller(lws_cluster, tmp_path):
    cluster = lws_cluster
    ns = f"lws-vllm-{os.getpid() % 10000}"
    servers(cluster, VLLM)
    inv = inventory(tmp_path, VLLM, cluster, ns)
    nodes = [n["name"] for n in yaml.safe_load((EXAMPLES / f"{VLLM}.yaml").read_text())["nodes"]]

    res = cli(tmp_path, cluster, "up", "-t", "lws", "-i", str(inv), "-y", "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "✓ serving through" in res.stdout
    pods = engine_pods(cluster, ns)
    leader, worker = pods[f"{VLLM_LWS}-0"], pods[f"{VLLM_LWS}-0-1"]
    assert set(pods) == {f"{VLLM_LWS}-0", f"{VLLM_LWS}-0-1"}
    assert (leader["spec"]["nodeName"], worker["spec"]["nodeName"]) == (nodes[0], nodes[1])
    # the controller's pod webhook gave each its place in the group; the worker runs its node's server
    assert leader["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    assert _env(worker)["LWS_WORKER_INDEX"] == "1" and _env(worker)["LWS_GROUP_SIZE"] == "2"
    assert worker["spec"]["containers"][0]["command"][1] == "/opt/deployctl/pick-server.sh"
    assert get(cluster, "ConfigMap", ns, f"{VLLM_LWS}-nodes")["data"] == {nodes[1]: "1"}
    lws = get(cluster, "LeaderWorkerSet", ns, VLLM_LWS)
    assert lws["status"]["readyReplicas"] == 1

    res = cli(tmp_path, cluster, "status", "-t", "lws", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["degraded"] is False and doc["ready"] == {"mixed": 2}
    assert doc["workloads"] == [f"LeaderWorkerSet {VLLM_LWS}: 1/1 group(s) of 2 ready, Available=True"]
    res = cli(tmp_path, cluster, "diff", "-t", "lws", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stderr
    diff = json.loads(res.stdout)
    assert {c["change"] for c in diff["objects"]} == {"unchanged"}, diff["objects"]
    assert [(a["instance"], a["action"]) for a in diff["instances"]] == [("mixed", "keep")]
    res = cli(tmp_path, cluster, "up", "-t", "lws", "-i", str(inv), "-y", "--ready-timeout", READY)
    assert res.returncode == 0 and "nothing to do" in res.stdout, res.stdout + res.stderr

    # one pod deleted: the controller recreates the whole group (an HCCL world cannot take a rank back)
    for _ in range(2):
        before = {n: p["metadata"]["uid"] for n, p in engine_pods(cluster, ns).items()}
        status, body = cluster.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{VLLM_LWS}-0-1")
        assert status == 200, body

        def recreated():
            now = engine_pods(cluster, ns)
            return set(now) == set(before) and all(now[n]["metadata"]["uid"] != before[n] and is_ready(now[n])
                                                   for n in before)
        cluster.wait_for("the group recreated and ready", recreated, timeout=WAIT)
    res = cli(tmp_path, cluster, "status", "-t", "lws", "-i", str(inv), "--output", "json")
    assert res.returncode == 0 and json.loads(res.stdout)["degraded"] is False, res.stdout

    # a changed pod template: the controller rolls the group, deployctl deletes nothing itself
    changed = inventory(tmp_path, VLLM, cluster, ns, values={"podAnnotations": {"example.com/revision": "2"}},
                        name="changed")
    res = cli(tmp_path, cluster, "diff", "-t", "lws", "-i", str(changed), "--output", "json")
    assert [(a["instance"], a["action"]) for a in json.loads(res.stdout)["instances"]] == [("mixed", "restart")]
    before = {n: p["metadata"]["uid"] for n, p in engine_pods(cluster, ns).items()}
    res = cli(tmp_path, cluster, "up", "-t", "lws", "-i", str(changed), "-y", "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "restarting its" not in res.stdout
    after = engine_pods(cluster, ns)
    assert set(after) == set(before) and all(after[n]["metadata"]["uid"] != before[n] for n in before)
    assert all(p["metadata"]["annotations"].get("example.com/revision") == "2" and is_ready(p) for p in after.values())

    # history and rollback: helm's revisions; the controller rolls the group back to the first template
    res = cli(tmp_path, cluster, "history", "-t", "lws", "-i", str(changed), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    assert len(json.loads(res.stdout)["revisions"]) == 2, res.stdout
    res = cli(tmp_path, cluster, "rollback", "-t", "lws", "-i", str(changed), "-y", "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    back = engine_pods(cluster, ns)
    assert set(back) == set(after) and all(back[n]["metadata"]["uid"] != after[n]["metadata"]["uid"] for n in after)
    assert all("example.com/revision" not in p["metadata"]["annotations"] and is_ready(p) for p in back.values())

    res = cli(tmp_path, cluster, "down", "-t", "lws", "-i", str(changed), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["status"] == "uninstalled"
    cluster.wait_for("no pod left", lambda: not objects(cluster, "Pod", ns), timeout=WAIT)
    assert not objects(cluster, "LeaderWorkerSet", ns) and not objects(cluster, "StatefulSet", ns)
    cluster.delete_namespace(ns)


HPAS = "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers"


def _unschedulable(pod: dict) -> bool:
    return any(c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or [])


def test_a_scaler_copies_an_instance_that_cannot_run_so_up_refuses_it_and_puts_the_count_back(lws_cluster, tmp_path):
    """An HPA on an instance's LeaderWorkerSet, as a user would add one: the API server stores it, and the HPA
    controller of this control plane's kube-controller-manager (it runs every controller; no metrics server, so it
    applies only the HPA's bounds) raises the LWS to minReplicas through /scale, as it would on load. The LWS
    controller then makes a second group, a copy of the instance pinned to the servers the first group holds: it
    never schedules. So `status` and `diff` name the HPA, `up` refuses before changing anything while it exists, and once it
    is gone `diff` shows the count it left and `up` puts it back through /scale (helm's two-way patch of a custom
    resource would not: helm v3.22.0 pkg/kube/client.go L687-703), read back from the API server.

    Upstream: the LWS /scale subresource selects the group leaders (kubernetes-sigs/lws@v0.9.0
    api/leaderworkerset/v1/leaderworkerset_types.go L381-385, L416)."""
    cluster = lws_cluster
    ns = _ns(cluster, "lws-hpa")
    servers(cluster, VLLM)
    inv = inventory(tmp_path, VLLM, cluster, ns)
    res = cli(tmp_path, cluster, "up", "-t", "lws", "-i", str(inv), "-y", "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    scale = cluster.get(f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets/{VLLM_LWS}/scale")
    assert scale["spec"]["replicas"] == 1
    assert scale["status"]["selector"] == (f"leaderworkerset.sigs.k8s.io/name={VLLM_LWS},"
                                           "leaderworkerset.sigs.k8s.io/worker-index=0")     # the leaders

    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "llm-load"},
           "spec": {"scaleTargetRef": {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                                       "name": VLLM_LWS},
                    "minReplicas": 2, "maxReplicas": 3,
                    "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                        "type": "Utilization", "averageUtilization": 80}}}]}}
    status, body = cluster.request("POST", HPAS.format(ns=ns), hpa)
    assert status == 201, body
    stored = cluster.get(HPAS.format(ns=ns) + "/llm-load")
    assert stored["spec"]["scaleTargetRef"] == hpa["spec"]["scaleTargetRef"]
    assert (stored["spec"]["minReplicas"], stored["spec"]["maxReplicas"]) == (2, 3)
    cluster.wait_for("the HPA controller scales the LWS to 2",
                     lambda: get(cluster, "LeaderWorkerSet", ns, VLLM_LWS)["spec"]["replicas"] == 2, timeout=WAIT)
    copies = (f"{VLLM_LWS}-1", f"{VLLM_LWS}-1-1")
    cluster.wait_for("the copy's pods unschedulable", lambda: all(
        n in engine_pods(cluster, ns) and _unschedulable(engine_pods(cluster, ns)[n]) for n in copies), timeout=WAIT)

    res = cli(tmp_path, cluster, "status", "-t", "lws", "-i", str(inv))
    text = " ".join(res.stdout.split())
    assert f"HorizontalPodAutoscaler llm-load scales LeaderWorkerSet {VLLM_LWS} (min 2, max 3)" in text, res.stdout
    res = cli(tmp_path, cluster, "diff", "-t", "lws", "-i", str(inv), "--output", "json")
    assert [s.split(":")[0] for s in json.loads(res.stdout)["scalers"]] == [
        f"HorizontalPodAutoscaler llm-load scales LeaderWorkerSet {VLLM_LWS} (min 2, max 3) of instance mixed"]
    revisions = helm_revisions(cluster, ns)
    res = cli(tmp_path, cluster, "up", "-t", "lws", "-i", str(inv), "-y", "--ready-timeout", READY)
    out = " ".join((res.stdout + res.stderr).split())
    assert res.returncode == 1, out
    assert "problem(s) with the cluster: nothing was changed" in out and "HorizontalPodAutoscaler/llm-load" in out
    assert f"kubectl delete hpa llm-load -n {ns}" in out
    assert helm_revisions(cluster, ns) == revisions
    assert get(cluster, "LeaderWorkerSet", ns, VLLM_LWS)["spec"]["replicas"] == 2

    status, body = cluster.request("DELETE", HPAS.format(ns=ns) + "/llm-load")
    assert status == 200, body
    res = cli(tmp_path, cluster, "diff", "-t", "lws", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stderr
    changed = [c for c in json.loads(res.stdout)["objects"] if c["change"] != "unchanged"]
    assert [(c["kind"], c["details"]) for c in changed] == [("LeaderWorkerSet", ["spec.replicas: 2 → 1"])]
    res = cli(tmp_path, cluster, "up", "-t", "lws", "-i", str(inv), "-y", "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"LeaderWorkerSet {VLLM_LWS} was scaled to 2 outside deployctl" in " ".join(res.stdout.split())
    assert get(cluster, "LeaderWorkerSet", ns, VLLM_LWS)["spec"]["replicas"] == 1
    cluster.wait_for("the copy removed", lambda: not set(copies) & set(engine_pods(cluster, ns)), timeout=WAIT)
    res = cli(tmp_path, cluster, "diff", "-t", "lws", "-i", str(inv), "--output", "json")
    assert {c["change"] for c in json.loads(res.stdout)["objects"]} == {"unchanged"}, res.stdout
    assert json.loads(res.stdout)["scalers"] == []
    res = cli(tmp_path, cluster, "down", "-t", "lws", "-i", str(inv))
    assert res.returncode == 0, res.stdout + res.stderr
    cluster.delete_namespace(ns)


def test_mindie_instance_comes_up_as_one_group(lws_cluster, tmp_path):
    cluster = lws_cluster
    ns = f"lws-mindie-{os.getpid() % 10000}"
    servers(cluster, MINDIE)
    inv = inventory(tmp_path, MINDIE, cluster, ns)
    res = cli(tmp_path, cluster, "up", "-t", "lws", "-i", str(inv), "-y", "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    pods = engine_pods(cluster, ns)
    assert len(pods) == 2 and all(is_ready(p) for p in pods.values())
    roles = sorted(p["metadata"]["labels"]["deployctl.io/rank-role"] for p in pods.values())
    assert roles == ["master", "worker"]
    res = cli(tmp_path, cluster, "down", "-t", "lws", "-i", str(inv))
    assert res.returncode == 0, res.stdout + res.stderr
    started = time.monotonic()
    cluster.wait_for("no pod left", lambda: not objects(cluster, "Pod", ns), timeout=WAIT)
    assert time.monotonic() - started < WAIT
    cluster.delete_namespace(ns)


def test_up_refuses_a_cluster_without_the_lws_api(k8s_cluster, k8s_ns, tmp_path):
    """The shared control plane has no LWS controller: `up --target lws` stops before changing anything."""
    cluster = k8s_cluster
    servers(cluster, VLLM)
    inv = inventory(tmp_path, VLLM, cluster, k8s_ns)
    res = cli(tmp_path, cluster, "up", "-t", "lws", "-i", str(inv), "-y", "--ready-timeout", READY)
    assert res.returncode != 0
    text = " ".join((res.stdout + res.stderr).split())
    assert "does not serve LeaderWorkerSet" in text and "install the LeaderWorkerSet controller" in text
    assert not objects(cluster, "ConfigMap", k8s_ns) or all(
        not c["metadata"].get("labels", {}).get("app.kubernetes.io/managed-by") for c in objects(cluster, "ConfigMap", k8s_ns))
