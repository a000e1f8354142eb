"""Run many probe commands in one SSH round trip: a fixed-argv script with delimited outputs.

Each probe's argv is quoted with shlex.join, so no inventory value reaches the remote shell
unquoted. Output of the script::

    @@deployctl-begin npu.info
    ...command output (stdout and stderr)...
    @@deployctl-end 0
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

BEGIN = "@@deployctl-begin"
END = "@@deployctl-end"


@dataclass(frozen=True)
class ProbeOutput:
    name: str
    rc: int
    text: str


# Ascend tools live outside the default non-interactive PATH on some distributions; C locale keeps
# the tools' output in the format the parsers expect.
PREAMBLE = ('export PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/local/Ascend/driver/tools"; '
            "export LC_ALL=C")


def batch_argv(commands: list[tuple[str, list[str]]], per_command_timeout: int = 30,
               parallel: bool = False) -> list[str]:
    """One `sh -c` running every (name, argv), each bounded by coreutils timeout.

    ``parallel`` runs the commands at once (each into its own file, printed in order afterwards): for
    probes that mostly wait, such as pings to peers.
    """
    if parallel:
        return _parallel_argv(commands, per_command_timeout)
    lines = [PREAMBLE]
    for name, argv in commands:
        _check_name(name)
        run = shlex.join(["timeout", "-k", "2", str(per_command_timeout), *argv])
        # the newline before END keeps a last line without "\n" apart from the marker; it is removed again
        lines.append(f"echo {shlex.quote(BEGIN + ' ' + name)}; {run} 2>&1 </dev/null; "
                     f"printf '\\n{END} %s\\n' \"$?\"")
    return ["sh", "-c", "\n".join(lines)]


def _parallel_argv(commands: list[tuple[str, list[str]]], per_command_timeout: int) -> list[str]:
    lines = [PREAMBLE, 'd=$(mktemp -d) || exit 1', "trap 'rm -rf \"$d\"' EXIT"]
    for i, (name, argv) in enumerate(commands):
        _check_name(name)
        run = shlex.join(["timeout", "-k", "2", str(per_command_timeout), *argv])
        lines.append(f"( echo {shlex.quote(BEGIN + ' ' + name)}; {run} 2>&1 </dev/null; "
                     f"printf '\\n{END} %s\\n' \"$?\" ) > \"$d/{i}\" &")
    lines.append("wait")
    lines += [f'cat "$d/{i}"' for i in range(len(commands))]
    return ["sh", "-c", "\n".join(lines)]


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
