"""`deployctl scale` on the simulated cluster, end to end: vLLM-Ascend 1P1D with a spare server, the stand-in
engines' capacity set low (2 running requests per decode API server, `--max-num-seqs 2`; the rest queue, as vLLM's
scheduler does) and clients ramping load through the P/D proxy.

1. Shadow mode recommends one more decode instance within 60 s of the overload starting.
2. `--apply` starts it on the spare server behind the proxy while the clients keep sending: no request fails, and
   the new instance answers some of them. It loads its weights from the running decode instance (vLLM-Ascend's
   NetLoader; the stand-in: 6 s from disk, 1 s from a peer), which its engine log says.
3. The load ramps down to one client: `--apply` drains the added instance at the proxy and removes it, no request
   fails; the history holds the scale-up and the scale-down entries, the record the decisions and their inputs.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest
import yaml
from conftest import EXAMPLES, run_cli
from fakecluster import FakeCluster, default_cluster
from fakecluster.fixtures import require_fake_cluster_support

pytestmark = pytest.mark.e2e

IMAGE = "quay.io/ascend/vllm-ascend:v0.18.0-a3"
TIMING = {"ttft_ms": 50.0, "ttft_per_token_ms": 0.1, "tpot_ms": 30.0, "tpot_per_request_ms": 5.0}
POLICY = {"interval_s": 2, "spares": ["d2"], "roles": {"decode": {"min": 1, "max": 2}},
          "scale_up": {"for_s": 8}, "scale_down": {"for_s": 8}, "cooldown_up_s": 5, "cooldown_down_s": 5}


class Clients:
    """``n`` clients, each sending one completion after the other through the proxy; every answer's node kept."""

    def __init__(self, url: str, n: int) -> None:
        self.url, self.stop, self.lock = url, threading.Event(), threading.Lock()
        self.ok, self.failed, self.nodes = 0, [], []
        self.threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(n)]
        for t in self.threads:
            t.start()

    def _loop(self) -> None:
        body = json.dumps({"model": "qwen3", "prompt": "count the sheep one by one", "max_tokens": 48,
                           "ignore_eos": True}).encode()
        while not self.stop.is_set():
            req = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    text = json.loads(r.read())["choices"][0]["text"]
                with self.lock:
                    self.ok += 1
                    self.nodes.append(text)
            except Exception as exc:      # noqa: BLE001 - every failure is counted and shown
                with self.lock:
                    self.failed.append(repr(exc)[:200])

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(90)


def _events(res) -> list[dict]:
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]


@pytest.fixture(scope="module")
def pd_with_spare(tmp_path_factory):
    require_fake_cluster_support()
    specs = default_cluster(3, "a3", weights_dir="/data/models/Qwen3-235B-A22B-W8A8", engine_join_timeout=20,
                            engine_timing=TIMING, images=(IMAGE,), engine_slow_start=6.0,
                            engine_load_from_peer_s=1.0)
    specs = [specs[0].replace(name="p1"), specs[1].replace(name="d1"), specs[2].replace(name="d2")]
    fc = FakeCluster(specs, tmp_path_factory.mktemp("fakecluster-scale")).start()
    try:
        work = tmp_path_factory.mktemp("scale")
        doc = yaml.safe_load((EXAMPLES / "vllm-a3-1p1d-qwen3.yaml").read_text())
        doc["engine"]["image"] = IMAGE
        doc["engine"]["netloader"] = {"enabled": True}
        doc["ssh"] = {"user": "root", "key": str(fc.client_key), "known_hosts": str(fc.known_hosts)}
        doc["nodes"] = [{"name": n.name, "address": n.ip} for n in fc.nodes]
        doc["layout"]["decode"]["model"] = {"max_batch_size": 2}
        doc["deploy"] = {"scaling": POLICY}
        inv = work / "inv.yaml"
        inv.write_text(yaml.safe_dump(doc, sort_keys=False))
        runs = work / "runs"
        res = run_cli("preflight", "-i", str(inv), "--run-dir", str(runs), "--output", "json")
        assert res.returncode == 0, res.stdout + res.stderr
        res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "90", "--output", "json")
        assert res.returncode == 0, res.stdout + res.stderr
        yield fc, inv, runs, json.loads(res.stdout)["url"]
    finally:
        fc.stop()


def test_overload_adds_a_decode_instance_on_the_spare_and_underload_removes_it(pd_with_spare):
    fc, inv, runs, url = pd_with_spare
    scale = ["scale", "-i", str(inv), "--run-dir", str(runs), "--output", "json", "--interval", "2"]
    # the deployment as written: d2 is a spare, in no instance
    res = run_cli("status", "-i", str(inv), "--run-dir", str(runs), "--output", "json")
    assert res.returncode == 0 and "d2" not in res.stdout, res.stdout
    clients = Clients(f"{url}/v1/completions", 16)
    try:
        # 1. shadow: one more decode instance, within 60 s of the overload's start: of its first reading (the clients
        #    were sending before), on the scaler's own clock; the test's would count the start of its process too,
        #    15-20 s on a loaded machine
        events = _events(run_cli(*scale, "--rounds", "12"))
        decode = [e for e in events if e["event"] == "decision" and e["role"] == "decode"]
        up = [e for e in decode if e["action"] == "up"]
        assert up, [e.get("reason") for e in decode]
        read = [e["inputs"]["latest"]["at"] for e in decode if e["inputs"]["latest"]]
        assert up[0]["inputs"]["latest"]["at"] - read[0] < 60, (read, up[0]["inputs"]["latest"])
        assert up[0]["desired"] == 2 and "waiting per instance" in up[0]["reason"]
        assert up[0]["inputs"]["latest"]["waiting"] > POLICY.get("waiting_per_instance", 5)
        assert not [e for e in events if e["event"] == "change"]          # shadow changes nothing
        # 2. apply: decode-1 on d2, behind the proxy, while the clients keep sending
        served_before = len(clients.nodes)
        events = _events(run_cli(*scale, "--apply", "--rounds", "8"))
        [change] = [e for e in events if e["event"] == "change"]
        assert change["ok"] and (change["action"], change["instance"], change["nodes"]) == ("up", "decode-1", ["d2"])
        print(f"scale-up of decode-1: {change['seconds']} s")
        # the new instance answers some of the clients' requests (the proxy sends it a share once it is added)
        deadline = time.monotonic() + 60
        while not any("from d2" in t for t in clients.nodes[served_before:]) and time.monotonic() < deadline:
            time.sleep(0.5)
        res = run_cli("logs", "-i", str(inv), "--run-dir", str(runs), "--host", "d2", "--tail", "2000")
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-1000:]
        [record] = sorted((runs / "runs").glob("*-logs"))
        logs = "".join(p.read_text() for p in (record / "hosts" / "d2").rglob("*") if p.is_file())
        # every rank of the new instance copied its weights from the running decode instance on d1
        assert logs.count("Netloader P2P load time") == 16, logs[-2000:]
        assert "DefaultModelLoader" not in logs
        after = clients.nodes[served_before:]
        assert any("from d2" in t for t in after), after[-3:]
        assert clients.failed == [], clients.failed[:3]
    finally:
        clients.close()
    res = run_cli("status", "-i", str(inv), "--run-dir", str(runs), "--output", "json")
    assert res.returncode == 0 and "decode-1" in res.stdout, res.stdout[-2000:]
    # 3. one client left: the added instance is drained and removed
    light = Clients(f"{url}/v1/completions", 1)
    try:
        events = _events(run_cli(*scale, "--apply", "--rounds", "10"))
        [change] = [e for e in events if e["event"] == "change"]
        assert change["ok"] and (change["action"], change["instance"]) == ("down", "decode-1")
        print(f"scale-down of decode-1: {change['seconds']} s")
        time.sleep(2)
        assert light.failed == [] and light.ok > 0, light.failed[:3]
    finally:
        light.close()
    # read on d2 itself: no container of the deployment left there
    ps = fc.ssh("d2", "docker ps -a", check=True).stdout
    assert "deployctl-" not in ps, ps
    history = json.loads(run_cli("history", "-i", str(inv), "--run-dir", str(runs), "--output", "json").stdout)
    ops = [r["operation"] for r in history["revisions"]]
    assert ops[-2:] == ["scale-up", "scale-down"] and history["revisions"][-1]["live"]
    assert "decode-1 on d2" in history["revisions"][-2]["summary"]
    records = sorted((runs / "runs").glob("*-scale"))
    assert len(records) == 3
    logged = [json.loads(x) for x in (records[-1] / "events.jsonl").read_text().splitlines()]
    down = [e for e in logged if e["event"] == "decision" and e["action"] == "down"]
    assert down and down[0]["inputs"]["latest"]["waiting"] == 0.0 and down[0]["inputs"]["policy"]["bounds"]
    assert not (runs / "scale").exists() or not list((runs / "scale").iterdir())
