"""Chart values for a plan: what `deployctl render --target helm` writes as values.yaml.

The files the engine reads (config.json, ranktable.json, the MindIE-MS files) are taken verbatim from the
bare-metal render, so the ConfigMaps hold the same bytes; the env presets are the same, minus the three
per-pod variables the chart takes from the downward API (the pod IP is the server IP under hostNetwork).

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

from deployctl.engines.mindie.chart_values import ChartValues, Image, Instance, Ms, Npu, Ports, RankTable, Service
from deployctl.engines.mindie.env import node_env
from deployctl.errors import LayoutError, Problem, RenderError, UsageError
from deployctl.k8s.nodes import k8s_node
from deployctl.models.artifact import Artifact
from deployctl.models.plan import Plan
from deployctl.render.merge import deep_merge

CHART_NAME = "mindie"
# Differ per server; the chart sets them from the downward API (status.podIP / status.hostIP).
POD_ENV = ("MIES_CONTAINER_IP", "MIES_CONTAINER_MANAGEMENT_IP", "HOST_IP")
# Set on the MindIE-MS node only (bare metal shares one env file between server and MindIE-MS there).
MS_ENV = ("GLOBAL_RANK_TABLE_FILE_PATH", "MINDIE_MS_CONTROLLER_CONFIG_FILE_PATH",
          "MINDIE_MS_COORDINATOR_CONFIG_FILE_PATH")
MS_FILES = ("ms_controller.json", "ms_coordinator.json", "global_ranktable.json")


def split_image(image: str) -> tuple[str, str]:
    """`repo/name:tag` -> (repo/name, tag); a digest stays in the tag as `@sha256:...`."""
    if "@" in image:
        repo, digest = image.split("@", 1)
        return repo, "@" + digest
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon + 1:]
    return image, "latest"


def shm_quantity(size: str) -> str:
    """docker --shm-size (500g, 64m, 1024) -> a Kubernetes quantity (500Gi, 64Mi, 1024)."""
    unit = size[-1].lower()
    return size[:-1] + {"k": "Ki", "m": "Mi", "g": "Gi"}[unit] if unit in "kmg" else size


def accelerator_type(plan: Plan) -> str:
    cluster = plan.inventory.cluster
    if cluster.hardware == "a2":
        return "module-910b-8"
    return "module-a3-16-super-pod" if cluster.super_pod else "module-a3-16"


def fullname(inv) -> str:
    """The chart's resource name prefix (templates/_helpers.tpl "mindie.fullname", without overrides)."""
    release = inv.helm_release
    name = release if CHART_NAME in release else f"{release}-{CHART_NAME}"
    return name[:32].rstrip("-")


def _files(artifacts: dict[str, Artifact], node: str, names: tuple[str, ...]) -> dict[str, str]:
    return {n: artifacts[f"{node}/{n}"].content.decode() for n in names if f"{node}/{n}" in artifacts}


def _shared_env(plan: Plan, nodes: list[str], what: str, drop: tuple[str, ...] = MS_ENV) -> dict[str, str]:
    """The env every pod of ``nodes`` shares; a difference beyond POD_ENV is a bug, not a user error."""
    skip = POD_ENV + drop
    envs = [{k: v for k, v in node_env(plan, plan.node(n)).items() if k not in skip} for n in nodes]
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


def chart_values(plan: Plan, artifacts: list[Artifact]) -> ChartValues:
    """The chart values for a plan, from its bare-metal artifacts (render_artifacts(plan))."""
    inv = plan.inventory
    e = inv.engine
    if not inv.helm_release[0].isalpha():
        raise UsageError(f"release name '{inv.helm_release}' cannot name Kubernetes Services (they must start "
                         "with a letter)", hint="set kubernetes.release in the inventory")
    if plan.preset == "pd-split":
        raise LayoutError("pd-split is not rendered for Kubernetes yet", problems=[Problem(
            path="layout.preset", message="the chart runs one MindIE server per pod, and MindIE's decode runs one "
            "server per DP rank (distributed DP, Motor boot.sh L115-142)")],
            hint="deploy pd-split with --target hosts, or use a colocated layout on Kubernetes")
    by_path = {a.path: a for a in artifacts}
    cluster_table = inv.kubernetes.rank_table == "cluster"
    instances = []
    for inst in plan.instances:
        names = ("config.json",) if cluster_table else ("config.json", "ranktable.json")
        instances.append(Instance(
            name=inst.name, role=inst.role,
            servers=len(inst.nodes),
            nodes=[] if cluster_table else [k8s_node(plan, inst.master)] + [
                k8s_node(plan, n) for n in inst.nodes if n != inst.master],
            env=_shared_env(plan, inst.nodes, f"instance {inst.name}"),
            files=_files(by_path, inst.master, names)))
    ms = Ms()
    ms_node = next((n for n in plan.nodes if n.runs_router), None)
    if ms_node is not None:
        ms = Ms(enabled=True, node=k8s_node(plan, ms_node.name),
                env=_shared_env(plan, [ms_node.name], "the MindIE-MS node", drop=()),
                files=_files(by_path, ms_node.name, MS_FILES))
    repo, tag = split_image(e.image)
    p = e.ports
    values = ChartValues(
        image=Image(repository=repo, tag=tag),
        schedulerName=inv.kubernetes.scheduler_name or "",
        npu=Npu(perPod=inv.devices_per_node, acceleratorType=accelerator_type(plan)),
        rankTable=RankTable(source=inv.kubernetes.rank_table),
        shmSize=shm_quantity(e.shm_size), workDir=e.work_dir, daemon=e.daemon, msHome=e.ms_home,
        tls=e.tls, privileged=e.privileged, weightsPath=inv.model.weights_path,
        ports=Ports(http=p.http, management=p.management, metrics=p.metrics, interComm=p.inter_comm,
                    multiNode=p.multi_node, coordinator=p.coordinator, controller=p.controller),
        service=Service(port=p.coordinator if ms_node is not None else p.http),
        instances=instances, ms=ms)
    if inv.kubernetes.values:
        values = ChartValues.model_validate(deep_merge(values.model_dump(), inv.kubernetes.values))
    return values
