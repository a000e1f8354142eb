"""Per-node env file (KEY=VALUE lines, usable as `docker run --env-file`).

Example (node2 of a 2 x 8 A2 tp-pp plan)::

    MIES_CONTAINER_IP=10.200.2.3
    MASTER_IP=10.200.2.2
    WORLD_SIZE=16
    RANK_TABLE_FILE=/etc/deployctl/ranktable.json
    HCCL_CONNECT_TIMEOUT=7200
    NPU_MEMORY_FRACTION=0.96
"""

from __future__ import annotations

import re

from deployctl import __version__
from deployctl.models.artifact import Artifact
from deployctl.models.plan import Plan, PlanNode
from deployctl.planning.env import env_value, preset_env

ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# docker --env-file reads a line as KEY=VALUE up to the newline, with no quoting: a newline (or any other
# control character) in a value would start another variable (LD_PRELOAD=...) or split the line
ENV_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def env_file(header: list[str], env: dict[str, str]) -> str:
    """The one writer of env files: `# header` lines, then KEY=VALUE lines; refuses what would not be
    read back as exactly these variables by `docker run --env-file` (or a shell sourcing it)."""
    from deployctl.errors import RenderError

    lines = [f"# {h}" for h in header]
    for key, value in env.items():
        if not ENV_KEY.match(key):
            raise RenderError(f"env key {key!r} is not a variable name", hint="this is a deployctl bug; "
                              "validation should have refused it")
        bad = ENV_BAD.search(value)
        if bad:
            raise RenderError(f"env {key}: the value holds a control character (U+{ord(bad.group()):04X}) that "
                              "would split the env file", hint="this is a deployctl bug; validation should have "
                              "refused it")
        lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"


def computed_env(plan: Plan, node: PlanNode) -> dict[str, str]:
    """What deployctl derives per node from the plan (identical keys on every rank)."""
    inv = plan.inventory
    inst = plan.instance(node.instance)
    work = inv.engine.work_dir
    master = plan.node(inst.master)
    env = {
        "MIES_CONTAINER_IP": node.container_ip,
        "MIES_CONTAINER_MANAGEMENT_IP": node.container_ip,
        "HOST_IP": node.server_id,
        "MASTER_IP": master.server_id,
        "MASTER_PORT": str(inv.engine.ports.master),
        "WORLD_SIZE": str(inst.world_size),
        "MIES_CONFIG_JSON_PATH": f"{work}/config.json",
    }
    if inst.multi_node:
        env["RANK_TABLE_FILE"] = f"{work}/ranktable.json"
        env["RANKTABLEFILE"] = env["RANK_TABLE_FILE"]
    if node.runs_ms:
        env["GLOBAL_RANK_TABLE_FILE_PATH"] = f"{work}/global_ranktable.json"
        env["MINDIE_MS_CONTROLLER_CONFIG_FILE_PATH"] = f"{work}/ms_controller.json"
        env["MINDIE_MS_COORDINATOR_CONFIG_FILE_PATH"] = f"{work}/ms_coordinator.json"
    return env


def node_env(plan: Plan, node: PlanNode) -> dict[str, str]:
    """Computed variables first, then the sorted preset; engine.env overrides either in place."""
    inv = plan.inventory
    user = {k: env_value(v) for k, v in inv.engine.env.items()}
    preset = preset_env(inv.cluster.hardware, node.role)
    computed = computed_env(plan, node)
    merged = dict(computed)
    merged.update({k: preset[k] for k in sorted(preset) if k not in computed})
    merged.update({k: user[k] for k in user if k in merged})
    merged.update({k: user[k] for k in sorted(user) if k not in merged})
    return merged


def render_envs(plan: Plan) -> list[Artifact]:
    out = []
    for node in plan.nodes:
        header = [f"deployctl {__version__}: environment of node {node.name} ({node.role}, instance {node.instance})",
                  "Use as: docker run --env-file env ...   Do not edit by hand: change the inventory and re-render."]
        text = env_file(header, node_env(plan, node))
        out.append(Artifact(kind="env", path=f"{node.name}/env", content=text.encode(), mode=0o640))
    return out
