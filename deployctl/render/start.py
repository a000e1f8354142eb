"""Per-node start.sh: the `docker run` of the seed guide, every user value shell-quoted.

Example (abridged)::

    docker run -d --name ds-prod-mindie --net=host --ipc=host --shm-size=500g \\
      --device=/dev/davinci0 ... --device=/dev/davinci_manager --device=/dev/devmm_svm --device=/dev/hisi_hdc \\
      -v /usr/local/Ascend/driver:/usr/local/Ascend/driver:ro ... -v "$HERE:"/etc/deployctl:ro \\
      --env-file "$HERE/env" ... IMAGE bash -c '...exec "$DEPLOYCTL_DAEMON"'
"""

from __future__ import annotations

from deployctl import __version__
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
CONTROL_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
# Sources the CANN/ATB/MindIE set_env.sh scripts that exist in the image, then execs the daemon
# from its service directory. The daemon path arrives as an env var, never spliced into the script.
LAUNCHER = (
    'for f in /usr/local/Ascend/ascend-toolkit/set_env.sh /usr/local/Ascend/nnal/atb/set_env.sh '
    '/usr/local/Ascend/atb-models/set_env.sh /usr/local/Ascend/mindie/set_env.sh; '
    'do if [ -f "$f" ]; then source "$f"; fi; done; '
    'cd "$(dirname "$DEPLOYCTL_DAEMON")/.." && exec "$DEPLOYCTL_DAEMON"'
)


# MindIE-MS binaries take their config from MINDIE_MS_*_CONFIG_FILE_PATH (set in env on this node);
# the coordinator also takes its predict and manage addresses as arguments (Motor boot.sh).
MS_LAUNCHERS = (
    ("controller", 'cd "$DEPLOYCTL_MS_HOME" && exec ./bin/ms_controller'),
    ("coordinator", 'cd "$DEPLOYCTL_MS_HOME" && exec ./bin/ms_coordinator "$DEPLOYCTL_MS_IP" '
                    '"$DEPLOYCTL_MS_PORT" "$DEPLOYCTL_MS_IP" "$DEPLOYCTL_MS_MANAGE_PORT"'),
)


def container_name(plan: Plan) -> str:
    e = plan.inventory.engine
    return e.container_name or f"{plan.inventory.cluster.name}-mindie"


def start_script(plan: Plan, node: PlanNode) -> str:
    inv = plan.inventory
    e = inv.engine
    inst = plan.instance(node.instance)
    weights = inv.model.weights_path
    mounts = [(p, p) for p in HOST_MOUNTS] + [(weights, weights)]
    return render_template(
        "start.sh.j2", version=__version__, node=node.name, role=node.role, instance=node.instance,
        is_master=node.is_master, ranktable=inst.multi_node,
        container_name=container_name(plan), image=e.image, privileged=e.privileged, shm_size=e.shm_size,
        devices=[f"/dev/davinci{i}" for i in node.device_ids] + list(CONTROL_DEVICES),
        mounts=mounts, work_dir=e.work_dir, daemon=e.daemon, launcher=LAUNCHER)


def ms_script(plan: Plan, node: PlanNode) -> str:
    e = plan.inventory.engine
    return render_template(
        "start-ms.sh.j2", version=__version__, node=node.name, image=e.image,
        container_name=container_name(plan), work_dir=e.work_dir, ms_home=e.ms_home,
        ms_ip=node.container_ip, coordinator_port=e.ports.coordinator, roles=MS_LAUNCHERS)


def render_starts(plan: Plan) -> list[Artifact]:
    out = [Artifact(kind="start", path=f"{n.name}/start.sh", content=start_script(plan, n).encode(),
                    mode=0o755) for n in plan.nodes]
    out += [Artifact(kind="start", path=f"{n.name}/start-ms.sh", content=ms_script(plan, n).encode(),
                     mode=0o755) for n in plan.nodes if n.runs_ms]
    return out
