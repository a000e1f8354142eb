"""Chart values for a plan: what `deployctl render --target helm` writes as values.yaml.

The files the engine reads (config.json, ranktable.json, the MindIE-MS files) are taken verbatim from the
bare-metal render, so the ConfigMaps hold the same bytes; the env presets are the same, minus the three
per-pod variables the chart takes from the downward API (the pod IP is the server IP under hostNetwork).

pd-split: the P and D instances are StatefulSets like any other (a distributed decode pod runs one server per DP
rank from config1..N.json, as start.sh does: values mindie.launchers.dpServer) and MindIE-MS's controller and
coordinator run as Deployments pinned to the prefill master's server, with its ms_controller.json,
ms_coordinator.json and global_ranktable.json (templates/mindie-ms.yaml).

Example (2 x 8 A2 tp-pp, abridged)::

    npu: {resource: huawei.com/Ascend910, perPod: 8, acceleratorType: module-910b-8}
    instances:
    - name: mixed
      role: mixed
      servers: 2
      nodes: [node1, node2]
      env: {MASTER_IP: 10.200.2.2, WORLD_SIZE: "16", ...}
      files: {config.json: "{...}", ranktable.json: "{...}"}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from deployctl.core.engine_spec.container import ENV_KEYS
from deployctl.core.engines.mindie.chart_values import Launchers, MindieValues, Ms, Ports, RankTable
from deployctl.core.engines.mindie.config import config_files
from deployctl.core.engines.mindie.env import node_env
from deployctl.core.engines.mindie.install import install, ms_home, server
from deployctl.core.engines.mindie.processes import dp_servers
from deployctl.core.engines.mindie.start import dp_cpu_slices
from deployctl.core.engines.mindie.topology import distributed
from deployctl.core.errors import LayoutError, Problem, RenderError
from deployctl.core.render.chart_values import Instance, Service, common_values, files_of
from deployctl.core.render.k8s_nodes import k8s_node
from deployctl.core.models.artifact import Artifact
from deployctl.core.models.engine_settings.mindie import MindieSettings
from deployctl.core.models.plan import Plan

if TYPE_CHECKING:
    from deployctl.core.models.plan import Instance as PlanInstance

# Differ per server; the chart sets them from the downward API (status.podIP / status.hostIP).
POD_ENV = ("MIES_CONTAINER_IP", "MIES_CONTAINER_MANAGEMENT_IP", "HOST_IP")
# Set on the MindIE-MS node only (bare metal shares one env file between server and MindIE-MS there).
MS_ENV = ("GLOBAL_RANK_TABLE_FILE_PATH", "MINDIE_MS_CONTROLLER_CONFIG_FILE_PATH",
          "MINDIE_MS_COORDINATOR_CONFIG_FILE_PATH")
MS_FILES = ("ms_controller.json", "ms_coordinator.json", "global_ranktable.json")


def _shared_env(plan: Plan, nodes: list[str], what: str, drop: tuple[str, ...] = MS_ENV) -> dict[str, str]:
    """The env every pod of ``nodes`` shares; a difference beyond POD_ENV is a bug, not a user error."""
    skip = POD_ENV + drop
    envs = [{k: v for k, v in node_env(plan, plan.node(n)).items() if k not in skip} for n in nodes]
    for env in envs:    # the variables a pod keeps over set_env.sh: not the MindIE-MS node's own (pd-split)
        if ENV_KEYS in env:
            env[ENV_KEYS] = " ".join(k for k in env[ENV_KEYS].split() if k not in drop)
    ifaces = {n: e.get("GLOO_SOCKET_IFNAME") for n, e in zip(nodes, envs)}
    if len(set(ifaces.values())) > 1:
        index = {n.name: i for i, n in enumerate(plan.inventory.nodes)}
        raise LayoutError(f"the nodes of {what} name different network interfaces; the chart gives every pod of "
                          "an instance the same env, and GLOO_SOCKET_IFNAME cannot come from the downward API",
                          problems=[Problem(path=f"nodes[{index[n]}].interface", message=f"{n}: {i}")
                                    for n, i in ifaces.items()],
                          hint="use the same interface name on these servers (nodes[].interface), or --target hosts")
    if any(e != envs[0] for e in envs[1:]):
        raise RenderError(f"the env of {what} differs between its nodes beyond {', '.join(POD_ENV)}",
                          hint="this is a deployctl bug; please report it with the inventory")
    return envs[0]


def _same_dp_servers(plan: Plan, inst: PlanInstance) -> None:
    """Every pod of a distributed decode instance runs the same number of DP servers (one env per instance)."""
    counts = {n: dp_servers(plan, plan.node(n)) for n in inst.nodes}
    if len(set(counts.values())) > 1:
        raise LayoutError(f"the servers of decode instance {inst.name} would run different numbers of DP servers "
                          f"({', '.join(f'{n}: {c}' for n, c in counts.items())})",
                          problems=[Problem(path="layout.decode.nodes", message="servers with different NPU counts")],
                          hint="give the decode servers the same devices, or deploy with --target hosts")


def chart_values(plan: Plan, artifacts: list[Artifact]) -> dict:
    """The chart values for a plan, from its bare-metal artifacts (render_artifacts(plan))."""
    inv = plan.inventory
    e = cast(MindieSettings, inv.engine)
    cluster_table = inv.kubernetes.rank_table == "cluster"
    instances = []
    for inst in plan.instances:
        master = plan.node(inst.master)
        env = _shared_env(plan, inst.nodes, f"instance {inst.name}")
        if distributed(plan, inst):
            # one server per DP rank of the pod, each reading its config<i>.json: the same files and count as
            # bare metal's start.sh (processes.dp_servers; config.config_files)
            names = tuple(config_files(plan, master)) + ("ranktable.json",)
            env["DEPLOYCTL_DP_SERVERS"] = str(dp_servers(plan, master))
            if dp_cpu_slices(plan, master):     # A3: DP server i on CPU slice i (start.py)
                env["DEPLOYCTL_DP_CPU_SLICES"] = str(dp_cpu_slices(plan, master))
            _same_dp_servers(plan, inst)
        else:
            names = ("config.json",) if cluster_table else ("config.json", "ranktable.json")
        instances.append(Instance(
            name=inst.name, role=inst.role,
            servers=len(inst.nodes),
            nodes=[] if cluster_table else [k8s_node(plan, inst.master)] + [
                k8s_node(plan, n) for n in inst.nodes if n != inst.master],
            env=env,
            files=files_of(artifacts, inst.master, names)))
    ms = Ms()
    ms_node = next((n for n in plan.nodes if n.runs_router), None)
    if ms_node is not None:
        ms = Ms(enabled=True, node=k8s_node(plan, ms_node.name),
                env=_shared_env(plan, [ms_node.name], "the MindIE-MS node", drop=()),
                files=files_of(artifacts, ms_node.name, MS_FILES))
    p = e.ports
    return common_values(
        plan, service=Service(port=p.coordinator if ms_node is not None else p.http), instances=instances,
        mindie=MindieValues(
            rankTable=RankTable(source=inv.kubernetes.rank_table), daemon=server(e), msHome=ms_home(e),
            launchers=Launchers(server=install(e).launcher, dpServer=install(e).dp_launcher,
                                **dict(install(e).ms_launchers)), tls=e.tls,
            ports=Ports(http=p.http, management=p.management, metrics=p.metrics, interComm=p.inter_comm,
                        multiNode=p.multi_node, coordinator=p.coordinator, controller=p.controller,
                        distBase=p.dist_base),
            ms=ms))
