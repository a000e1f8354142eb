"""Stand-ins for Kubernetes controllers that cannot be built for the test control plane (tests/k8scluster.py): each
one reconciles against the real API server as the upstream controller does, with every behaviour sourced."""
