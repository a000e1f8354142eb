"""The real Prometheus (Debian's `prometheus` package, installed by .ci/run) for the observe tests: started on a free
port of 127.0.0.1 with a given config, queried through its HTTP API. Missing binaries FAIL the test with the
install line (never skip: CI installs them)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from support import free_port

INSTALL = "apt-get install -y --no-install-recommends prometheus   (.ci/run does)"


def binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: {INSTALL}", pytrace=False)
    return path


class Prometheus:
    def __init__(self, config: Path, work: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = work / "prometheus.log"
        (work / "tsdb").mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [binary("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={work / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log.open("wb"), stderr=subprocess.STDOUT, cwd=work)

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"prometheus exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        pytest.fail(f"prometheus not ready in {timeout} s: {self.log.read_text()[-2000:]}")

    def api(self, path: str, **params) -> dict:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:       # 400 bad_data: the error is in the body
            return json.loads(exc.read())

    def query(self, expr: str) -> dict:
        return self.api("query", query=expr)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def __enter__(self):
        try:
            self.wait_ready()
        except BaseException:           # __exit__ is not called when __enter__ fails
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()


def concrete(expr: str, cluster: str, rate: str = "1m") -> str:
    """A dashboard expression as Grafana sends it: its variables replaced."""
    return expr.replace("$__rate_interval", rate).replace("$cluster", cluster)
