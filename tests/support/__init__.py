"""Test support shared by the suite: one fake executor (executor.py), one inventory builder (inventory.py), the
free-port helpers (ports.py), and the session's leak check (leaks.py). Import as ``support``, the way test files
import ``fakecluster`` (tests/ is on sys.path under pytest)."""

from .executor import FakeExecutor
from .ports import free_port, free_range

__all__ = ["FakeExecutor", "free_port", "free_range"]
