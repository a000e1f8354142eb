"""The rendered scrape configuration and dashboard in the real Prometheus (Debian's package) against the simulated
cluster: a fleet of two single-node replicas (vLLM-Ascend, then MindIE) behind
deployctl's HAProxy router is brought up with `deployctl up` (MindIE with no monitoring setting in the
inventory: the env preset switches its metrics on); Prometheus scrapes what `deployctl observe render`
wrote; through its HTTP API every engine, router and npu-exporter target is up and every panel of the dashboard
returns series (the NPU panels from a stand-in npu-exporter on each simulated host,
tests/fakecluster/fake_bin/npu_exporter.py), and an NPU set to Alarm shows unhealthy with an error code."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from fakecluster import default_cluster
from fakecluster.spec import DEFAULT_IMAGES, DEFAULT_WEIGHTS_DIR, VLLM_IMAGES
from promserver import Prometheus, concrete

pytestmark = pytest.mark.e2e

ROUTER = "router: {port: 8080, admin_port: 8081, check_interval_ms: 300}\nlayout: {preset: single, replicas: 2}\n"
ENGINES = {
    "vllm": f"""\
engine: {{kind: vllm-ascend, image: "{VLLM_IMAGES['a2']}"}}
model: {{name: qwen3-235b-a22b, quant: w8a8, weights_path: {DEFAULT_WEIGHTS_DIR}, served_name: m,
        max_seq_len: 8192, max_input_len: 4096, max_batch_size: 16}}
""",
    # MindIE serves /metrics only with MIES_SERVICE_MONITOR_MODE=1: deployctl's env preset sets it, the inventory
    # says nothing (observable from the first `up`, docs/observability.md)
    "mindie": f"""\
engine: {{image: "{DEFAULT_IMAGES['a2']}"}}
model: {{name: deepseek-r1, quant: w4a8, weights_path: {DEFAULT_WEIGHTS_DIR}, served_name: m,
        max_seq_len: 8192, max_input_len: 4096, max_batch_size: 16}}
""",
}
NPU_EXPORTER = Path(__file__).resolve().parents[2] / "fakecluster" / "fake_bin" / "npu_exporter.py"


@contextlib.contextmanager
def npu_exporters(fc):
    """The npu-exporter stand-in on every node: in the node's network namespace, on its address, port 8082."""
    procs = [subprocess.Popen(["ip", "netns", "exec", n.netns, sys.executable, str(NPU_EXPORTER), "--ip", n.ip],
                              env={"PATH": "/usr/bin:/bin", "FAKECLUSTER_STATE": str(n.state_file)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for n in fc.nodes]
    try:
        yield procs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(10)


def chat(url: str) -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello"}],
                       "max_tokens": 8}).encode()
    req = urllib.request.Request(f"{url}/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200


def wait_for(prom: Prometheus, expr: str, want, timeout: float = 60):
    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        got = prom.query(expr)
        if got["status"] == "success" and want(got["data"]["result"]):
            return got["data"]["result"]
        time.sleep(0.5)
    pytest.fail(f"{expr}: {got}")


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_prometheus_scrapes_the_fleet_and_the_dashboard_queries_return_series(fake_cluster_factory, tmp_path, engine):
    fc = fake_cluster_factory(default_cluster(2))
    inv = tmp_path / "inv.yaml"
    doc = yaml.safe_load(fc.inventory_snippet() + ENGINES[engine] + ROUTER)
    for node in doc["nodes"]:
        node["interface"] = "eth0"        # the simulated hosts' NIC (fakecluster/cluster.py); vLLM-Ascend names it
    inv.write_text(yaml.safe_dump(doc))
    res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(tmp_path / "runs"), "--ready-timeout", "90",
                  "--skip-preflight")
    assert res.returncode == 0, res.stdout + res.stderr
    router = f"http://{fc.node('node1').ip}:8080"
    for _ in range(6):
        chat(router)

    res = run_cli("observe", "render", "-i", str(inv), "-o", str(tmp_path / "mon"), "--interval", "1",
                  "--npu-exporter")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "WARN" not in res.stderr, res.stderr
    dash = json.loads((tmp_path / "mon" / "grafana-dashboard.json").read_text())
    cluster = "fake-a2-2"
    fc.update_node("node2", npu_health={3: "Alarm"})
    with npu_exporters(fc), Prometheus(tmp_path / "mon" / "prometheus.yml", tmp_path / "prom") as prom:
        wait_for(prom, 'up{job="deployctl-npu"} == 1', lambda r: len(r) == 2)
        ups = wait_for(prom, 'up{job=~"deployctl-engine|deployctl-router"} == 1', lambda r: len(r) == 3)
        # deployctl's instance in its own label; Prometheus's `instance` is each target's host:port
        port = 8000 if engine == "vllm" else 1027
        ip1, ip2 = fc.node("node1").ip, fc.node("node2").ip
        assert sorted((r["metric"]["job"], r["metric"]["deployctl_instance"], r["metric"]["instance"],
                       r["metric"]["node"], r["metric"]["role"], r["metric"]["cluster"]) for r in ups) == [
            ("deployctl-engine", "mixed-0", f"{ip1}:{port}", "node1", "mixed", cluster),
            ("deployctl-engine", "mixed-1", f"{ip2}:{port}", "node2", "mixed", cluster),
            ("deployctl-router", "router", f"{ip1}:8081", "node1", "router", cluster)]
        # a few scrapes, so rate() has two samples; traffic in between
        wait_for(prom, "count_over_time(up{job=\"deployctl-engine\"}[1m])", lambda r: r and min(
            float(x["value"][1]) for x in r) >= 3)
        for _ in range(6):
            chat(router)
        # scraped since: the traffic is in the counters, 12 answered requests over the two replicas
        prefix = "vllm:" if engine == "vllm" else ""
        wait_for(prom, f"sum({prefix}time_to_first_token_seconds_count)", lambda r: r and float(r[0]["value"][1]) >= 12)
        empty, checked = [], 0
        for panel in dash["panels"]:
            for t in panel["targets"]:
                got = prom.query(concrete(t["expr"], cluster, "30s"))
                assert got["status"] == "success", (panel["title"], t["expr"], got)
                checked += 1
                if not got["data"]["result"]:
                    empty.append((panel["title"], t["expr"]))
        assert checked >= 15 and empty == [], empty
        tokens = prom.query(f'sum({prefix}generation_tokens_total{{cluster="{cluster}"}})')["data"]["result"]
        assert float(tokens[0]["value"][1]) > 0
        backends = prom.query('haproxy_server_status{state="UP", proxy="instances"} == 1')["data"]["result"]
        assert sorted(r["metric"]["server"] for r in backends) == ["mixed-0", "mixed-1"]
        # the NPU set to Alarm, and only it, is unhealthy, with an error code; 8 NPUs per node have HBM numbers
        sick = prom.query("npu_chip_info_health_status == 0")["data"]["result"]
        assert [(r["metric"]["node"], r["metric"]["id"]) for r in sick] == [("node2", "3")]
        code = prom.query('npu_chip_info_error_code{node="node2", id="3"}')["data"]["result"]
        assert float(code[0]["value"][1]) > 0
        hbm = prom.query(concrete([t["expr"] for p in dash["panels"] if p["title"] == "NPU HBM used"
                                   for t in p["targets"]][0], cluster))["data"]["result"]
        assert len(hbm) == 16 and all(0 < float(r["value"][1]) < 1 for r in hbm)
