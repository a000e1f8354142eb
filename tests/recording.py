"""A pipeline reporter that keeps every line (tests of the deploy pipeline, hosts and k8s)."""

from __future__ import annotations


class RecordingReporter:
    def __init__(self):
        self.lines: list[str] = []

    def stage(self, name):
        self.lines.append(f"· {name}")

    def changes(self, changes):
        self.lines.append("changes")

    def step(self, message):
        self.lines.append(message)

    def failure(self, message):
        self.lines.append(f"FAIL {message}")

    def verification(self, title, result):
        self.lines += [title] + [u.line() for u in result.units]

    def preflight(self, result):
        self.lines.append("preflight")

    def text(self) -> str:
        return "\n".join(self.lines)
