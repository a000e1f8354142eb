"""Fleet helpers of the e2e tests: a request load through a router and samples of HAProxy's own view of its
servers (its runtime API, read on the router node)."""

from __future__ import annotations

import json
import threading
import urllib.request


class Load:
    """Workers sending chat completions (streamed and not) through the router until stopped; every request
    must answer 200 with a complete body (a streamed one ends with [DONE])."""

    def __init__(self, url: str, workers: int = 4, model: str = "ds-r1"):
        self.url, self.model, self.ok, self.failures = url, model, 0, []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.work, args=(k,), daemon=True) for k in range(workers)]
        self.lock = threading.Lock()

    def one(self, stream: bool) -> None:
        body = json.dumps({"model": self.model, "messages": [{"role": "user", "content": "hello there"}],
                           "max_tokens": 12, "stream": stream}).encode()
        req = urllib.request.Request(f"{self.url}/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            text = r.read().decode()
            assert r.status == 200, r.status
        if stream:
            assert text.rstrip().endswith("data: [DONE]"), text[-200:]
        else:
            assert json.loads(text)["choices"][0]["message"]["content"]

    def work(self, k: int) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                self.one(stream=(k + n) % 2 == 0)
                with self.lock:
                    self.ok += 1
            except Exception as exc:   # noqa: BLE001 - every failure is the test's business
                with self.lock:
                    self.failures.append(f"{type(exc).__name__}: {exc}")

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(90)


class RouterWatch:
    """Samples HAProxy's `show stat` on the router node (its runtime API, from inside the node): how many
    replicas the router sends to, at every sample."""

    CMD = ("python3", "-c", "import socket,sys\ns=socket.create_connection(('127.0.0.1',8081),5)\n"
           "s.sendall(b'show stat\\n')\nout=b''\nwhile True:\n d=s.recv(65536)\n if not d: break\n out+=d\n"
           "sys.stdout.write(out.decode())")

    def __init__(self, fc, node: str):
        self.fc, self.node, self.samples = fc, node, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def statuses(self) -> dict[str, str]:
        import shlex

        out = self.fc.ssh(self.node, shlex.join(self.CMD)).stdout
        rows = [ln.split(",") for ln in out.splitlines() if ln.startswith("instances,")]
        head = out.lstrip("# ").splitlines()[0].split(",")
        col = head.index("status")
        return {r[1]: r[col] for r in rows if r[1] not in ("FRONTEND", "BACKEND")}

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.samples.append(self.statuses())
            except Exception:   # noqa: BLE001 - a missed sample is only a missed sample
                pass
            self.stop.wait(0.3)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(30)
