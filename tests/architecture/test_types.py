"""The core type-checks (issue 35): `mypy` with the repository's configuration (pyproject.toml [tool.mypy]: the
files it checks, deployctl/core, and how strictly) reports no error. Run from the repository root, as CI and a
developer's plain `mypy` run it. mypy is in the test extra; without it this fails, it does not skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parents[2]


def test_core_type_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)     # [tool.mypy] files = ["deployctl/core"] is relative to the root
    stdout, stderr, status = api.run(["--config-file", str(ROOT / "pyproject.toml")])
    assert status == 0, f"mypy (pyproject.toml [tool.mypy]) reports errors:\n{stdout}{stderr}"
