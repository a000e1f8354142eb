"""`up | status | diff | down --target k8s` end to end: the deployctl CLI, the real helm binary and the
official kubernetes client against the in-repo fake API server (tests/fakek8s; no real kube-apiserver
can run on our machines). The fake schedules pods onto registered Nodes and lets a test make a pod
never ready, crash-loop or stay unschedulable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, run_cli

NPU = "huawei.com/Ascend910"
NS = "mindie"


def inventory(tmp_path: Path, stem: str, kubeconfig: Path, extra: str = "") -> Path:
    text = (EXAMPLES / f"{stem}.yaml").read_text().replace("hccn/", str(EXAMPLES / "hccn") + "/")
    path = tmp_path / f"{stem}.yaml"
    path.write_text(text + f"\nkubernetes:\n  namespace: {NS}\n  kubeconfig: {kubeconfig}\n" + extra)
    return path


def add_servers(api, stem: str, skip: str = "", ip_of: dict | None = None) -> None:
    inv = yaml.safe_load((EXAMPLES / f"{stem}.yaml").read_text())
    per = 8 if inv["cluster"]["hardware"] == "a2" else 16
    accel = "module-910b-8" if per == 8 else "module-a3-16"
    for node in inv["nodes"]:
        if node["name"] != skip:
            api.add_node(node["name"], (ip_of or {}).get(node["name"], node["address"]),
                         labels={"accelerator-type": accel}, allocatable={NPU: str(per)})


def cli(tmp_path: Path, *args: str):
    return run_cli(*args, cwd=tmp_path, env={"HOME": str(tmp_path / "home")})


def created(api) -> set[tuple[str, str]]:
    """(kind, name) of every object deployctl/helm created, helm's release Secrets, pods and deployctl's Lease
    (its lock) aside."""
    out = set()
    for r in api.requests_to("POST"):
        body = r.get("body") or {}
        if body.get("kind") and body["kind"] not in ("Secret", "Pod", "Namespace", "Event", "Lease"):
            out.add((body["kind"], body["metadata"]["name"]))
    return out


def rendered_objects(tmp_path: Path, inv: Path) -> set[tuple[str, str]]:
    res = cli(tmp_path, "render", "-t", "helm", "-i", str(inv), "-o", str(tmp_path / "r"), "--force")
    assert res.returncode == 0, res.stderr
    docs = [d for d in yaml.safe_load_all((tmp_path / "r" / "manifests.yaml").read_text()) if d]
    return {(d["kind"], d["metadata"]["name"]) for d in docs
            if "helm.sh/hook" not in (d["metadata"].get("annotations") or {})}


def test_up_creates_exactly_the_rendered_objects_then_status_diff_rerun_down(fake_kube, kubeconfig, tmp_path):
    add_servers(fake_kube, "a2-2x8-tp-pp")
    inv = inventory(tmp_path, "a2-2x8-tp-pp", kubeconfig)
    expected = rendered_objects(tmp_path, inv)
    assert ("StatefulSet", "ds32-2x8-ascend-llm-mixed-master") in expected

    res = cli(tmp_path, "up", "-t", "k8s", "-i", str(inv), "-y", "--ready-timeout", "30")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "✓ serving through Service ds32-2x8-ascend-llm.mindie:1025" in res.stdout
    assert created(fake_kube) == expected
    ns = fake_kube.get_object("namespaces", None, NS)   # created by deployctl, for hostNetwork/hostPath pods
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    pods = {p["metadata"]["name"]: p for p in fake_kube.objects("pods", NS)}
    assert set(pods) == {"ds32-2x8-ascend-llm-mixed-master-0", "ds32-2x8-ascend-llm-mixed-worker-0"}
    assert pods["ds32-2x8-ascend-llm-mixed-master-0"]["spec"]["nodeName"] == "node1"   # the rank table's master
    assert pods["ds32-2x8-ascend-llm-mixed-worker-0"]["status"]["podIP"] == "10.200.2.3"
    files = fake_kube.get_object("configmaps", NS, "ds32-2x8-ascend-llm-mixed-files")["data"]
    assert files["ranktable.json"].encode() == (
        Path(__file__).parents[1] / "golden" / "a2-2x8-tp-pp" / "node1" / "ranktable.json").read_bytes()

    res = cli(tmp_path, "status", "-t", "k8s", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["degraded"] is False and doc["ready"] == {"mixed": 2}

    res = cli(tmp_path, "diff", "-t", "k8s", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stderr
    assert {o["change"] for o in json.loads(res.stdout)["objects"]} == {"unchanged"}

    writes = len(fake_kube.requests_to("POST")) + len(fake_kube.requests_to("PUT")) + len(fake_kube.requests_to("PATCH"))
    res = cli(tmp_path, "up", "-t", "k8s", "-i", str(inv), "-y")
    assert res.returncode == 0 and "nothing to do" in res.stdout
    assert len(fake_kube.requests_to("POST")) + len(fake_kube.requests_to("PUT")) + \
        len(fake_kube.requests_to("PATCH")) == writes

    res = cli(tmp_path, "down", "-t", "k8s", "-i", str(inv))
    assert res.returncode == 0, res.stderr
    assert fake_kube.objects("statefulsets", NS) == [] and fake_kube.objects("pods", NS) == []


def test_pod_that_never_becomes_ready_is_named_and_the_install_is_undone(fake_kube, kubeconfig, tmp_path):
    add_servers(fake_kube, "a2-2x8-tp-pp")
    fake_kube.never_ready("ds32-2x8-ascend-llm-mixed-worker-0")
    inv = inventory(tmp_path, "a2-2x8-tp-pp", kubeconfig)
    res = cli(tmp_path, "up", "-t", "k8s", "-i", str(inv), "-y", "--ready-timeout", "5")
    assert res.returncode == 1
    out = res.stdout
    assert "pod ds32-2x8-ascend-llm-mixed-worker-0 (mixed) on node2: Running, not ready" in out
    assert "Unhealthy: Readiness probe failed: HTTP probe failed with statuscode: 503" in out
    assert "ds32-2x8-ascend-llm-mixed-master-0" not in out.split("not ready", 1)[1].split("uninstall")[0]
    assert "✗ up failed; the release was uninstalled" in out
    assert fake_kube.objects("statefulsets", NS) == []
    record = next((tmp_path / ".deployctl" / "runs").glob("*-up-k8s"))
    assert (record / "status").read_text() == "failed\n"
    assert "ds32-2x8-ascend-llm-mixed-worker-0" in (record / "rollout.json").read_text()


def test_pd_split_up_on_kubernetes_is_refused_before_anything_changes(fake_kube, kubeconfig, tmp_path):
    """MindIE's decode runs one server per DP rank (distributed DP); the chart runs one server per pod, so
    pd-split is refused for Kubernetes (exit 2, nothing installed) instead of deploying a decode MindIE-MS
    cannot reach (mindie-upstream-rules.md §1.1)."""
    add_servers(fake_kube, "a3-pd-2p2d")
    inv = inventory(tmp_path, "a3-pd-2p2d", kubeconfig)
    res = cli(tmp_path, "up", "-t", "k8s", "-i", str(inv), "-y", "--ready-timeout", "30")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "pd-split is not rendered for Kubernetes yet" in res.stdout + res.stderr
    assert fake_kube.objects("statefulsets", NS) == [] and fake_kube.objects("deployments", NS) == []


@pytest.mark.parametrize("case, expect", [
    ("missing", "no Kubernetes Node named 'node2'"),
    ("wrong-ip", "Node node2 has InternalIP 10.9.9.9, but the rank table names it 10.200.2.3"),
])
def test_node_checks_refuse_before_changing_anything(fake_kube, kubeconfig, tmp_path, case, expect):
    if case == "missing":
        add_servers(fake_kube, "a2-2x8-tp-pp", skip="node2")
    else:
        add_servers(fake_kube, "a2-2x8-tp-pp", ip_of={"node2": "10.9.9.9"})
    inv = inventory(tmp_path, "a2-2x8-tp-pp", kubeconfig)
    res = cli(tmp_path, "up", "-t", "k8s", "-i", str(inv), "-y")
    assert res.returncode == 1
    assert expect in res.stderr + res.stdout
    assert created(fake_kube) == set()
