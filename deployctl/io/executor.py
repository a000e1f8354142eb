"""The executor interface: run a fixed argument list on a host, get rc/stdout/stderr back."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Protocol


# hosts contacted at once by every fan-out (reads, locks, history, preflight, watch rounds): a thread and one SSH
# connection handshake each; 64 covers a 64-server fleet in one wave. DEPLOYCTL_FAN_OUT (or `deployctl --fan-out
# N`) changes it: measured at 1,024 simulated hosts in docs/dev/benchmarks.md ("A thousand hosts").
FAN_OUT = 64
FAN_OUT_ENV = "DEPLOYCTL_FAN_OUT"
MAX_FAN_OUT = 1024


def fan_out_width() -> int:
    """Hosts contacted at once: DEPLOYCTL_FAN_OUT when it is a whole number in [1, MAX_FAN_OUT], else FAN_OUT."""
    text = os.environ.get(FAN_OUT_ENV, "").strip()
    return int(text) if text.isdigit() and 1 <= int(text) <= MAX_FAN_OUT else FAN_OUT

# What one SSH command may print (stdout + stderr) before deployctl stops reading and names the host. The
# largest legitimate read is a host's state batch (every revision manifest and history entry: tens of KB each)
# or preflight's probe batch (~100 KB on an A3 server); 4 MB is 40x that, and with FAN_OUT hosts read at once
# the buffers stay at 64 x 4 MB = 256 MB even when every host floods. DEPLOYCTL_MAX_OUTPUT_MB (or
# `deployctl --max-output-mb N`) raises or lowers it.
DEFAULT_OUTPUT_MB = 4.0
OUTPUT_ENV = "DEPLOYCTL_MAX_OUTPUT_MB"
# `deployctl logs` streams each container's log to a file, never into memory, so it may keep more: 32 MB is
# ~150,000 lines of a verbose MindIE log; a fleet of 64 hosts that all flood writes 2 GB to disk at worst.
# DEPLOYCTL_MAX_LOG_MB or `deployctl logs --max-log-mb N`.
DEFAULT_LOG_MB = 32.0
LOG_ENV = "DEPLOYCTL_MAX_LOG_MB"


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


class OutputLimitExceeded(HostError):
    """A command printed more than the output cap; reading stopped and the channel was closed.

    ``output`` is what was read (at most the cap) so that a caller that ran a batch of commands can tell
    which one flooded (``relabel``); it is dropped by ``relabel``, so a kept error holds no output.
    """

    def __init__(self, host: str, command: str, limit: int, output: bytes | bytearray | None = None):
        super().__init__(host, "output-limit", f"output of `{command}` on {host} exceeded {fmt_mb(limit)}",
                         f"something on {host} prints without end (e.g. a file that is a link to /dev/zero, or a "
                         f"runaway tool): check `{command}` there; if that much output is legitimate, raise the "
                         f"cap with {OUTPUT_ENV}=N or `deployctl --max-output-mb N`")
        self.command, self.limit, self.output = command, limit, output

    def relabel(self, command: str) -> "OutputLimitExceeded":
        return OutputLimitExceeded(self.host, command, self.limit)


def fmt_mb(nbytes: int) -> str:
    return f"{nbytes / 2**20:g} MB"


def limit_bytes(env: str, default_mb: float, value_mb: float | None = None) -> int:
    """A cap in bytes: ``value_mb`` when given, else the environment variable ``env``, else ``default_mb``."""
    if value_mb is None:
        raw = os.environ.get(env, "").strip()
        if raw:
            try:
                value_mb = float(raw)
            except ValueError:
                value_mb = -1.0
            if not value_mb > 0:
                from deployctl.core.errors import UsageError

                raise UsageError(f"{env}={raw!r} is not a size in MB", hint=f"e.g. {env}=8 (megabytes, > 0)")
    mb = default_mb if value_mb is None else value_mb
    return max(1, int(mb * 2**20))


def short_command(argv: list[str], width: int = 100) -> str:
    """The command line as a finding shows it (long scripts cut)."""
    text = " ".join(join_argv(argv).split())
    return text if len(text) <= width else text[:width - 1] + "…"


class Executor(Protocol):
    def run(self, target: HostTarget, argv: list[str], timeout: float) -> CommandResult: ...

    def close(self) -> None: ...


def join_argv(argv: list[str]) -> str:
    """Quote every argument: user values never reach a remote shell unquoted."""
    return shlex.join(argv)
