"""Tests marked ``alone`` run while no other xdist worker runs a test.

A test that loads the whole machine on purpose (``test_truth.py``'s launch under full CPU load: stress-ng on every
core) would otherwise load the other worker's tests too, which then fail for timing reasons that are not theirs.
Every test holds a shared lock on a file in the run's temporary directory (common to all workers) from its setup
to its teardown; an ``alone`` test holds it exclusively. A turnstile lock keeps the exclusive one from waiting
forever behind a stream of shared ones: a worker that wants to run alone takes the turnstile first, so the others
stop at it before their next test."""

from __future__ import annotations

import fcntl
import os

import pytest


class Alone:
    def __init__(self, config) -> None:
        self.config = config
        self.fds: tuple[int, int] | None = None

    def _locks(self) -> tuple[int, int]:
        if self.fds is None:       # <pytest-of-user>/pytest-N: the worker's basetemp is a folder in it
            folder = self.config._tmp_path_factory.getbasetemp().parent
            self.fds = tuple(os.open(folder / name, os.O_RDWR | os.O_CREAT, 0o600)  # type: ignore[assignment]
                             for name in ("alone.gate", "alone.run"))
        return self.fds  # type: ignore[return-value]

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        gate, run = self._locks()
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(run, fcntl.LOCK_EX if item.get_closest_marker("alone") else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            return (yield)
        finally:
            fcntl.flock(run, fcntl.LOCK_UN)


def configure(config) -> None:
    """Under xdist, in each worker (one process alone runs every test alone anyway)."""
    if hasattr(config, "workerinput"):
        config.pluginmanager.register(Alone(config), "deployctl-alone")
