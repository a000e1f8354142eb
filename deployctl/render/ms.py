"""pd-split: MindIE-MS controller/coordinator configs and the global rank table (server_group_list).

Written into the folder of the node that runs MindIE-MS (the prefill master). Example::

    {"version": "1.0", "status": "completed", "server_group_list": [
      {"group_id": "0", "server_count": "1", "server_list": [{"server_id": "coordinator", "server_ip": ...}]},
      {"group_id": "1", "server_count": "1", "server_list": [{"server_id": "controller", "server_ip": ...}]},
      {"group_id": "2", "deploy_server": "0", "server_count": "2", "server_list": [...prefill...]},
      {"group_id": "3", "deploy_server": "1", "server_count": "2", "server_list": [...decode...]}]}
"""

from __future__ import annotations

from deployctl.models.artifact import Artifact
from deployctl.models.plan import Instance, Plan
from deployctl.render.ranktable import to_json, uses_super_pod


def _group_servers(plan: Plan, inst: Instance) -> list[dict]:
    ports = plan.inventory.engine.ports
    super_pod = uses_super_pod(plan)
    servers = []
    for name in inst.nodes:
        node = plan.node(name)
        devices = []
        for r in (r for r in inst.ranks if r.node == name):
            dev = {"device_id": str(r.device_id), "device_ip": str(r.device_ip)}
            if super_pod:
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
    ms = next(n for n in plan.nodes if n.runs_ms)
    groups = [
        {"group_id": "0", "server_count": "1",
         "server_list": [{"server_id": "coordinator", "server_ip": ms.container_ip}]},
        {"group_id": "1", "server_count": "1",
         "server_list": [{"server_id": "controller", "server_ip": ms.container_ip}]},
    ]
    for gid, inst in enumerate(plan.instances, start=2):
        group = {"group_id": str(gid), "deploy_server": "0" if inst.role == "prefill" else "1",
                 "server_count": str(len(inst.nodes)), "server_list": _group_servers(plan, inst)}
        if uses_super_pod(plan):
            pods: dict[str, list] = {}
            for name in inst.nodes:
                node = plan.node(name)
                pods.setdefault(node.super_pod_id, []).append({"server_id": node.server_id})
            group["super_pod_list"] = [{"super_pod_id": p, "server_list": s} for p, s in pods.items()]
        groups.append(group)
    return {"version": "1.2" if uses_super_pod(plan) else "1.0", "status": "completed",
            "server_group_list": groups}


def controller_doc(plan: Plan) -> dict:
    e = plan.inventory.engine
    ms = next(n for n in plan.nodes if n.runs_ms)
    prefill, decode = plan.instance("prefill"), plan.instance("decode")

    def node_cfg(inst: Instance) -> dict:
        d = inst.degrees
        return {"enable_dist_dp_server": inst.role == "decode", "node_machine_num": len(inst.nodes),
                "tp_size": d.tp, "dp_size": d.dp, "sp_size": 1, "cp_size": d.cp}

    tls_keys = ("request_coordinator", "request_server", "http_server", "cluster", "etcd_server", "ccae",
                "alarm", "external_coordinator")
    return {
        "allow_all_zero_ip_listening": False, "deploy_mode": "pd_separate",
        "initial_dist_server_port": 10000, "cluster_port": e.ports.cluster,
        "global_rank_table_file_path": f"{e.work_dir}/global_ranktable.json",
        "rank_table_detecting_seconds": 5, "disappeared_server_waiting_seconds": 7200,
        "default_p_rate": 1, "default_d_rate": 1, "is_heterogeneous": False,
        "server_online_attempt_times": 36, "server_online_wait_seconds": 5,
        "mindie_server_port": e.ports.http, "mindie_server_control_port": e.ports.management,
        "mindie_server_metric_port": e.ports.metrics, "controller_alarm_port": e.ports.coordinator + 2,
        "mindie_ms_coordinator_port": e.ports.coordinator + 1,
        "mindie_ms_coordinator_external_port": e.ports.coordinator + 3, "node_manager_port": 1028,
        "http_timeout_seconds": 5, "http_retries": 3, "role_decision_methods": "digs",
        "multi_node_infer_config": {"multi_node_infer_enable": prefill.multi_node or decode.multi_node,
                                    "p_node_config": node_cfg(prefill), "d_node_config": node_cfg(decode)},
        "transfer_type": "D2DTransfer",
        "http_server": {"ip": ms.container_ip, "port": e.ports.controller},
        "tls_config": {f"{k}_tls_enable": e.tls for k in tls_keys},
        "log_info": {"log_level": "INFO", "to_file": True, "to_stdout": True,
                     "run_log_path": "./logs/ms_controller_run_log.txt",
                     "operation_log_path": "./logs/ms_controller_operation_log.txt"},
    }


def coordinator_doc(plan: Plan) -> dict:
    e = plan.inventory.engine
    ms = next(n for n in plan.nodes if n.runs_ms)
    base = e.ports.coordinator
    tls_keys = ("controller_server", "request_server", "mindie_client", "mindie_mangment", "external", "status")
    return {
        "http_config": {
            "allow_all_zero_ip_listening": False,
            "predict_ip": ms.container_ip, "predict_port": str(base),
            "manage_ip": ms.container_ip, "manage_port": str(base + 1),
            "alarm_port": str(base + 2), "external_port": str(base + 3), "status_port": str(base + 4),
            "server_thread_num": 10, "client_thread_num": 10, "http_timeout_seconds": 600,
            "keep_alive_seconds": 180, "server_name": "MindIE-MS", "user_agent": "Coordinator/1.0",
        },
        "request_limit": {"single_node_max_requests": 1000, "max_requests": 10000, "body_limit": 1},
        "metrics_config": {"enable": False, "trigger_size": 100},
        "exception_config": {"max_retry": 5, "schedule_timeout": 600, "first_token_timeout": 600,
                             "infer_timeout": 600, "tokenizer_timeout": 300},
        "log_info": {"log_level": "INFO", "to_file": True, "to_stdout": True,
                     "run_log_path": "./logs/ms_coordinator_run_log.txt",
                     "operation_log_path": "./logs/ms_coordinator_operation_log.txt"},
        "digs_scheduler_config": {"deploy_mode": "pd_separate", "scheduler_type": "digs_scheduler",
                                  "algorithm_type": "load_balance"},
        "tls_config": {f"{k}_tls_enable": e.tls for k in tls_keys},
    }


def render_ms(plan: Plan) -> list[Artifact]:
    ms = [n for n in plan.nodes if n.runs_ms]
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
