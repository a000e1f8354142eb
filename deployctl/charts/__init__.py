"""The Helm chart shipped with deployctl (deployctl/charts/ascend-llm, package data of deployctl.charts)."""
