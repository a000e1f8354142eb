"""pytest fixtures for fake Ascend clusters. Enable them with, in tests/conftest.py:

    pytest_plugins = ["fakecluster.fixtures"]

* `fake_cluster_factory(specs=None, *, n=2, hardware="a2")` -> a started `FakeCluster`, stopped after
  the test (specs default to `default_cluster(n, hardware)` on a free subnet);
* `fake_cluster_2a2`: one healthy 2-node A2 cluster for the whole session (do not inject faults into it:
  use the factory for that).

On a machine that cannot run them (not root, no sshd, no `ip netns`, no overlayfs) these fixtures FAIL
with what to install. They never skip: a skipped SSH layer would look green while testing nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from .cluster import FakeCluster, check_environment, gc_stale
from .spec import NodeSpec, default_cluster


_collected = False


def require_fake_cluster_support() -> None:
    """pytest.fail (never skip) with the fix when fake clusters cannot run here. The first call also
    removes clusters left behind by test runs that died (their owner process is gone)."""
    global _collected
    problems = check_environment()
    if not problems and not _collected:
        _collected = True
        gc_stale()
    if problems:
        pytest.fail("fake Ascend cluster fixtures cannot run on this machine:\n  - " + "\n  - ".join(problems)
                    + "\nInstall the missing pieces (Debian/Ubuntu: apt-get install -y --no-install-recommends "
                      "openssh-server openssh-client iproute2 util-linux python3) and run the tests as root.",
                    pytrace=False)


FakeClusterFactory = Callable[..., FakeCluster]


@pytest.fixture
def fake_cluster_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeClusterFactory]:
    """Build and start fake clusters inside a test; all of them are stopped afterwards."""
    require_fake_cluster_support()
    made: list[FakeCluster] = []

    def factory(specs: list[NodeSpec] | None = None, *, n: int = 2, hardware: str = "a2") -> FakeCluster:
        if specs is None:
            specs = default_cluster(n, hardware)  # type: ignore[arg-type]
        cluster = FakeCluster(specs, tmp_path_factory.mktemp("fakecluster"))
        made.append(cluster)
        return cluster.start()

    try:
        yield factory
    finally:
        errors = []
        for cluster in reversed(made):      # every one, even when stopping another failed
            try:
                cluster.stop()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]


@pytest.fixture(scope="session")
def fake_cluster_2a2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeCluster]:
    """A healthy 2-node A2 cluster (node1, node2) shared by the whole session."""
    require_fake_cluster_support()
    cluster = FakeCluster(default_cluster(2, "a2"), tmp_path_factory.mktemp("fakecluster-2a2"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
