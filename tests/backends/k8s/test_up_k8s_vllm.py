"""vLLM-Ascend through `up | status | diff | down --target k8s`: the deployctl CLI, helm v3.22 and a real
control plane (tests/k8scluster.py). One pod per server pinned to it, the proxy of the prefill/decode split,
the Service on the proxy; a change on one server restarts its instance only (OnDelete StatefulSets: the
real StatefulSet controller makes the new revision, deployctl deletes that instance's pods), and the other
keeps its pods."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from conftest import EXAMPLES
from kube_e2e import READY, WAIT, cli, get, objects, servers

STEM = "vllm-a3-1p1d-qwen3"
PREFIX = "qwen3-pd-ascend-llm"


def inventory(tmp_path: Path, cluster, ns: str, interface_d1: str | None = None) -> Path:
    doc = yaml.safe_load((EXAMPLES / f"{STEM}.yaml").read_text())
    if interface_d1:
        next(n for n in doc["nodes"] if n["name"] == "d1")["interface"] = interface_d1
    doc["kubernetes"] = {"namespace": ns, "kubeconfig": str(cluster.kubeconfig)}
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def pods(cluster, ns: str) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in objects(cluster, "Pod", ns)}


def test_vllm_pd_split_up_status_restart_one_instance_down(k8s_cluster, k8s_ns, tmp_path):
    cluster, ns = k8s_cluster, k8s_ns
    servers(cluster, STEM)                                  # p1 10.202.0.2, d1 10.202.0.3: 16 NPUs each
    inv = inventory(tmp_path, cluster, ns)

    res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(inv), "-y", "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"✓ serving through Service {PREFIX}.{ns}:1999" in res.stdout
    live = pods(cluster, ns)
    engines = {n: p for n, p in live.items() if p["metadata"]["labels"].get("app.kubernetes.io/component") == "engine"}
    assert {n: p["spec"]["nodeName"] for n, p in engines.items()} == {f"{PREFIX}-prefill-0-0": "p1",
                                                                      f"{PREFIX}-decode-0-0": "d1"}
    (proxy,) = [p for p in live.values() if p["metadata"]["labels"].get("app.kubernetes.io/component") == "proxy"]
    assert proxy["spec"]["nodeName"] == "p1"
    env = get(cluster, "ConfigMap", ns, f"{PREFIX}-decode-0-env")["data"]
    assert env["HCCL_IF_IP"] == "10.202.0.3" and env["GLOO_SOCKET_IFNAME"] == "enp189s0f0"
    service = get(cluster, "Service", ns, PREFIX)
    assert service["spec"]["ports"][0]["targetPort"] == 1999
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "proxy"
    assert service["spec"]["clusterIP"].startswith("10.96.")        # allocated by the API server

    res = cli(tmp_path, cluster, "status", "-t", "k8s", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["degraded"] is False and doc["ready"] == {"prefill": 1, "decode": 1, "proxy": 1}

    before = {n: p["metadata"]["uid"] for n, p in pods(cluster, ns).items()}
    revisions = {s["metadata"]["name"]: s["status"]["currentRevision"] for s in objects(cluster, "StatefulSet", ns)}
    changed = inventory(tmp_path, cluster, ns, interface_d1="enp189s0f1")
    res = cli(tmp_path, cluster, "diff", "-t", "k8s", "-i", str(changed), "--output", "json")
    assert res.returncode == 0, res.stderr
    actions = {a["instance"]: a["action"] for a in json.loads(res.stdout)["instances"]}
    assert actions == {"prefill": "keep", "decode": "restart"}
    mark = cluster.audit_mark()
    res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(changed), "-y", "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    after = {n: p["metadata"]["uid"] for n, p in pods(cluster, ns).items()}
    assert set(after) == set(before)
    assert after[f"{PREFIX}-prefill-0-0"] == before[f"{PREFIX}-prefill-0-0"]      # untouched
    assert after[f"{PREFIX}-decode-0-0"] != before[f"{PREFIX}-decode-0-0"]        # restarted
    assert {n for n in after if after[n] != before[n]} == {f"{PREFIX}-decode-0-0"}
    # deployctl deleted the decode pod, and only it; the StatefulSet controller made it again at the new revision
    deleted = [w["name"] for w in cluster.writes(mark, namespace=ns) if w["verb"] == "delete" and w["kind"] == "Pod"]
    assert deleted == [f"{PREFIX}-decode-0-0"]
    decode = next(n for n in revisions if "decode" in n)
    prefill = next(n for n in revisions if "prefill" in n)

    def caught_up():       # the controller's status follows a moment after the pods
        sets = {s["metadata"]["name"]: s["status"] for s in objects(cluster, "StatefulSet", ns)}
        return sets if sets[decode].get("updatedReplicas") == 1 and sets[decode].get("readyReplicas") == 1 else None

    sets = cluster.wait_for("decode's StatefulSet status: its pod updated and ready", caught_up, WAIT)
    assert sets[decode]["updateRevision"] != revisions[decode]
    # under OnDelete the real controller never moves status.currentRevision (only RollingUpdate completes a
    # rollout): deployctl must compare pods with updateRevision, as it does (diff.stale_instances, rollout)
    assert sets[decode]["currentRevision"] == revisions[decode]
    assert sets[prefill]["currentRevision"] == sets[prefill]["updateRevision"] == revisions[prefill]
    assert pods(cluster, ns)[f"{PREFIX}-decode-0-0"]["metadata"]["labels"]["controller-revision-hash"] == \
        sets[decode]["updateRevision"]
    env = get(cluster, "ConfigMap", ns, f"{PREFIX}-decode-0-env")["data"]
    assert env["GLOO_SOCKET_IFNAME"] == "enp189s0f1"
    res = cli(tmp_path, cluster, "diff", "-t", "k8s", "-i", str(changed), "--output", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert {o["change"] for o in doc["objects"]} == {"unchanged"}
    assert {a["action"] for a in doc["instances"]} == {"keep"}        # the restarted pod runs the update revision
    res = cli(tmp_path, cluster, "status", "-t", "k8s", "-i", str(changed), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["degraded"] is False

    res = cli(tmp_path, cluster, "down", "-t", "k8s", "-i", str(changed))
    assert res.returncode == 0, res.stderr
    assert objects(cluster, "StatefulSet", ns) == [] and objects(cluster, "Pod", ns) == []
