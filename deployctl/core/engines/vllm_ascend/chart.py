"""vLLM-Ascend's part of the `ascend-llm` chart: the `vllm:` values block and the values of a plan.

Every server of an instance runs its own launch (its `vllm serve` argument files, device slices, start rank,
HCCL_IF_IP), so each becomes one pod of its own StatefulSet pinned to that server (templates/
vllm-ascend-statefulset.yaml), with the bare-metal files verbatim in a ConfigMap and the same launcher as
bare metal's start.sh (render.LAUNCHER). The prefill master also runs the P/D proxy (a Deployment of its own).

Example (A3 1P1D, abridged)::

    engine: vllm-ascend
    instances:
    - name: prefill
      role: prefill
      servers: 1
      nodes: [p1]
      pods:
      - node: p1
        ports: [8000, 8001]
        env: {HCCL_IF_IP: 10.202.0.2, GLOO_SOCKET_IFNAME: enp189s0f0, ...}
        files: {serve-0.args: "...", serve-0.devices: "0,1,...", ...}
    vllm: {mooncake: true, proxy: {enabled: true, node: p1, files: {proxy.args: "..."}}}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from pydantic import Field

from deployctl.core.engines.vllm_ascend.render import LAUNCHER, PROXY, PROXY_LAUNCHER, node_env
from deployctl.core.render.chart_values import HostMount, Instance, Pod, Resources, Service, common_values, files_of
from deployctl.core.render.k8s_nodes import k8s_node
from deployctl.core.models.base import Frozen
from deployctl.core.models.engine_settings.vllm_ascend import VllmAscendSettings

if TYPE_CHECKING:
    from deployctl.core.models.artifact import Artifact
    from deployctl.core.models.plan import Plan

OWNED_VALUES = ("proxy", "mooncake")   # rendered from the plan; kubernetes.values may not set them
# the guides' docker run mounts (render.HOST_MOUNTS), as hostPath volumes; hccn.conf on pd-split (the PD guide)
HOST_MOUNTS = (
    HostMount(name="dcmi", path="/usr/local/dcmi", type="Directory"),
    HostMount(name="npu-smi", path="/usr/local/bin/npu-smi", type="File"),
    HostMount(name="driver", path="/usr/local/Ascend/driver", type="Directory"),
    HostMount(name="ascend-install-info", path="/etc/ascend_install.info", type="File"),
)
HCCN_CONF = HostMount(name="hccn-conf", path="/etc/hccn.conf", type="File")


class VllmPorts(Frozen):
    """Host ports (the pods use the host network, as HCCL and the DP address need)."""

    api: int = Field(8000, ge=1024, le=65535, description="the OpenAI port of node 0 (external DP: rank i on "
                                                           "api + i)")
    proxy: int = Field(1999, ge=1024, le=65535, description="pd-split: the load-balancing proxy")


class Proxy(Frozen):
    """pd-split: the load-balancing proxy of the guides, pinned to the prefill master (no NPU)."""

    enabled: bool = False
    node: str = ""
    script: str = Field(PROXY, pattern=r"^/", description="the proxy script in the image")
    files: dict[str, str] = Field(default_factory=dict, description="proxy.args, verbatim")


class VllmValues(Frozen):
    """What templates/vllm-ascend-*.yaml read from .Values.vllm."""

    launcher: str = Field(LAUNCHER, description="bash -c script of every engine pod: one `vllm serve` per "
                                                "serve-<i>.args (bare metal's start.sh runs the same)")
    proxyLauncher: str = Field(PROXY_LAUNCHER, description="bash -c script of the proxy pod")
    mooncake: bool = Field(False, description="pd-split: Mooncake's libraries on LD_LIBRARY_PATH")
    ports: VllmPorts = VllmPorts()
    proxy: Proxy = Proxy()
    proxyResources: Resources = Resources(requests={"cpu": "2", "memory": "2Gi"})


def chart_values(plan: Plan, artifacts: list[Artifact]) -> dict[str, Any]:
    """The chart values for a plan, from its bare-metal artifacts (render_artifacts(plan))."""
    from deployctl.core.engines.vllm_ascend.launch import launches

    inv = plan.inventory
    e = cast(VllmAscendSettings, inv.engine)
    node_launch = launches(plan)
    instances = []
    for inst in plan.instances:
        order = [inst.master] + [n for n in inst.nodes if n != inst.master]
        pods = []
        for name in order:
            launch = node_launch[name]
            files = [f"serve-{i}.{ext}" for i in range(len(launch.serves)) for ext in ("args", "devices")]
            pods.append(Pod(node=k8s_node(plan, name), ports=[s.port for s in launch.serves if s.port],
                            env=node_env(plan, plan.node(name)), files=files_of(artifacts, name, files)))
        instances.append(Instance(name=inst.name, role=inst.role, servers=len(order),
                                  nodes=[k8s_node(plan, n) for n in order], pods=pods))
    proxy = Proxy()
    proxy_node = next((n for n, lt in node_launch.items() if lt.proxy is not None), None)
    if proxy_node is not None:
        proxy = Proxy(enabled=True, node=k8s_node(plan, proxy_node), files=files_of(artifacts, proxy_node,
                                                                                    ("proxy.args",)))
    mounts = list(HOST_MOUNTS) + ([HCCN_CONF] if plan.preset == "pd-split" else [])
    return common_values(
        plan, hostMounts=mounts,
        service=Service(port=e.ports.proxy if proxy.enabled else e.ports.api), instances=instances,
        vllm=VllmValues(mooncake=any(lt.mooncake for lt in node_launch.values()),
                        ports=VllmPorts(api=e.ports.api, proxy=e.ports.proxy), proxy=proxy))
