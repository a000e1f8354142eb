"""What `deployctl bench` needs beyond the core install: the `bench` extra (pyproject.toml), asked for by name.

AIPerf (the load generator, run as `python -m aiperf`), matplotlib (the plots) and tokenizers (the word-level
tokenizer handed to AIPerf) are not dependencies of the core install: validate, plan, render, preflight, up and
the rest never import them. `bench` checks for them before it reads anything, and refuses (exit 2) with the
command that installs them.
"""

from __future__ import annotations

import sys

PACKAGES = ("aiperf", "matplotlib", "tokenizers")      # the import names of the bench extra's distributions
INSTALL = "pip install 'deployctl[bench]'"


def missing() -> list[str]:
    """The packages of the bench extra this Python environment cannot import (found, not imported: AIPerf
    itself runs in a child process)."""
    from importlib.util import find_spec

    out = []
    for name in PACKAGES:
        try:
            found = find_spec(name) is not None
        except (ImportError, ValueError):       # a broken or refused installation counts as missing
            found = False
        if not found:
            out.append(name)
    return out


def require() -> None:
    """Refuse (UsageError, exit 2) when a package of the bench extra is missing, naming the extra to install."""
    from deployctl.core.errors import UsageError

    absent = missing()
    if absent:
        raise UsageError(f"deployctl bench needs its extra (AIPerf and the plotting libraries), not part of the "
                         f"core install: {', '.join(absent)} not installed",
                         hint=f"{INSTALL} in the environment deployctl runs from ({sys.executable} -m {INSTALL}; "
                              "with pipx: pipx install --force 'deployctl[bench]')")
