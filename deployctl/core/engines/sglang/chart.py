"""SGLang's part of the `ascend-llm` chart: the `sglang:` values block and the values of a plan.

Every node of a server runs its own launch (its server.args: node rank, HTTP on rank 0), so each becomes one pod of
its own StatefulSet pinned to that node (templates/sglang-statefulset.yaml), with the bare-metal files verbatim in a
ConfigMap and the same launcher as bare metal's start.sh (render.LAUNCHER). In a P/D split the router runs as a
Deployment of its own on the router node (templates/sglang-router.yaml), with router.args and its own env
(router.env on bare metal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from pydantic import Field

from deployctl.core.engines.sglang.render import HOST_MOUNTS, LAUNCHER, ROUTER_LAUNCHER, node_env
from deployctl.core.models.base import Frozen
from deployctl.core.models.engine_settings.sglang import SglangSettings
from deployctl.core.render.chart_values import HostMount, Instance, Pod, Resources, Service, common_values, files_of
from deployctl.core.render.env import env_value
from deployctl.core.render.k8s_nodes import k8s_node

if TYPE_CHECKING:
    from deployctl.core.models.artifact import Artifact
    from deployctl.core.models.plan import Plan

OWNED_VALUES = ("router",)   # rendered from the plan; kubernetes.values may not set them
MOUNT_TYPES = {"/etc/ascend_install.info": "File"}


class SglangPorts(Frozen):
    """Host ports (the pods use the host network, as HCCL, the dist-init address and MemFabric need)."""

    api: int = Field(30000, ge=1024, le=65535, description="every server's HTTP port (node rank 0)")
    router: int = Field(6688, ge=1024, le=65535, description="pd-split: the router")


class Router(Frozen):
    """pd-split: SGLang's router (sglang_router.launch_router --pd-disaggregation), pinned to the router node."""

    enabled: bool = False
    node: str = ""
    env: dict[str, str] = Field(default_factory=dict, description="the router's own env (engine.router_env, "
                                                                   "bare metal's router.env)")
    files: dict[str, str] = Field(default_factory=dict, description="router.args, verbatim")


class SglangValues(Frozen):
    """What templates/sglang-*.yaml read from .Values.sglang."""

    launcher: str = Field(LAUNCHER, description="bash -c script of every engine pod: python3 -m "
                                                "sglang.launch_server with server.args (bare metal's start.sh runs "
                                                "the same)")
    routerLauncher: str = Field(ROUTER_LAUNCHER, description="bash -c script of the router pod")
    ports: SglangPorts = SglangPorts()
    router: Router = Router()
    routerResources: Resources = Resources(requests={"cpu": "2", "memory": "2Gi"})


def host_mounts() -> list[HostMount]:
    return [HostMount(name=p.strip("/").replace("/", "-").replace("_", "-").replace(".", "-").lower(), path=p,
                      type=MOUNT_TYPES.get(p, "Directory")) for p in HOST_MOUNTS]


def chart_values(plan: Plan, artifacts: list[Artifact]) -> dict[str, Any]:
    """The chart values for a plan, from its bare-metal artifacts (render_artifacts(plan))."""
    from deployctl.core.engines.sglang.launch import launches

    e = cast(SglangSettings, plan.inventory.engine)
    every = launches(plan)
    instances = []
    for inst in plan.instances:
        order = [inst.master] + [n for n in inst.nodes if n != inst.master]
        pods = [Pod(node=k8s_node(plan, name), ports=[every[name].server.port] if every[name].server.port else [],
                    env=node_env(plan, plan.node(name)), files=files_of(artifacts, name, ("server.args",)))
                for name in order]
        instances.append(Instance(name=inst.name, role=inst.role, servers=len(order),
                                  nodes=[k8s_node(plan, n) for n in order], pods=pods))
    router = Router()
    node = next((n for n, lt in every.items() if lt.router is not None), None)
    if node is not None:
        router = Router(enabled=True, node=k8s_node(plan, node), env={k: env_value(v) for k, v in e.router_env.items()},
                        files=files_of(artifacts, node, ("router.args",)))
    return common_values(
        plan, hostMounts=host_mounts(), service=Service(port=e.ports.router if router.enabled else e.ports.api),
        instances=instances,
        sglang=SglangValues(ports=SglangPorts(api=e.ports.api, router=e.ports.router), router=router))
