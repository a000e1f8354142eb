"""HCCL rank table of one instance (ranktable.json), serialised from the plan.

Example (A2, version 1.0; every scalar a string)::

    {"version": "1.0", "status": "completed", "server_count": "2",
     "server_list": [{"server_id": "10.200.2.2", "container_ip": "10.200.2.2",
                      "device": [{"device_id": "0", "device_ip": "29.0.0.1", "rank_id": "0"}, ...]}, ...]}

A3 with cluster.super_pod adds `super_device_id` per device and `super_pod_list` (version 1.2).
"""

from __future__ import annotations

from typing import Any

from deployctl.core.models.artifact import Artifact
from deployctl.core.models.plan import Instance, Plan, Rank
from deployctl.core.engines.mindie.topology import distributed
from deployctl.core.input.merge import to_json


def uses_super_pod(plan: Plan) -> bool:
    c = plan.inventory.cluster
    return c.hardware == "a3" and c.super_pod


def device_entry(rank: Rank, super_pod: bool) -> dict:
    entry = {"device_id": str(rank.device_id), "device_ip": str(rank.device_ip)}
    if super_pod:
        entry["super_device_id"] = str(rank.sdid)
    entry["rank_id"] = str(rank.rank)
    return entry


def ranktable_doc(plan: Plan, inst: Instance) -> dict:
    """The instance's rank table (made once per instance and plan: do not change it)."""
    return plan.memo(("mindie-ranktable", inst.name), lambda: _ranktable_doc(plan, inst))


def _ranktable_doc(plan: Plan, inst: Instance) -> dict:
    super_pod = uses_super_pod(plan)
    ranks: dict[str, list[dict]] = {name: [] for name in inst.nodes}
    for r in inst.ranks:
        if r.node in ranks:
            ranks[r.node].append(device_entry(r, super_pod))
    servers = []
    for name in inst.nodes:
        node = plan.node(name)
        servers.append({
            "server_id": node.server_id,
            "container_ip": node.container_ip,
            "device": ranks[name],
        })
    doc: dict[str, Any] = {"version": "1.2" if super_pod else "1.0", "status": "completed",
                           "server_count": str(len(servers)), "server_list": servers}
    if super_pod:
        pods: dict[str | None, list[dict]] = {}
        for name in inst.nodes:
            node = plan.node(name)
            pods.setdefault(node.super_pod_id, []).append({"server_id": node.server_id})
        doc["super_pod_list"] = [{"super_pod_id": pid, "server_list": members}
                                 for pid, members in pods.items()]
    return doc


def render_ranktables(plan: Plan) -> list[Artifact]:
    """Every node of a multi-server instance gets the same table, mode 640 (MindIE checks it)."""
    out = []
    for inst in plan.instances:
        # a distributed-DP decode loads its instance's table even on one server (schedule_config.cpp L210-211)
        if not inst.multi_node and not distributed(plan, inst):
            continue
        content = to_json(ranktable_doc(plan, inst))     # serialised once, the same bytes for each node
        out += [Artifact(kind="ranktable", path=f"{n}/ranktable.json", content=content, mode=0o640)
                for n in inst.nodes]
    return out
