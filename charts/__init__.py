"""Helm charts shipped with deployctl (package data: deployctl.charts). The chart itself is charts/mindie."""
