"""Kubernetes: chart values from a plan, the helm CLI, and the Kubernetes API (client, lazily imported)."""
