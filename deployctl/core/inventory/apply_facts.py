"""Preflight facts into the inventory: device IPs, SDIDs, super pod ids, interfaces and the SKU the hosts report
(what the inventory states always wins)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deployctl.core.models.host_facts import FactsFile
    from deployctl.core.models.inventory import Cluster, Inventory


def apply_facts(inv: Inventory, facts: FactsFile) -> Inventory:
    """Fill device IPs, SDIDs and super pod ids the inventory leaves out from preflight facts.

    What the inventory states always wins; preflight's device-ip/sdid rules report disagreements.
    """
    from deployctl.core.models.inventory import Device

    super_pod = inv.cluster.hardware == "a3" and inv.cluster.super_pod
    nodes = []
    for node in inv.nodes:
        host = facts.hosts.get(node.name)
        if host is not None and node.interface is None and node.server_ip in host.addresses:
            node = node.model_copy(update={"interface": host.addresses[node.server_ip]})
        if host is None or not host.reachable or not host.devices:
            nodes.append(node)
            continue
        live = host.devices
        listed = node.devices if node.devices is not None else [Device(id=i) for i in sorted(live)]
        devices = []
        for dev in listed:
            fact = live.get(dev.id)
            update: dict[str, Any] = {}
            if fact is not None and dev.ip is None and fact.ip is not None:
                update["ip"] = fact.ip.ip
            if fact is not None and super_pod and dev.sdid is None and fact.sdid is not None:
                update["sdid"] = fact.sdid
            devices.append(dev.model_copy(update=update) if update else dev)
        change: dict[str, Any] = {"devices": devices}
        pods = {d.super_pod_id for d in live.values() if d.super_pod_id is not None}
        if super_pod and node.super_pod_id is None and len(pods) == 1:
            change["super_pod_id"] = str(pods.pop())
        nodes.append(node.model_copy(update=change))
    return inv.model_copy(update={"nodes": nodes, "cluster": _sku_from_facts(inv, facts)})


def _sku_from_facts(inv: Inventory, facts: FactsFile) -> Cluster:
    """cluster.sku from npu-smi's chip name when the inventory names none and every host reports the same
    known one (910B3, Ascend910_9391, ...); else the cluster as it is."""
    if inv.cluster.sku is not None:
        return inv.cluster
    from deployctl.core.sizing.hardware import sku_for

    names = {c.name for h in facts.hosts.values() if h.reachable and h.npu for c in h.npu.chips}
    if len(names) != 1:
        return inv.cluster
    name = names.pop()
    try:
        sku_for(inv.cluster.hardware, name)
    except ValueError:
        return inv.cluster
    return inv.cluster.model_copy(update={"sku": name})
