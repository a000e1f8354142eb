"""Run many probe commands in one SSH round trip: a fixed-argv script with delimited outputs.

Each probe's argv is quoted with shlex.join, so no inventory value reaches the remote shell
unquoted. Output of the script::

    @@deployctl-begin npu.info
    ...command output (stdout and stderr)...
    @@deployctl-end 0

Probes run one after another, or (``parallel``) several at once, each into a file of its own that is
printed in the commands' order once all have finished: the output is byte for byte the sequential one.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import lru_cache

BEGIN = "@@deployctl-begin"
END = "@@deployctl-end"

# How many of one host's read-only probes run at once (preflight phase 1). Most of a probe's time is
# npu-smi / hccn_tool waiting on the NPU driver, so concurrency is what makes a host fast; but each call
# is a driver query and preflight may run on a host that is serving or being set up, so the host must
# not get a burst of ~50 queries at once. 8 is one per NPU (an A2 server has 8, an A3 server 8
# packages): about one query in flight per device, and at most 8 (+8 `timeout`) extra processes on
# the host. It cuts an A2 host's 42 tool calls to 6 rounds (A3: 106 to 14).
PROBE_CONCURRENCY = 8


@dataclass(frozen=True)
class ProbeOutput:
    name: str
    rc: int
    text: str


# Ascend tools live outside the default non-interactive PATH on some distributions; C locale keeps
# the tools' output in the format the parsers expect.
PREAMBLE = ('export PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/local/Ascend/driver/tools"; '
            "export LC_ALL=C")


def _probe_line(name: str, argv: list[str], per_command_timeout: int) -> str:
    """One probe: marker, the command bounded by coreutils timeout (stderr merged), its exit code."""
    _check_name(name)
    run = shlex.join(["timeout", "-k", "2", str(per_command_timeout), *argv])
    # the newline before END keeps a last line without "\n" apart from the marker; it is removed again
    return f"echo {shlex.quote(BEGIN + ' ' + name)}; {run} 2>&1 </dev/null; printf '\\n{END} %s\\n' \"$?\""


def batch_argv(commands: list[tuple[str, list[str]]], per_command_timeout: int = 30,
               parallel: bool | int = False) -> list[str]:
    """One `sh -c` running every (name, argv), each bounded by coreutils timeout.

    ``parallel``: False (or 1) runs the commands one after another, streaming; an int N > 1 runs at most
    N at once (read-only probes: PROBE_CONCURRENCY); True runs all at once (probes that only wait, such
    as pings to peers). Either way each command's output, exit code and timeout are its own and the
    output is the sequential one, in the same order.
    """
    width = len(commands) if parallel is True else int(parallel)
    key = tuple((name, tuple(argv)) for name, argv in commands)
    return ["sh", "-c", _script(key, per_command_timeout, max(1, min(width, len(commands))))]


@lru_cache(maxsize=64)
def _script(commands: tuple[tuple[str, tuple[str, ...]], ...], per_command_timeout: int, width: int) -> str:
    """The script (cached: preflight sends the same probes to every host, and quoting them costs ~2 ms)."""
    lines = [_probe_line(name, list(argv), per_command_timeout) for name, argv in commands]
    if width == 1:
        return "\n".join([PREAMBLE, *lines])
    return _bounded_script(lines, width)


def _bounded_script(lines: list[str], width: int) -> str:
    """``width`` workers share the probes: each walks the list and runs a probe it is the first to claim.

    A claim is an exclusive create (``set -C``: O_EXCL) of c<i>, so every probe runs exactly once, a
    worker that finishes early takes the next probe (no static split: a slow probe holds up one worker,
    not a share of the list), and nothing beyond POSIX sh builtins is spent on the scheduling. Probe i
    writes to file <i>; one `cat` prints them in order. Without a temporary directory (mktemp fails) the
    probes run one after another, as the sequential script does.
    """
    n = len(lines)
    cases = "\n".join(f"{i}) {line};;" for i, line in enumerate(lines))
    files = " ".join(f'"$d/{i}"' for i in range(n))
    return "\n".join([
        PREAMBLE,
        f"p() {{\ncase $1 in\n{cases}\nesac\n}}",
        f'if ! d=$(mktemp -d 2>/dev/null); then i=0; while [ "$i" -lt {n} ]; do p "$i"; i=$((i + 1)); done; exit 0; fi',
        "trap 'rm -rf \"$d\"' EXIT",
        f'w() {{ set -C; i=0; while [ "$i" -lt {n} ]; do '
        f'if {{ true; }} 2>/dev/null >"$d/c$i"; then p "$i" >"$d/$i"; fi; i=$((i + 1)); done; }}',
        " ".join(["w &"] * width),
        "wait",
        f"cat {files}",
    ])


def _check_name(name: str) -> None:
    if not name.replace(".", "").replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"probe name {name!r} must be a plain identifier")


def split_outputs(stdout: str) -> dict[str, ProbeOutput]:
    """Cut the script output back into one ProbeOutput per probe (a probe cut short gets rc -1)."""
    out: dict[str, ProbeOutput] = {}
    pattern = re.compile(rf"^{re.escape(BEGIN)} (\S+)\n(.*?)\n{re.escape(END)} (-?\d+)$", re.S | re.M)
    pos = 0
    for m in pattern.finditer(stdout):
        out[m.group(1)] = ProbeOutput(m.group(1), int(m.group(3)), m.group(2))
        pos = m.end()
    tail = stdout[pos:]
    cut = re.search(rf"^{re.escape(BEGIN)} (\S+)\n(.*)", tail, re.S | re.M)
    if cut:
        out[cut.group(1)] = ProbeOutput(cut.group(1), -1, cut.group(2))
    return out
