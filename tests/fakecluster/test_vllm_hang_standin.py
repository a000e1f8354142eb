"""The stand-in vLLM-Ascend and watch's hang probe (deployctl's own fact): a prefill and a decode server of a P/D
split answer the plain one-token completion themselves (no kv_transfer_params: the connector has nothing to do, as
with vLLM-Ascend's Mooncake connectors); the run-time hang (fake_bin/vllm.py HANG_FLAG): while the flag file exists,
completions are held unanswered and /health, /metrics, /v1/models still answer 200; the flag of a previous run is
gone after a start. Processes on this machine (127.0.0.1), no cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

from fakecluster.test_vllm_standin import ENV, VLLM_PY, host, kv_config  # noqa: F401 - the fixture
from support import free_port, free_range
from support.procs import stop, wait_http

from deployctl.probes.infer import INFER


def wait_ready(p: subprocess.Popen, port: int) -> None:
    wait_http(p, f"http://127.0.0.1:{port}/v1/models")


def probe(port: int, timeout: float):
    body = json.dumps({"model": "m", "prompt": "1", "max_tokens": 1})
    argv = [sys.executable if a == "python3" else a
            for a in INFER.command(f"http://127.0.0.1:{port}/v1/completions", body, "1_virtual", timeout)]
    return INFER.parse(subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 60).stdout)


def status(port: int, path: str) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as r:
        return r.status


def test_a_hung_engine_answers_its_health_check_but_no_completion(host):  # noqa: F811
    flag = Path(host["settings"]).parent / "hang"
    flag.write_text("")                                 # left over from a run before this start
    port = free_port()
    p = subprocess.Popen([sys.executable, str(VLLM_PY), "serve", host["model"], "--tensor-parallel-size", "8",
                          "--served-model-name", "m", "--host", "127.0.0.1", "--port", str(port)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env={**ENV, "FAKE_VLLM_SETTINGS": host["settings"]})
    try:
        wait_ready(p, port)
        assert not flag.exists()                        # a start clears it
        assert probe(port, 5).ok
        flag.write_text("")
        held = probe(port, 1)
        assert held.outcome == "timeout", held
        assert [status(port, u) for u in ("/health", "/metrics", "/v1/models")] == [200, 200, 200]
        flag.unlink()
        assert probe(port, 5).ok
    finally:
        stop(p)


def test_prefill_and_decode_servers_answer_the_probe_directly(host):  # noqa: F811
    for role in ("kv_producer", "kv_consumer"):
        port = free_port()
        p = subprocess.Popen([sys.executable, str(VLLM_PY), "serve", host["model"], "--tensor-parallel-size", "4",
                              "--served-model-name", "m", "--kv-transfer-config", kv_config(role, port=free_range(4)),
                              "--host", "127.0.0.1", "--port", str(port)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env={**ENV, "FAKE_VLLM_SETTINGS": host["settings"]})
        try:
            wait_ready(p, port)
            answer = probe(port, 5)
        finally:
            out = stop(p)
        assert answer.ok, (role, answer, out[-2000:])
