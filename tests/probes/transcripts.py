"""Cut one command's output out of a real multi-command transcript (the faultdiag samples)."""

from __future__ import annotations

import re
from pathlib import Path

_COMMAND = re.compile(r"^(Datetime:|/?usr/local/|cat /|lspci|pip list)")


def section(path: Path, command: str) -> str:
    """The output under ``command`` in a faultdiag transcript (command line, then its output)."""
    found, current = [], None
    for line in path.read_text().splitlines():
        if _COMMAND.match(line):
            current = [] if line.strip() == command else None
            if current is not None:
                found.append(current)
        elif current is not None:
            current.append(line)
    assert len(found) == 1, f"{command!r} appears {len(found)} times in {path.name}"
    return "\n".join(found[0])
