"""Alerts: every event to a webhook (POST JSON) and/or a command (the event as JSON on its stdin).

The webhook may come from the inventory (deploy.recovery.hooks.webhook): it only receives events. A command runs
on this machine, as the operator, with the operator's environment, so it is the operator's to give, never the
inventory's alone (the same rule as a kubeconfig's credential plugin, deployctl.io.kube): `watch --hook-command
'CMD ARGS'` names one, and the inventory's deploy.recovery.hooks.command runs only when the operator opts in with
`watch --allow-hook-command` or DEPLOYCTL_ALLOW_HOOK_COMMAND=1; otherwise it is not run and the watch says so
(``hook_command``).

Nothing of an event is ever put into a URL or a command line (host text in a cause stays data; the events are
cleaned and bounded before they get here, deployctl.features.watch.events). Hooks run on one background thread in order,
each bounded by a timeout; a hook that fails is reported once per failure, never retried, and never holds up the
watch loop (at most ``QUEUE`` events wait; beyond that they are dropped and counted)."""

from __future__ import annotations

import json
import os
import queue
import shlex
import subprocess
import threading
import urllib.request
from typing import Callable

from deployctl.core.errors import UsageError

QUEUE = 1000
WEBHOOK_TIMEOUT = 5
COMMAND_TIMEOUT = 10
ALLOW_COMMAND_ENV = "DEPLOYCTL_ALLOW_HOOK_COMMAND"
INVENTORY_KEY = "deploy.recovery.hooks.command"


def command_allowed(flag: bool = False) -> bool:
    """The operator's opt-in to the inventory's hook command: the flag, or DEPLOYCTL_ALLOW_HOOK_COMMAND=1."""
    return flag or os.environ.get(ALLOW_COMMAND_ENV, "").strip().lower() in ("1", "true", "yes")


def parse_command(text: str) -> list[str]:
    """`--hook-command 'CMD ARGS'`: split as a POSIX shell would split words (quotes), never run by a shell."""
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"--hook-command {text!r}: {exc}", hint="quote it as one shell word list, e.g. "
                         "--hook-command '/usr/local/bin/page-oncall --team llm'") from None
    if not argv:
        raise UsageError("--hook-command is empty", hint="name a program: --hook-command '/usr/local/bin/page-oncall'")
    return argv


def hook_command(inventory: list[str] | None, operator: str | None, allow: bool,
                 where: str = INVENTORY_KEY) -> tuple[list[str] | None, str]:
    """The command the hooks run (the operator's ``--hook-command``, else the inventory's when ``allow``), and a
    warning when the inventory names one that is not run (``where``: file:line and key, for the message)."""
    if operator is not None:
        argv = parse_command(operator)
        skipped = inventory and list(inventory) != argv
        return argv, (f"{where} ({shlex.join(inventory)[:200]}) is not run: --hook-command replaces it"
                      if skipped else "")
    if not inventory:
        return None, ""
    if allow:
        return list(inventory), ""
    return None, (f"{where} ({shlex.join(inventory)[:200]}) is not run: a hook command runs on this machine as you, "
                  f"so you enable it, not the inventory: pass --allow-hook-command (or set {ALLOW_COMMAND_ENV}=1) "
                  "if you trust it, or give your own with --hook-command 'CMD ARGS'")


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
