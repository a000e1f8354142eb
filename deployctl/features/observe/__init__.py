"""Observability: a Prometheus scrape configuration for a deployment (every engine's metrics endpoint, the
fleet router's exporter, Ascend's npu-exporter where installed) and a Grafana dashboard over it
(``deployctl observe render``, docs/observability.md). Both are built as plain dicts and serialised: no
YAML or JSON text is templated, so no inventory value is ever spliced into either file.
"""
