"""Golden tests of the user-facing messages for bad inventories.

Every folder in tests/errors/ is one realistic mistake: ``inventory.yaml`` (a valid inventory with
that mistake, described by its ``# case:`` comment), ``expected.txt`` (the exact stderr of the CLI)
and optionally ``command`` (``plan`` for mistakes only the planner sees, ``render`` for what only the files need:
device IPs left to preflight; default ``validate``).
Inventory paths are relative to the repository root so the messages are stable.

Regenerate with ``pytest tests/test_errors.py --update-golden`` and read every diff.
"""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, check_golden, run_cli

ERRORS = ROOT / "tests" / "errors"
CASES = sorted(p.name for p in ERRORS.iterdir() if (p / "inventory.yaml").is_file())


def _command(case: str) -> str:
    f = ERRORS / case / "command"
    return f.read_text(encoding="utf-8").strip() if f.exists() else "validate"


def _inventory(case: str) -> str:
    return f"tests/errors/{case}/inventory.yaml"


def test_enough_cases():
    assert len(CASES) >= 25


def _case_text(case: str) -> str:
    """The inventory as text; a few cases are deliberately not UTF-8 (Latin-1, UTF-16)."""
    raw = (ERRORS / case / "inventory.yaml").read_bytes()
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return raw.decode("utf-16")
    return raw.decode("utf-8", errors="replace")


@pytest.mark.parametrize("case", CASES)
def test_error_message(case: str, update_golden: bool, tmp_path):
    inventory = _case_text(case)
    assert inventory.startswith("# case: "), "start each case with a one-line '# case: ...' comment"
    command = _command(case)
    assert command in ("validate", "plan", "render")

    out = ("-o", str(tmp_path / "out")) if command == "render" else ()
    result = run_cli(command, "-i", _inventory(case), *out)

    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stdout == ""
    assert result.stderr.startswith("✗ ")
    if command in ("validate", "render"):
        # every problem names the file it came from
        assert f"tests/errors/{case}/" in result.stderr
    check_golden(ERRORS / case / "expected.txt", result.stderr.encode("utf-8"), update_golden)


@pytest.mark.parametrize("case", ["device-ip-invalid", "multi-semantic"])
def test_error_as_json(case: str):
    result = run_cli("validate", "-i", _inventory(case), "--output", "json")

    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr == ""
    doc = json.loads(result.stdout)
    assert doc["error"] == "InventoryError"
    assert doc["exit_code"] == 2
    assert doc["problems"], doc
    for p in doc["problems"]:
        assert set(p) >= {"file", "line", "path", "message", "hint"}
        assert p["file"] == _inventory(case)
        assert isinstance(p["line"], int) and p["line"] > 0
        assert p["message"]
    if case == "device-ip-invalid":
        (p,) = doc["problems"]
        assert p["path"] == "nodes[0].devices[3].ip"
        assert "29.0.3.300" in p["message"]
        lines = (ERRORS / case / "inventory.yaml").read_text(encoding="utf-8").splitlines()
        assert "29.0.3.300" in lines[p["line"] - 1]


def test_plan_refusal_as_json():
    result = run_cli("plan", "-i", _inventory("plan-r1-w8a8-one-a2"), "--output", "json")

    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    doc = json.loads(result.stdout)
    assert doc["error"] == "LayoutError"
    assert doc["problems"] and "GB" in doc["problems"][0]["message"]


def test_debug_shows_traceback():
    result = run_cli("--debug", "validate", "-i", _inventory("device-ip-invalid"))

    assert result.returncode == 2
    assert "Traceback" in result.stderr
    assert "InventoryError" in result.stderr
    # the user-facing message still follows the traceback
    assert "nodes[0].devices[3].ip: '29.0.3.300' is not a valid IP address" in result.stderr


def test_missing_inventory_file():
    result = run_cli("validate", "-i", "tests/errors/no-such-inventory.yaml")

    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "tests/errors/no-such-inventory.yaml" in result.stderr
