"""The router stand-ins: the official HAProxy image (fake docker: the real HAProxy of this machine in a container),
the vLLM P/D proxy's instance API (POST /instances/add|remove, load_balance_proxy_server_example.py@v0.13.0) and the
engines' in-flight gauges (vLLM's /metrics, MindIE's /metrics and /metrics-json).

The cluster tests run one A2 node with a prefiller (p0) and two decoders (d0, d1) of the stand-in vLLM-Ascend in
their own containers, slowed down by engine_timing (tpot) so that a streamed answer stays in flight for seconds.
Nothing asserts on timing: waits poll with wide limits.
"""

from __future__ import annotations

import csv
import http.client
import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fakecluster import FakeCluster, default_cluster
from fakecluster.fixtures import require_fake_cluster_support
from fakecluster.spec import VLLM_IMAGES
from fakecluster.test_engine import wait_for as engine_wait_for
from fakecluster.test_timing import load as load_fake
from support import free_port

FAKE_BIN = Path(__file__).resolve().parent / "fake_bin"
HAPROXY_IMAGE = "haproxy:2.6"
VLLM_IMAGE = VLLM_IMAGES["a2"]                         # v0.13.0: the instance API, no bounds checks yet
TPOT_MS = 40                                           # a decode step of every engine on the node
LONG = 250                                             # tokens of a long answer: ~10 s in flight
PROXY, FRONT, ADMIN = 9000, 9400, 9401
ENGINES = {"p0": (0, 8100, "kv_producer"), "d0": (1, 8200, "kv_consumer"), "d1": (2, 8201, "kv_consumer")}
CFG = "/var/lib/deployctl/router/haproxy.cfg"
PROXY_PY = "/vllm-workspace/vllm-ascend/examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py"


# ---- helpers ------------------------------------------------------------------------------------

def wait_for(what, cond, timeout: float = 60, interval: float = 0.2):
    return engine_wait_for(what, cond, timeout, interval)


def call(ip: str, port: int, path: str, body: dict | None = None, timeout: float = 30) -> tuple[int, str]:
    conn = http.client.HTTPConnection(ip, port, timeout=timeout)
    try:
        if body is None:
            conn.request("GET", path)
        else:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def try_http(ip, port, path) -> int | None:
    try:
        return call(ip, port, path, timeout=3)[0]
    except OSError:
        return None


def chat_body(tokens: int, stream: bool) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": "route me"}], "max_tokens": tokens,
            "ignore_eos": True, "stream": stream}


class Stream(threading.Thread):
    """One streamed chat completion read to the end: status, bytes, and how the body ended ("clean": the chunked
    body's terminator came; "IncompleteRead": the server closed the connection without it)."""

    def __init__(self, ip: str, port: int, tokens: int = LONG):
        super().__init__(daemon=True)
        self.ip, self.port, self.tokens = ip, port, tokens
        self.status, self.data, self.end, self.chunked = None, b"", None, None
        self.start()

    def run(self):
        conn = http.client.HTTPConnection(self.ip, self.port, timeout=120)
        try:
            conn.request("POST", "/v1/chat/completions", json.dumps(chat_body(self.tokens, True)),
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            self.status, self.chunked = resp.status, resp.getheader("Transfer-Encoding")
            try:
                self.data = resp.read()
                self.end = "clean"
            except http.client.IncompleteRead as e:
                self.data, self.end = e.partial, "IncompleteRead"
        except OSError as e:
            self.end = f"{type(e).__name__}: {e}"
        finally:
            conn.close()

    def result(self, timeout: float = 90) -> Stream:
        self.join(timeout)
        assert not self.is_alive(), "the streamed request did not end"
        return self

    @property
    def done(self) -> bool:
        return b"data: [DONE]" in self.data


def running(ip: str, port: int) -> int:
    """vllm:num_requests_running summed over the engine label (the stand-in vLLM's /metrics)."""
    _, text = call(ip, port, "/metrics", timeout=5)
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("vllm:num_requests_running{")))


def container_log(fc: FakeCluster, name: str, node: str = "node1") -> str:
    try:
        text = fc.node(node).host_path(f"/var/lib/fakedocker/{name}/container.log").read_text()
    except OSError:
        return ""
    return "".join(json.loads(line)["log"] for line in text.splitlines() if line.strip())


def admin(fc: FakeCluster, command: str) -> str:
    """One command on HAProxy's runtime API (the `stats socket ipv4@127.0.0.1:ADMIN`), from inside the node."""
    script = f'exec 3<>/dev/tcp/127.0.0.1/{ADMIN}; printf "%s\\n" "{command}" >&3; cat <&3'
    r = fc.ssh("node1", f"bash -c '{script}'", timeout=20)
    assert r.returncode == 0, r.stderr
    return r.stdout


def show_stat(fc: FakeCluster) -> dict[str, dict[str, str]]:
    """`show stat` of the backend's servers: {server: row} (CSV columns by their header names)."""
    text = admin(fc, "show stat").lstrip("# ")
    return {row["svname"]: row for row in csv.DictReader(io.StringIO(text))
            if row.get("pxname") == "engines" and row["svname"] not in ("FRONTEND", "BACKEND")}


def write_cfg(fc: FakeCluster) -> None:
    r = fc.ssh("node1", f"mkdir -p {Path(CFG).parent} && cat > {CFG} && chmod 644 {CFG}",
               input=haproxy_cfg(fc.node("node1").ip))
    assert r.returncode == 0, r.stderr


def haproxy_cfg(ip: str) -> str:
    return f"""global
    log stdout format raw local0
    stats socket ipv4@127.0.0.1:{ADMIN} level admin

defaults
    mode http
    log global
    option httplog
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    retries 3
    option redispatch
    retry-on conn-failure empty-response response-timeout

frontend llm
    bind 0.0.0.0:{FRONT}
    default_backend engines

backend engines
    balance roundrobin
    option httpchk GET /health
    http-check expect status 200
    server d0 {ip}:{ENGINES['d0'][1]} check port {ENGINES['d0'][1]} inter 1s fall 2 rise 2
    server d1 {ip}:{ENGINES['d1'][1]} check port {ENGINES['d1'][1]} inter 1s fall 2 rise 2
"""


# ---- the cluster ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """One A2 node with the vLLM-Ascend and HAProxy images; p0, d0, d1 running (Mooncake P/D pairs, TP1)."""
    require_fake_cluster_support()
    if not os.path.exists("/usr/sbin/haproxy"):
        pytest.fail("the fake HAProxy image runs this machine's HAProxy: apt-get install -y haproxy", pytrace=False)
    specs = default_cluster(1, "a2", images=(VLLM_IMAGE, HAPROXY_IMAGE), engine_timing={"tpot_ms": TPOT_MS})
    fc = FakeCluster(specs, tmp_path_factory.mktemp("fc-router")).start()
    try:
        ip = fc.node("node1").ip
        weights = specs[0].weights_dir
        for name, (dev, port, role) in ENGINES.items():
            kv = json.dumps({"kv_connector": "MooncakeConnectorV1", "kv_role": role, "kv_port": str(36000 + 100 * dev),
                             "engine_id": name, "kv_connector_extra_config": {
                                 "prefill": {"dp_size": 1, "tp_size": 1}, "decode": {"dp_size": 1, "tp_size": 1}}})
            r = fc.ssh("node1", f"docker run -d --name {name} --net=host --device /dev/davinci{dev} "
                                f"-v /data/models:/data/models -e HCCL_IF_IP={ip} -e GLOO_SOCKET_IFNAME=eth0 "
                                f"{VLLM_IMAGE} vllm serve {weights} --served-model-name m --host 0.0.0.0 "
                                f"--port {port} --kv-transfer-config '{kv}'")
            assert r.returncode == 0, r.stderr
        for name, (_, port, _) in ENGINES.items():
            wait_for(f"{name} /health", lambda: try_http(ip, port, "/health") == 200)
        yield fc
    finally:
        fc.stop()


# ---- the vLLM P/D proxy: POST /instances/add|remove (v0.13.0) -------------------------------------

def test_proxy_instance_api_with_requests_in_flight(node):
    fc = node
    ip = fc.node("node1").ip
    d0, d1 = ENGINES["d0"][1], ENGINES["d1"][1]
    r = fc.ssh("node1", f"docker run -d --name proxy --net=host {VLLM_IMAGE} python3 {PROXY_PY} --host 0.0.0.0 "
                        f"--port {PROXY} --prefiller-hosts {ip} --prefiller-ports {ENGINES['p0'][1]} "
                        f"--decoder-hosts {ip} {ip} --decoder-ports {d0} {d1} --waiting-retry-interval 1")
    assert r.returncode == 0, r.stderr
    wait_for("the proxy", lambda: try_http(ip, PROXY, "/healthcheck") == 200)
    assert json.loads(call(ip, PROXY, "/healthcheck")[1]) == {"status": "ok", "prefill_instances": 1,
                                                               "decode_instances": 2}
    # two long streams: the first on d0 (index 0), the second on d1 (index 1); the gauges show where they run
    a = Stream(ip, PROXY)
    wait_for("A running on d0", lambda: running(ip, d0) == 1)
    b = Stream(ip, PROXY)
    wait_for("B running on d1", lambda: running(ip, d1) == 1)
    assert running(ip, d0) == 1
    # take d0 out: no new request goes there, A (on d0) goes on
    code, text = call(ip, PROXY, "/instances/remove", {"type": "decode", "instances": f"{ip}:{d0}"})
    assert code == 200, text
    assert json.loads(text) == {"message": f"remove decode instances: ['{ip}:{d0}'].",
                                "current_prefill_instances": [f"{ip}:{ENGINES['p0'][1]}"],
                                "current_decode_instances": [f"{ip}:{d1}"]}
    c = Stream(ip, PROXY, tokens=60)
    wait_for("C running on d1 next to B", lambda: running(ip, d1) == 2)
    assert running(ip, d0) == 1, "a new request reached the removed decoder"
    for s in (a, b, c):
        s.result()
        assert s.status == 200 and s.chunked == "chunked" and s.done, (s.status, s.end, s.data[-200:])
    # A, on the removed decoder, ends normally; so does C
    assert a.end == "clean" and c.end == "clean", (a.end, c.end)
    # B's decoder is still in, but B's index (1) is now past the end of the shorter list: v0.13.0's release_decoder
    # raises IndexError after the last chunk and uvicorn drops the connection without the chunked terminator
    assert b.end == "IncompleteRead", b.end
    wait_for("the IndexError in the proxy's log",
             lambda: "IndexError: list index out of range" in container_log(fc, "proxy"))
    wait_for("no request in flight on d0 and d1", lambda: running(ip, d0) == 0 and running(ip, d1) == 0)
    assert json.loads(call(ip, PROXY, "/healthcheck")[1])["decode_instances"] == 1
    # d0 back: the proxy asks it for /v1/models first
    code, text = call(ip, PROXY, "/instances/add", {"type": "decode", "instances": [f"{ip}:{d0}"]})
    assert code == 200 and json.loads(text)["message"] == f"add decode instances: ['{ip}:{d0}'].", text
    assert json.loads(text)["current_decode_instances"] == [f"{ip}:{d1}", f"{ip}:{d0}"]
    # nothing answers on 8299: it waits, is checked every --waiting-retry-interval s, given up after 3 checks
    code, text = call(ip, PROXY, "/instances/add", {"type": "decode", "instances": f"{ip}:8299"})
    assert code == 200 and json.loads(text)["message"] == (
        f"add decode instances: []. Instances ['{ip}:8299'] are waiting to be added."), text
    assert call(ip, PROXY, "/instances/add", {"type": "x", "instances": []}) == (
        200, '{"error":"Instance type x is not supported. Only support \'prefill\' and \'decode\'."}')
    assert call(ip, PROXY, "/instances/remove", {"type": "decode", "instances": "no-port"}) == (
        500, "Internal Server Error")
    wait_for("the waiting instance given up", lambda: f"Instance {ip}:8299 was not added to the proxy."
             in container_log(fc, "proxy"))
    assert json.loads(call(ip, PROXY, "/healthcheck")[1])["decode_instances"] == 2
    code, text = call(ip, PROXY, "/v1/chat/completions", chat_body(3, False))
    assert code == 200 and json.loads(text)["usage"]["completion_tokens"] == 3, text


# ---- HAProxy (the official image, the real HAProxy) -----------------------------------------------

def test_haproxy_balances_drains_and_marks_a_stopped_engine_down(node):
    fc = node
    ip = fc.node("node1").ip
    write_cfg(fc)
    # the entrypoint takes options alone as `haproxy <options>` (and adds -W -db)
    r = fc.ssh("node1", f"docker run --rm --net=host -v {CFG}:/usr/local/etc/haproxy/haproxy.cfg:ro {HAPROXY_IMAGE} "
                        f"-c -f /usr/local/etc/haproxy/haproxy.cfg")
    assert r.returncode == 0 and "Configuration file is valid" in r.stdout + r.stderr, r.stdout + r.stderr
    r = fc.ssh("node1", f"docker run -d --name deployctl-router --net=host "
                        f"-v {CFG}:/usr/local/etc/haproxy/haproxy.cfg:ro "
                        f"{HAPROXY_IMAGE} haproxy -W -db -f /usr/local/etc/haproxy/haproxy.cfg")
    assert r.returncode == 0, r.stderr
    r = fc.ssh("node1", "docker inspect -f '{{.Path}} {{.Config.User}} {{.Config.StopSignal}}' deployctl-router")
    assert r.stdout.split() == ["docker-entrypoint.sh", "haproxy", "SIGUSR1"], r.stdout
    wait_for("d0 and d1 UP", lambda: [s["status"] for s in show_stat(fc).values()] == ["UP", "UP"])
    # round robin over both engines
    for _ in range(6):
        code, text = call(ip, FRONT, "/v1/chat/completions", chat_body(2, False))
        assert code == 200, text
    stot = {name: int(row["stot"]) for name, row in show_stat(fc).items()}
    assert stot["d0"] >= 1 and stot["d1"] >= 1, stot
    # drain the engine that serves a long stream: no new request reaches it, the stream finishes
    s = Stream(ip, FRONT, tokens=150)
    busy = wait_for("the stream's engine", lambda: next((n for n, row in show_stat(fc).items()
                                                          if row["scur"] == "1"), None))
    other = "d1" if busy == "d0" else "d0"
    assert admin(fc, f"set server engines/{busy} state drain").strip() == ""
    assert show_stat(fc)[busy]["status"] == "DRAIN"
    before = {name: int(row["stot"]) for name, row in show_stat(fc).items()}
    for _ in range(4):
        assert call(ip, FRONT, "/v1/chat/completions", chat_body(2, False))[0] == 200
    after = {name: int(row["stot"]) for name, row in show_stat(fc).items()}
    assert after[busy] == before[busy] and after[other] == before[other] + 4, (before, after)
    assert running(ip, ENGINES[busy][1]) == 1          # what a drain waits for to reach 0
    s.result()
    assert s.status == 200 and s.end == "clean" and s.done, (s.status, s.end)
    wait_for(f"{busy} idle", lambda: running(ip, ENGINES[busy][1]) == 0)
    admin(fc, f"set server engines/{busy} state ready")
    # a stopped engine: two failed checks (fall 2, inter 1s) mark it DOWN; the clients never see it
    assert fc.ssh("node1", "docker stop d1").returncode == 0
    try:
        wait_for("d1 DOWN", lambda: show_stat(fc)["d1"]["status"].startswith("DOWN"))
        assert show_stat(fc)["d0"]["status"] == "UP"
        for _ in range(3):
            assert call(ip, FRONT, "/v1/chat/completions", chat_body(2, False))[0] == 200
        wait_for("HAProxy's log line", lambda: "Server engines/d1 is DOWN" in container_log(fc, "deployctl-router"))
    finally:
        fc.ssh("node1", "docker start d1")
    wait_for("d1 UP again", lambda: show_stat(fc)["d1"]["status"] == "UP")
    # docker stop sends the image's STOPSIGNAL (SIGUSR1): a graceful stop, exit 0
    assert fc.ssh("node1", "docker stop deployctl-router").returncode == 0
    r = fc.ssh("node1", "docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' deployctl-router")
    assert r.stdout.split() == ["exited", "0"], r.stdout
    assert "All workers exited" in container_log(fc, "deployctl-router")


def test_haproxy_runs_as_the_haproxy_user(node):
    """USER haproxy (uid 99): a config only root can read, or a port below 1024, fail as on a real host."""
    fc = node
    write_cfg(fc)
    r = fc.ssh("node1", f"sed 's/bind 0.0.0.0:{FRONT}/bind 0.0.0.0:80/' {CFG} > /tmp/h80.cfg && chmod 600 {CFG} && "
                        f"docker run --rm --net=host -v {CFG}:/usr/local/etc/haproxy/haproxy.cfg:ro {HAPROXY_IMAGE}; "
                        f"echo rc=$?; chmod 644 {CFG}; docker run --rm --net=host "
                        f"-v /tmp/h80.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro {HAPROXY_IMAGE}; echo rc=$?")
    text = r.stdout + r.stderr
    assert "Could not open configuration file /usr/local/etc/haproxy/haproxy.cfg : Permission denied" in text, text
    assert "cannot bind socket (Permission denied) for [0.0.0.0:80]" in text, text
    assert r.stdout.count("rc=1") == 2, text


# ---- no cluster: version gating, MindIE's metrics -------------------------------------------------

def test_proxy_of_v0_11_has_no_instance_api(tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"image": "quay.io/ascend/vllm-ascend:v0.11.0"}))
    port = free_port()
    code = ("import sys; sys.path.insert(0, %r); import vllm; sys.exit(vllm.proxy_main(sys.argv[1:]))"
            % str(FAKE_BIN))
    p = subprocess.Popen([sys.executable, "-c", code, "--host", "127.0.0.1", "--port", str(port)],
                         env={"PATH": "/usr/bin:/bin", "FAKE_VLLM_SETTINGS": str(settings)},
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for("the proxy", lambda: try_http("127.0.0.1", port, "/healthcheck") == 200)
        assert call("127.0.0.1", port, "/instances/add", {"type": "decode", "instances": "a:1"}) == (
            404, '{"detail":"Not Found"}')
        assert call("127.0.0.1", port, "/healthcheck")[1] == (
            '{"status":"ok","prefill_instances":1,"decode_instances":1}')
    finally:
        p.terminate()
        p.communicate(timeout=60)
    # the options of the node listener came with the API
    r = subprocess.run([sys.executable, "-c", code, "--waiting-retry-interval", "1"], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "FAKE_VLLM_SETTINGS": str(settings)}, timeout=60)
    assert r.returncode == 2 and "unrecognized arguments: --waiting-retry-interval 1" in r.stderr


@pytest.fixture
def mindie(tmp_path):
    module = load_fake("engine")
    servers = []

    def serve(monitor: bool):
        module.ApiHandler.ctx = {"model": "ds", "metric_model": "ds", "started": time.time(),
                                 "timing": module.Timing(), "monitor": monitor, "requests": 0}
        if monitor:
            module.start_metrics_collector(module.ApiHandler.ctx)
        ports = {}
        for role in ("metrics", "management"):
            ports[role] = free_port()
            servers.append(module.bind_http("127.0.0.1", ports[role], module.ApiHandler, role, role))
        return module.ApiHandler.ctx, ports

    yield module, serve
    module.STOP.set()
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def test_mindie_metrics_need_the_monitor_switch_and_count_requests_in_flight(mindie):
    module, serve = mindie
    _, ports = serve(monitor=False)
    assert call("127.0.0.1", ports["metrics"], "/metrics") == (500, json.dumps(
        {"error": "Environment variable MIES_SERVICE_MONITOR_MODE is not set.",
         "error_type": "Incomplete Generation"}) + "\n")
    assert call("127.0.0.1", ports["management"], "/metrics-json")[0] == 503        # not ready yet
    ctx, ports = serve(monitor=True)
    module.READY.set()
    assert module.monitor_mode("1") and not module.monitor_mode("0") and not module.monitor_mode("")
    with ctx["timing"]:                                # one request in flight
        wait_for("num_requests_running 1", lambda: 'num_requests_running{model_name="ds"} 1' in call(
            "127.0.0.1", ports["metrics"], "/metrics")[1])
        doc = json.loads(call("127.0.0.1", ports["management"], "/metrics-json")[1])
        values = {r["metric"][0]["__name__"]: r["value"] for r in doc["result"]}
        assert values["processingInferRequestNum"] == "1" and values["waitingInferRequestNum"] == "0", doc
    wait_for("num_requests_running 0", lambda: 'num_requests_running{model_name="ds"} 0' in call(
        "127.0.0.1", ports["metrics"], "/metrics")[1])
    text = call("127.0.0.1", ports["metrics"], "/metrics")[1]
    assert "# TYPE num_requests_waiting gauge" in text and 'num_requests_swapped{model_name="ds"} 0' in text
