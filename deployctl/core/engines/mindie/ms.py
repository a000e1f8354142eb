"""pd-split: MindIE-MS controller/coordinator configs and the global rank table (server_group_list).

Written into the folder of the node that runs MindIE-MS (the prefill master). Example::

    {"version": "1.0", "status": "completed", "server_group_list": [
      {"group_id": "0", "server_count": "1", "server_list": [{"server_id": "coordinator", "server_ip": ...}]},
      {"group_id": "1", "server_count": "1", "server_list": [{"server_id": "controller", "server_ip": ...}]},
      {"group_id": "2", "deploy_server": "0", "server_count": "2", "server_list": [...prefill...]},
      {"group_id": "3", "deploy_server": "1", "server_count": "2", "server_list": [...decode...]}]}
"""

from __future__ import annotations

import json
from typing import Any, cast

from deployctl.core.models.artifact import Artifact
from deployctl.core.models.engine_settings.mindie import MindieSettings
from deployctl.core.models.plan import Instance, Plan
from deployctl.core.engines.mindie.ranktable import uses_super_pod
from deployctl.core.engines.mindie.topology import distributed
from deployctl.core.input.merge import deep_merge, merge_by_position, to_json


def _group_servers(plan: Plan, inst: Instance) -> list[dict]:
    ports = cast(MindieSettings, plan.inventory.engine).ports
    servers = []
    for name in inst.nodes:
        node = plan.node(name)
        devices = []
        for r in (r for r in inst.ranks if r.node == name):
            dev = {"device_id": str(r.device_id), "device_ip": str(r.device_ip)}
            if r.sdid is not None and plan.hardware == "a3":  # Motor's A3 samples carry it even at 1.0
                dev["super_device_id"] = str(r.sdid)
            dev["device_logical_id"] = str(r.local_rank)
            dev["rank_id"] = str(r.rank)
            devices.append(dev)
        servers.append({"server_id": node.server_id, "server_ip": node.container_ip,
                        "predict_port": str(ports.http), "mgmt_port": str(ports.management),
                        "metric_port": str(ports.metrics), "inter_comm_port": str(ports.inter_comm),
                        "device": devices})
    return servers


def global_ranktable_doc(plan: Plan) -> dict:
    ms = next(n for n in plan.nodes if n.runs_router)
    groups: list[dict[str, Any]] = [
        {"group_id": "0", "server_count": "1",
         "server_list": [{"server_id": "coordinator", "server_ip": ms.container_ip}]},
        {"group_id": "1", "server_count": "1",
         "server_list": [{"server_id": "controller", "server_ip": ms.container_ip}]},
    ]
    for gid, inst in enumerate(plan.instances, start=2):
        # prefill centralized, decode distributed: the flags differ, so deploy_server is each side's flag
        # (Motor deploy_ac_job.py L1340-1346; ControllerConfig.cpp GetPDInitRole L611-628)
        group = {"group_id": str(gid), "deploy_server": "1" if distributed(plan, inst) else "0",
                 "server_count": str(len(inst.nodes)), "server_list": _group_servers(plan, inst)}
        if uses_super_pod(plan):
            pods: dict[str | None, list] = {}
            for name in inst.nodes:
                node = plan.node(name)
                pods.setdefault(node.super_pod_id, []).append({"server_id": node.server_id})
            group["super_pod_list"] = [{"super_pod_id": p, "server_list": s} for p, s in pods.items()]
        groups.append(group)
    return {"version": "1.2" if uses_super_pod(plan) else "1.0", "status": "completed",
            "server_group_list": groups}


def _defaults(name: str) -> dict:
    from deployctl.core.packaged import packaged_text

    return json.loads(packaged_text(__package__, f"{name}.json"))


def _tls_switches(doc: dict, enabled: bool) -> dict:
    """Every `*_tls_enable` follows engine.tls (the `*_tls_items` paths stay as shipped)."""
    return {k: enabled for k in doc.get("tls_config", {}) if k.endswith("_tls_enable")}


def controller_doc(plan: Plan) -> dict:
    """Motor's shipped ms_controller.json with the plan's ports, paths and instance shapes."""
    e = cast(MindieSettings, plan.inventory.engine)
    ms = next(n for n in plan.nodes if n.runs_router)
    # every instance of a role has the same shape (rules.py refuses others): the first one speaks for all
    prefill, decode = plan.role("prefill")[0], plan.role("decode")[0]
    p_count, d_count = len(plan.role("prefill")), len(plan.role("decode"))

    def node_cfg(inst: Instance) -> dict:
        # Motor deploy_ac_job.py update_ms_controller_config L1677-1710: a distributed side counts its DP
        # ranks as machines (node_machine_num = dp, L1701-1703)
        d, dist = inst.degrees, distributed(plan, inst)
        return {"enable_dist_dp_server": dist, "node_machine_num": d.dp if dist else len(inst.nodes),
                "tp_size": d.tp, "dp_size": d.dp, "sp_size": 1, "cp_size": d.cp}

    base = _defaults("ms_controller")
    doc = deep_merge(base, {
        "deploy_mode": "pd_separate", "cluster_port": e.ports.cluster,
        "global_rank_table_file_path": f"{e.work_dir}/global_ranktable.json",
        # the P:D ratio, "or the real numbers of P and D" (pd_separation_service_deployment.md L421); sum <= 16
        # (ControllerConfig.cpp L56-80). One instance each: their server counts; several: the instance counts
        **({"default_p_rate": len(prefill.nodes), "default_d_rate": len(decode.nodes)} if p_count == d_count == 1
           else _rates(p_count, d_count)),
        "mindie_server_port": e.ports.http, "mindie_server_control_port": e.ports.management,
        "mindie_server_metric_port": e.ports.metrics, "controller_alarm_port": e.ports.coordinator + 2,
        "mindie_ms_coordinator_port": e.ports.coordinator + 1,
        "mindie_ms_coordinator_external_port": e.ports.coordinator + 3,
        "initial_dist_server_port": e.ports.dist_base,   # RankTableLoader.cpp L239 (controller.md L191)
        "multi_node_infer_config": {"multi_node_infer_enable": True,   # Motor user_config.json L94
                                    "p_node_config": node_cfg(prefill), "d_node_config": node_cfg(decode)},
        "http_server": {"ip": ms.container_ip, "port": e.ports.controller},
        "tls_config": _tls_switches(base, e.tls),
    })
    return merge_by_position(doc, e.ms.controller)      # engine.ms.controller last (settings.py MsSettings)


def _rates(p: int, d: int) -> dict:
    from math import gcd

    g = gcd(p, d)
    p, d = p // g, d // g
    while p + d > 16:            # keep the ratio as close as the controller's bound allows
        p, d = max(1, round(p / 2)), max(1, round(d / 2))
    return {"default_p_rate": p, "default_d_rate": d}


def coordinator_doc(plan: Plan) -> dict:
    """Motor's shipped ms_coordinator.json with the plan's IPs and ports (5 from engine.ports.coordinator)."""
    e = cast(MindieSettings, plan.inventory.engine)
    ms = next(n for n in plan.nodes if n.runs_router)
    port = e.ports.coordinator
    base = _defaults("ms_coordinator")
    doc = deep_merge(base, {
        "http_config": {"predict_ip": ms.container_ip, "predict_port": str(port),
                        "manage_ip": ms.container_ip, "manage_port": str(port + 1),
                        "alarm_port": str(port + 2), "external_port": str(port + 3),
                        "status_port": str(port + 4)},
        "tls_config": _tls_switches(base, e.tls),
    })
    return merge_by_position(doc, e.ms.coordinator)     # engine.ms.coordinator last (settings.py MsSettings)


def render_ms(plan: Plan) -> list[Artifact]:
    ms = [n for n in plan.nodes if n.runs_router]
    if not ms:
        return []
    folder = ms[0].name
    return [
        Artifact(kind="global_ranktable", path=f"{folder}/global_ranktable.json",
                 content=to_json(global_ranktable_doc(plan)), mode=0o640),
        Artifact(kind="ms_controller", path=f"{folder}/ms_controller.json",
                 content=to_json(controller_doc(plan)), mode=0o640),
        Artifact(kind="ms_coordinator", path=f"{folder}/ms_coordinator.json",
                 content=to_json(coordinator_doc(plan)), mode=0o640),
    ]
