"""Per-node start.sh: the `docker run` of the seed guide, every user value shell-quoted.

Example (abridged)::

    docker run -d --name ds-prod-mindie --net=host --ipc=host --shm-size=500g \\
      --device=/dev/davinci0 ... --device=/dev/davinci_manager --device=/dev/devmm_svm --device=/dev/hisi_hdc \\
      -v /usr/local/Ascend/driver:/usr/local/Ascend/driver:ro ... -v "$HERE:"/etc/deployctl:ro \\
      --env-file "$HERE/env" ... IMAGE bash -c '...exec "$DEPLOYCTL_DAEMON"'
"""

from __future__ import annotations

from deployctl import __version__
from deployctl.engines.container import devices, inventory_mounts, source_set_env
from deployctl.engines.mindie.config import config_files
from deployctl.engines.mindie.processes import container_name, dp_servers, is_distributed
from deployctl.models.artifact import Artifact
from deployctl.models.plan import Plan, PlanNode
from deployctl.render._jinja import render_template

HOST_MOUNTS = (
    "/usr/local/Ascend/driver",
    "/usr/local/Ascend/firmware",
    "/usr/local/dcmi",
    "/usr/local/sbin/npu-smi",
    "/etc/hccn.conf",
)
SET_ENV = source_set_env(("/usr/local/Ascend/ascend-toolkit/set_env.sh", "/usr/local/Ascend/nnal/atb/set_env.sh",
                          "/usr/local/Ascend/atb-models/set_env.sh", "/usr/local/Ascend/mindie/set_env.sh"))
# Sources the CANN/ATB/MindIE set_env.sh scripts that exist in the image (deployctl's env wins over theirs),
# then execs the daemon
# from its service directory. The daemon path arrives as an env var, never spliced into the script.
LAUNCHER = SET_ENV + 'cd "$(dirname "$DEPLOYCTL_DAEMON")/.." && exec "$DEPLOYCTL_DAEMON"'
# A distributed-decode node runs one daemon per DP rank, each with its own config<i>.json (Motor boot.sh
# L115-142 -> node_manager -> llm_daemon_starter.py L127-144: `--config-file configI.json --expert-parallel
# true`); the container lives while all of them do and stops with the first that exits.
DP_LAUNCHER = SET_ENV + (
    'cd "$(dirname "$DEPLOYCTL_DAEMON")/.." && pids=() && '
    'for i in $(seq 1 "$DEPLOYCTL_DP_SERVERS"); do '
    '"$DEPLOYCTL_DAEMON" --config-file "$DEPLOYCTL_WORK/config$i.json" --expert-parallel true & pids+=($!); done; '
    'wait -n; rc=$?; kill "${pids[@]}" 2>/dev/null; wait; exit "$rc"')


# MindIE-MS binaries take their config from MINDIE_MS_*_CONFIG_FILE_PATH (set in env on this node);
# the coordinator also takes its predict and manage addresses as arguments (Motor boot.sh).
MS_LAUNCHERS = (
    ("controller", 'exec ./bin/ms_controller'),
    ("coordinator", 'exec ./bin/ms_coordinator "$DEPLOYCTL_MS_IP" '
                    '"$DEPLOYCTL_MS_PORT" "$DEPLOYCTL_MS_IP" "$DEPLOYCTL_MS_MANAGE_PORT"'),
)
# MindIE-MS needs MindIE's libraries: Motor boot.sh (7be35ef) L27 LD_LIBRARY_PATH with mindie-llm/lib(/grpc)
# and mindie-service/lib(/grpc), L39 HSECEASY_PATH=mindie-service/lib; coordinator.md L315, L321
MS_ENV = (SET_ENV + 'LLM="$(dirname "$DEPLOYCTL_MS_HOME")/mindie-llm"; '
          'export LD_LIBRARY_PATH="$LLM/lib:$LLM/lib/grpc:$DEPLOYCTL_MS_HOME/lib:$DEPLOYCTL_MS_HOME/lib/grpc'
          '${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; export HSECEASY_PATH="$DEPLOYCTL_MS_HOME/lib"; '
          'cd "$DEPLOYCTL_MS_HOME" && ')


def engine_files(plan: Plan, node: PlanNode) -> list[str]:
    """The files MindIE's ConstrainOwner checks (file_utils.cpp L342-386): owner = the engine's uid, mode <= 640."""
    inst = plan.instance(node.instance)
    names = list(config_files(plan, node))
    if inst.multi_node or is_distributed(plan, node):
        names.append("ranktable.json")
    return names


def start_script(plan: Plan, node: PlanNode) -> str:
    inv = plan.inventory
    e = inv.engine
    weights = inv.model.weights_path
    mounts = [(p, p, "ro") for p in HOST_MOUNTS] + [(weights, weights, "ro")]
    mounts += inventory_mounts(e)
    dist = is_distributed(plan, node)
    return render_template(
        f"{__package__}/templates/start.sh.j2", version=__version__, node=node.name, role=node.role, instance=node.instance,
        is_master=node.is_master, owned=engine_files(plan, node), uid=e.run_as_uid,
        container_name=container_name(plan), image=e.image, privileged=e.privileged, shm_size=e.shm_size,
        devices=devices(node),
        mounts=mounts, work_dir=e.work_dir, daemon=e.daemon, launcher=DP_LAUNCHER if dist else LAUNCHER,
        dp_servers=dp_servers(plan, node) if dist else 0)


def ms_script(plan: Plan, node: PlanNode) -> str:
    e = plan.inventory.engine
    return render_template(
        f"{__package__}/templates/start-ms.sh.j2", version=__version__, node=node.name, image=e.image,
        container_name=container_name(plan), work_dir=e.work_dir, ms_home=e.ms_home,
        ms_ip=node.container_ip, coordinator_port=e.ports.coordinator,
        roles=[(name, MS_ENV + cmd) for name, cmd in MS_LAUNCHERS], uid=e.run_as_uid)


def render_starts(plan: Plan) -> list[Artifact]:
    out = [Artifact(kind="start", path=f"{n.name}/start.sh", content=start_script(plan, n).encode(),
                    mode=0o755) for n in plan.nodes]
    out += [Artifact(kind="start", path=f"{n.name}/start-ms.sh", content=ms_script(plan, n).encode(),
                     mode=0o755) for n in plan.nodes if n.runs_router]
    return out
