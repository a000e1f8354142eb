"""vLLM-Ascend end to end on simulated hosts: the two example inventories (inventories/examples/vllm-*.yaml) with
the fake cluster's addresses, `up -y` with preflight (the socket interfaces come from its facts: the inventories
name none), `status`, a chat completion (node 0 / the P-D proxy), `history`, an env change + `up` (a new
revision), `rollback`, `down`; on the P/D split the KV-transfer check after the smoke passes, and fails the run
(rolled back, the Mooncake error named) when the decode node's Mooncake transfers fail.

The fake image runs the stand-in vLLM (tests/fakecluster/fake_bin/vllm.py): vLLM's own flag tables, the DP
handshake over TCP between the nodes, Mooncake's handshake ports, the proxy of the guides.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLES, run_cli
from fakecluster import FakeCluster, default_cluster
from fakecluster.fixtures import require_fake_cluster_support

READY_TIMEOUT = "90"


@dataclass
class Deployment:
    fc: FakeCluster
    inv: Path
    runs: Path
    container: str
    api: tuple[str, int]          # where clients send requests (node 0's API, or the proxy)
    proxy: str | None = None


def inventory_for(fc: FakeCluster, example: str, path: Path, env: dict | None = None) -> Path:
    """The example inventory with the fake cluster's addresses and SSH settings, without `interface:` (preflight
    finds the NIC carrying each address)."""
    doc = yaml.safe_load((EXAMPLES / example).read_text())
    doc["ssh"] = {"user": "root", "key": str(fc.client_key), "known_hosts": str(fc.known_hosts)}
    doc["nodes"] = [{"name": n.name, "address": n.ip} for n in fc.nodes]
    if env:
        doc["engine"]["env"] = dict(env)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def preflight(dep: Deployment):
    """`deployctl preflight`: its facts (the NIC carrying each node's address) are what `up` then plans with."""
    res = run_cli("preflight", "-i", str(dep.inv), "--run-dir", str(dep.runs), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    return res


def up(dep: Deployment, *extra: str):
    res = run_cli("up", "-i", str(dep.inv), "-y", "--run-dir", str(dep.runs), "--ready-timeout", READY_TIMEOUT,
                  "--output", "json", *extra)
    doc = json.loads(res.stdout) if res.stdout.strip().startswith("{") else {}
    return res, doc


def read_inventory(dep: Deployment) -> Path:
    """For `status`, `history`, `rollback`, `down`: the inventory as written, without interfaces (they are a gap
    preflight fills, like device IPs; these commands read what the hosts run and need no facts)."""
    return dep.inv


def status(dep: Deployment, inv: Path | None = None) -> tuple[int, list[dict]]:
    st = run_cli("status", "-i", str(inv or read_inventory(dep)), "--output", "json")
    assert st.stdout.strip().startswith("{"), st.stdout + st.stderr
    doc = json.loads(st.stdout)
    assert "nodes" in doc, doc
    return st.returncode, doc["nodes"]


def history(dep: Deployment) -> dict:
    h = run_cli("history", "-i", str(read_inventory(dep)), "--output", "json")
    assert h.returncode == 0, h.stdout + h.stderr
    return json.loads(h.stdout)


def chat(ip: str, port: int, model: str, content: str = "hi", stream: bool = False):
    body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 16}
    if stream:
        body["stream"] = True
    req = urllib.request.Request(f"http://{ip}:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    raw = urllib.request.urlopen(req, timeout=30).read().decode()
    if not stream:
        return json.loads(raw)
    chunks = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]
    assert raw.rstrip().endswith("data: [DONE]"), raw
    return "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])


def container_env(fc: FakeCluster, node: str, container: str) -> dict[str, str]:
    r = fc.ssh(node, f"cat /var/lib/fakedocker/{container}/env", check=True)
    return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)


def containers(fc: FakeCluster, node: str) -> list[str]:
    return fc.ssh(node, "docker ps -a --format '{{.Names}}'", check=True).stdout.split()


def make_cluster(tmp_path_factory, specs) -> FakeCluster:
    require_fake_cluster_support()
    return FakeCluster(specs, tmp_path_factory.mktemp("fakecluster")).start()


def check_lifecycle(dep: Deployment, model: str, before_down=None) -> None:
    """up (done by the fixture) -> env on the hosts, status, chat, history, env change + up, rollback, down."""
    fc = dep.fc
    for n in fc.nodes:
        env = container_env(fc, n.name, dep.container)
        assert env["HCCL_IF_IP"] == n.ip
        assert env["GLOO_SOCKET_IFNAME"] == env["TP_SOCKET_IFNAME"] == env["HCCL_SOCKET_IFNAME"] == "eth0"
    rc, rows = status(dep)
    assert rc == 0, rows
    # a headless node serves no HTTP: status reads its engine cores' "init engine ... took" lines instead
    assert [(r["node"], r["engine"], r["ready"], r["problem"]) for r in rows] == [
        (n.name, "running", True, "") for n in fc.nodes]
    first_rev = {r["node"]: r["revision"] for r in rows}
    answer = chat(*dep.api, model)
    assert "fake vLLM-Ascend 0.13.0" in answer["choices"][0]["message"]["content"], answer
    assert "fake vLLM-Ascend" in chat(*dep.api, model, stream=True)
    hist = history(dep)
    assert hist, hist
    # an env change is a new revision, restarted everywhere
    doc = yaml.safe_load(dep.inv.read_text())
    doc["engine"]["env"] = {"TEST_REVISION": "b"}
    dep.inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    res, out = up(dep)
    assert res.returncode == 0, res.stdout + res.stderr
    assert out["status"] == "successful"
    rc, rows = status(dep)
    assert rc == 0, rows
    second_rev = {r["node"]: r["revision"] for r in rows}
    assert all(second_rev[n] != first_rev[n] for n in first_rev), (first_rev, second_rev)
    for n in fc.nodes:
        assert container_env(fc, n.name, dep.container)["TEST_REVISION"] == "b"
    assert chat(*dep.api, model)["choices"][0]["message"]["content"]
    if before_down:
        before_down(dep, first_rev, second_rev)
    # rollback: the first revision again, serving
    rb = run_cli("rollback", "-i", str(read_inventory(dep)), "-y", "--run-dir", str(dep.runs), "--ready-timeout",
                 READY_TIMEOUT, "--output", "json")
    assert rb.returncode == 0, rb.stdout + rb.stderr
    rc, rows = status(dep)
    assert rc == 0, rows
    assert {r["node"]: r["revision"] for r in rows} == first_rev
    for n in fc.nodes:
        assert "TEST_REVISION" not in container_env(fc, n.name, dep.container)
    assert chat(*dep.api, model)["choices"][0]["message"]["content"]
    # down: nothing left (the engine processes are seen before, so their absence after means something)
    alive = "pgrep --ns $$ --nslist net -f '[/].fakecluster/vllm.py'"
    assert all(fc.ssh(n.name, alive).returncode == 0 for n in fc.nodes)
    dn = run_cli("down", "-i", str(read_inventory(dep)), "--run-dir", str(dep.runs))
    assert dn.returncode == 0, dn.stdout + dn.stderr
    for n in fc.nodes:
        assert containers(fc, n.name) == []
        # this node's processes only (its network namespace): other fake clusters share the machine's pid space
        assert fc.ssh(n.name, alive).returncode == 1


# ---- 2 x A2: DeepSeek-V3.2 DP2 x TP8, EP16 (internal DP: node2 runs --headless) ---------------------------

@pytest.fixture(scope="module")
def a2(tmp_path_factory):
    fc = make_cluster(tmp_path_factory, default_cluster(2, "a2", weights_dir="/data/models/DeepSeek-V3.2-W8A8",
                                                        engine_join_timeout=20))
    try:
        work = tmp_path_factory.mktemp("vllm-a2")
        inv = inventory_for(fc, "vllm-a2-2x8-v32-dp-ep.yaml", work / "inv.yaml")
        dep = Deployment(fc, inv, work / "runs", "deployctl_v32-vllm_vllm", (fc.node("node1").ip, 8000))
        preflight(dep)
        res, doc = up(dep)
        assert res.returncode == 0, res.stdout + res.stderr
        assert doc["status"] == "successful", doc
        yield dep
    finally:
        fc.stop()


def test_a2_dp_ep_headless_node_joins_the_dp_group(a2):
    fc = a2.fc
    logs = {n: fc.ssh(n, f"docker logs {a2.container} 2>&1", check=True).stdout for n in ("node1", "node2")}
    assert "All 2 DP ranks joined the data parallel group." in logs["node1"], logs["node1"]
    assert "Application startup complete." in logs["node1"]
    assert "(EngineCore_DP1 " in logs["node2"] and "init engine (profile, create kv cache, warmup model)" in logs["node2"]
    assert "Application startup complete." not in logs["node2"]


def test_status_reads_an_inventory_without_interfaces(a2):
    rc, rows = status(a2, a2.inv)
    # node2 is headless: no HTTP endpoint to probe, its readiness is its engine cores' log line (up waits for it)
    assert rc == 0 and [r["ready"] for r in rows] == [True, True], rows


def test_a2_dp_ep_lifecycle(a2):
    check_lifecycle(a2, "ds-v3.2")


# ---- 2 x A3: Qwen3-235B 1P1D (external DP, Mooncake, the proxy on p1) ---------------------------------------

@pytest.fixture(scope="module")
def a3(tmp_path_factory):
    specs = default_cluster(2, "a3", weights_dir="/data/models/Qwen3-235B-A22B-W8A8", engine_join_timeout=20)
    specs = [specs[0].replace(name="p1"), specs[1].replace(name="d1")]
    fc = make_cluster(tmp_path_factory, specs)
    try:
        work = tmp_path_factory.mktemp("vllm-a3")
        inv = inventory_for(fc, "vllm-a3-1p1d-qwen3.yaml", work / "inv.yaml")
        dep = Deployment(fc, inv, work / "runs", "deployctl_qwen3-pd_vllm", (fc.node("p1").ip, 1999), "deployctl_qwen3-pd_vllm-proxy")
        preflight(dep)
        res, doc = up(dep)
        assert res.returncode == 0, res.stdout + res.stderr
        assert doc["status"] == "successful", doc
        yield dep
    finally:
        fc.stop()


def test_a3_pd_proxy_sends_prefill_then_decode(a3):
    fc = a3.fc
    assert set(containers(fc, "p1")) == {a3.container, a3.proxy}
    assert containers(fc, "d1") == [a3.container]
    # round robin: two requests reach both prefill ranks and two of the four decode ranks
    texts = [chat(*a3.api, "qwen3")["choices"][0]["message"]["content"] for _ in range(4)]
    assert {t.split("DP rank ")[1].split(" ")[0] for t in texts} == {"0", "1", "2", "3"}, texts
    assert all("kv_consumer" in t for t in texts)
    logs = fc.ssh("d1", f"docker logs {a3.container} 2>&1", check=True).stdout
    # kv_port 36100 + dp_rank x tp + tp_rank (mooncake_connector.py side_channel_port): 4 ranks x TP4
    for r in range(4):
        assert f"Mooncake handshake ports {36100 + 4 * r}-{36103 + 4 * r} on {fc.node('d1').ip}" in logs, logs
    for needle in ("Mooncake transfer failed", "103900", "103902"):
        assert needle not in logs


def test_a3_pd_lifecycle_and_the_kv_transfer_check(a3):
    def mooncake_fault(dep: Deployment, first_rev, second_rev):
        fc = dep.fc
        fc.update_node("d1", engine_mooncake_error=True)
        try:
            doc = yaml.safe_load(dep.inv.read_text())
            doc["engine"]["env"] = {"TEST_REVISION": "c"}
            dep.inv.write_text(yaml.safe_dump(doc, sort_keys=False))
            res, out = up(dep)
        finally:
            fc.update_node("d1", engine_mooncake_error=False)
        text = res.stdout + res.stderr
        assert res.returncode == 1, text
        assert "Mooncake transfer failed" in text and "103902" in text, text
        assert "d1" in text
        rc, rows = status(dep)
        assert rc == 0, rows
        assert {r["node"]: r["revision"] for r in rows} == second_rev     # rolled back to revision b
        doc["engine"]["env"] = {"TEST_REVISION": "b"}
        dep.inv.write_text(yaml.safe_dump(doc, sort_keys=False))

    check_lifecycle(a3, "qwen3", before_down=mooncake_fault)
