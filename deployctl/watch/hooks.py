"""Alerts: every event to a webhook (POST JSON) and/or a command (the event as JSON on its stdin).

Nothing of an event is ever put into a URL or a command line (host text in a cause stays data). Hooks run on
one background thread in order, each bounded by a timeout; a hook that fails is reported once per failure,
never retried, and never holds up the watch loop (at most ``QUEUE`` events wait; beyond that they are dropped
and counted)."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import urllib.request
from typing import Callable

QUEUE = 1000
WEBHOOK_TIMEOUT = 5
COMMAND_TIMEOUT = 10


class Hooks:
    def __init__(self, webhook: str | None, command: list[str] | None, report: Callable[[str], None]):
        self.webhook, self.command, self.report = webhook, list(command) if command else None, report
        self.dropped = 0
        self.q: queue.Queue = queue.Queue(QUEUE)
        self.thread = None
        if self.webhook or self.command:
            self.thread = threading.Thread(target=self._run, daemon=True, name="deployctl-watch-hooks")
            self.thread.start()

    def send(self, event: dict) -> None:
        if self.thread is None:
            return
        try:
            self.q.put_nowait(json.dumps(event, default=str))
        except queue.Full:
            self.dropped += 1

    def close(self, timeout: float = 15) -> None:
        if self.thread is not None:
            self.q.put(None)
            self.thread.join(timeout)

    def _run(self) -> None:
        while True:
            doc = self.q.get()
            if doc is None:
                return
            if self.webhook:
                self._post(doc)
            if self.command:
                self._command(doc)

    def _post(self, doc: str) -> None:
        req = urllib.request.Request(self.webhook, data=doc.encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=WEBHOOK_TIMEOUT) as r:
                r.read(65536)
        except Exception as exc:   # noqa: BLE001 - any failure of an alert is reported, the watch goes on
            self.report(f"webhook {self.webhook}: {type(exc).__name__}: {str(exc)[:200]}")

    def _command(self, doc: str) -> None:
        try:
            res = subprocess.run(self.command, input=doc, text=True, capture_output=True, timeout=COMMAND_TIMEOUT)
            if res.returncode != 0:
                self.report(f"hook command {self.command[0]}: exit {res.returncode}: "
                            f"{(res.stderr or res.stdout).strip()[-200:]}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.report(f"hook command {self.command[0]}: {type(exc).__name__}: {str(exc)[:200]}")
