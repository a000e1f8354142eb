"""The stand-in vLLM-Ascend (fake_bin/vllm.py): its argv rules, run as processes on this machine (127.0.0.1, lo),
no cluster. FAKE_VLLM_SETTINGS points it at a settings file whose dev_dir holds /dev/davinci0..7 files."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import free_port, free_range
from support.procs import stop, stop_all, wait_http

VLLM_PY = Path(__file__).resolve().parent / "fake_bin" / "vllm.py"
ENV = {"PATH": "/usr/bin:/bin", "HCCL_IF_IP": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo"}


@pytest.fixture
def host(tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    for i in range(8):
        (dev / f"davinci{i}").touch()
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}\n")
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"dev_dir": str(dev), "ip": "127.0.0.1", "node": "unit",
                                    "image": "quay.io/ascend/vllm-ascend:v0.13.0",
                                    # the ranks' rendezvous: wide, as the processes of a group start on a loaded machine
                                    "engine": {"join_timeout": 60}}))
    return {"model": str(model), "settings": str(settings)}


_started: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _stop_stand_ins():
    """Whatever a test started is stopped when it ends, passed or not."""
    yield
    stop_all(_started)
    _started.clear()


def start(host, *args, env=None, log: Path | None = None) -> subprocess.Popen:
    """A stand-in ``vllm serve``; its output to a pipe (read at ``finish``), or to ``log`` to be read while it runs."""
    with (log.open("w") if log else contextlib.nullcontext(subprocess.PIPE)) as sink:
        p = subprocess.Popen([sys.executable, str(VLLM_PY), "serve", host["model"], *args], stdout=sink,
                             stderr=subprocess.STDOUT, text=True,
                             env={**ENV, "FAKE_VLLM_SETTINGS": host["settings"], **(env or {})})
    p.log = log  # type: ignore[attr-defined]
    _started.append(p)
    return p


def finish(p: subprocess.Popen, timeout=60) -> tuple[int, str]:
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(p)
        raise
    return p.returncode, out if p.log is None else p.log.read_text()  # type: ignore[attr-defined]


def wait_line(p: subprocess.Popen, words: str, timeout: float = 60) -> None:
    """Until the output ``p`` writes to its ``log`` holds ``words``; fails at once if ``p`` exits first."""
    deadline = time.monotonic() + timeout
    while words not in p.log.read_text():  # type: ignore[attr-defined]
        assert p.poll() is None and time.monotonic() < deadline, (words, p.returncode, p.log.read_text())  # type: ignore[attr-defined]
        time.sleep(0.1)


def dp(addr_port: int, size: int, local: int, *more: str) -> list[str]:
    return ["--tensor-parallel-size", "4", "--data-parallel-size", str(size), "--data-parallel-size-local", str(local),
            "--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port", str(addr_port), *more]


def test_unknown_flag_is_refused_like_argparse(host):
    rc, out = finish(start(host, "--tensor-parallel-size", "8", "--no-such-flag", "3"))
    assert rc == 2
    assert out.splitlines()[-1] == "vllm serve: error: unrecognized arguments: --no-such-flag 3"
    assert out.startswith("usage: vllm serve [model_tag] [options]")


def test_flags_of_another_version_table(host, tmp_path):
    # --cuda-graph-sizes exists in vLLM 0.11's parser, not in 0.13's
    rc, out = finish(start(host, "--cuda-graph-sizes", "8", "--port", str(free_port())))
    assert rc == 2 and "unrecognized arguments: --cuda-graph-sizes 8" in out
    s = json.loads(Path(host["settings"]).read_text())
    Path(host["settings"]).write_text(json.dumps(dict(s, image="quay.io/ascend/vllm-ascend:v0.11.0")))
    port = free_port()
    p = start(host, "--cuda-graph-sizes", "8", "--host", "127.0.0.1", "--port", str(port))
    wait_http(p, f"http://127.0.0.1:{port}/v1/models")
    p.terminate()
    rc, out = finish(p)
    assert "Application startup complete." in out, out


def test_underscore_spelling_is_accepted_and_the_server_answers(host):
    port = free_port()
    p = start(host, "--tensor_parallel_size", "8", "--served-model-name", "m", "--host", "127.0.0.1",
              "--port", str(port))
    try:
        import urllib.request
        body = wait_http(p, f"http://127.0.0.1:{port}/v1/models")
        assert json.loads(body)["data"][0]["id"] == "m"
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(
            {"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
            headers={"Content-Type": "application/json"})
        assert "vLLM-Ascend" in json.loads(urllib.request.urlopen(req, timeout=5).read())[
            "choices"][0]["message"]["content"]
    finally:
        p.terminate()
        rc, out = finish(p)
    assert out.count("init engine (profile, create kv cache, warmup model) took 1.23 seconds") == 1
    assert "Application startup complete." in out


def test_headless_at_rank_0_is_an_error(host):
    rc, out = finish(start(host, *dp(free_port(), 2, 1), "--headless"))
    assert rc == 1 and "rank 0 belongs to the DP master" in out
    rc, out = finish(start(host, "--tensor-parallel-size", "4", "--data-parallel-size", "2",
                           "--data-parallel-start-rank", "1", "--headless"))
    assert rc == 1 and "--headless needs --data-parallel-address" in out


def test_start_rank_without_headless_is_an_error(host):
    rc, out = finish(start(host, *dp(free_port(), 2, 1, "--data-parallel-start-rank", "1"), "--port", str(free_port())))
    assert rc == 1 and "data_parallel_start_rank is only applicable in headless mode" in out


def test_devices_must_exist_and_fit(host):
    rc, out = finish(start(host, "--tensor-parallel-size", "2", env={"ASCEND_RT_VISIBLE_DEVICES": "7,8"}))
    assert rc == 1 and "ASCEND_RT_VISIBLE_DEVICES=7,8: device(s) 8 do not exist" in out
    rc, out = finish(start(host, *dp(free_port(), 2, 2, "--tensor-parallel-size", "8")))
    assert rc == 1 and "8 x 2 DP rank(s) in this process = 16 NPUs, but 8 are visible" in out


def test_internal_dp_group_meets_and_serves(host):
    rpc, api = free_port(), free_port()
    master = start(host, *dp(rpc, 4, 2), "--host", "127.0.0.1", "--port", str(api))
    worker = start(host, *dp(rpc, 4, 2, "--data-parallel-start-rank", "2"), "--headless",
                   log=Path(host["settings"]).parent / "worker.log")
    wait_http(master, f"http://127.0.0.1:{api}/v1/models")
    wait_line(worker, "running; no API server in headless mode")
    for p in (worker, master):
        p.terminate()
    (_, wout), (_, mout) = finish(worker), finish(master)
    assert wout.count("init engine (profile, create kv cache, warmup model) took") == 2, wout
    assert mout.count("init engine (profile, create kv cache, warmup model) took") == 2, mout
    assert "Application startup complete." in mout and "All 4 DP ranks joined" in mout


def test_overlapping_start_ranks_abort_the_group(host):
    rpc = free_port()
    master = start(host, *dp(rpc, 4, 2), "--host", "127.0.0.1", "--port", str(free_port()))
    worker = start(host, *dp(rpc, 4, 2, "--data-parallel-start-rank", "1"), "--headless")
    (mrc, mout), (wrc, wout) = finish(master), finish(worker)
    assert mrc == 1 and wrc == 1
    assert "Unexpected HELLO message for remote engine 1" in mout and "already held by this node" in mout
    assert "aborted the handshake" in wout


def test_mismatched_dp_size_aborts_the_group(host):
    rpc = free_port()
    master = start(host, *dp(rpc, 2, 1), "--host", "127.0.0.1", "--port", str(free_port()))
    worker = start(host, *dp(rpc, 4, 1, "--data-parallel-start-rank", "1"), "--headless")
    (mrc, mout), (wrc, wout) = finish(master), finish(worker)
    assert mrc == 1 and wrc == 1
    assert "Mismatched parallel config" in mout and "data_parallel_size 4" in mout, mout


def test_a_missing_headless_node_times_out(host):
    s = json.loads(Path(host["settings"]).read_text())
    Path(host["settings"]).write_text(json.dumps(dict(s, engine={"join_timeout": 3})))
    rc, out = finish(start(host, *dp(free_port(), 2, 1), "--host", "127.0.0.1", "--port", str(free_port())))
    assert rc == 1 and "DP rank(s) 1 of 2 never connected" in out


def kv_config(role="kv_producer", port=36000, **extra) -> str:
    doc = {"kv_connector": "MooncakeConnectorV1", "kv_role": role, "kv_port": str(port), "engine_id": "0",
           "kv_connector_extra_config": {"prefill": {"dp_size": 1, "tp_size": 4},
                                         "decode": {"dp_size": 1, "tp_size": 4}}}
    doc.update(extra)
    return json.dumps(doc)


def test_kv_port_conflict_is_a_zmq_error(host):
    kv = free_range(4)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", kv + 2))           # tp rank 2 of DP rank 0
        busy.listen(1)
        rc, out = finish(start(host, "--tensor-parallel-size", "4", "--kv-transfer-config", kv_config(port=kv),
                               "--host", "127.0.0.1", "--port", str(free_port())))
    assert rc == 1
    assert f"zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:{kv + 2}')" in out


def test_kv_transfer_config_rules(host):
    rc, out = finish(start(host, "--kv-transfer-config", "{not json"))
    assert rc == 2 and "argument --kv-transfer-config: invalid loads value" in out
    bad = json.loads(kv_config())
    del bad["engine_id"]
    bad["kv_connector_extra_config"].pop("decode")
    rc, out = finish(start(host, "--tensor-parallel-size", "4", "--kv-transfer-config", json.dumps(bad)))
    assert rc == 1 and "engine_id is missing" in out and "kv_connector_extra_config.decode needs dp_size" in out
    rc, out = finish(start(host, "--tensor-parallel-size", "8", "--kv-transfer-config", kv_config()))
    assert rc == 1 and "prefill says dp_size 1, tp_size 4 but this kv_producer runs" in out


def test_hccl_if_ip_and_gloo_interface(host):
    rc, out = finish(start(host, "--tensor-parallel-size", "4", "--kv-transfer-config", kv_config(),
                           env={"GLOO_SOCKET_IFNAME": "enp189s0f0"}))
    assert rc == 1 and "Unable to find address for: enp189s0f0" in out
    rc, out = finish(start(host, "--tensor-parallel-size", "4", "--kv-transfer-config", kv_config(),
                           env={"HCCL_IF_IP": ""}))
    assert rc == 1 and "HCCL_IF_IP is not set" in out


def test_proxy_script_arguments_must_pair():
    code = ("import sys; sys.path.insert(0, %r); import vllm; sys.exit(vllm.proxy_main(sys.argv[1:]))"
            % str(VLLM_PY.parent))
    r = subprocess.run([sys.executable, "-c", code, "--prefiller-hosts", "a", "b", "--prefiller-ports", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "Number of prefiller hosts must match number of prefiller ports" in r.stdout
