"""support/alone.py: under two xdist workers, a test marked ``alone`` overlaps no other test, and the others
still run side by side (a pytest run of its own on generated tests that log when they start and end)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e          # fresh interpreters: two pytest runs of their own

SUPPORT = Path(__file__).resolve().parent.parent

CONFTEST = f'''
import sys
sys.path.insert(0, {str(SUPPORT)!r})
from support import alone

def pytest_configure(config):
    config.addinivalue_line("markers", "alone: runs alone")
    config.addinivalue_line("markers", "other: any other mark")
    alone.configure(config)
'''

TESTS = '''
import json, os, time
import pytest

LOG = os.environ["ALONE_LOG"]

def spans(name, seconds):
    start = time.monotonic()
    time.sleep(seconds)
    with open(LOG, "a") as f:
        f.write(json.dumps([name, start, time.monotonic()]) + "\\n")

@pytest.mark.parametrize("i", range(8))
def test_shared(i):
    spans(f"shared{i}", 0.4)

@pytest.mark.{mark}
def test_heavy():
    spans("heavy", 1.5)

@pytest.mark.parametrize("i", range(8))
def test_more(i):
    spans(f"more{i}", 0.4)
'''


def run(tmp_path: Path, mark: str) -> dict[str, tuple[float, float]]:
    tmp_path.mkdir()
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_gen.py").write_text(TESTS.replace("{mark}", mark))
    log = tmp_path / "log"
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-q", "-p", "no:cacheprovider", "--rootdir",
                        str(tmp_path), "-c", "/dev/null", "--basetemp", str(tmp_path / "base"),
                        str(tmp_path)], capture_output=True, text=True, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "ALONE_LOG": str(log)})
    assert r.returncode == 0, r.stdout + r.stderr
    return {name: (a, b) for name, a, b in map(json.loads, log.read_text().splitlines())}


def overlaps(spans: dict[str, tuple[float, float]], name: str) -> list[str]:
    a, b = spans[name]
    return [k for k, (c, d) in spans.items() if k != name and c < b and a < d]


def test_an_alone_test_overlaps_no_other_and_the_others_run_side_by_side(tmp_path):
    spans = run(tmp_path / "alone", "alone")
    assert len(spans) == 17 and overlaps(spans, "heavy") == []
    assert any(overlaps(spans, k) for k in spans if k != "heavy")      # two workers still run together


def test_without_the_mark_the_heavy_test_overlaps_others(tmp_path):
    """The check above can fail: the same run without the mark overlaps."""
    spans = run(tmp_path / "plain", "other")
    assert overlaps(spans, "heavy")
