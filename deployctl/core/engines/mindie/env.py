"""Per-node env file of a MindIE node: computed variables, the presets, then engine.env.

Example (node2 of a 2 x 8 A2 dp-ep plan)::

    MIES_CONTAINER_IP=10.200.2.3
    MASTER_IP=10.200.2.2
    WORLD_SIZE=16
    RANK_TABLE_FILE=/etc/deployctl/ranktable.json
    HCCL_CONNECT_TIMEOUT=7200
    NPU_MEMORY_FRACTION=0.96
"""

from __future__ import annotations

from typing import cast

from deployctl import __version__
from deployctl.core.engines.mindie.presets import preset_env
from deployctl.core.engines.mindie.processes import is_distributed
from deployctl.core.engines.mindie.support import needs_gloo_interface
from deployctl.core.models.artifact import Artifact
from deployctl.core.models.engine_settings.mindie import MindieSettings
from deployctl.core.models.plan import Plan, PlanNode
from deployctl.core.engine_spec.container import with_env_keys
from deployctl.core.render.env import env_file, user_env


def computed_env(plan: Plan, node: PlanNode) -> dict[str, str]:
    """What deployctl derives per node from the plan (identical keys on every rank); made once per node (the
    acceptance checks and the env file read it). Callers must not change it."""
    return plan.memo(("mindie-computed-env", node.name), lambda: _computed_env(plan, node))


def _computed_env(plan: Plan, node: PlanNode) -> dict[str, str]:
    inv = plan.inventory
    inst = plan.instance(node.instance)
    work = inv.engine.work_dir
    master = plan.node(inst.master)
    env = {
        "MIES_CONTAINER_IP": node.container_ip,
        "MIES_CONTAINER_MANAGEMENT_IP": node.container_ip,
        "HOST_IP": node.server_id,
        "MASTER_IP": master.server_id,
        "MASTER_PORT": str(cast(MindieSettings, inv.engine).ports.master),
        "WORLD_SIZE": str(inst.world_size),
        "MIES_CONFIG_JSON_PATH": f"{work}/config.json",
    }
    dist = is_distributed(plan, node)
    if dist:   # each DP server reads its own config<i>.json (--config-file), not MIES_CONFIG_JSON_PATH
        del env["MIES_CONFIG_JSON_PATH"]
    if inst.multi_node or dist:   # distributedEnable loads the rank table even on one node (schedule_config.cpp L210)
        env["RANK_TABLE_FILE"] = f"{work}/ranktable.json"
        env["RANKTABLEFILE"] = env["RANK_TABLE_FILE"]
    if node.interface and needs_gloo_interface(plan, inst):
        # deepseek_v3.2.md L138: GLOO_SOCKET_IFNAME=<nic of MIES_CONTAINER_IP> (faq.md: else "Connection refused")
        env["GLOO_SOCKET_IFNAME"] = node.interface
    if node.runs_router:
        env["GLOBAL_RANK_TABLE_FILE_PATH"] = f"{work}/global_ranktable.json"
        env["MINDIE_MS_CONTROLLER_CONFIG_FILE_PATH"] = f"{work}/ms_controller.json"
        env["MINDIE_MS_COORDINATOR_CONFIG_FILE_PATH"] = f"{work}/ms_coordinator.json"
    return env


def node_env(plan: Plan, node: PlanNode) -> dict[str, str]:
    """Computed variables first, then the sorted preset; engine.env overrides either in place."""
    inv = plan.inventory
    user, preset = plan.memo(("mindie-role-env", node.role), lambda: (
        user_env(inv, node.role), preset_env(inv.cluster.hardware, node.role, model=inv.model.name)))
    computed = computed_env(plan, node)
    merged = dict(computed)
    merged.update({k: preset[k] for k in sorted(preset) if k not in computed})
    merged.update({k: user[k] for k in user if k in merged})
    merged.update({k: user[k] for k in sorted(user) if k not in merged})
    return with_env_keys(merged)


def render_envs(plan: Plan) -> list[Artifact]:
    out = []
    for node in plan.nodes:
        header = [f"deployctl {__version__}: environment of node {node.name} ({node.role}, instance {node.instance})",
                  "Use as: docker run --env-file env ...   Do not edit by hand: change the inventory and re-render."]
        text = env_file(header, node_env(plan, node))
        out.append(Artifact(kind="env", path=f"{node.name}/env", content=text.encode(), mode=0o600))
    return out
