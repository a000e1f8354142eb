"""Test tiers (CONTRIBUTING.md): the fast tier, `pytest -m "not e2e and not slow"`, runs each property test with a fifth of its
examples (at least 10) so that a developer can run it after every change; a full run (CI: `pytest`) runs them
all. The assertions are the same in both tiers; only how many generated cases reach them differs."""

from __future__ import annotations

FAST = {"on": False}     # set by conftest.pytest_configure from the -m expression


def examples(n: int) -> int:
    """max_examples for a property test: n in a full run, n // 5 (at least 10) in the fast tier."""
    return max(10, n // 5) if FAST["on"] else n
