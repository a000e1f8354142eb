"""SGLang through `up | status | diff | down --target k8s`: the deployctl CLI, helm v3.22 and a real control
plane (tests/k8scluster.py; kwok runs the pods, no NPU needed). The 2P1D example: one pod per node pinned to it
(the decode server's two nodes: node rank 0 with the HTTP port and its probes, rank 1 without), SGLang's router
as a Deployment on p1, the Service on the router; a change on one decode node restarts the decode server as a
whole (both its pods: OnDelete StatefulSets, deployctl deletes that instance's pods) and leaves the prefill
servers and the router running."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from conftest import EXAMPLES
from kube_e2e import READY, WAIT, cli, get, objects, servers

STEM = "sglang-a3-2p1d-deepseek-r1"
PREFIX = "r1-sglang-2p1d-ascend-llm"
COMPONENT = "app.kubernetes.io/component"


def inventory(tmp_path: Path, cluster, ns: str, interface_d2: str | None = None) -> Path:
    doc = yaml.safe_load((EXAMPLES / f"{STEM}.yaml").read_text())
    if interface_d2:
        next(n for n in doc["nodes"] if n["name"] == "d2")["interface"] = interface_d2
    doc["kubernetes"] = {"namespace": ns, "kubeconfig": str(cluster.kubeconfig)}
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def pods(cluster, ns: str) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in objects(cluster, "Pod", ns)}


def test_sglang_pd_split_up_status_restart_one_instance_down(k8s_cluster, k8s_ns, tmp_path):
    cluster, ns = k8s_cluster, k8s_ns
    servers(cluster, STEM)                          # p1, p2, d1, d2 (10.204.0.2-5): 16 NPUs each
    inv = inventory(tmp_path, cluster, ns)

    res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(inv), "-y", "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"✓ serving through Service {PREFIX}.{ns}:6688" in res.stdout
    live = pods(cluster, ns)
    engines = {n: p for n, p in live.items() if p["metadata"]["labels"].get(COMPONENT) == "engine"}
    assert {n: p["spec"]["nodeName"] for n, p in engines.items()} == {
        f"{PREFIX}-prefill-0-0-0": "p1", f"{PREFIX}-prefill-1-0-0": "p2",
        f"{PREFIX}-decode-0-0": "d1", f"{PREFIX}-decode-1-0": "d2"}
    assert all(p["status"]["podIP"] == p["status"]["hostIP"] for p in engines.values())      # host network
    # the HTTP server and its probes on node rank 0 only: d2 (node rank 1) runs schedulers
    d1, d2 = (engines[f"{PREFIX}-decode-{k}-0"]["spec"]["containers"][0] for k in (0, 1))
    assert d1["readinessProbe"]["httpGet"] == {"path": "/health", "port": 30000, "scheme": "HTTP"}
    assert "readinessProbe" not in d2 and "ports" not in d2
    (router,) = [p for p in live.values() if p["metadata"]["labels"].get(COMPONENT) == "router"]
    assert router["spec"]["nodeName"] == "p1"
    assert router["spec"]["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/health"
    args = get(cluster, "ConfigMap", ns, f"{PREFIX}-router-files")["data"]["router.args"].splitlines()
    assert args[:4] == ["--pd-disaggregation", "--prefill", "http://10.204.0.2:30000", "8998"]
    assert get(cluster, "ConfigMap", ns, f"{PREFIX}-router-env")["data"] == {"SGLANG_DP_ROUND_ROBIN": "1"}
    server = get(cluster, "ConfigMap", ns, f"{PREFIX}-decode-1-files")["data"]["server.args"].splitlines()
    assert server[server.index("--node-rank") + 1] == "1"
    assert server[server.index("--dist-init-addr") + 1] == "10.204.0.4:5000"
    env = get(cluster, "ConfigMap", ns, f"{PREFIX}-decode-1-env")["data"]
    assert env["GLOO_SOCKET_IFNAME"] == "enp189s0f0" and env["ASCEND_MF_STORE_URL"] == "tcp://10.204.0.2:24670"
    service = get(cluster, "Service", ns, PREFIX)
    assert service["spec"]["ports"][0]["targetPort"] == 6688
    assert service["spec"]["selector"][COMPONENT] == "router"
    assert service["spec"]["clusterIP"].startswith("10.96.")          # allocated by the API server
    deployment = get(cluster, "Deployment", ns, f"{PREFIX}-router")
    assert deployment["status"].get("readyReplicas") == 1

    res = cli(tmp_path, cluster, "status", "-t", "k8s", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["degraded"] is False
    assert doc["ready"] == {"prefill-0": 1, "prefill-1": 1, "decode": 2, "router": 1}

    res = cli(tmp_path, cluster, "diff", "-t", "k8s", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert {o["change"] for o in doc["objects"]} == {"unchanged"}
    assert {a["action"] for a in doc["instances"]} == {"keep"}

    before = {n: p["metadata"]["uid"] for n, p in pods(cluster, ns).items()}
    changed = inventory(tmp_path, cluster, ns, interface_d2="enp189s0f1")
    res = cli(tmp_path, cluster, "diff", "-t", "k8s", "-i", str(changed), "--output", "json")
    assert res.returncode == 0, res.stderr
    actions = {a["instance"]: a["action"] for a in json.loads(res.stdout)["instances"]}
    assert actions == {"prefill-0": "keep", "prefill-1": "keep", "decode": "restart"}
    mark = cluster.audit_mark()
    res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(changed), "-y", "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    after = {n: p["metadata"]["uid"] for n, p in pods(cluster, ns).items()}
    assert set(after) == set(before)
    # d2's env changed, and the whole decode server restarted: its node rank 0 on d1 too (one world)
    decode = {f"{PREFIX}-decode-0-0", f"{PREFIX}-decode-1-0"}
    assert {n for n in after if after[n] != before[n]} == decode
    deleted = [w["name"] for w in cluster.writes(mark, namespace=ns) if w["verb"] == "delete" and w["kind"] == "Pod"]
    assert sorted(deleted) == sorted(decode)
    assert get(cluster, "ConfigMap", ns, f"{PREFIX}-decode-1-env")["data"]["GLOO_SOCKET_IFNAME"] == "enp189s0f1"

    def settled():      # the StatefulSet controller's status follows a moment after the pods
        doc = json.loads(cli(tmp_path, cluster, "diff", "-t", "k8s", "-i", str(changed), "--output", "json").stdout)
        return doc if {a["action"] for a in doc["instances"]} == {"keep"} else None

    doc = cluster.wait_for("every instance at its update revision", settled, WAIT)
    assert {o["change"] for o in doc["objects"]} == {"unchanged"}
    res = cli(tmp_path, cluster, "status", "-t", "k8s", "-i", str(changed), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["degraded"] is False and doc["ready"] == {"prefill-0": 1, "prefill-1": 1, "decode": 2, "router": 1}

    res = cli(tmp_path, cluster, "down", "-t", "k8s", "-i", str(changed))
    assert res.returncode == 0, res.stderr
    assert objects(cluster, "StatefulSet", ns) == [] and objects(cluster, "Deployment", ns) == []
    assert objects(cluster, "Pod", ns) == []
