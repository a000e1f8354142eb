"""The Grafana dashboard over ``scrape.py``'s jobs: a classic dashboard JSON model (importable by Grafana's
"Import dashboard" and by file provisioning), built as a dict. Every query selects on the variable ``$cluster``
(a constant set to the inventory's cluster name), so no inventory value is written into PromQL. Panels per instance
group by ``deployctl_instance`` (the plan's instance, scrape.py); Prometheus's ``instance`` is the target's host:port.

The engine's metric names come from its engine spec (``metric_names``, each cited there). The others:

* npu-exporter (Ascend/ascend-npu-exporter@0516e8af collector/npu_collector.go L23-51): npu_chip_info_health_status
  (1 healthy, 0 not; getHealthCode), npu_chip_info_hbm_used_memory / npu_chip_info_hbm_total_memory (MB),
  npu_chip_info_error_code, label ``id`` (the device's physical id).
* HAProxy's exporter (addons/promex, HAProxy 2.6; names as served by Debian 12's haproxy 2.6.12):
  haproxy_server_status{proxy, server, state} (1 on the current state), haproxy_server_current_sessions.
"""

from __future__ import annotations

from deployctl.features.observe.scrape import ENGINE_JOB, INSTANCE_LABEL, NPU_JOB, ROUTER_JOB

# Grafana 12's classic dashboard model (schemaVersion 41); older Grafana migrates a lower one on import, a newer one
# migrates this one
SCHEMA_VERSION = 41
DS = {"type": "prometheus", "uid": "${datasource}"}
E = f'job="{ENGINE_JOB}", cluster="$cluster"'
R = f'job="{ROUTER_JOB}", cluster="$cluster"'
N = f'job="{NPU_JOB}", cluster="$cluster"'
RATE = "$__rate_interval"
BY = INSTANCE_LABEL
LEGEND = "{{" + BY + "}}"


def _q(hist: str, q: float) -> str:
    return f"histogram_quantile({q}, sum by ({BY}, le) (rate({hist}_bucket{{{E}}}[{RATE}])))"


def panels(m) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(title, unit, [(expr, legend)]) of every panel, the engine's for its ``MetricNames`` ``m``."""
    return [
        ("Time to first token p90 per instance", "s", [(_q(m.ttft, 0.9), f"{LEGEND} p90"),
                                                       (_q(m.ttft, 0.5), f"{LEGEND} p50")]),
        ("Time per output token p90 per instance", "s", [(_q(m.tpot, 0.9), f"{LEGEND} p90"),
                                                         (_q(m.tpot, 0.5), f"{LEGEND} p50")]),
        ("Output tokens per second per instance", "short",
         [(f"sum by ({BY}) (rate({m.generated}{{{E}}}[{RATE}]))", LEGEND)]),
        ("Requests in flight per instance", "short", [(f"sum by ({BY}) ({m.running}{{{E}}})", LEGEND)]),
        ("Requests queued per instance", "short", [(f"sum by ({BY}) ({m.waiting}{{{E}}})", LEGEND)]),
        ("KV cache use per instance", "percentunit", [(f"max by ({BY}) ({m.kv_usage}{{{E}}})", LEGEND)]),
        # one series per endpoint: Prometheus's instance (host:port) tells a node's DP ranks apart
        ("Engine endpoints up", "short", [(f"up{{{E}}}", f"{LEGEND} {{{{node}}}} {{{{instance}}}}")]),
        ("Engine restarts (counter resets, 1 h)", "short",
         [(f"sum by ({BY}) (resets({m.generated}{{{E}}}[1h]))", LEGEND)]),
        ("Router: backends up", "short",
         [(f'max by (server) (haproxy_server_status{{{R}, proxy="instances", state="UP"}})', "{{server}}"),
          (f"up{{{R}}}", "router scrape")]),
        ("Router: sessions per backend", "short",
         [(f'sum by (server) (haproxy_server_current_sessions{{{R}, proxy="instances"}})', "{{server}}")]),
        ("NPU health (1 healthy)", "short",
         [(f"min by (node, id) (npu_chip_info_health_status{{{N}}})", "{{node}} NPU {{id}}")]),
        ("NPU error code", "short", [(f"max by (node, id) (npu_chip_info_error_code{{{N}}})", "{{node}} NPU {{id}}")]),
        ("NPU HBM used", "percentunit",
         [(f"max by (node, id) (npu_chip_info_hbm_used_memory{{{N}}} / npu_chip_info_hbm_total_memory{{{N}}})",
           "{{node}} NPU {{id}}")]),
    ]


def _panel(k: int, title: str, unit: str, exprs: list) -> dict:
    return {"id": k + 1, "type": "timeseries", "title": title, "datasource": DS,
            "gridPos": {"h": 8, "w": 12, "x": 12 * (k % 2), "y": 8 * (k // 2)},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                        "tooltip": {"mode": "multi", "sort": "none"}},
            "targets": [{"refId": chr(ord("A") + i), "datasource": DS, "expr": expr, "legendFormat": legend,
                         "range": True} for i, (expr, legend) in enumerate(exprs)]}


def dashboard(cluster: str, engine: str, names) -> dict:
    """The dashboard of one deployment: ``engine`` is the engine's display name, ``names`` its ``MetricNames``."""
    return {
        "title": f"deployctl: {cluster}", "uid": None, "tags": ["deployctl", "ascend"],
        "description": f"Engines ({engine}), router and NPUs of the deployment {cluster} (deployctl observe render).",
        "schemaVersion": SCHEMA_VERSION, "version": 1, "editable": True, "graphTooltip": 1,
        "time": {"from": "now-1h", "to": "now"}, "refresh": "30s", "timezone": "",
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0},
            {"name": "cluster", "type": "constant", "query": cluster, "hide": 2,
             "current": {"text": cluster, "value": cluster}}]},
        "annotations": {"list": []},
        "panels": [_panel(k, title, unit, exprs) for k, (title, unit, exprs) in enumerate(panels(names))],
    }
