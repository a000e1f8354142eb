"""The executor interface: run a fixed argument list on a host, get rc/stdout/stderr back."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Protocol


# hosts contacted at once by every fan-out (reads, locks, history, preflight): a thread and one SSH connection
# each; 64 covers a 64-server fleet in one wave (preflight --workers overrides it)
FAN_OUT = 64


@dataclass(frozen=True)
class HostTarget:
    """How to reach one host (resolved from the inventory's ssh defaults and node overrides)."""

    name: str
    address: str
    user: str = "root"
    port: int = 22
    key: str | None = None
    known_hosts: str | None = None


@dataclass(frozen=True)
class CommandResult:
    host: str
    command: str
    rc: int
    stdout: str
    stderr: str = ""
    seconds: float = 0.0


class HostError(Exception):
    """A host could not be used at all: unreachable, auth failed, host key unknown or changed, timeout."""

    def __init__(self, host: str, kind: str, message: str, hint: str = ""):
        super().__init__(f"{host}: {message}")
        self.host, self.kind, self.message, self.hint = host, kind, message, hint


class Executor(Protocol):
    def run(self, target: HostTarget, argv: list[str], timeout: float) -> CommandResult: ...

    def close(self) -> None: ...


def join_argv(argv: list[str]) -> str:
    """Quote every argument: user values never reach a remote shell unquoted."""
    return shlex.join(argv)
