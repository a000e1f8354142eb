"""`deployctl observe render` without hosts: the scrape configuration's jobs, targets and labels for a MindIE fleet
and a vLLM-Ascend fleet, promtool's verdict on it, and every dashboard query parsed by the real Prometheus."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, run_cli
from promserver import Prometheus, binary, concrete

FLEET = EXAMPLES / "a2-fleet-4x2x8-dp-ep.yaml"


def vllm_fleet(tmp_path: Path) -> Path:
    doc = yaml.safe_load((EXAMPLES / "vllm-a2-2x8-v32-dp-ep.yaml").read_text())
    doc["model"] = {"name": "qwen3-235b-a22b", "quant": "w8a8", "weights_path": "/data/models/q",
                    "served_name": "qwen3", "max_seq_len": 8192, "max_input_len": 4096, "max_batch_size": 16}
    doc["layout"] = {"preset": "single", "replicas": 2}
    doc["router"] = {"port": 8080, "admin_port": 8081}
    path = tmp_path / "vllm.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def render(inv: Path, out: Path, *extra: str) -> dict:
    res = run_cli("observe", "render", "-i", str(inv), "-o", str(out), "--output", "json", *extra)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout)


def groups(config: dict) -> dict[str, list]:
    return {j["job_name"]: [(g["targets"], g["labels"]) for g in j["static_configs"]] for j in config["scrape_configs"]}


def test_mindie_fleet_scrapes_every_node_the_router_and_npu_exporters(tmp_path):
    doc = render(FLEET, tmp_path / "mon", "--npu-exporter")
    config = yaml.safe_load((tmp_path / "mon" / "prometheus.yml").read_text())
    jobs = groups(config)
    assert set(jobs) == {"deployctl-engine", "deployctl-router", "deployctl-npu"}
    engine = jobs["deployctl-engine"]
    # 4 replicas of 2 nodes: every node's MindIE metrics port (engine.ports.metrics, default 1027)
    assert len(engine) == 8
    # deployctl's instance in a label of its own; Prometheus's `instance` is left to be the target's host:port
    assert engine[0] == (["10.200.5.2:1027"], {"cluster": "r1-fleet", "node": "a2-node1",
                                               "deployctl_instance": "mixed-0", "role": "mixed"})
    assert {lab["deployctl_instance"] for _, lab in engine} == {"mixed-0", "mixed-1", "mixed-2", "mixed-3"}
    assert jobs["deployctl-router"] == [(["10.200.5.2:8081"], {"cluster": "r1-fleet", "node": "a2-node1",
                                                                "deployctl_instance": "router", "role": "router"})]
    assert [t for t, _ in jobs["deployctl-npu"]][:2] == [["10.200.5.2:8082"], ["10.200.5.3:8082"]]
    assert [lab["deployctl_instance"] for _, lab in jobs["deployctl-npu"]][:3] == ["mixed-0", "mixed-0", "mixed-1"]
    assert not any("instance" in lab for group in jobs.values() for _, lab in group)
    # MindIE answers /metrics only with MIES_SERVICE_MONITOR_MODE=1, which the env preset sets: nothing to add
    assert {t["needs"] for t in doc["targets"]} == {""}


@pytest.mark.parametrize("where, value, level", [
    ("engine", 0, "note"), ("engine", "off", "WARN"), ("decode", 0, "note")])
def test_metrics_switched_off_by_the_user_are_said_before_up_and_at_render(tmp_path, where, value, level):
    """engine.env (or a role's env) may turn MindIE's metrics off: the env file says 0, `plan` says so before `up`
    (a value MindIE cannot read as a number is a warning) and `observe render` marks those targets."""
    doc = yaml.safe_load((EXAMPLES / ("a3-pd-2p2d.yaml" if where == "decode" else FLEET.name)).read_text())
    block = doc["layout"]["decode"] if where == "decode" else doc["engine"]
    block.setdefault("env", {})["MIES_SERVICE_MONITOR_MODE"] = value
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(doc))
    key = ("layout.decode.env" if where == "decode" else "engine.env") + ".MIES_SERVICE_MONITOR_MODE"
    res = run_cli("plan", "-i", str(inv))
    assert res.returncode == 0, res.stdout + res.stderr
    said = [line for line in res.stdout.splitlines() if "MIES_SERVICE_MONITOR_MODE" in line and "500" in line]
    assert len(said) == 1 and key in said[0] and "GET /metrics answers 500" in said[0], res.stdout
    assert said[0].lstrip().startswith("note:" if level == "note" else "WARN"), said
    out = render(inv, tmp_path / "mon")
    marked = {t["labels"]["role"] for t in out["targets"] if t["needs"]}
    assert marked == ({"decode"} if where == "decode" else {"mixed"})
    assert all(key in t["needs"] for t in out["targets"] if t["needs"])
    res = run_cli("render", "-i", str(inv), "-o", str(tmp_path / "tree"))
    assert res.returncode == 0, res.stdout + res.stderr
    node = "d1" if where == "decode" else "a2-node1"
    assert f"\nMIES_SERVICE_MONITOR_MODE={value}\n" in (tmp_path / "tree" / node / "env").read_text()


def test_vllm_fleet_scrapes_each_api_port_and_no_npu_exporter_unless_asked(tmp_path):
    render(vllm_fleet(tmp_path), tmp_path / "mon", "--interval", "5")
    config = yaml.safe_load((tmp_path / "mon" / "prometheus.yml").read_text())
    assert config["global"]["scrape_interval"] == "5s"
    jobs = groups(config)
    assert set(jobs) == {"deployctl-engine", "deployctl-router"}
    assert [t for t, _ in jobs["deployctl-engine"]] == [["10.200.2.2:8000"], ["10.200.2.3:8000"]]


def test_promtool_accepts_the_config(tmp_path):
    render(FLEET, tmp_path / "mon", "--npu-exporter", "--npu-exporter-https")
    res = subprocess.run([binary("promtool"), "check", "config", str(tmp_path / "mon" / "prometheus.yml")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_the_dashboard_model(tmp_path):
    render(FLEET, tmp_path / "mon")
    dash = json.loads((tmp_path / "mon" / "grafana-dashboard.json").read_text())
    assert dash["schemaVersion"] >= 39
    const = {v["name"]: v for v in dash["templating"]["list"]}
    assert const["cluster"]["query"] == "r1-fleet"
    titles = [p["title"] for p in dash["panels"]]
    for want in ("Time to first token", "Time per output token", "Output tokens", "Requests in flight",
                 "Requests queued", "KV cache", "NPU health", "NPU HBM", "restarts", "Router: backends up"):
        assert any(want in t for t in titles), (want, titles)
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert all('cluster="$cluster"' in e for e in exprs if "{" in e)
    assert not any("r1-fleet" in e for e in exprs)     # the inventory's name reaches PromQL only via the variable
    # per-instance panels group by deployctl's label, never by Prometheus's host:port `instance`
    per_instance = [t for p in dash["panels"] if p["title"].endswith("per instance") or "restarts" in p["title"]
                    for t in p["targets"]]
    assert len(per_instance) == 9
    for t in per_instance:
        assert "by (deployctl_instance" in t["expr"] and t["legendFormat"].startswith("{{deployctl_instance}}"), t
    assert not any("by (instance" in e or ", instance)" in e for e in exprs)


def test_the_dashboard_reads_the_engines_own_metric_names(tmp_path):
    render(FLEET, tmp_path / "mindie")
    render(vllm_fleet(tmp_path), tmp_path / "vllm")
    exprs = {}
    for kind in ("mindie", "vllm"):
        dash = json.loads((tmp_path / kind / "grafana-dashboard.json").read_text())
        exprs[kind] = " ".join(t["expr"] for p in dash["panels"] for t in p["targets"])
    for name in ("vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
                 "vllm:generation_tokens_total", "vllm:num_requests_running", "vllm:num_requests_waiting",
                 "vllm:kv_cache_usage_perc"):
        assert name in exprs["vllm"] and name not in exprs["mindie"], name
    for name in ("(time_to_first_token_seconds_bucket", "(time_per_output_token_seconds_bucket",
                 "(generation_tokens_total", "(num_requests_running", "(npu_cache_usage_perc"):
        assert name in exprs["mindie"] and name not in exprs["vllm"], name


@pytest.mark.e2e        # runs the Prometheus server until it has scraped (seconds): CI's full run, not the fast tier
def test_prometheus_keeps_its_own_instance_label(tmp_path):
    """Loaded by the real Prometheus: every target's `instance` is its host:port (nothing overrides it), deployctl's
    instance is in `deployctl_instance`, and two endpoints of one instance are two series."""
    render(FLEET, tmp_path / "mon", "--npu-exporter")
    with Prometheus(tmp_path / "mon" / "prometheus.yml", tmp_path / "prom") as prom:
        active = []
        for _ in range(100):
            active = prom.api("targets", state="active")["data"]["activeTargets"]
            if len(active) == 17:
                break
            time.sleep(0.1)
    assert len(active) == 17, active               # 8 engines, the router, 8 npu-exporters
    for t in active:
        assert t["labels"]["instance"] == t["discoveredLabels"]["__address__"], t
        assert t["labels"]["deployctl_instance"] in {"mixed-0", "mixed-1", "mixed-2", "mixed-3", "router"}, t
    engines = [t["labels"] for t in active if t["labels"]["job"] == "deployctl-engine"]
    assert sorted(lab["instance"] for lab in engines if lab["deployctl_instance"] == "mixed-0") == [
        "10.200.5.2:1027", "10.200.5.3:1027"]


@pytest.mark.parametrize("example", ["mindie", "vllm"])
def test_every_dashboard_query_parses_in_prometheus(tmp_path, example):
    inv = FLEET if example == "mindie" else vllm_fleet(tmp_path)
    render(inv, tmp_path / "mon")
    dash = json.loads((tmp_path / "mon" / "grafana-dashboard.json").read_text())
    with Prometheus(tmp_path / "mon" / "prometheus.yml", tmp_path / "prom") as prom:
        bad = prom.query("sum(rate(up[")
        assert bad["status"] == "error" and bad["errorType"] == "bad_data"     # the check can fail
        for p in dash["panels"]:
            for t in p["targets"]:
                got = prom.query(concrete(t["expr"], "r1-fleet"))
                assert got["status"] == "success", (p["title"], t["expr"], got)


@pytest.mark.parametrize("name", ["prometheus.yml", "grafana-dashboard.json"])
def test_rendering_again_replaces_the_file_and_keeps_others(tmp_path, name):
    out = tmp_path / "mon"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    (out / name).write_text("old")
    render(FLEET, out)
    assert (out / "keep.txt").read_text() == "mine"
    assert (out / name).read_text() != "old"
    assert sorted(p.name for p in out.iterdir()) == sorted(["keep.txt", "prometheus.yml", "grafana-dashboard.json"])


def test_values_are_serialised_never_spliced():
    """Whatever a label holds (inventory names are validated; this is the second line of defence), the YAML reads
    back the same values and no extra keys."""
    from deployctl.features.observe.scrape import Target, scrape_config, scrape_yaml

    odd = 'a: b\n- c: "d" # e\n{f}'
    config = scrape_config([Target("deployctl-engine", "10.0.0.1:1", {"cluster": odd, "node": "n",
                                                                        "deployctl_instance": odd, "role": "mixed"})])
    back = yaml.safe_load(scrape_yaml(config))
    assert back == config
    assert back["scrape_configs"][0]["static_configs"][0]["labels"]["cluster"] == odd


@pytest.mark.parametrize("example, want", [
    # MindIE pd-split: prefill nodes on the metrics port; a distributed decode node, one daemon per DP rank, each on
    # its own metricsPort (dist_base + 4k + 2)
    ("a3-pd-2p2d.yaml", {("prefill", "p1", "10.202.0.2:1027"), ("decode", "d1", "10.202.0.4:10002"),
                         ("decode", "d1", "10.202.0.4:10014")}),
    # vLLM-Ascend pd-split: one `vllm serve` per DP rank, each with its API port
    ("vllm-a3-1p1d-qwen3.yaml", {("prefill", "p1", "10.202.0.2:8001"), ("decode", "d1", "10.202.0.3:8003")}),
])
def test_pd_split_targets_carry_their_role(tmp_path, example, want):
    doc = render(EXAMPLES / example, tmp_path / "mon")
    got = {(t["labels"]["role"], t["labels"]["node"], t["address"]) for t in doc["targets"]}
    assert want <= got, sorted(got)
    assert {t["labels"]["role"] for t in doc["targets"]} == {"prefill", "decode"}
    assert not any(t["job"] == "deployctl-router" for t in doc["targets"])   # no fleet router in a pd-split


def test_an_unwritable_directory_is_a_usage_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = run_cli("observe", "render", "-i", str(FLEET), "-o", str(blocker / "mon"))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "cannot write" in res.stderr and "Traceback" not in res.stderr
