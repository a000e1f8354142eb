"""The fake container runtime + stand-in MindIE, end to end over real SSH (what `deployctl up` will do).

The tree is rendered by the real CLI (`deployctl render`) for an inventory made from
`fc.inventory_snippet()`, each node's folder is copied to the node (tar over ssh, modes kept) and its
start.sh run there, master first. Then: containers, logs, health, the OpenAI API, stop/rm. One test per
fault switch and per MindIE check. Timeouts are small (engine_join_timeout a few seconds).
"""

from __future__ import annotations

import http.client as httpclient
import json
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from fakecluster import FakeCluster, default_cluster
from fakecluster.cluster import tcp_port_open
from fakecluster.fake_bin import docker as fake_docker
from fakecluster.fixtures import require_fake_cluster_support

DEPLOYCTL = Path(sys.executable).parent / "deployctl"
JOIN = 60.0                               # engine_join_timeout of the test nodes (s): a peer's start through
                                          # ssh and the docker chain has taken many seconds on a loaded CI machine
NAME = "deployctl_fake-a2-2_mindie"        # deployctl_<cluster.name>_mindie
MODEL = "ds-r1"
MGMT, PORT, METRICS, MULTI = 1026, 1025, 1027, 1120
ENGINE_DEFAULTS = dict(engine_crash=False, engine_never_ready=False, engine_reject_config=False,
                       engine_slow_start=0.0, engine_join_timeout=JOIN)


# ---- helpers ------------------------------------------------------------------------------------

def inventory(fc: FakeCluster, *, nodes: list[str] | None = None, layout: dict, image: str | None = None,
              quant: str = "w8a8") -> str:
    doc = yaml.safe_load(fc.inventory_snippet())
    if nodes is not None:
        doc["nodes"] = [n for n in doc["nodes"] if n["name"] in nodes]
        doc["cluster"]["name"] = f"fake-{fc.specs[0].hardware}-{len(nodes)}"
    spec = fc.specs[0]
    doc.update(engine={"image": image or spec.docker_images[0]},
               model={"name": "deepseek-r1", "quant": quant, "weights_path": spec.weights_dir, "served_name": MODEL,
                      "max_seq_len": 8192, "max_input_len": 4096, "max_batch_size": 32},
               layout=layout)
    return yaml.safe_dump(doc, sort_keys=False)


def render(tmp: Path, inv_text: str) -> Path:
    inv = tmp / "inventory.yaml"
    inv.write_text(inv_text)
    out = tmp / "rendered"
    r = subprocess.run([str(DEPLOYCTL), "render", "-i", str(inv), "-o", str(out)], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "COLUMNS": "200"})
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def push(fc: FakeCluster, node: str, folder: Path, dest: str, then: str | None = None) -> subprocess.CompletedProcess:
    """Copy a rendered node folder to `dest` on the node, modes kept (tar over ssh, as root); then run
    `then` there in the same ssh session (its result is returned)."""
    tar = subprocess.run(["tar", "-C", str(folder), "-cf", "-", "."], capture_output=True, check=True).stdout
    cmd = f"rm -rf {dest} && mkdir -p {dest} && tar -C {dest} -xf - || exit 99"
    r = subprocess.run(fc.ssh_args(node) + [cmd + (f"\n{then}" if then else "")], input=tar, capture_output=True,
                       timeout=120)
    assert r.returncode != 99, r.stderr
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode(), r.stderr.decode())


def sh(fc: FakeCluster, node: str, cmd: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return fc.ssh(node, cmd, timeout=timeout)


def on_all(fn, items):
    with ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
        return list(pool.map(fn, items))


def start(fc: FakeCluster, node: str, dest: str, script: str = "start.sh") -> subprocess.CompletedProcess:
    return sh(fc, node, f"bash {dest}/{script}")


def logs(fc: FakeCluster, node: str, name: str = NAME) -> str:
    r = sh(fc, node, f"docker logs {name}")
    return r.stdout + r.stderr


def outcome(fc: FakeCluster, node: str, name: str = NAME) -> tuple[str, int, str]:
    """(status, exit code, `docker logs`) in one round trip."""
    r = sh(fc, node, f"docker inspect --format '{{{{.State.Status}}}} {{{{.State.ExitCode}}}}' {name} && "
                     f"docker logs {name} 2>&1")
    head, _, text = r.stdout.partition("\n")
    status, code = head.split()
    return status, int(code), text


def inspect(fc: FakeCluster, node: str, name: str = NAME) -> tuple[str, int]:
    r = sh(fc, node, f"docker inspect --format '{{{{.State.Status}}}} {{{{.State.ExitCode}}}}' {name}")
    status, code = r.stdout.split()
    return status, int(code)


def wait_for(what, cond, timeout: float = 60, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def http(ip: str, port: int, path: str, body: dict | None = None, timeout: float = 5) -> tuple[int, str]:
    conn = httpclient.HTTPConnection(ip, port, timeout=timeout)
    try:
        if body is None:
            conn.request("GET", path)
        else:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def ready(ip: str, port: int = MGMT) -> int | None:
    try:
        return http(ip, port, "/v2/health/ready", timeout=2)[0]
    except OSError:
        return None


def chat(ip: str, port: int, *, stream: bool = False, model: str = MODEL, **extra) -> tuple[int, str]:
    return http(ip, port, "/v1/chat/completions",
                {"model": model, "messages": [{"role": "user", "content": "Say hello to the fake cluster"}],
                 "stream": stream, **extra}, timeout=30)


def sse_events(text: str) -> list[str]:
    return [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]


def state(fc: FakeCluster, node: str, name: str = NAME) -> dict:
    """The container's state file as the fake docker wrote it (read on this machine: the node's /var/lib
    overlay lands under its directory), to poll without an ssh round trip each time."""
    try:
        return json.loads(fc.node(node).host_path(f"/var/lib/fakedocker/{name}/state.json").read_text())
    except (OSError, ValueError):
        return {}


def host_logs(fc: FakeCluster, node: str, name: str = NAME) -> str:
    try:
        text = fc.node(node).host_path(f"/var/lib/fakedocker/{name}/container.log").read_text()
    except OSError:
        return ""
    return "".join(json.loads(line)["log"] for line in text.splitlines() if line.strip())


def exited(fc, node, name=NAME):
    return state(fc, node, name).get("Status") == "exited"


def wait_log(fc, node, text, name=NAME, timeout=60):
    wait_for(f"{text!r} in the log of {name} on {node}", lambda: text in host_logs(fc, node, name), timeout)


# ---- fixtures -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def a2(tmp_path_factory):
    """2 x A2 (node1, node2), tree rendered for layout dp-ep (TP8 x DP2, rank table over both nodes)."""
    require_fake_cluster_support()
    fc = FakeCluster(default_cluster(2, "a2", engine_join_timeout=JOIN), tmp_path_factory.mktemp("engine-a2"))
    fc.start()
    try:
        tmp = tmp_path_factory.mktemp("engine-a2-tree")
        tree = render(tmp, inventory(fc, layout={"preset": "dp-ep"}))
        single = render(tmp_path_factory.mktemp("engine-a2-single"),
                        inventory(fc, nodes=["node1"], layout={"preset": "single"}, quant="w4a8"))
        yield fc, tree, single
    finally:
        fc.stop()


@pytest.fixture
def cluster(a2):
    """The module's cluster, cleaned after each test: no containers left, engine faults back to normal."""
    fc, tree, single = a2
    yield fc, tree, single

    def clean(n):
        if any(n.host_path("/var/lib/fakedocker").glob("*/config.json")):
            sh(fc, n.name, "ids=$(docker ps -aq); [ -z \"$ids\" ] || docker rm -f $ids >/dev/null")
        if any(getattr(n.spec, k) != v for k, v in ENGINE_DEFAULTS.items()) or n.spec.image_missing or \
                n.spec.missing_npus:
            fc.update_node(n.name, image_missing=False, missing_npus=set(), **ENGINE_DEFAULTS)
    on_all(clean, fc.nodes)


def up(fc: FakeCluster, tree: Path, dest: str, nodes=("node1", "node2")) -> None:
    on_all(lambda n: push(fc, n, tree / n, dest), nodes)
    for n in nodes:                                   # master first
        r = start(fc, n, dest)
        assert r.returncode == 0, r.stdout + r.stderr


# ---- end to end -----------------------------------------------------------------------------------

def test_up_serves_on_two_a2_nodes(cluster):
    fc, tree, _ = cluster
    dest = "/var/lib/deployctl/test/e2e"
    t0 = time.monotonic()
    up(fc, tree, dest)
    ip1, ip2 = fc.node("node1").ip, fc.node("node2").ip
    wait_for("both nodes ready", lambda: ready(ip1) == 200 and ready(ip2) == 200)
    print(f"\n2 x A2 up (push + start + ready) in {time.monotonic() - t0:.2f}s")
    for n in ("node1", "node2"):
        r = sh(fc, n, f"docker ps --format '{{{{.Names}}}}\t{{{{.Status}}}}'; echo ---; docker logs {NAME}; echo ---; "
                      f"docker inspect --format '{{{{.State.Status}}}} {{{{.State.ExitCode}}}}' {NAME}")
        ps, text, insp = r.stdout.split("---\n")
        assert ps.startswith(NAME + "\tUp "), ps
        assert "Daemon start success!" in text
        assert "Start to parse ranktable file\nFinished parsing ranktable file.\n" in text
        assert insp == "running 0\n"
        assert http(fc.node(n).ip, MGMT, "/v2/health/live")[0] == 200
    assert "All 2 servers of the ranktable joined" in host_logs(fc, "node1")
    # the OpenAI API on the master's `port` (only there), from this machine through the bridge
    code, body = chat(ip1, PORT)
    assert code == 200, body
    doc = json.loads(body)
    assert doc["object"] == "chat.completion" and doc["model"] == MODEL
    assert doc["choices"][0]["message"]["role"] == "assistant" and doc["choices"][0]["message"]["content"]
    assert doc["choices"][0]["finish_reason"] == "stop" and doc["usage"]["total_tokens"] > doc["usage"]["prompt_tokens"]
    code, body = chat(ip1, PORT, stream=True, max_tokens=4, stream_options={"include_usage": True})
    events = sse_events(body)
    assert code == 200 and events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]).split() \
        == doc["choices"][0]["message"]["content"].split()[:4]
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 4
    code, body = http(ip1, PORT, "/v1/models")
    assert code == 200 and [m["id"] for m in json.loads(body)["data"]] == [MODEL]
    code, body = chat(ip1, PORT, model="gpt-4")
    assert code == 404 and json.loads(body)["error"]["code"] == "model_not_found"
    assert tcp_port_open(ip2, PORT) == "ECONNREFUSED"        # workers do not serve the API
    # what the fake docker recorded
    cfg = json.loads(fc.node("node1").host_path(f"/var/lib/fakedocker/{NAME}/config.json").read_text())
    assert cfg["MountMap"]["/etc/deployctl"] == dest and cfg["MountMap"]["/etc/hccn.conf"] == "/etc/hccn.conf"
    assert "MIES_CONTAINER_IP=" + ip1 in cfg["Env"] and cfg["NetworkMode"] == "host"
    assert [d["host"] for d in cfg["Devices"]][:8] == [f"/dev/davinci{i}" for i in range(8)]
    r = sh(fc, "node1", f"docker inspect {NAME}; echo ---; docker logs --tail 1 -t {NAME}; echo ---; "
                        f"docker logs --since 10m {NAME} | wc -l; docker logs --since 2099-01-01T00:00:00Z {NAME} | wc -l")
    insp, tail, since = r.stdout.split("---\n")
    assert int(since.split()[0]) > 5 and since.split()[1] == "0"
    obj = json.loads(insp)[0]
    assert obj["Name"] == "/" + NAME and obj["State"]["Running"] is True and len(obj["Id"]) == 64
    assert obj["HostConfig"]["NetworkMode"] == "host" and obj["HostConfig"]["IpcMode"] == "host"
    assert tail.endswith(" Daemon start success!\n") and tail[:4].isdigit()
    # stop (SIGTERM: a clean exit 0), remove: ports free again
    r = sh(fc, "node1", f"docker stop -t 5 {NAME} && docker ps -a --format '{{{{.Status}}}}' && docker rm {NAME} "
                        "&& docker ps -aq")
    assert r.returncode == 0 and r.stdout.startswith("deployctl_fake-a2-2_mindie\nExited (0) "), r.stdout + r.stderr
    assert r.stdout.endswith(" ago\ndeployctl_fake-a2-2_mindie\n")
    r = sh(fc, "node2", f"docker rm -f {NAME} && docker ps -aq")
    assert r.returncode == 0 and r.stdout == NAME + "\n"
    for ip, port in ((ip1, PORT), (ip1, MGMT), (ip1, METRICS), (ip1, MULTI), (ip2, MGMT)):
        assert tcp_port_open(ip, port) == "ECONNREFUSED", (ip, port)


def test_single_node_needs_no_rendezvous(cluster):
    fc, _, single = cluster
    dest = "/var/lib/deployctl/test/single"
    assert not (single / "node1" / "ranktable.json").exists()
    push(fc, "node1", single / "node1", dest)
    assert start(fc, "node1", dest).returncode == 0
    ip = fc.node("node1").ip
    wait_for("single node ready", lambda: ready(ip) == 200)
    text = host_logs(fc, "node1", "deployctl_fake-a2-1_mindie")
    assert "Daemon start success!" in text and "ranktable" not in text
    assert chat(ip, PORT)[0] == 200


def test_start_sh_refuses_an_existing_container_and_docker_start_restarts(cluster):
    fc, tree, _ = cluster
    dest = "/var/lib/deployctl/test/restart"
    up(fc, tree, dest)
    ip1 = fc.node("node1").ip
    wait_for("ready", lambda: ready(ip1) == 200)
    r = start(fc, "node1", dest)
    assert r.returncode == 1 and f"container {NAME} already exists" in r.stderr
    # the engine dies on its own: the state says so
    pid = sh(fc, "node1", f"docker inspect -f '{{{{.State.Pid}}}}' {NAME}").stdout.strip()
    sh(fc, "node1", f"kill -9 {pid}")
    wait_for("node1 exited", lambda: exited(fc, "node1"))
    assert inspect(fc, "node1") == ("exited", 137)
    # its peer loses the communicator and fails too (HCCL heartbeat)
    wait_for("node2 exited", lambda: exited(fc, "node2"))
    assert inspect(fc, "node2") == ("exited", 1) and "heartbeat lost" in host_logs(fc, "node2")
    # `docker start` reruns both with the same config
    for n in ("node1", "node2"):
        r = sh(fc, n, f"docker start {NAME}")
        assert r.returncode == 0 and r.stdout == NAME + "\n", r.stderr
    wait_for("ready again", lambda: ready(ip1) == 200 and ready(fc.node("node2").ip) == 200)
    assert logs(fc, "node1").count("Daemon start success!") == 2     # `docker logs` keeps both runs


# ---- MindIE's own checks --------------------------------------------------------------------------

def test_ranktable_with_mode_644_is_refused(cluster):
    fc, tree, _ = cluster
    dest = "/var/lib/deployctl/test/mode644"
    # start.sh would chmod it back to 640: take that line out, as a hand-edited copy might
    r = push(fc, "node1", tree / "node1", dest, then=f"sed -i '/^chmod 640/d' {dest}/start.sh && "
                                                     f"chmod 644 {dest}/ranktable.json && bash {dest}/start.sh")
    assert r.returncode == 0, r.stderr                        # docker run -d succeeds; MindIE refuses later
    wait_for("exit", lambda: exited(fc, "node1"))
    status, code, text = outcome(fc, "node1")
    assert (status, code) == ("exited", 1)
    assert "Check path: ranktable.json failed, by: Check Other group permission failed" in text
    assert "Required permisssion is 640, but got permission is 644" in text
    assert "Daemon start success!" not in text and "Start to parse ranktable file" not in text
    # MINDIE_CHECK_INPUTFILES_PERMISSION=0 does not switch it off for the rank table: the IsFileValid overload
    # ranktable_config.cpp L50 calls returns false on a failed permission check either way (file_utils.cpp L312-320)
    r = sh(fc, "node1", f"docker rm {NAME} >/dev/null && echo MINDIE_CHECK_INPUTFILES_PERMISSION=0 >> {dest}/env "
                        f"&& bash {dest}/start.sh")
    assert r.returncode == 0, r.stderr
    wait_for("exit", lambda: exited(fc, "node1"))
    status, code, text = outcome(fc, "node1")
    assert (status, code) == ("exited", 1)
    assert "Required permisssion is 640, but got permission is 644" in text
    assert "Finished parsing ranktable file." not in text and "Daemon start success!" not in text


def test_config_json_mode_and_owner_are_checked_too(cluster):
    """MindIE checks config.json like the rank table (at most 640, owned by the engine's user). start.sh fixes
    both (chown to ENGINE_UID, chmod 640); a hand-edited copy without those lines shows MindIE's refusals."""
    fc, _, single = cluster
    dest = "/var/lib/deployctl/test/cfgmode"
    name = "deployctl_fake-a2-1_mindie"
    strip = f"sed -i '/^chmod 640/d; s/chown \"\\$ENGINE_UID\" \"\\$f\"/:/' {dest}/start.sh"
    push(fc, "node1", single / "node1", dest, then=f"{strip} && grep -q '; then :; fi' {dest}/start.sh && "
                                                   f"chmod 644 {dest}/config.json && bash {dest}/start.sh")
    wait_for("exit", lambda: exited(fc, "node1", name))
    status, code, text = outcome(fc, "node1", name)
    assert (status, code) == ("exited", 1)
    assert "Check path: config.json failed, by: Check Other group permission failed" in text
    sh(fc, "node1", f"docker rm {name} && chmod 640 {dest}/config.json && chown 1000 {dest}/config.json && "
                    f"bash {dest}/start.sh")
    wait_for("exit", lambda: exited(fc, "node1", name))
    assert "owner id diff: current process user id is 0, file owner id is 1000" in host_logs(fc, "node1", name)


def test_container_ip_not_in_the_rank_table_is_refused(cluster):
    fc, tree, _ = cluster
    dest = "/var/lib/deployctl/test/wrongip"
    push(fc, "node1", tree / "node1", dest, then=f"sed -i 's/^MIES_CONTAINER_IP=.*/MIES_CONTAINER_IP=10.99.0.9/; "
                                                 f"s/^HOST_IP=.*/HOST_IP=10.99.0.9/' {dest}/env && bash {dest}/start.sh")
    wait_for("exit", lambda: exited(fc, "node1"))
    status, code, text = outcome(fc, "node1")
    assert "Can not find the local server in ranktable file" in text and "MIES_CONTAINER_IP=10.99.0.9" in text
    assert (status, code) == ("exited", 1)


def test_world_size_and_device_count_must_match_the_table(cluster):
    fc, tree, _ = cluster
    dest = "/var/lib/deployctl/test/world"
    push(fc, "node1", tree / "node1", dest, then=f"sed -i 's/^WORLD_SIZE=.*/WORLD_SIZE=8/' {dest}/env && "
                                                 f"bash {dest}/start.sh")
    wait_for("exit", lambda: exited(fc, "node1"))
    assert "WORLD_SIZE=8 in the environment is not equal to the number of devices in ranktable file, which is 16" \
        in host_logs(fc, "node1")
    # one --device fewer than the table's devices for this server
    sh(fc, "node1", f"docker rm {NAME} && sed -i 's/^WORLD_SIZE=.*/WORLD_SIZE=16/; /--device=\\/dev\\/davinci7 /d' "
                    f"{dest}/start.sh {dest}/env && bash {dest}/start.sh")
    wait_for("exit", lambda: exited(fc, "node1"))
    assert "has 8 devices in ranktable file, but the container sees 7 NPUs" in host_logs(fc, "node1")


def test_weights_config_more_open_than_750_is_refused(cluster):
    fc, _, single = cluster
    dest = "/var/lib/deployctl/test/weights"
    w = fc.specs[0].weights_dir
    try:
        push(fc, "node1", single / "node1", dest, then=f"chmod 644 {w}/config.json && bash {dest}/start.sh")
        wait_for("exit", lambda: exited(fc, "node1", "deployctl_fake-a2-1_mindie"))
        text = host_logs(fc, "node1", "deployctl_fake-a2-1_mindie")
        assert "Check path: config.json failed, by: Check Other group permission failed" in text
        assert "Required permisssion is 750, but got permission is 644" in text
    finally:
        sh(fc, "node1", f"chmod 640 {w}/config.json")


def test_busy_port_is_a_bind_error(cluster):
    fc, _, single = cluster
    dest = "/var/lib/deployctl/test/busy"
    assert push(fc, "node1", single / "node1", dest, then=f"bash {dest}/start.sh").returncode == 0
    ip = fc.node("node1").ip
    wait_for("ready", lambda: ready(ip) == 200)
    # a second engine with the same config: its management port is taken
    r = sh(fc, "node1", f"sed -i 's/^NAME=.*/NAME=second/' {dest}/start.sh && bash {dest}/start.sh")
    assert r.returncode == 0
    wait_for("second exited", lambda: exited(fc, "node1", "second"))
    status, code, text = outcome(fc, "node1", "second")
    assert f"failed to listen on {ip}:{MGMT}: Address already in use" in text, text
    assert (status, code) == ("exited", 1)
    assert ready(ip) == 200                                   # the first one is unaffected


# ---- the rendezvous and the fault switches --------------------------------------------------------

def test_master_times_out_naming_the_worker_that_never_started(cluster):
    fc, tree, _ = cluster
    fc.update_node("node1", engine_join_timeout=5.0)     # a window wide enough to see the 503 on a loaded machine
    dest = "/var/lib/deployctl/test/timeout"
    t0 = time.monotonic()
    push(fc, "node1", tree / "node1", dest, then=f"bash {dest}/start.sh")
    ip1, ip2 = fc.node("node1").ip, fc.node("node2").ip
    assert wait_for("listening", lambda: ready(ip1) == 503)   # live, not ready while waiting
    wait_for("exit", lambda: exited(fc, "node1"))
    assert 4.9 < time.monotonic() - t0 < 40                   # its own 5 s, not the nodes' JOIN of 60 s
    status, code, text = outcome(fc, "node1")
    assert "[EI0006] Getting socket times out" in text
    assert f"did not connect to the master {ip1} within 5 s: {ip2} (container_ip {ip2})" in text
    assert (status, code) == ("exited", 1) and "Daemon start success!" not in text


def test_worker_alone_times_out_waiting_for_the_master(cluster):
    fc, tree, _ = cluster
    fc.update_node("node2", engine_join_timeout=1.0)
    dest = "/var/lib/deployctl/test/worker-alone"
    push(fc, "node2", tree / "node2", dest, then=f"bash {dest}/start.sh")
    wait_for("exit", lambda: exited(fc, "node2"))
    status, code, text = outcome(fc, "node2")
    assert "[EI0006]" in text and f"{fc.node('node1').ip}:{MULTI}" in text
    assert (status, code) == ("exited", 1)


def test_engine_crash_then_switched_off_for_the_next_start(cluster):
    fc, tree, _ = cluster
    fc.update_node("node2", engine_crash=True)
    fc.update_node("node1", engine_join_timeout=1.0)
    dest = "/var/lib/deployctl/test/crash"
    up(fc, tree, dest)
    wait_for("node2 exited", lambda: exited(fc, "node2"))
    status, code, text = outcome(fc, "node2")
    assert (status, code) == ("exited", 1)
    assert "NPU out of memory" in text and "Daemon is killing..." in text and "Daemon start success!" not in text
    # the master never sees node2 join and gives up after its join timeout, naming it
    wait_for("node1 exited", lambda: exited(fc, "node1"))
    assert fc.node("node2").ip in host_logs(fc, "node1").split("[EI0006]", 1)[1]
    # runtime switch: the next start of the same container is healthy
    fc.update_node("node2", engine_crash=False)
    fc.update_node("node1", engine_join_timeout=JOIN)
    on_all(lambda n: sh(fc, n, f"docker start {NAME}"), ("node1", "node2"))
    wait_for("ready", lambda: ready(fc.node("node1").ip) == 200 and ready(fc.node("node2").ip) == 200)


def test_engine_never_ready(cluster):
    fc, tree, _ = cluster
    fc.update_node("node2", engine_never_ready=True)
    up(fc, tree, "/var/lib/deployctl/test/never")
    ip1, ip2 = fc.node("node1").ip, fc.node("node2").ip
    wait_for("master ready", lambda: ready(ip1) == 200)
    wait_log(fc, "node2", "Warming up the model")
    time.sleep(0.3)
    assert ready(ip2) == 503 and http(ip2, MGMT, "/v2/health/live")[0] == 200
    status, code, text = outcome(fc, "node2")
    assert "Daemon start success!" not in text and (status, code) == ("running", 0)


def test_engine_reject_config(cluster):
    fc, tree, _ = cluster
    fc.update_node("node1", engine_reject_config="maxPrefillTokens is too small for this model")
    dest = "/var/lib/deployctl/test/reject"
    push(fc, "node1", tree / "node1", dest, then=f"bash {dest}/start.sh")
    wait_for("exit", lambda: exited(fc, "node1"))
    status, code, text = outcome(fc, "node1")
    assert "Check config.json failed: maxPrefillTokens is too small for this model" in text
    assert (status, code) == ("exited", 1) and "ranktable" not in text


def test_engine_slow_start(cluster):
    fc, tree, _ = cluster
    fc.update_node("node2", engine_slow_start=5.0)        # a window wide enough to see both 503s on a loaded machine
    t0 = time.monotonic()
    up(fc, tree, "/var/lib/deployctl/test/slow")
    ip1, ip2 = fc.node("node1").ip, fc.node("node2").ip
    wait_for("both listening, not ready", lambda: ready(ip1) == 503 and ready(ip2) == 503)
    assert "Loading the weights" in host_logs(fc, "node2")
    wait_for("ready", lambda: ready(ip1) == 200 and ready(ip2) == 200)
    assert time.monotonic() - t0 > 4.95


# ---- docker errors ---------------------------------------------------------------------------------

def test_docker_run_errors_like_real_docker(cluster):
    fc, tree, _ = cluster
    dest = "/var/lib/deployctl/test/errors"
    push(fc, "node1", tree / "node1", dest)
    img = fc.specs[0].docker_images[0]
    r = sh(fc, "node1", f"docker run -d --name abc --no-such-flag {shlex.quote(img)}")
    assert r.returncode == 125 and r.stderr == "unknown flag: --no-such-flag\nSee 'docker run --help'.\n"
    # image not here: no pull from a fake node
    fc.update_node("node1", image_missing=True)
    r = start(fc, "node1", dest)
    assert r.returncode == 125 and f"Unable to find image '{img}' locally" in r.stderr
    assert "no such host" in r.stderr and sh(fc, "node1", "docker ps -aq").stdout == ""
    fc.update_node("node1", image_missing=False)
    # a --device the node does not have: the container is created, not started
    fc.update_node("node1", missing_npus={7})
    r = start(fc, "node1", dest)
    assert r.returncode == 125
    assert 'error gathering device information while adding custom device "/dev/davinci7": no such file or ' \
           "directory" in r.stderr
    assert inspect(fc, "node1") == ("created", 128)
    r = start(fc, "node1", dest)                             # start.sh sees it and refuses
    assert r.returncode == 1 and "already exists" in r.stderr
    fc.update_node("node1", missing_npus=set())
    # name in use
    r = sh(fc, "node1", f"docker run -d --name {NAME} {shlex.quote(img)} true")
    assert r.returncode == 125 and f'Conflict. The container name "/{NAME}" is already in use' in r.stderr
    # --mount with a missing source; -v creates a missing source directory (as real docker does)
    r = sh(fc, "node1", f"docker run -d --name m1 --mount type=bind,source=/nope,target=/x {shlex.quote(img)} true")
    assert r.returncode == 125 and "bind source path does not exist: /nope" in r.stderr
    r = sh(fc, "node1", f"docker run --rm -v /data/new-dir:/x:ro {shlex.quote(img)} sh -c 'ls -d /x; touch /x/f'; "
                        "echo rc=$?; ls -d /data/new-dir")
    assert "/x\n" in r.stdout and "Read-only file system" in r.stderr and "rc=1" in r.stdout
    assert "/data/new-dir" in r.stdout
    # a command that does not exist in the image
    r = sh(fc, "node1", f"docker run -d --name m2 {shlex.quote(img)} no-such-binary")
    assert r.returncode == 127 and 'exec: "no-such-binary": executable file not found in $PATH' in r.stderr
    # missing containers
    r = sh(fc, "node1", "docker container inspect nope; echo rc=$?; docker logs nope; docker stop nope; "
                        "docker rm -f nope; echo rc=$?")
    assert "Error: No such container: nope" in r.stderr and "rc=1" in r.stdout and "rc=0" in r.stdout


# ---- prefill/decode split on A3 with MindIE-MS ----------------------------------------------------

def test_pd_split_2p2d_a3_with_mindie_ms(tmp_path_factory):
    require_fake_cluster_support()
    fc = FakeCluster(default_cluster(4, "a3", engine_join_timeout=JOIN), tmp_path_factory.mktemp("engine-a3"))
    fc.start()
    try:
        tree = render(tmp_path_factory.mktemp("engine-a3-tree"),
                      inventory(fc, layout={"preset": "pd-split", "prefill": {"nodes": ["node1", "node2"]},
                                            "decode": {"nodes": ["node3", "node4"]}}))
        assert (tree / "node1" / "start-ms.sh").exists()
        dest = "/var/lib/deployctl/test/pd"
        t0 = time.monotonic()
        up(fc, tree, dest, nodes=("node1", "node3", "node2", "node4"))
        ips = {n.name: n.ip for n in fc.nodes}
        n_dp = len(list((tree / "node3").glob("config*.json")))
        wait_for("P and D ready", lambda: all(ready(ips[n]) == 200 for n in ("node1", "node2")) and all(
            ready(ips[n], 10001 + 4 * k) == 200 for n in ("node3", "node4") for k in range(n_dp)), timeout=180)
        r = start(fc, "node1", dest, "start-ms.sh")
        assert r.returncode == 0, r.stderr
        base = "deployctl_fake-a3-4_mindie"
        wait_log(fc, "node1", "MindIE-MS coordinator is ready!", base + "-ms-coordinator")
        print(f"\n2P+2D A3 up (push + start + MS ready) in {time.monotonic() - t0:.2f}s")
        r = sh(fc, "node1", "docker ps --format '{{.Names}}'")
        assert sorted(r.stdout.split()) == [base, base + "-ms-controller", base + "-ms-coordinator"]
        wait_log(fc, "node1", "All instances are ready", base + "-ms-controller")
        for n in ("node1", "node2"):
            assert logs(fc, n, base).count("Daemon start success!") == 1
        # prefill: one centralized instance, its master holds the multiNodesInfer rendezvous
        assert "All 2 servers of the ranktable joined" in host_logs(fc, "node1", base)
        # decode: distributed DP, one container per node running one daemon per DP rank (tp1 -> 16 per A3
        # node), each with its own config<i>.json and ports 10000+4k..+3; no rendezvous
        assert n_dp == 16 and not (tree / "node3" / "config.json").exists()
        for n in ("node3", "node4"):
            text = logs(fc, n, base)
            assert text.count("Daemon start success!") == n_dp, text[-3000:]
            assert "ranktable joined" not in text and "Finished parsing ranktable file." in text
            for k in range(n_dp):
                assert http(ips[n], 10001 + 4 * k, "/v2/health/ready")[0] == 200, (n, k)
            pids = {line.split("] [")[1] for line in text.splitlines() if "Daemon start success" not in line
                    and "distributed DP server on" in line}
            assert len(pids) == n_dp, pids          # each daemon logs under its own pid
        code, body = chat(ips["node1"], 1035)
        assert code == 200, body
        doc = json.loads(body)
        assert "answering from node3" in doc["choices"][0]["message"]["content"]     # decode DP server 0
        assert " dmi," in doc["choices"][0]["message"]["content"]
        code, body = chat(ips["node1"], 1035, stream=True, max_tokens=3)
        assert code == 200 and sse_events(body)[-1] == "[DONE]"
        assert http(ips["node1"], 1036, "/v1/readiness")[0] == 200
        # the coordinator follows the instances: decode gone -> not ready, requests refused
        sh(fc, "node3", f"docker stop {base}")
        wait_for("coordinator not ready", lambda: http(ips["node1"], 1036, "/v1/readiness")[0] == 503)
        assert chat(ips["node1"], 1035)[0] == 503
        # docker stop / rm -f end every daemon of the container (one process group: bash -c runs its background
        # jobs without job control)
        sh(fc, "node4", f"docker rm -f {base}")
        for n in ("node3", "node4"):
            wait_for(f"{n} DP servers gone", lambda: not any(tcp_port_open(ips[n], 10001 + 4 * k, 0.2) is True
                                                                     for k in range(n_dp)))
    finally:
        fc.stop()


# ---- no SSH: pieces of the fake docker --------------------------------------------------------------

def test_docker_cli_pieces():
    opts, rest = fake_docker.parse_flags(["-d", "--name", "x1", "--net=host", "-e", "A=1", "-eB=2", "--privileged",
                                          "-v", "/a:/b:ro", "img", "bash", "-c", "echo -d"],
                                         fake_docker.RUN_FLAGS, "run")
    assert opts["detach"] and opts["name"] == "x1" and opts["network"] == "host" and opts["env"] == ["A=1", "B=2"]
    assert opts["privileged"] is True and opts["volumes"] == ["/a:/b:ro"] and rest == ["img", "bash", "-c", "echo -d"]
    with pytest.raises(fake_docker.CliError) as e:
        fake_docker.parse_flags(["--bogus", "img"], fake_docker.RUN_FLAGS, "run")
    assert e.value.rc == 125 and e.value.msg == "unknown flag: --bogus\nSee 'docker run --help'."
    with pytest.raises(fake_docker.CliError) as e:
        fake_docker.parse_flags(["-p", "80:80", "img"], fake_docker.RUN_FLAGS, "run")
    assert "not simulated" in e.value.msg
    assert fake_docker.merge_env(["A=1", "B=2", "A=3"]) == ["A=3", "B=2"]
    assert fake_docker.parse_volume("/x:/y:ro")["RW"] is False and fake_docker.parse_volume("/x:/y")["RW"] is True
    assert fake_docker.parse_size("500g") == 500 * 1024 ** 3
    assert [fake_docker.human_duration(s) for s in (0.5, 1, 59, 61, 150, 3700, 90000)] == [
        "Less than a second", "1 second", "59 seconds", "About a minute", "2 minutes", "About an hour", "25 hours"]
    assert fake_docker.go_time(0.5) == "1970-01-01T00:00:00.500000000Z" and fake_docker.go_time(None) == \
        "0001-01-01T00:00:00Z"
    assert fake_docker.parse_time("2025-01-02T03:04:05Z") == 1735787045.0
    assert abs(fake_docker.parse_time("10s", now=100.0) - 90.0) < 1e-9
    assert fake_docker.render("{{.State.Running}} {{.State.ExitCode}} {{json .State}}",
                              {"State": {"Running": True, "ExitCode": 0}}) == \
        'true 0 {"Running":true,"ExitCode":0}'
    assert fake_docker.ps_command(["bash", "-c", "echo hi"]) == "bash -c 'echo hi'"


def test_engine_faults_parse_and_reach_the_node_state():
    from fakecluster import parse_fault
    from fakecluster.spec import NodeSpec
    from fakecluster.tools import node_state
    assert parse_fault("node2:engine_crash") == ("node2", "engine_crash", True)
    assert parse_fault("node2:engine_reject_config=bad maxSeqLen") == ("node2", "engine_reject_config", "bad maxSeqLen")
    assert parse_fault("node1:engine_slow_start=2.5") == ("node1", "engine_slow_start", 2.5)
    assert parse_fault("node1:engine_join_timeout=5") == ("node1", "engine_join_timeout", 5.0)
    assert parse_fault("node1:engine_never_ready=false") == ("node1", "engine_never_ready", False)
    spec = NodeSpec("n1", "10.200.0.11", engine_never_ready=True, engine_slow_start=1)
    assert node_state(spec)["engine"] == {"crash": False, "crash_on": "", "never_ready": True,
                                          "reject_config": False, "slow_start": 1.0, "join_timeout": 15.0}
    with pytest.raises(ValueError):
        NodeSpec("n1", "10.200.0.11", engine_join_timeout=0)


GOLDEN = Path(__file__).resolve().parent.parent / "golden"


@pytest.mark.parametrize("node_dir", sorted({p.parent for p in GOLDEN.glob("*/*/config.json")} |
                                             {p.parent for p in GOLDEN.glob("*/*/config1.json")}),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_trees_pass_the_engine_checks(node_dir, tmp_path, monkeypatch, capsys):
    """Every rendered golden node folder passes the stand-in MindIE's config and rank-table checks, with the
    env of its env file and the devices of its start.sh (in-process, no container)."""
    import importlib.util
    import re
    import shutil
    spec = importlib.util.spec_from_file_location("fake_engine", Path(fake_docker.__file__).with_name("engine.py"))
    engine = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(engine)
    configs = sorted(node_dir.glob("config*.json"))        # config.json, or config1..N.json (distributed DP)
    for c in configs:
        assert engine.config_problems(json.loads(c.read_text())) == [], c
    cfg = json.loads(configs[0].read_text())
    if not cfg["BackendConfig"]["multiNodesInferEnabled"] and \
            not cfg["BackendConfig"]["ScheduleConfig"].get("distributedEnable"):
        assert not (node_dir / "ranktable.json").exists()
        return
    table = tmp_path / "ranktable.json"
    shutil.copyfile(node_dir / "ranktable.json", table)
    table.chmod(0o640)
    for line in (node_dir / "env").read_text().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.partition("=")
            monkeypatch.setenv(k, v)
    monkeypatch.setenv("RANK_TABLE_FILE", str(table))
    devices = [int(d) for d in re.findall(r"--device=/dev/davinci(\d+) ", (node_dir / "start.sh").read_text())]
    servers, master, local, world, _ = engine.parse_ranktable(devices, 1.0)
    assert local.container_ip == dict(line.split("=", 1) for line in (node_dir / "env").read_text().splitlines()
                                      if "=" in line and not line.startswith("#"))["MIES_CONTAINER_IP"]
    assert world == sum(len(s.devices) for s in servers) and "Finished parsing ranktable file." in capsys.readouterr().out
    table.chmod(0o644)
    with pytest.raises(engine.Fatal):
        engine.parse_ranktable(devices, 1.0)
    assert "Required permisssion is 640, but got permission is 644" in capsys.readouterr().out


def test_env_file_rules(tmp_path):
    f = tmp_path / "env"
    f.write_text("# comment\n\nA=1\n  B= spaced value \nEMPTY=\nHCCL_OP_RETRY_ENABLE=L0:0, L1:0, L2:0\n")
    assert fake_docker.read_env_file(str(f)) == ["A=1", "B= spaced value ", "EMPTY=",
                                                 "HCCL_OP_RETRY_ENABLE=L0:0, L1:0, L2:0"]
    f.write_text("BAD KEY=1\n")
    with pytest.raises(fake_docker.CliError):
        fake_docker.read_env_file(str(f))
