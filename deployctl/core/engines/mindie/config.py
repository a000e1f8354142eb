"""MindIE Service config.json per node, serialised from the plan; engine.config merged last (key by key, lists of
objects by position).

Example (2 x 8 A2, tp-pp; abridged)::

    {"Version": "1.0.0",
     "ServerConfig": {"ipAddress": "10.200.2.2", "port": 1025, "httpsEnabled": false,
                      "inferMode": "standard", "interCommTLSEnabled": false, ...},
     "BackendConfig": {"modelInstanceNumber": 1, "npuDeviceIds": [[0, 1, 2, 3, 4, 5, 6, 7]],
                       "multiNodesInferEnabled": true, "multiNodesInferPort": 1120,
                       "interNodeTLSEnabled": false,
                       "ModelDeployConfig": {"maxSeqLen": 8192, "maxInputTokenLen": 4096,
                           "ModelConfig": [{"modelName": "ds-r1", "tp": 8, "pp": 2, "moe_tp": 8, ...}]},
                       "ScheduleConfig": {"maxBatchSize": 32, ...}},
     "LogConfig": {...}, "EnableDynamicAdjustTimeoutConfig": false}
"""

from __future__ import annotations

import json
from typing import cast

from deployctl.core import catalog
from deployctl.core.engines.mindie.processes import dp_ports, dp_servers, is_distributed
from deployctl.core.engines.mindie.support import backend
from deployctl.core.input.roles import for_role
from deployctl.core.models.artifact import Artifact
from deployctl.core.models.engine_settings.mindie import MindieSettings
from deployctl.core.models.inventory import Inventory
from deployctl.core.models.plan import Instance, Plan, PlanNode
from deployctl.core.sizing.limits import max_prefill_tokens
from deployctl.core.input.merge import merge_by_position, to_json


def _tls_paths(prefix: str, base: str) -> dict:
    return {f"{prefix}TlsCaFile": [f"{base}_ca.pem"], f"{prefix}TlsCert": f"security/certs/{base}/server.pem",
            f"{prefix}TlsPk": f"security/keys/{base}/server.key.pem",
            f"{prefix}TlsCrlPath": f"security/{base}/certs/", f"{prefix}TlsCrlFiles": ["server_crl.pem"]}


def role_inventory(plan: Plan, node: PlanNode) -> Inventory:
    """The inventory as this node's role sees it: layout.<role>.engine.config and layout.<role>.model (pd-split)
    over the engine and model blocks (inventory/roles.py); the inventory itself for a mixed node."""
    return for_role(plan.inventory, node.role)


def server_config(plan: Plan, node: PlanNode, inst: Instance) -> dict:
    e = cast(MindieSettings, role_inventory(plan, node).engine)
    tls = e.tls
    pd = node.role != "mixed"
    # the same file on every node of an instance (MindIE guide): MIES_CONTAINER_IP in env picks the node
    master_ip = plan.node(inst.master).container_ip
    cfg = {
        "ipAddress": master_ip, "managementIpAddress": master_ip,
        "port": e.ports.http, "managementPort": e.ports.management, "metricsPort": e.ports.metrics,
        "allowAllZeroIpListening": False,
        "maxLinkNum": 300 if len(plan.nodes) >= 4 else 1000,
        "httpsEnabled": tls, "fullTextEnabled": False,
        "tlsCaPath": "security/ca/", "tlsCaFile": ["ca.pem"], "tlsCert": "security/certs/server.pem",
        "tlsPk": "security/keys/server.key.pem", "tlsCrlPath": "security/certs/",
        "tlsCrlFiles": ["server_crl.pem"],
        **_tls_paths("management", "management"), **_tls_paths("metrics", "metrics"),
        "inferMode": "dmi" if pd else "standard",
        "interCommTLSEnabled": tls, "interCommPort": e.ports.inter_comm,
        "interCommTlsCaPath": "security/grpc/ca/", "interCommTlsCaFiles": ["ca.pem"],
        "interCommTlsCert": "security/grpc/certs/server.pem", "interCommPk": "security/grpc/keys/server.key.pem",
        "interCommTlsCrlPath": "security/grpc/certs/", "interCommTlsCrlFiles": ["server_crl.pem"],
        "openAiSupport": "vllm", "tokenTimeout": 600, "e2eTimeout": 600,
        # pd-split decode: one server per DP rank (Ascend/MindIE-Motor@5dfb024e user_config_base_A3.json L203-278;
        # the controller's GetPDInitRole, mindie_motor/src/controller/constant/ControllerConfig.cpp L611)
        "distDPServerEnabled": is_distributed(plan, node),
        "HealthCheckConfig": {"npuUsageThreshold": 0},
    }
    return cfg


def model_config(plan: Plan, node: PlanNode, inst: Instance) -> dict:
    inv = role_inventory(plan, node)
    info = catalog.served_model(inv)
    d = inst.degrees
    # a distributed DP server holds tp x cp devices; the controller assigns them (llm_manager_impl.cpp L782-803).
    # Otherwise worldSize is this server's own NPU count, as npuDeviceIds lists them: BackendConfig refuses the
    # config at load when they differ ("The size of npuDeviceIds (subset) does not equal to worldSize",
    # MindIE-LLM backend_config.cpp@v3.0.0 L156-165; 40fb063 L175-181), before the rank table would overwrite it
    # (config_manager_impl.cpp L117-118 vs L134); published: src/server/scripts/A2_double_machine.md.
    world = d.tp * d.cp if is_distributed(plan, node) else len(node.device_ids)
    mc = {
        "modelInstanceType": "Standard", "modelName": inv.model.served_name,
        "modelWeightPath": inv.model.weights_path, "worldSize": world,
        "cpuMemSize": 5, "npuMemSize": -1, "backendType": backend(inv), "trustRemoteCode": False,
        "tp": d.tp, "dp": d.dp, "pp": d.pp, "cp": d.cp, "sp": 1, "moe_tp": d.moe_tp, "moe_ep": d.moe_ep,
    }
    spec = inv.model.speculative
    if spec is not None:
        # MTP as MindIE-LLM's guides write it (A2_double_machine.md L50, deepseek_v3.2.md L192); only mtp is a
        # MindIE plugin (validate.py refuses eagle/eagle3 with plugin_utils.py's source)
        mc["plugin_params"] = json.dumps({"plugin_type": "mtp", "num_speculative_tokens": spec.tokens},
                                         separators=(",", ":"))
    if node.role != "mixed":
        mc["kv_link_timeout"] = 1080
        if node.role == "decode":
            mc["kv_trans_timeout"] = 10
    # local TP keys exist on the atb runtime only (torch: parallel_info_manager.py L226-243 reads none)
    if info.kv.kind == "mla" and (d.o_proj_tp or d.lm_head_tp) and backend(inv) == "atb":
        opts = {}
        if d.lm_head_tp:
            opts["lm_head_local_tp"] = d.lm_head_tp
        if d.o_proj_tp:
            opts["o_proj_local_tp"] = d.o_proj_tp
        mc["models"] = {"deepseekv2": {"parallel_options": opts}}
    return mc


def backend_config(plan: Plan, node: PlanNode, inst: Instance) -> dict:
    inv = role_inventory(plan, node)
    m = inv.model
    e = cast(MindieSettings, inv.engine)
    dist = is_distributed(plan, node)
    devices = inst.degrees.tp * inst.degrees.cp if dist else len(node.device_ids)
    schedule = {"distributedEnable": True} if dist else {}   # schedule_config.cpp L51, L210-211
    return {
        "backendName": "mindieservice_llm_engine", "modelInstanceNumber": 1,
        "npuDeviceIds": [list(range(devices))],
        "tokenizerProcessNumber": 8,
        "multiNodesInferEnabled": inst.multi_node and not dist,
        "multiNodesInferPort": e.ports.multi_node,
        "interNodeTLSEnabled": e.tls,
        "interNodeTlsCaPath": "security/grpc/ca/", "interNodeTlsCaFiles": ["ca.pem"],
        "interNodeTlsCert": "security/grpc/certs/server.pem", "interNodeTlsPk": "security/grpc/keys/server.key.pem",
        "interNodeTlsCrlPath": "security/grpc/certs/", "interNodeTlsCrlFiles": ["server_crl.pem"],
        "kvPoolConfig": {"backend": "", "configPath": ""},
        "ModelDeployConfig": {
            "maxSeqLen": m.max_seq_len, "maxInputTokenLen": m.max_input_len, "truncation": False,   # a bool in 2.x (model_deploy_config.cpp@40fb063 L36); 3.0 reads false as 0
            "ModelConfig": [model_config(plan, node, inst)],
        },
        "ScheduleConfig": {
            "templateType": "Standard", "templateName": "Standard_LLM", "cacheBlockSize": 128,
            "maxPrefillBatchSize": min(50, m.max_batch_size), "maxPrefillTokens": max_prefill_tokens(inv),
            "prefillTimeMsPerReq": 150, "prefillPolicyType": 0,
            "decodeTimeMsPerReq": 50, "decodePolicyType": 0,
            "maxBatchSize": m.max_batch_size, "maxIterTimes": max(1, m.max_seq_len - m.max_input_len),
            "maxPreemptCount": 0, "supportSelectBatch": False,
            "maxQueueDelayMicroseconds": 5000, "maxFirstTokenWaitTime": 2500, **schedule,
        },
    }


def config_doc(plan: Plan, node: PlanNode) -> dict:
    """The node's config.json; identical for every node of one instance."""
    inst = plan.instance(node.instance)
    doc = {
        "Version": "1.0.0",
        "ServerConfig": server_config(plan, node, inst),
        "BackendConfig": backend_config(plan, node, inst),
        "LogConfig": {"dynamicLogLevel": "", "dynamicLogLevelValidHours": 2, "dynamicLogLevelValidTime": ""},
        "EnableDynamicAdjustTimeoutConfig": False,
    }
    # key by key; lists of objects by position (ModelConfig[0] keeps its rendered keys): settings.py MindieSettings.
    # A pd-split role's layout.<role>.engine.config is already merged over engine.config (roles.for_role)
    return merge_by_position(doc, cast(MindieSettings, role_inventory(plan, node).engine).config)


def config_files(plan: Plan, node: PlanNode) -> dict[str, dict]:
    """File name -> document: config.json, or config1..N.json on a distributed-decode node, identical but for
    the four ports of each DP rank (Motor gen_config_single_container.py __update_server_env L438-461). Made
    once per instance (what of the node the files read: its role and its device count); do not change them."""
    return plan.memo(("mindie-config", node.instance, node.role, len(node.device_ids)),
                     lambda: _config_files(plan, node))


def _config_files(plan: Plan, node: PlanNode) -> dict[str, dict]:
    doc = config_doc(plan, node)
    if not is_distributed(plan, node):
        return {"config.json": doc}
    out = {}
    for k in range(dp_servers(plan, node)):
        server = dict(doc["ServerConfig"], **dp_ports(plan, k))
        out[f"config{k + 1}.json"] = dict(doc, ServerConfig=server)
    return out


def render_configs(plan: Plan) -> list[Artifact]:
    """The config files of every node (mode 640, ConstrainOwner: file_utils.cpp L342-386); each document
    serialised once (the nodes of an instance share it)."""
    encoded: dict[int, bytes] = {}
    out = []
    for n in plan.nodes:
        for name, doc in config_files(plan, n).items():
            if id(doc) not in encoded:
                encoded[id(doc)] = to_json(doc)
            out.append(Artifact(kind="config", path=f"{n.name}/{name}", content=encoded[id(doc)], mode=0o640))
    return out
