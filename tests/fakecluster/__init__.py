"""Simulated Ascend A2/A3 hosts for tests: real sshd per node in its own network + mount namespace.

    from fakecluster import FakeCluster, NodeSpec, default_cluster

See spec.py (NodeSpec, default_cluster, fleet), tools.py (generated files), cluster.py (FakeCluster),
manyhost.py (ManyHostCluster: many hosts behind one sshd),
fixtures.py (pytest fixtures) and scripts/fake-cluster (developer CLI).
"""

from .cluster import FakeCluster, FakeClusterError, FakeNode, check_environment, free_subnet, gc_stale
from .manyhost import ManyHostCluster
from .spec import NodeSpec, default_cluster, fleet, parse_fault, with_faults

__all__ = ["FakeCluster", "FakeClusterError", "FakeNode", "ManyHostCluster", "NodeSpec", "check_environment",
           "default_cluster", "fleet", "free_subnet", "gc_stale", "parse_fault", "with_faults"]
