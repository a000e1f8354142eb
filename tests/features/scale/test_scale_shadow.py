"""`deployctl scale` in shadow mode without hosts: the engines' metrics read through the same batch the hosts run
(here: this machine, a local HTTP server answering as a vLLM API server), per-role readings, one decision per role
and round, each recorded with what it read."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from deployctl.core.engine_spec.protocol import MetricsTarget
from deployctl.core.models.scaling import RoleBounds, Scaling
from deployctl.io.executor import HostTarget
from support.executor import FakeExecutor

NAMES = SimpleNamespace(running="vllm:num_requests_running", waiting="vllm:num_requests_waiting",
                        kv_usage="vllm:kv_cache_usage_perc", generated="vllm:generation_tokens_total",
                        prompt="vllm:prompt_tokens_total", ttft="vllm:time_to_first_token_seconds",
                        tpot="vllm:inter_token_latency_seconds")


class Metrics:
    """What the fake API servers expose, by port; counters grow by `rate` per scrape."""

    def __init__(self):
        self.state: dict[int, dict] = {}

    def text(self, port: int) -> str:
        s = self.state[port]
        s["generated"] += s["rate"]
        return (f"# HELP vllm:num_requests_running x\nvllm:num_requests_running{{engine=\"0\"}} {s['running']}\n"
                f"vllm:num_requests_waiting{{engine=\"0\"}} {s['waiting']}\n"
                f"vllm:kv_cache_usage_perc{{engine=\"0\"}} {s['kv']}\n"
                f"vllm:generation_tokens_total{{engine=\"0\"}} {s['generated']}\n"
                "vllm:unrelated_total 7\n")


@pytest.fixture
def servers():
    metrics = Metrics()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = metrics.text(self.server.server_address[1]).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    started = []
    for _ in range(2):
        srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        started.append(srv)
        metrics.state[srv.server_address[1]] = {"running": 4, "waiting": 0, "kv": 0.3, "generated": 0, "rate": 0}
    yield metrics, [s.server_address[1] for s in started]
    for s in started:
        s.shutdown()


def fake_plan(ports: list[int]):
    targets = [MetricsTarget("n1", "decode-0", "decode", f"127.0.0.1:{ports[0]}"),
               MetricsTarget("n2", "decode-1", "decode", f"127.0.0.1:{ports[1]}")]
    spec = SimpleNamespace(metric_names=NAMES, metrics_targets=lambda plan: targets)
    return SimpleNamespace(engine_spec=spec, instances=[SimpleNamespace(role="decode"), SimpleNamespace(role="decode")])


HOSTS = {"n1": HostTarget("n1", "127.0.0.1"), "n2": HostTarget("n2", "127.0.0.1")}


def test_the_engines_own_metrics_are_read_on_their_hosts_and_a_silent_host_is_not_idle(servers):
    from deployctl.features.scale.read import read_samples

    metrics, ports = servers
    metrics.state[ports[0]].update(running=10, waiting=3, kv=0.5)
    samples = read_samples(fake_plan(ports), FakeExecutor(here=True), HOSTS, lambda: 5.0)
    by = {s.instance: s for s in samples}
    assert (by["decode-0"].running, by["decode-0"].waiting, by["decode-0"].kv_usage) == (10.0, 3.0, 0.5)
    assert by["decode-1"].error == "" and by["decode-0"].at == 5.0
    down = read_samples(fake_plan(ports), FakeExecutor(here=True, down={"n2"}), HOSTS, lambda: 6.0)
    assert {s.instance: bool(s.error) for s in down} == {"decode-0": False, "decode-1": True}


def test_shadow_recommends_one_more_decode_once_overload_lasts_and_records_why(servers, tmp_path):
    from deployctl.features.scale.read import read_samples
    from deployctl.features.scale.shadow import Shadow
    from deployctl.io.records import RunRecord

    metrics, ports = servers
    for p in ports:
        metrics.state[p].update(waiting=9, kv=0.95, running=16)
    clock = iter(range(0, 1000, 10))
    now = {"t": 0.0}

    def tick():
        now["t"] = float(next(clock))
        return now["t"]

    policy = Scaling(interval_s=10, roles={"decode": RoleBounds(min=1, max=3)},
                     scale_up={"for_s": 20})
    plan = fake_plan(ports)
    record = RunRecord.create(tmp_path, "scale")
    shadow = Shadow(plan, policy, {"decode": 1000.0},
                    lambda: read_samples(plan, FakeExecutor(here=True), HOSTS, tick), clock=lambda: now["t"],
                    record=record)
    actions = [shadow.round()[0].action for _ in range(3)]
    assert actions == ["hold", "hold", "up"]                 # readings at 0, 10, 20 s: 20 s of overload
    events = [json.loads(x) for x in (record.path / "events.jsonl").read_text().splitlines()]
    up = events[-1]
    assert up["event"] == "decision" and up["mode"] == "shadow" and (up["current"], up["desired"]) == (2, 3)
    assert "9 waiting per instance > 5" in up["reason"] and up["inputs"]["latest"]["kv_usage"] == 0.95
