"""The executor interface: run a fixed argument list on a host, get rc/stdout/stderr back."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Protocol


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


@dataclass
class FakeExecutor:
    """Test double: canned outputs per (host, command), records every call."""

    outputs: dict[tuple[str, str], CommandResult | HostError] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)

    def run(self, target: HostTarget, argv: list[str], timeout: float) -> CommandResult:
        command = join_argv(argv)
        self.calls.append((target.name, command))
        out = self.outputs.get((target.name, command))
        if isinstance(out, HostError):
            raise out
        return out or CommandResult(target.name, command, 127, "", "command not found")

    def close(self) -> None:
        pass
