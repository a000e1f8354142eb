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
        lines = [f"✗ {self.message}"]
        for p in self.problems:
            loc = p.location()
            lines.append(f"  • {loc}: {p.message}" if loc else f"  • {p.message}")
            if p.hint:
                lines.append(f"    hint: {p.hint}")
        if self.hint:
            lines.append(f"To fix: {self.hint}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "error": type(self).__name__,
            "message": self.message,
            "hint": self.hint,
            "exit_code": self.exit_code,
            "problems": [
                {"file": p.file, "line": p.line, "path": p.path, "message": p.message, "hint": p.hint}
                for p in self.problems
            ],
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
