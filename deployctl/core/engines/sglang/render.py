"""Per-node files of an SGLang deployment: env, server.args (one argument per line, read back with `mapfile`),
start.sh, and on the router node router.args and start-router.sh. No rank table: a server's nodes find each other
through --dist-init-addr, P and D through the router's bootstrap ports and the MemFabric config store."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from deployctl import __version__
from deployctl.core.engine_spec.container import (FRONT_TEMPLATE, args_file, devices, inventory_mounts,
                                                  source_set_env, with_env_keys)
from deployctl.core.engines.sglang.launch import NodeLaunch, launches
from deployctl.core.engines.sglang.support import matrix, preset_env
from deployctl.core.models.artifact import Artifact
from deployctl.core.models.engine_settings.sglang import SglangSettings
from deployctl.core.render._jinja import render_template
from deployctl.core.render.env import env_file, env_value, user_env

if TYPE_CHECKING:
    from deployctl.core.models.plan import Plan, PlanNode

# the Ascend guide's docker run (sgl-project/sglang@0b1520f0 docs/platforms/ascend/ascend_npu.md L129-138): the
# driver, firmware, install info and queue_schedule of the host, its npu-smi under /usr/local/sbin
HOST_MOUNTS = ("/usr/local/sbin", "/usr/local/Ascend/driver", "/usr/local/Ascend/firmware", "/etc/ascend_install.info",
               "/var/queue_schedule")
# every launch script sources the toolkit's and ATB's set_env.sh first (BP/deepseek_r1.mdx@40946a20 L382-383)
SET_ENV = source_set_env(("/usr/local/Ascend/ascend-toolkit/set_env.sh", "/usr/local/Ascend/nnal/atb/set_env.sh"))
LAUNCHER = SET_ENV + 'mapfile -t ARGS < "$DEPLOYCTL_WORK/server.args"; exec python3 -m sglang.launch_server "${ARGS[@]}"'
ROUTER_LAUNCHER = ('mapfile -t ARGS < "$DEPLOYCTL_WORK/router.args"; '
                   'exec python3 -m sglang_router.launch_router "${ARGS[@]}"')


def container_name(plan: Plan) -> str:
    from deployctl.core.engine_spec.container import container_name as named

    return named(plan.inventory, plan.inventory.engine.container_name or "sglang")


def router_name(plan: Plan) -> str:
    return f"{container_name(plan)}-router"


def computed_env(plan: Plan, node: PlanNode) -> dict[str, str]:
    """The NIC of the node's IP for HCCL and Gloo (every multi-node guide: BP/deepseek_r1.mdx L410-411), and in a P/D
    split the MemFabric store every server names alike (on the first prefill server's master) and, on A2, RDMA."""
    e = cast(SglangSettings, plan.inventory.engine)
    env: dict[str, str] = {}
    if node.interface:
        env.update(HCCL_SOCKET_IFNAME=node.interface, GLOO_SOCKET_IFNAME=node.interface)
    if plan.preset == "pd-split" and e.transfer_backend == "ascend":
        store = plan.node(plan.role("prefill")[0].master).container_ip
        env["ASCEND_MF_STORE_URL"] = f"tcp://{store}:{e.ports.mf_store}"
        if plan.hardware == "a2":
            rdma = matrix()["pd"]["a2_protocol"]
            env["ASCEND_MF_TRANSFER_PROTOCOL"] = rdma["ASCEND_MF_TRANSFER_PROTOCOL"]
    return env


def node_env(plan: Plan, node: PlanNode) -> dict[str, str]:
    inv = plan.inventory
    merged = computed_env(plan, node)
    preset = preset_env(inv, node.role)
    merged.update({k: preset[k] for k in sorted(preset) if k not in merged})
    # the guides unset the proxy variables (BP/deepseek_r1.mdx@40946a20 L376-379)
    merged.update({k: "" for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY") if k not in merged})
    merged.update(user_env(inv, node.role))
    return with_env_keys(merged)


def start_script(plan: Plan, node: PlanNode, launch: NodeLaunch) -> str:
    inv = plan.inventory
    e = cast(SglangSettings, inv.engine)
    mounts = [(p, p, "ro") for p in HOST_MOUNTS] + [(inv.model.weights_path, inv.model.weights_path, "ro")]
    draft = inv.model.speculative.draft_weights_path if inv.model.speculative else None
    if draft and not draft.startswith(inv.model.weights_path.rstrip("/") + "/"):
        mounts.append((draft, draft, "ro"))
    mounts += inventory_mounts(e)
    return render_template(
        f"{__package__}/templates/start.sh.j2", version=__version__, node=node.name, role=node.role,
        instance=node.instance, is_master=node.is_master, rank=launch.server.rank, container_name=container_name(plan),
        image=e.image, privileged=e.privileged, uid=e.run_as_uid, shm_size=e.shm_size, devices=devices(node),
        mounts=mounts, work_dir=e.work_dir, launcher=LAUNCHER, ipc_host=True)


def render(plan: Plan) -> list[Artifact]:
    e = cast(SglangSettings, plan.inventory.engine)
    out = []
    for node, launch in ((plan.node(n), lt) for n, lt in launches(plan).items()):
        header = [f"deployctl {__version__}: environment of node {node.name} ({node.role}, instance {node.instance})",
                  "Use as: docker run --env-file env ...   Do not edit by hand: change the inventory and re-render."]
        out.append(Artifact(kind="env", path=f"{node.name}/env", content=env_file(header, node_env(plan, node)).encode(),
                            mode=0o600))
        out.append(Artifact(kind="start", path=f"{node.name}/start.sh",
                            content=start_script(plan, node, launch).encode(), mode=0o755))
        out.append(Artifact(kind="args", path=f"{node.name}/server.args", content=args_file(launch.server.argv),
                            mode=0o640))
        if launch.router is not None:
            out.append(Artifact(kind="args", path=f"{node.name}/router.args", content=args_file(launch.router),
                                mode=0o640))
            head = [f"deployctl {__version__}: environment of the SGLang router on node {node.name}",
                    "Use as: docker run --env-file router.env ...   Do not edit by hand: change the inventory."]
            renv = {k: env_value(v) for k, v in e.router_env.items()}
            out.append(Artifact(kind="env", path=f"{node.name}/router.env", content=env_file(head, renv).encode(),
                                mode=0o600))
            url = f"http://{node.container_ip}:{e.ports.router}"
            text = render_template(FRONT_TEMPLATE, version=__version__, what="the SGLang router", node=node.name,
                                   serves="every prefill and decode server", container_name=router_name(plan),
                                   image=e.image, uid=e.run_as_uid, work_dir=e.work_dir, router_env=True,
                                   extra_env=[], launcher=ROUTER_LAUNCHER, url=url)
            out.append(Artifact(kind="start", path=f"{node.name}/start-router.sh", content=text.encode(), mode=0o755))
    return out
