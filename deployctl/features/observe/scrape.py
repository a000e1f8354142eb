"""The scrape targets of a plan and the Prometheus configuration that scrapes them.

Jobs (the dashboard selects on them):

* ``deployctl-engine``: every engine process's metrics endpoint, as the engine spec says
  (``metrics_targets(plan)``: MindIE's metrics port, vLLM's /metrics on each API port);
* ``deployctl-router``: the fleet router's HAProxy Prometheus exporter (fleet/templates/haproxy.cfg.j2: GET /metrics
  on the router's address, admin port);
* ``deployctl-npu``: Ascend's npu-exporter on every node, when asked for (``--npu-exporter``). Its default port is
  8082 (Ascend/ascend-npu-exporter@020f37e4:cmd/npu-exporter/main.go L49 ``portConst = 8082``, flag ``-port``) and
  it serves https unless started with ``-enableHTTP`` (same file, ``validate``/``main``).

Every target carries the labels cluster, node, deployctl_instance (the plan's instance; ``router`` for the router)
and role. Prometheus's own ``instance`` label is left alone: it stays the target's host:port, so each endpoint (a DP
rank's metrics port, a node's exporter) is a series of its own and the usual host:port joins keep working.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ENGINE_JOB = "deployctl-engine"
ROUTER_JOB = "deployctl-router"
NPU_JOB = "deployctl-npu"
NPU_EXPORTER_PORT = 8082          # npu-exporter's default (see the module docstring)
INSTANCE_LABEL = "deployctl_instance"   # the plan's instance; Prometheus's `instance` stays host:port
ROUTER_METRICS_PATH = "/metrics"  # haproxy.cfg.j2 frontend metrics


@dataclass(frozen=True)
class Target:
    job: str
    address: str                      # host:port
    labels: dict = field(default_factory=dict)
    path: str = "/metrics"
    scheme: str = "http"
    needs: str = ""                   # what must be set for it to answer, for the operator


def _labels(cluster: str, node: str, instance: str, role: str) -> dict:
    return {"cluster": cluster, "node": node, INSTANCE_LABEL: instance, "role": role}


def targets(plan, npu_exporter_port: int | None = None, npu_scheme: str = "http") -> list[Target]:

    cluster = plan.inventory.cluster.name
    out = []
    for t in plan.engine_spec.metrics_targets(plan):
        out.append(Target(ENGINE_JOB, t.address, _labels(cluster, t.node, t.instance, t.role), t.path, needs=t.needs))
    r = plan.router
    if r is not None:
        out.append(Target(ROUTER_JOB, f"{r.ip}:{r.admin_port}", _labels(cluster, r.node, "router", "router"),
                          ROUTER_METRICS_PATH))
    if npu_exporter_port is not None:
        for node in plan.nodes:
            inst = plan.instance(node.instance)
            out.append(Target(NPU_JOB, f"{node.container_ip}:{npu_exporter_port}",
                              _labels(cluster, node.name, inst.name, inst.role), scheme=npu_scheme))
    return out


def scrape_config(targets: list[Target], interval_s: int = 15) -> dict:
    """prometheus.yml as a dict: one scrape job per (job, path, scheme), one static group per target (its labels)."""
    jobs: dict[tuple, list[Target]] = {}
    for t in targets:
        jobs.setdefault((t.job, t.path, t.scheme), []).append(t)
    configs = []
    for (job, path, scheme), group in jobs.items():
        # a job split by path or scheme keeps its job label (target labels win over the job name's)
        split = sum(1 for k in jobs if k[0] == job) > 1
        name, extra = (f"{job}-{len(configs)}", {"job": job}) if split else (job, {})
        configs.append({"job_name": name, "metrics_path": path, "scheme": scheme,
                        "static_configs": [{"targets": [t.address], "labels": {**t.labels, **extra}}
                                           for t in group]})
    return {"global": {"scrape_interval": f"{interval_s}s", "evaluation_interval": f"{interval_s}s"},
            "scrape_configs": configs}


def scrape_yaml(config: dict) -> str:
    import yaml

    head = "# deployctl observe render: Prometheus scrape configuration. Do not edit: re-render from the inventory.\n"
    return head + yaml.safe_dump(config, sort_keys=False, default_flow_style=False, allow_unicode=False)
