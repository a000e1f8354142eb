"""What runs on a MindIE node: the daemon container (one daemon, or one per DP rank for a distributed
decode) and, on the pd-split router node, MindIE-MS's controller and coordinator."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from deployctl.core.engine_spec.protocol import MetricNames, NodeProcesses, Process
from deployctl.core.engines.mindie.topology import distributed
from deployctl.core.models.engine_settings.mindie import MindieSettings

if TYPE_CHECKING:
    from deployctl.core.engine_spec.protocol import MetricsTarget
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Plan, PlanNode

# the daemon logs this once it serves (MindIE-LLM src/server/daemon/llm_daemon.cpp L323-324)
READY_LINE = "Daemon start success!"
# the coordinator logs this when the controller has given it the instances (deepseek_v3.2.md L399)
MS_READY_LINE = "MindIE-MS coordinator is ready!"
HEALTH = "/v2/health/ready"     # on the management port (http_handler.cpp L496-507, L586-593)


def container_name(plan: Plan) -> str:
    from deployctl.core.engine_spec.container import container_name as named

    return named(plan.inventory, plan.inventory.engine.container_name or "mindie")


def ms_containers(plan: Plan) -> tuple[str, str]:
    base = container_name(plan)
    return f"{base}-ms-controller", f"{base}-ms-coordinator"


def dp_servers(plan: Plan, node: PlanNode) -> int:
    """Server processes on a distributed-decode node: one per DP rank, devices / (tp x cp)
    (Motor gen_config_single_container.py get_server_num L147-162)."""
    inst = plan.instance(node.instance)
    return max(1, len(node.device_ids) // (inst.degrees.tp * inst.degrees.cp))


def is_distributed(plan: Plan, node: PlanNode) -> bool:
    return distributed(plan, plan.instance(node.instance))


def dp_ports(plan: Plan, k: int) -> dict[str, int]:
    """DP rank k of a node: predict, management, metrics, inter-comm = base + 4k .. + 3
    (Motor RankTableLoader.cpp UpdateNodeInfo L128-136, ParseDistributeNodeInfo L239, L262)."""
    base = cast(MindieSettings, plan.inventory.engine).ports.dist_base + 4 * k
    return {"port": base, "managementPort": base + 1, "metricsPort": base + 2, "interCommPort": base + 3}


def node_processes(plan: Plan, node: PlanNode) -> NodeProcesses:
    p = cast(MindieSettings, plan.inventory.engine).ports
    ip = node.container_ip
    name = container_name(plan)
    if is_distributed(plan, node):
        ranks = [dp_ports(plan, k) for k in range(dp_servers(plan, node))]
        engine = Process(containers=(name,), start="start.sh", ready_container=name, ready_line=READY_LINE,
                         ready_count=len(ranks),
                         health_urls=tuple(f"http://{ip}:{r['managementPort']}{HEALTH}" for r in ranks),
                         ports=tuple(v for r in ranks for v in r.values()))
    else:
        engine = Process(containers=(name,), start="start.sh", ready_container=name, ready_line=READY_LINE,
                         health_urls=(f"http://{ip}:{p.management}{HEALTH}",),
                         ports=(p.http, p.management, p.metrics, p.inter_comm, p.multi_node))
    if node.runs_router:
        controller, coordinator = ms_containers(plan)
        router = Process(containers=(controller, coordinator), start="start-ms.sh", ready_container=coordinator,
                         ready_line=MS_READY_LINE, ports=tuple(range(p.coordinator, p.coordinator + 5)) + (
                             p.controller, p.cluster),
                         restart_files=("global_ranktable.json", "ms_controller.json", "ms_coordinator.json",
                                        "start-ms.sh"))
        return NodeProcesses(engine=engine, router=router, serves=f"http://{ip}:{p.coordinator}", smoke=True)
    inst = plan.instance(node.instance)
    colocated = plan.preset != "pd-split"
    return NodeProcesses(engine=engine, serves=f"http://{ip}:{p.http}" if colocated and node.is_master else None,
                         smoke=colocated and node.name == inst.master)


def host_ports(inv: Inventory) -> dict[str, int]:
    """Ports every node needs free before a launch (the router's only on its node: not listed here)."""
    p = cast(MindieSettings, inv.engine).ports
    return {"http": p.http, "management": p.management, "metrics": p.metrics, "inter_comm": p.inter_comm,
            "multi_node": p.multi_node, "master": p.master}


# MindIE Server serves Prometheus text on GET /metrics of its metrics server, managementIpAddress:metricsPort
# (MindIE-LLM@8b4871a src/server/endpoint/http_wrapper/http_handler.cpp L1963-1971, http_server.cpp L284), and only
# with MIES_SERVICE_MONITOR_MODE=1 in its environment: the env preset sets it (monitor.py, env.yaml).
# the metrics deployctl's dashboard reads (prometheus_metrics.cpp: L146, L151, L183, L119, L124, L189; label model_name)
METRIC_NAMES = MetricNames(ttft="time_to_first_token_seconds", tpot="time_per_output_token_seconds",
                           generated="generation_tokens_total", running="num_requests_running",
                           waiting="num_requests_waiting", kv_usage="npu_cache_usage_perc",
                           prompt="prompt_tokens_total")


def metrics_targets(plan: Plan) -> list[MetricsTarget]:
    from deployctl.core.engine_spec.protocol import MetricsTarget

    from deployctl.core.engines.mindie.monitor import needs

    e = cast(MindieSettings, plan.inventory.engine)
    need = {role: needs(plan, role) for role in dict.fromkeys(inst.role for inst in plan.instances)}
    out: list[MetricsTarget] = []
    for node in plan.nodes:
        inst = plan.instance(node.instance)
        ports = ([dp_ports(plan, k)["metricsPort"] for k in range(dp_servers(plan, node))]
                 if is_distributed(plan, node) else [e.ports.metrics])
        out += [MetricsTarget(node.name, inst.name, inst.role, f"{node.container_ip}:{port}", needs=need[inst.role])
                for port in ports]
    return out
