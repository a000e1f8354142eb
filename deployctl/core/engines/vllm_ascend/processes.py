"""What runs on a vLLM-Ascend node and how to tell it is ready.

API processes: uvicorn logs "Application startup complete." (vLLM's OpenAI server runs under uvicorn), then
GET /health and /v1/models answer 200. Headless processes serve no HTTP: each DP engine core logs
"init engine (profile, create kv cache, warmup model) took ..." when it is ready (vllm/v1/engine/core.py
L210 in vLLM 0.11.0, L260 in 0.13.0, L282 in 0.18.0, read from the PyPI wheels).
The proxy (pd-split) logs the same uvicorn line and answers GET /healthcheck
(load_balance_proxy_server_example.py@v0.13.0 L873).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from deployctl.core.engine_spec.protocol import MetricNames, NodeProcesses, Process
from deployctl.core.engines.vllm_ascend.launch import node_launch
from deployctl.core.engines.vllm_ascend.support import feature
from deployctl.core.engines.vllm_ascend.render import container_name, proxy_name
from deployctl.core.models.engine_settings.vllm_ascend import VllmAscendSettings

if TYPE_CHECKING:
    from deployctl.core.engine_spec.protocol import MetricsTarget
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Plan, PlanNode

API_READY = "Application startup complete."
# what users report when Mooncake's KV transfer fails (vllm-ascend issues #4866, #3724: error codes 103900/103902,
# "Mooncake transfer failed"): the request may still be answered, so the decode logs are read after the smoke
TRANSFER_ERRORS = ("Mooncake transfer failed", "103900", "103902")
SMOKE_WORDS = 2000   # a prompt long enough that prefill hands the decode side a KV cache of many blocks
ENGINE_READY = "init engine (profile, create kv cache, warmup model) took"


def node_processes(plan: Plan, node: PlanNode) -> NodeProcesses:
    launch = node_launch(plan, node.name)
    e = cast(VllmAscendSettings, plan.inventory.engine)
    ip = node.container_ip
    api = [s for s in launch.serves if s.port is not None]
    name = container_name(plan)
    if api:
        engine = Process(containers=(name,), start="start.sh", ready_container=name, ready_line=API_READY,
                         ready_count=len(api), fatal_log=TRANSFER_ERRORS if plan.preset == "pd-split" else (),
                         health_urls=tuple(u for s in api for u in (f"http://{ip}:{s.port}/health",
                                                                     f"http://{ip}:{s.port}/v1/models")),
                         ports=tuple(cast(int, s.port) for s in api))   # api: the serves with a port
    else:
        engines = sum(s.engines for s in launch.serves)
        engine = Process(containers=(name,), start="start.sh", ready_container=name, ready_line=ENGINE_READY,
                         ready_count=engines, fatal_log=TRANSFER_ERRORS if plan.preset == "pd-split" else ())
    if launch.proxy is not None:
        proxy = proxy_name(plan)
        router = Process(containers=(proxy,), start="start-proxy.sh", ready_container=proxy, ready_line=API_READY,
                         health_urls=(f"http://{ip}:{e.ports.proxy}/healthcheck",), ports=(e.ports.proxy,),
                         restart_files=("proxy.args", "start-proxy.sh"),
                         # a proxy that takes instances out and back keeps running while they restart
                         restart_with_engines=feature("proxy_instances_api", plan.engine.version).get("value") != "yes")
        return NodeProcesses(engine=engine, router=router, serves=f"http://{ip}:{e.ports.proxy}", smoke=True,
                             smoke_words=SMOKE_WORDS)
    inst = plan.instance(node.instance)
    colocated = plan.preset != "pd-split"
    serves = f"http://{ip}:{api[0].port}" if api and colocated else None
    return NodeProcesses(engine=engine, serves=serves, smoke=colocated and node.name == inst.master)


def host_ports(inv: Inventory) -> dict[str, int]:
    p = cast(VllmAscendSettings, inv.engine).ports
    return {"api": p.api, "dp_rpc": p.dp_rpc}

# the metrics deployctl's dashboard reads (vllm 0.13.0 wheel, vllm/v1/metrics/loggers.py: L671, L741 (the TPOT histogram
# since 0.11; vllm:time_per_output_token_seconds is hidden from 0.12 on, L703-708), L579 (a prometheus_client Counter,
# exposed with _total), L415, L425, L461 (vllm:gpu_cache_usage_perc is gone); labels model_name, engine)
METRIC_NAMES = MetricNames(ttft="vllm:time_to_first_token_seconds", tpot="vllm:inter_token_latency_seconds",
                           generated="vllm:generation_tokens_total", running="vllm:num_requests_running",
                           waiting="vllm:num_requests_waiting", kv_usage="vllm:kv_cache_usage_perc",
                           prompt="vllm:prompt_tokens_total")


def metrics_targets(plan: Plan) -> list[MetricsTarget]:
    """GET /metrics on every API process's port: vLLM mounts prometheus_client's app there
    (vllm 0.13.0 wheel, vllm/entrypoints/serve/instrumentator/metrics.py L41) whatever its flags, so no switch is
    needed (vllm-project/vllm@00c7e582 vllm/entrypoints/serve/__init__.py L11-14 and instrumentator/__init__.py
    L18-20 register it for every API server; --disable-log-stats keeps the endpoint but drops the vllm: series);
    headless nodes serve no HTTP, their engine cores report through the API server of their instance's master."""
    from deployctl.core.engine_spec.protocol import MetricsTarget

    out: list[MetricsTarget] = []
    for node in plan.nodes:
        inst = plan.instance(node.instance)
        out += [MetricsTarget(node.name, inst.name, inst.role, f"{node.container_ip}:{s.port}")
                for s in node_launch(plan, node.name).serves if s.port is not None]
    return out
