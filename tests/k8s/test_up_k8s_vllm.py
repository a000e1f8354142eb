"""vLLM-Ascend through `up | status | diff | down --target k8s`: the deployctl CLI, the real helm binary and the
Kubernetes API. One pod per server pinned to it, the proxy of the prefill/decode split, the Service on the
proxy; a change on one server restarts its instance only, and the other keeps its pods."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from conftest import EXAMPLES, run_cli

NPU = "huawei.com/Ascend910"
NS = "serving"
STEM = "vllm-a3-1p1d-qwen3"
PREFIX = "qwen3-pd-ascend-llm"


def inventory(tmp_path: Path, kubeconfig: Path, interface_d1: str | None = None) -> Path:
    doc = yaml.safe_load((EXAMPLES / f"{STEM}.yaml").read_text())
    if interface_d1:
        next(n for n in doc["nodes"] if n["name"] == "d1")["interface"] = interface_d1
    doc["kubernetes"] = {"namespace": NS, "kubeconfig": str(kubeconfig)}
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def cli(tmp_path: Path, *args: str):
    return run_cli(*args, cwd=tmp_path, env={"HOME": str(tmp_path / "home")})


def pods(api) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in api.objects("pods", NS)}


def test_vllm_pd_split_up_status_restart_one_instance_down(fake_kube, kubeconfig, tmp_path):
    for name, ip in (("p1", "10.202.0.2"), ("d1", "10.202.0.3")):
        fake_kube.add_node(name, ip, labels={"accelerator-type": "module-a3-16"}, allocatable={NPU: "16"})
    inv = inventory(tmp_path, kubeconfig)

    res = cli(tmp_path, "up", "-t", "k8s", "-i", str(inv), "-y", "--ready-timeout", "60")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"✓ serving through Service {PREFIX}.{NS}:1999" in res.stdout
    live = pods(fake_kube)
    engines = {n: p for n, p in live.items() if p["metadata"]["labels"].get("app.kubernetes.io/component") == "engine"}
    assert {p["spec"]["nodeName"] for p in engines.values()} == {"p1", "d1"}
    assert {n: p["spec"]["nodeName"] for n, p in engines.items()} == {f"{PREFIX}-prefill-0-0": "p1",
                                                                      f"{PREFIX}-decode-0-0": "d1"}
    (proxy,) = [p for p in live.values() if p["metadata"]["labels"].get("app.kubernetes.io/component") == "proxy"]
    assert proxy["spec"]["nodeName"] == "p1"
    env = fake_kube.get_object("configmaps", NS, f"{PREFIX}-decode-0-env")["data"]
    assert env["HCCL_IF_IP"] == "10.202.0.3" and env["GLOO_SOCKET_IFNAME"] == "enp189s0f0"
    service = fake_kube.get_object("services", NS, PREFIX)
    assert service["spec"]["ports"][0]["targetPort"] == 1999
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "proxy"

    res = cli(tmp_path, "status", "-t", "k8s", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["degraded"] is False and doc["ready"] == {"prefill": 1, "decode": 1, "proxy": 1}

    before = {n: p["metadata"]["uid"] for n, p in pods(fake_kube).items()}
    changed = inventory(tmp_path, kubeconfig, interface_d1="enp189s0f1")
    res = cli(tmp_path, "diff", "-t", "k8s", "-i", str(changed), "--output", "json")
    assert res.returncode == 0, res.stderr
    actions = {a["instance"]: a["action"] for a in json.loads(res.stdout)["instances"]}
    assert actions == {"prefill": "keep", "decode": "restart"}
    res = cli(tmp_path, "up", "-t", "k8s", "-i", str(changed), "-y", "--ready-timeout", "60")
    assert res.returncode == 0, res.stdout + res.stderr
    after = {n: p["metadata"]["uid"] for n, p in pods(fake_kube).items()}
    assert after[f"{PREFIX}-prefill-0-0"] == before[f"{PREFIX}-prefill-0-0"]      # untouched
    assert after[f"{PREFIX}-decode-0-0"] != before[f"{PREFIX}-decode-0-0"]        # restarted
    env = fake_kube.get_object("configmaps", NS, f"{PREFIX}-decode-0-env")["data"]
    assert env["GLOO_SOCKET_IFNAME"] == "enp189s0f1"

    res = cli(tmp_path, "down", "-t", "k8s", "-i", str(changed))
    assert res.returncode == 0, res.stderr
    assert fake_kube.objects("statefulsets", NS) == [] and fake_kube.objects("pods", NS) == []
