"""Typed errors: every user-facing failure carries what went wrong, where, and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One problem found in the user's input.

    Attributes:
        message: what is wrong, naming the bad value.
        path: key path inside the inventory, e.g. ``nodes[1].devices[3].ip``.
        file: the file the value came from.
        line: 1-based line in that file, when known.
        hint: how to fix it.
    """

    message: str
    path: str = ""
    file: str = ""
    line: int | None = None
    hint: str = ""

    def location(self) -> str:
        where = self.file
        if where and self.line:
            where = f"{where}:{self.line}"
        if self.path:
            where = f"{where} {self.path}" if where else self.path
        return where

    def sort_key(self) -> tuple:
        return (self.file, self.line or 0, self.path, self.message)


MAX_SHOWN_PROBLEMS = 50    # render() and to_dict() list the first problems, then say how many more
MAX_TEXT = 1000            # characters of one message or hint (values from hostile input can be huge)


def _cap(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"… ({len(text) - MAX_TEXT} more characters)"


class DeployctlError(Exception):
    """Base of all errors deployctl reports without a traceback."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str = "", problems: list[Problem] | tuple = ()):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.problems = list(problems)

    def render(self) -> str:
        """The message shown to the user (plain text, stable: golden-tested)."""
        lines = [f"✗ {_cap(self.message)}"]
        for p in self.problems[:MAX_SHOWN_PROBLEMS]:
            loc = _cap(p.location())
            lines.append(f"  • {loc}: {_cap(p.message)}" if loc else f"  • {_cap(p.message)}")
            if p.hint:
                lines.append(f"    hint: {_cap(p.hint)}")
        more = len(self.problems) - MAX_SHOWN_PROBLEMS
        if more > 0:
            lines.append(f"  … and {more} more problem{'s' if more != 1 else ''} "
                         f"({len(self.problems)} in all; fix these first)")
        if self.hint:
            lines.append(f"To fix: {_cap(self.hint)}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "error": type(self).__name__,
            "message": _cap(self.message),
            "hint": _cap(self.hint),
            "exit_code": self.exit_code,
            "problems": [
                {"file": _cap(p.file), "line": p.line, "path": _cap(p.path), "message": _cap(p.message),
                 "hint": _cap(p.hint)}
                for p in self.problems[:MAX_SHOWN_PROBLEMS]
            ],
            "problem_count": len(self.problems),          # all of them; "problems" lists the first 50
            "problems_omitted": max(0, len(self.problems) - MAX_SHOWN_PROBLEMS),
        }


class InventoryError(DeployctlError):
    """The inventory cannot be deployed as written (static checks, no network)."""

    exit_code = 2


class LayoutError(DeployctlError):
    """The layout cannot run on these nodes: degrees do not add up, or it does not fit in memory."""

    exit_code = 2


class UsageError(DeployctlError):
    """A bad flag or argument (e.g. an output directory deployctl will not overwrite)."""

    exit_code = 2


class RenderError(DeployctlError):
    """A renderer failed (a bug or a broken template), naming the artifact."""

    exit_code = 1


class ExecutionError(DeployctlError):
    """An operation on the hosts failed (names the host, what ran and where the logs are)."""

    exit_code = 1
