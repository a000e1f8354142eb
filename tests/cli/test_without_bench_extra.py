"""The core install works without the bench extra; `bench` asks for it by name.

`pip install deployctl` leaves out AIPerf, matplotlib and tokenizers (and what they bring: pandas, numpy, scipy,
pyarrow, transformers, plotly, dash): they are `deployctl[bench]`. Here the CLI runs in a real process whose
import system refuses them (a sitecustomize on PYTHONPATH puts a finder first on sys.meta_path) and logs every
attempt: validate, plan and render of the sample must exit 0 without trying one, and bench must exit 2 with the
command that installs the extra, no traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HELM, ROOT

# fresh interpreters with an import blocker (a fork of the test process has every package imported already), as the
# packaging tests run the built wheel: CI's full run, not the fast tier
pytestmark = pytest.mark.e2e

BENCH_ONLY = ("aiperf", "matplotlib", "tokenizers", "pandas", "numpy", "scipy", "pyarrow", "transformers", "plotly",
              "dash")
SAMPLE = str(ROOT / "inventories" / "sample.yaml")

SITECUSTOMIZE = f'''
import os, sys

REFUSED = {BENCH_ONLY!r}


class _RefuseBenchExtra:
    """Not installed: what an environment without deployctl[bench] answers (every attempt logged)."""

    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in REFUSED:
            with open(os.environ["REFUSED_LOG"], "a") as log:
                log.write(name + "\\n")
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _RefuseBenchExtra())
'''


@pytest.fixture(scope="module")
def refusing(tmp_path_factory) -> Path:
    """A directory holding the sitecustomize that refuses the bench extra (for PYTHONPATH)."""
    site = tmp_path_factory.mktemp("refuse")
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return site


def run(site: Path, argv: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    """`python ARGV` in a process that cannot import the bench extra: (result, the imports it refused)."""
    log = cwd / "refused.log"
    log.write_text("")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "COLUMNS": "120", "NO_COLOR": "1",
           "PYTHONPATH": str(site), "REFUSED_LOG": str(log), "DEPLOYCTL_HELM": HELM}
    r = subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    return r, log.read_text().split()


@pytest.fixture
def without_extra(refusing):
    """Run `deployctl ARGS` without the bench extra: (result, the imports it refused)."""
    return lambda *args, cwd: run(refusing, ["-m", "deployctl", *args], cwd)


def test_the_finder_refuses_the_extra(refusing, without_extra, tmp_path):
    probe, refused = run(refusing, ["-c", "import matplotlib"], tmp_path)
    assert probe.returncode != 0 and "No module named 'matplotlib'" in probe.stderr and refused == ["matplotlib"]
    r, refused = without_extra("bench", "--help", cwd=tmp_path)     # its help needs nothing of it either
    assert r.returncode == 0 and "pip install 'deployctl[bench]'" in r.stdout and refused == [], r.stderr


@pytest.mark.parametrize("args", [["validate"], ["plan"], ["render", "-o", "out"], ["recommend"],
                                  ["observe", "render", "-o", "obs"]], ids=lambda a: " ".join(a))
def test_offline_commands_run_without_the_bench_extra(without_extra, tmp_path, args):
    cmd = [*args[:1], *(["render", "-i", SAMPLE, *args[2:]] if args[0] == "observe" else ["-i", SAMPLE, *args[1:]])]
    r, refused = without_extra(*cmd, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
    assert refused == [], f"{' '.join(cmd)} tried to import {refused}"


def test_other_commands_start_without_it(without_extra, tmp_path):
    for args in (["engines"], ["schema", "-o", "s.json"], ["init"], ["--help"]):
        r, refused = without_extra(*args, cwd=tmp_path)
        assert r.returncode == 0 and refused == [], f"{args}: {refused} {r.stderr[-1500:]}"


@pytest.mark.parametrize("output", ["text", "json"])
def test_bench_without_the_extra_exits_2_naming_what_to_install(without_extra, tmp_path, output):
    r, refused = without_extra("bench", "-i", SAMPLE, "--output", output, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    shown = r.stdout + r.stderr
    assert "pip install 'deployctl[bench]'" in shown and "Traceback" not in shown, shown
    assert "aiperf" in shown and not (tmp_path / ".deployctl").exists()      # refused before anything ran
