"""Reading an engine's command-line words (engine.args, a role's view of them) as its argparse-style parser does."""

from __future__ import annotations

from typing import Iterable, Sequence


def last_value(args: Sequence[object], flags: Iterable[str]) -> str | None:
    """The value the last of ``flags`` in ``args`` gives (``--flag=value`` or ``--flag value``; the last one wins,
    as in argparse, and a role's view lists its flags after the engine block's: core/input/roles.py); "" for a
    flag with no word after it, None when none of them is there."""
    names, words = set(flags), [str(a) for a in args]
    found = None
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag in names:
            found = value if eq else (words[i + 1] if i + 1 < len(words) else "")
    return found
