"""The stand-in vLLM-Ascend's NetLoader (fake_bin/netloader_fake.py, `vllm serve --load-format netloader`): a seed
loads from disk and serves its weights per rank; a client whose SOURCE names it joins (rank, model path, TP, PP
checked), loads in the peer time, and falls back to disk on a NACK or a dead source. Processes on this machine
(127.0.0.1), no cluster, as test_vllm_standin.py."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support import free_port, free_range
from support.procs import stop_all

VLLM_PY = Path(__file__).resolve().parent / "fake_bin" / "vllm.py"
ENV = {"PATH": "/usr/bin:/bin", "HCCL_IF_IP": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo"}
DISK_S, PEER_S = 1.5, 0.2
READY = "Application startup complete."


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
                                    "engine": {"join_timeout": 3, "slow_start": DISK_S, "load_from_peer_s": PEER_S}}))
    return {"model": str(model), "settings": str(settings), "tmp": tmp_path}


class Proc:
    """A stand-in `vllm serve` whose output lines are collected as they come."""

    def __init__(self, host, *args, env=None):
        self.started = time.monotonic()
        self.p = subprocess.Popen([sys.executable, str(VLLM_PY), "serve", host["model"], "--host", "127.0.0.1",
                                   "--port", str(free_port()), *args], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True,
                                  env={**ENV, "FAKE_VLLM_SETTINGS": host["settings"], **(env or {})})
        self.lines: list[str] = []
        self.times: list[float] = []      # when each line came
        threading.Thread(target=self._read, daemon=True).start()
        _started.append(self.p)

    def _read(self):
        for line in self.p.stdout:
            self.times.append(time.monotonic())
            self.lines.append(line.rstrip("\n"))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def wait(self, words: str, timeout: float = 60, from_start: bool = False) -> float:
        """Seconds from the stand-in's first line (its interpreter is up and it parses its flags) until a line
        holding ``words`` came. Not from the start of the process (unless ``from_start``, where load can only make
        the time longer): a Python start on a loaded 2-core CI machine has taken many seconds, more than the disk
        load these tests tell from a peer load."""
        deadline = time.monotonic() + timeout
        while (hit := next((i for i, line in enumerate(self.lines) if words in line), None)) is None:
            assert self.p.poll() is None or any(words in line for line in self.lines), self.text
            assert time.monotonic() < deadline, f"no {words!r} within {timeout} s:\n{self.text}"
            time.sleep(0.02)
        return self.times[hit] - (self.started if from_start else self.times[0])

    def exit_code(self, timeout: float = 60) -> int:
        rc = self.p.wait(timeout)
        time.sleep(0.1)         # the reader takes the last lines
        return rc


_started: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _stop_stand_ins():
    yield
    stop_all(_started)
    _started.clear()


def netloader(listen: int, source: list | None = None, **more) -> list[str]:
    doc = {"LISTEN_PORT": listen, **({"SOURCE": source} if source is not None else {}), **more}
    return ["--load-format", "netloader", "--model-loader-extra-config", json.dumps(doc)]


def source(ranks, *bases) -> list[dict]:
    return [{"device_id": r, "sources": [f"127.0.0.1:{b + r}" for b in bases]} for r in ranks]


def seed(host, tp=2):
    base = free_range(tp)
    p = Proc(host, "--tensor-parallel-size", str(tp), *netloader(base))
    took = p.wait(READY)
    return p, base, took


def test_bad_json_is_argparse_error(host):
    p = Proc(host, "--load-format", "netloader", "--model-loader-extra-config", '{"SOURCE": [}')
    assert p.exit_code() == 2
    assert p.lines[-1].startswith("vllm serve: error: argument --model-loader-extra-config: Value {\"SOURCE\": [} "
                                  "cannot be converted to <function loads"), p.text


def test_a_value_that_is_no_json_object_is_refused_by_netloader(host):
    p = Proc(host, "--load-format", "netloader", "--model-loader-extra-config", "LISTEN_PORT=7000")
    assert p.exit_code() == 1
    assert "RuntimeError: NetLoader requires --model-loader-extra-config to be a JSON object." in p.text


def test_seed_loads_from_disk_and_serves_every_rank(host):
    p, base, took = seed(host)
    assert took >= DISK_S
    assert "Did not get valid source info, use DefaultModelLoader" in p.text
    for rank in (0, 1):
        assert f"Start elastic Netloader server, rank: {rank}, listen port: 127.0.0.1:{base + rank}, group: " \
               "netloader" in p.text
        assert f"Elastic server started, rank: {rank}, group: netloader" in p.text
        socket.create_connection(("127.0.0.1", base + rank), timeout=2).close()


def test_client_loads_from_the_seed_faster_than_disk_and_serves_too(host):
    s, seed_base, _ = seed(host)
    own = free_range(2)
    c = Proc(host, "--tensor-parallel-size", "2", *netloader(own, source([0, 1], seed_base)))
    took = c.wait(READY)
    assert took < DISK_S, c.text
    for rank in (0, 1):
        assert "Receive ack: label=JOIN_ACK" in c.text
        assert f"Netloader P2P load time: {PEER_S:.3f}, device_id: {rank}, group: netloader" in c.text
        assert f"Elastic server started, rank: {rank}, group: netloader" in c.text    # a seed in turn
    assert "DefaultModelLoader" not in c.text
    s.wait(f"Accept new connection from 127.0.0.1:")


def test_mismatched_tp_is_nacked_and_falls_back_to_disk(host):
    s, seed_base, _ = seed(host, tp=2)
    c = Proc(host, "--tensor-parallel-size", "1", *netloader(free_range(1), source([0], seed_base)))
    took = c.wait(READY)
    assert took >= DISK_S
    assert (f"Connect to 127.0.0.1:{seed_base} fails, detail: Receive nack from server, reason: Received data "
            f"(0, '{host['model']}', 1, 1) does not consist with this server (0, '{host['model']}', 2, 1)") in c.text
    assert "All sources exhausted, no connection established for device_id=0" in c.text
    assert "Netloader elastic loading fails, use load format DefaultModelLoader" in c.text
    assert "does not consist with this server" in s.text          # the seed logs its NACK too


def test_sources_are_tried_in_order_and_a_dead_one_is_skipped(host):
    s, seed_base, _ = seed(host)
    dead = free_range(2)
    c = Proc(host, "--tensor-parallel-size", "2", *netloader(free_range(2), source([0, 1], dead, seed_base)))
    assert c.wait(READY) < DISK_S, c.text
    assert f"Connect to 127.0.0.1:{dead} fails, detail: [Errno 111] Connection refused" in c.text
    assert f"Finish connection to server: 127.0.0.1:{seed_base + 1}" in c.text


def test_no_live_source_falls_back_to_disk(host):
    dead = free_range(1)
    c = Proc(host, *netloader(free_range(1), source([0], dead)))
    assert c.wait(READY) >= DISK_S
    assert "All sources exhausted" in c.text and "use load format DefaultModelLoader" in c.text


def test_a_busy_listen_port_leaves_the_instance_serving_without_a_weight_server(host):
    base = free_range(1)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", base))
        busy.listen(1)
        c = Proc(host, *netloader(base))
        c.wait(READY)
    assert "Failed to start Netloader server for rank: 0, details: [Errno 98] Address already in use" in c.text
    assert "Elastic server started" not in c.text


def test_one_seed_rank_serves_its_clients_one_after_the_other(host):
    """The real server transfers in its accepting thread (elastic.py L396-403): a second client waits."""
    s, seed_base, _ = seed(host, tp=1)
    a = Proc(host, *netloader(free_range(1), source([0], seed_base)))
    b = Proc(host, *netloader(free_range(1), source([0], seed_base)))
    ta, tb = a.wait(READY, from_start=True), b.wait(READY, from_start=True)
    assert max(ta, tb) >= 2 * PEER_S
    assert "DefaultModelLoader" not in a.text + b.text
