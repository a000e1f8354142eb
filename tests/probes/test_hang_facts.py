"""The two facts of watch's hang probe, on what their fixtures do not show: `npu-smi info watch -s u` read into a
bounded usage of the chip that was asked for (garbage refused), and the probe script's one line read into an
InferAnswer (anything else refused); the script itself against a local server that answers, fails and holds."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading

import pytest

from deployctl.probes.infer import INFER, parse_infer_answer
from deployctl.probes.npu_smi_watch import MAX_ROWS, NPU_USAGE, npu_chip, parse_npu_usage

HEAD = "NpuID(Idx)  ChipId(Idx) AI Cube(%)  \n"


def test_the_peak_is_the_highest_row_of_the_chip_asked_for():
    u = parse_npu_usage(HEAD + "1 0 2\n1 0 41.5\n" + HEAD + "1 0 7\n", 1, 0)
    assert u.samples == (2.0, 41.5, 7.0) and u.peak == 41.5 and not u.refused
    assert parse_npu_usage(HEAD, 1, 0).peak is None           # killed before the first row


@pytest.mark.parametrize("text, why", [
    ("", "header"),
    ("garbage\n", "header"),
    (HEAD + "0 0 101\n", "percent"),
    (HEAD + "0 0 1e308\n", "percent"),
    (HEAD + "0 0 nan\n", "percent"),
    (HEAD + "0 0 -3\n", "percent"),
    (HEAD + "0 1 5\n", "asked for"),                          # another chip's row
    (HEAD + "0 0 5 44 12\n", "rows"),                         # more columns than `-s u` asks for (default letters)
    (HEAD + "0 0\n", "rows"),
    (HEAD + "0 0 5\x1b]0;title\x07\n", "percent"),
])
def test_anything_but_rows_of_the_chip_is_refused(text, why):
    with pytest.raises(ValueError, match=why):
        parse_npu_usage(text, 0, 0)


def test_npu_smi_refusing_the_letter_is_an_answer_not_garbage():
    u = parse_npu_usage("Error parameter of -s\nUsage: npu-smi info <watch|proc|-h|-m|-l|-t type>\n", 0, 0)
    assert u.refused == "Error parameter of -s" and u.peak is None


def test_rows_are_bounded():
    u = parse_npu_usage(HEAD + "0 0 1\n" * (MAX_ROWS + 50), 0, 0)
    assert len(u.samples) == MAX_ROWS


def test_npu_and_chip_of_a_device():
    assert npu_chip("a2", 5) == (5, 0)
    assert npu_chip("a3", 7) == (3, 1) and npu_chip("a3", 0) == (0, 0)
    assert NPU_USAGE.command(3, 1, 5.9)[:2] == ["timeout", "5"]


@pytest.mark.parametrize("text", ["", "status 200\n", "status 200 0.1\n", "status 2000 0.100\n", "status 200 0.100\nx\n",
                                  "timeout -1.000\n", "error Connection Refused 0.001\n", "ok\n",
                                  "status 200 1e9.000\n", "error " + "A" * 80 + " 0.001\n"])
def test_the_probe_line_is_refused_unless_it_is_the_scripts(text):
    with pytest.raises(ValueError):
        parse_infer_answer(text)


class _Engine(http.server.BaseHTTPRequestHandler):
    seen: list = []
    hold = threading.Event()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Engine.seen.append((self.path, body, self.headers.get("X-Request-Id")))
        if self.path == "/hold":
            _Engine.hold.wait(10)
            return
        code = 200 if self.path == "/v1/completions" else 500
        self.send_response(code)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *a):
        pass


def test_the_script_reports_an_answer_an_error_and_a_hold():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    body = json.dumps({"model": "m", "prompt": "1", "max_tokens": 1})

    def run(path: str, timeout: float):
        out = subprocess.run([sys.executable if a == "python3" else a
                              for a in INFER.command(base + path, body, "17_virtual", timeout)],
                             capture_output=True, text=True, timeout=30)
        return INFER.parse(out.stdout)

    try:
        ok, failed, held = run("/v1/completions", 5), run("/broken", 5), run("/hold", 1)
    finally:
        _Engine.hold.set()
        srv.shutdown()
    assert ok.ok and ok.status == 200
    assert failed.outcome == "status" and failed.status == 500 and not failed.ok
    assert held.outcome == "timeout" and 1.0 <= held.seconds < 3
    assert _Engine.seen[0] == ("/v1/completions", {"model": "m", "prompt": "1", "max_tokens": 1}, "17_virtual")
