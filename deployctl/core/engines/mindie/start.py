"""Per-node start.sh: the `docker run` of the seed guide, every user value shell-quoted.

Example (abridged)::

    docker run -d --name ds-prod-mindie --net=host --ipc=host --shm-size=500g \\
      --device=/dev/davinci0 ... --device=/dev/davinci_manager --device=/dev/devmm_svm --device=/dev/hisi_hdc \\
      -v /usr/local/Ascend/driver:/usr/local/Ascend/driver:ro ... -v "$HERE:"/etc/deployctl:ro \\
      --env-file "$HERE/env" ... IMAGE bash -c '...exec "$DEPLOYCTL_DAEMON"'
"""

from __future__ import annotations

from typing import cast

from deployctl import __version__
from deployctl.core.engine_spec.container import devices, inventory_mounts
from deployctl.core.render.start import start_script as engine_start
from deployctl.core.engines.mindie.install import install, ms_home, server
from deployctl.core.engines.mindie.config import config_files
from deployctl.core.engines.mindie.processes import container_name, dp_servers, is_distributed
from deployctl.core.models.artifact import Artifact
from deployctl.core.models.engine_settings.mindie import MindieSettings
from deployctl.core.models.plan import Plan, PlanNode
from deployctl.core.render._jinja import render_template

HOST_MOUNTS = (
    "/usr/local/Ascend/driver",
    "/usr/local/Ascend/firmware",
    "/usr/local/dcmi",
    "/usr/local/sbin/npu-smi",
    "/etc/hccn.conf",
)


def engine_files(plan: Plan, node: PlanNode) -> list[str]:
    """The files MindIE's ConstrainOwner checks (file_utils.cpp L342-386): owner = the engine's uid, mode <= 640."""
    inst = plan.instance(node.instance)
    names = list(config_files(plan, node))
    if inst.multi_node or is_distributed(plan, node):
        names.append("ranktable.json")
    return names


def start_script(plan: Plan, node: PlanNode) -> str:
    fixed = plan.memo(("mindie-start",), lambda: _plan_values(plan))     # the same for every node of the plan
    dist = is_distributed(plan, node)
    owned, servers = engine_files(plan, node), dp_servers(plan, node) if dist else 0
    head = dict(version=__version__, node=node.name, role=node.role, instance=node.instance,
                is_master=node.is_master, owned=owned, dp_servers=servers, container_name=fixed["container_name"],
                image=fixed["image"])
    body = dict(fixed["body"], owned=owned, devices=devices(node),
                launcher=fixed["dp_launcher"] if dist else fixed["launcher"], dp_servers=servers,
                dp_cpu_slices=dp_cpu_slices(plan, node))
    return engine_start(plan, f"{__package__}/templates/start.sh.j2", head, body)


def _plan_values(plan: Plan) -> dict:
    inv = plan.inventory
    e = cast(MindieSettings, inv.engine)
    weights = inv.model.weights_path
    mounts = [(p, p, "ro") for p in HOST_MOUNTS] + [(weights, weights, "ro")]
    mounts += inventory_mounts(e)
    return {"container_name": container_name(plan), "image": e.image, "launcher": install(e).launcher,
            "dp_launcher": install(e).dp_launcher,
            "body": dict(uid=e.run_as_uid, privileged=e.privileged, shm_size=e.shm_size, mounts=mounts,
                         work_dir=e.work_dir, daemon=server(e), ipc_host=True)}


def dp_cpu_slices(plan: Plan, node: PlanNode) -> int:
    """A3 distributed decode: the CPU slices the DP servers are bound to (one per NPU of the server, MindIE-Motor
    mindie_cpu_binding.py get_cores_a3 L107-118); 0 = no binding (A2 binds by NUMA node: not rendered)."""
    return len(node.device_ids) if is_distributed(plan, node) and plan.hardware == "a3" else 0


def ms_script(plan: Plan, node: PlanNode) -> str:
    e = cast(MindieSettings, plan.inventory.engine)
    return render_template(
        f"{__package__}/templates/start-ms.sh.j2", version=__version__, node=node.name, image=e.image,
        container_name=container_name(plan), work_dir=e.work_dir, ms_home=ms_home(e),
        ms_ip=node.container_ip, coordinator_port=e.ports.coordinator,
        roles=list(install(e).ms_launchers), uid=e.run_as_uid)


def render_starts(plan: Plan) -> list[Artifact]:
    out = [Artifact(kind="start", path=f"{n.name}/start.sh", content=start_script(plan, n).encode(),
                    mode=0o755) for n in plan.nodes]
    out += [Artifact(kind="start", path=f"{n.name}/start-ms.sh", content=ms_script(plan, n).encode(),
                     mode=0o755) for n in plan.nodes if n.runs_router]
    return out
