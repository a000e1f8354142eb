"""What runs on an SGLang node and how to tell it is ready (sglang 0.5.18-0.5.23 wheels, "SG" below).

* A server's first node (node rank 0) runs the HTTP server: it logs "The server is fired up and ready to roll!"
  after its warm-up request (SG 0.5.23 srt/entrypoints/http_server.py L2600; 0.5.18 L2402), then GET /health (a
  one-token generation: L721-800) and /v1/models answer 200.
* The other nodes of a server run schedulers only (SG 0.5.23 srt/entrypoints/engine.py L1234-1236): each scheduler
  logs "Memory pool end." once its KV pool is allocated (SG 0.5.23 srt/mem_cache/kv_cache_configurator.py L498-501;
  0.5.18 L295), one per device of the node.
* The P/D router (sglang-router 0.3.2, Rust) logs "Router ready | workers: ..." (a string of its binary,
  sglang_router_rs.abi3.so) and serves GET /health (the binary's routes).
* Fatal, while the HTTP server may still answer: a scheduler's exception, the parent's note that a child died, the KV
  pool's out-of-memory and the watchdog (SG 0.5.23 managers/scheduler.py L6372, entrypoints/engine.py L1978,
  mem_cache/allocation.py L239, L613, utils/watchdog.py L154).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from deployctl.core.engine_spec.protocol import MetricNames, NodeProcesses, Process
from deployctl.core.engines.sglang.launch import node_launch
from deployctl.core.engines.sglang.render import container_name, router_name
from deployctl.core.models.engine_settings.sglang import SglangSettings

if TYPE_CHECKING:
    from deployctl.core.engine_spec.protocol import MetricsTarget
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Plan, PlanNode

SERVER_READY = "The server is fired up and ready to roll!"
RANK_READY = "Memory pool end."
ROUTER_READY = "Router ready"
FATAL = (r"Scheduler hit an exception", r"Received sigquit from a child process", r"Prefill out of memory",
         r"Decode out of memory", r"watchdog timeout")
SMOKE_WORDS = 2000   # a prompt long enough that the prefill server hands the decode server a KV cache of many pages

# the metrics deployctl's dashboard reads (SG 0.5.23 srt/observability/metrics_collector.py L2041, L2051, L1861,
# L365, L371, L405; the same names in 0.5.18-0.5.22): SGLang has no time-per-output-token histogram of that name,
# inter_token_latency is its TPOT
METRIC_NAMES = MetricNames(ttft="sglang:time_to_first_token_seconds", tpot="sglang:inter_token_latency_seconds",
                           generated="sglang:generation_tokens_total", running="sglang:num_running_reqs",
                           waiting="sglang:num_queue_reqs", kv_usage="sglang:token_usage",
                           prompt="sglang:prompt_tokens_total")


def node_processes(plan: Plan, node: PlanNode) -> NodeProcesses:
    launch = node_launch(plan, node.name)
    e = cast(SglangSettings, plan.inventory.engine)
    ip = node.container_ip
    name = container_name(plan)
    server = launch.server
    if server.port is not None:
        engine = Process(containers=(name,), start="start.sh", ready_container=name, ready_line=SERVER_READY,
                         fatal_log=FATAL, ports=(server.port,),
                         health_urls=(f"http://{ip}:{server.port}/health", f"http://{ip}:{server.port}/v1/models"))
    else:
        engine = Process(containers=(name,), start="start.sh", ready_container=name, ready_line=RANK_READY,
                         ready_count=len(node.device_ids), fatal_log=FATAL)
    if launch.router is not None:
        router = router_name(plan)
        proc = Process(containers=(router,), start="start-router.sh", ready_container=router, ready_line=ROUTER_READY,
                       health_urls=(f"http://{ip}:{e.ports.router}/health",), ports=(e.ports.router,),
                       restart_files=("router.args", "router.env", "start-router.sh"),
                       # it takes servers out and back through its worker API (control.py): it keeps running
                       restart_with_engines=False)
        return NodeProcesses(engine=engine, router=proc, serves=f"http://{ip}:{e.ports.router}", smoke=True,
                             smoke_words=SMOKE_WORDS)
    inst = plan.instance(node.instance)
    colocated = plan.preset != "pd-split"
    serves = f"http://{ip}:{server.port}" if server.port is not None and colocated else None
    return NodeProcesses(engine=engine, serves=serves, smoke=colocated and node.name == inst.master)


def host_ports(inv: Inventory) -> dict[str, int]:
    from deployctl.core.input.roles import ROLES, for_role

    p = cast(SglangSettings, inv.engine).ports
    out = {"api": p.api}
    if inv.layout.preset == "pd-split":
        for role in ROLES:      # a role's own HTTP port (layout.<role>.engine.ports)
            own = cast(SglangSettings, for_role(inv, role).engine).ports.api
            if own != p.api:
                out[f"{role}.api"] = own
    if len(inv.nodes) > 1:
        out["dist_init"] = p.dist_init
    if inv.layout.preset == "pd-split":
        out.update(bootstrap=p.bootstrap, mf_store=p.mf_store, router=p.router, router_metrics=p.router_metrics)
    return out


def metrics_targets(plan: Plan) -> list[MetricsTarget]:
    """GET /metrics on every server's HTTP port: deployctl renders --enable-metrics, without which SGLang mounts no
    /metrics (SG 0.5.23 utils/common.py L2843-2849, called from http_server.py L314)."""
    from deployctl.core.engine_spec.protocol import MetricsTarget

    out: list[MetricsTarget] = []
    for node in plan.nodes:
        inst = plan.instance(node.instance)
        port = node_launch(plan, node.name).server.port
        if port is not None:
            out.append(MetricsTarget(node.name, inst.name, inst.role, f"{node.container_ip}:{port}"))
    return out
