"""The Kubernetes Nodes a release's pods are pinned to: exist, carry the plan's IPs, accelerator-type and
NPUs (pure; `up --target k8s` runs it as its preflight stage)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from deployctl.core.errors import Problem
from deployctl.core.models.plan import Plan

if TYPE_CHECKING:
    from deployctl.core.render.chart_values import CommonValues


def k8s_node(plan: Plan, name: str) -> str:
    """The Kubernetes Node a server is registered as (nodes[].k8s_node, default its name)."""
    return plan.inventory.node(name).k8s_node or name


def check_nodes(plan: Plan, nodes: list[dict], chart: CommonValues) -> list[Problem]:
    """The Nodes the pods are pinned to exist, carry the plan's IPs, accelerator-type and NPUs (pure).
    ``chart``: the engine chart's values (npu.resource, npu.perPod, npu.acceleratorType)."""
    inv = plan.inventory
    by_name = {n["metadata"]["name"]: n for n in nodes}
    accel, resource, per_pod = chart.npu.acceleratorType, chart.npu.resource, chart.npu.perPod
    out = []
    if inv.kubernetes.rank_table == "cluster":
        fit = [n for n in nodes if n["metadata"].get("labels", {}).get("accelerator-type") == accel]
        if len(fit) < len(plan.nodes):
            out.append(Problem(f"{len(fit)} Node(s) labelled accelerator-type={accel}, the plan needs "
                               f"{len(plan.nodes)}", path="nodes",
                               hint="label the NPU servers (MindCluster's node labelling) or add servers"))
        return out
    for node in plan.nodes:
        name = k8s_node(plan, node.name)
        live = by_name.get(name)
        if live is None:
            out.append(Problem(f"no Kubernetes Node named '{name}'", path=node.name,
                               hint="set nodes[].k8s_node to the server's Node name (kubectl get nodes)"))
            continue
        addresses = [a["address"] for a in (live.get("status") or {}).get("addresses") or []
                     if a.get("type") == "InternalIP"]
        if node.container_ip not in addresses:
            out.append(Problem(f"Node {name} has InternalIP {', '.join(addresses) or 'none'}, but the rank table "
                               f"names it {node.container_ip}", path=node.name,
                               hint="with hostNetwork the pod IP is the Node's InternalIP: set the node's "
                                    "address/container_ip to it, or fix kubelet --node-ip"))
        label = (live["metadata"].get("labels") or {}).get("accelerator-type")
        if label != accel:
            out.append(Problem(f"Node {name} has accelerator-type={label or '(none)'}, the pods select {accel}",
                               path=node.name, hint=f"kubectl label node {name} accelerator-type={accel}"))
        npus = (live.get("status") or {}).get("allocatable", {}).get(resource)
        if npus is None or int(str(npus)) < per_pod:
            out.append(Problem(f"Node {name} offers {npus or 0} {resource}, a pod needs {per_pod}", path=node.name,
                               hint="is the Ascend device plugin running there, and are all NPUs healthy?"))
    return out
