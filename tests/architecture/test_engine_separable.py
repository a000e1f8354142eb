"""An engine is separable: deployctl with one engine's folder and settings module deleted (and nothing else
changed) lists the other engines and renders their deployments byte for byte as the whole tree does. So the rest
of the package, core included, holds nothing of that engine: adding it was adding its files, and the rest of the
tree would be the same files without it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "inventories" / "examples"
KINDS = {"mindie": "mindie", "vllm_ascend": "vllm-ascend", "sglang": "sglang"}   # folder -> engine.kind

pytestmark = pytest.mark.slow


def engine_kind(path: Path) -> str:
    return (yaml.safe_load(path.read_text()).get("engine") or {}).get("kind", "mindie")


# a prefill/decode example of each engine (its router or proxy too)
PD_EXAMPLES = {"mindie": "a3-pd-2p1d.yaml", "vllm-ascend": "vllm-a3-2p1d-qwen3.yaml",
               "sglang": "sglang-a3-2p1d-deepseek-r1.yaml"}


@cache
def example_of(kind: str) -> Path:
    path = EXAMPLES / PD_EXAMPLES[kind]
    assert engine_kind(path) == kind
    return path


def deployctl(package_root: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(package_root), "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "deployctl", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> dict[str, dict[str, bytes]]:
    out = tmp_path_factory.mktemp("whole")
    rendered = {}
    for kind in KINDS.values():
        r = deployctl(ROOT, "render", "-i", str(example_of(kind)), "-o", str(out / kind), cwd=out)
        assert r.returncode == 0, r.stderr
        rendered[kind] = tree(out / kind)
    return rendered


@pytest.mark.parametrize("folder", sorted(KINDS))
def test_deployctl_without_an_engine_is_the_same_for_the_others(folder, whole, tmp_path):
    assert (ROOT / "deployctl" / "core" / "engines" / folder / "__init__.py").is_file()   # the list is complete:
    assert sorted(p.name for p in (ROOT / "deployctl/core/engines").iterdir()
                  if (p / "__init__.py").is_file()) == sorted(KINDS)
    copy = tmp_path / "pkg"
    shutil.copytree(ROOT / "deployctl", copy / "deployctl", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(copy / "deployctl" / "core" / "engines" / folder)
    (copy / "deployctl" / "core" / "models" / "engine_settings" / f"{folder}.py").unlink()

    listed = deployctl(copy, "engines", "--output", "json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert {row["engine"] for row in json.loads(listed.stdout)} == set(KINDS.values()) - {KINDS[folder]}

    for kind in set(KINDS.values()) - {KINDS[folder]}:
        r = deployctl(copy, "render", "-i", str(example_of(kind)), "-o", str(tmp_path / kind), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert tree(tmp_path / kind) == whole[kind], f"{kind} renders differently without {folder}"

    # an inventory of the missing engine is bad input (exit 2, the key named), not a crash
    gone = deployctl(copy, "validate", "-i", str(example_of(KINDS[folder])), cwd=tmp_path)
    assert gone.returncode == 2 and "Traceback" not in gone.stderr, gone.stderr
    assert "engine" in gone.stdout + gone.stderr
