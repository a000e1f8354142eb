"""Per-node files of a vLLM-Ascend deployment: env, one argument file per `vllm serve` process (one argument per
line, read back with `mapfile`), its device slice, start.sh, and on the prefill master the proxy's files.
No rank table and no config.json: vLLM's processes find each other through the DP address / master address.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from deployctl import __version__
from deployctl.core.engine_spec.container import (FRONT_TEMPLATE, args_file, devices, inventory_mounts,
                                                  source_set_env, with_env_keys)
from deployctl.core.render.start import start_script as engine_start
from deployctl.core.engines.vllm_ascend.launch import NodeLaunch, launches
from deployctl.core.engines.vllm_ascend.support import preset_env
from deployctl.core.models.artifact import Artifact
from deployctl.core.models.engine_settings.vllm_ascend import VllmAscendSettings
from deployctl.core.render._jinja import render_template
from deployctl.core.render.env import env_file, user_env

if TYPE_CHECKING:
    from deployctl.core.models.plan import Plan, PlanNode

# the docker run of the guides (VA docs/source/installation.md@HEAD, DeepSeek-V3.1.md §4.1): the whole driver
# tree rather than driver/lib64 + version.info + tools/hccn_tool, because lib64 alone misses driver/topo (EI0014,
# vllm-project/recipes#907)
HOST_MOUNTS = ("/usr/local/dcmi", "/usr/local/bin/npu-smi", "/usr/local/Ascend/driver", "/etc/ascend_install.info")
# Mooncake's libraries on PD nodes: DeepSeek-V3.1.md §5.3 (mindcluster-deploy role.yaml.j2 does the same)
MOONCAKE_LIB = "/usr/local/Ascend/ascend-toolkit/latest/python/site-packages/mooncake"
# the proxy of the guides, where the image keeps the repository (Dockerfile.a3@v0.13.0 L24 COPY . /vllm-workspace/vllm-ascend/)
PROXY = "/vllm-workspace/vllm-ascend/examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py"
# the image's set_env.sh scripts first, deployctl's env over them (engines/container.py)
SET_ENV = source_set_env(("/usr/local/Ascend/ascend-toolkit/set_env.sh", "/usr/local/Ascend/nnal/atb/set_env.sh"))
# every serve-<i>.args is one `vllm serve` (its devices in serve-<i>.devices, as launch_online_dp.py gives each
# DP rank); the container lives while all of them do and stops with the first that exits
LAUNCHER = SET_ENV + (
    'if [ -n "${DEPLOYCTL_MOONCAKE:-}" ]; then export LD_LIBRARY_PATH="' + MOONCAKE_LIB +
    '${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi; pids=(); '
    'for a in "$DEPLOYCTL_WORK"/serve-*.args; do mapfile -t ARGS < "$a"; d="${a%.args}.devices"; '
    'if [ -f "$d" ]; then ASCEND_RT_VISIBLE_DEVICES="$(cat "$d")" vllm serve "${ARGS[@]}" & '
    'else vllm serve "${ARGS[@]}" & fi; pids+=($!); done; '
    'wait -n; rc=$?; kill "${pids[@]}" 2>/dev/null; wait; exit "$rc"')
PROXY_LAUNCHER = 'mapfile -t ARGS < "$DEPLOYCTL_WORK/proxy.args"; exec python3 "$DEPLOYCTL_PROXY" "${ARGS[@]}"'


def container_name(plan: Plan) -> str:
    from deployctl.core.engine_spec.container import container_name as named

    return named(plan.inventory, plan.inventory.engine.container_name or "vllm")


def proxy_name(plan: Plan) -> str:
    return f"{container_name(plan)}-proxy"


def hierarchical_mc2(plan: Plan) -> bool:
    """The model is one whose A2 multi-node guides switch on hierarchical MC2 (the DeepSeek family)."""
    return plan.inventory.model.name.startswith("deepseek-")


def computed_env(plan: Plan, node: PlanNode) -> dict[str, str]:
    """HCCL_IF_IP and the socket interfaces of this node (multi_node_config.py DistEnvBuilder; every tutorial)."""
    env = {"HCCL_IF_IP": node.container_ip}
    if node.interface:
        env.update(GLOO_SOCKET_IFNAME=node.interface, TP_SOCKET_IFNAME=node.interface,
                   HCCL_SOCKET_IFNAME=node.interface)
    inst = plan.instance(node.instance)
    if plan.hardware == "a2" and (inst.multi_node or plan.preset == "pd-split") and hierarchical_mc2(plan):
        # hierarchical MC2 dispatch/combine (utils.py is_hierarchical_communication_enabled: v0.11.0 L814-819,
        # v0.13.0 L979-984, v0.18.0 L993-999; token_dispatcher.py passes expert_scales), as the A2 multi-node
        # DeepSeek guides set it: DeepSeek-R1.md L154/L201 and DeepSeek-V3.1.md L174/L227 (v0.13.0),
        # models/DeepSeek-V3.2.md L308/L362 (v0.18.0). The Qwen3-235B-A22B guide and vllm-ascend's only A2 CI config
        # of a catalog model (Qwen3-235B-A22B-A2.yaml) set neither: not rendered for other models.
        env.update(HCCL_INTRA_PCIE_ENABLE="1", HCCL_INTRA_ROCE_ENABLE="0")
    from deployctl.core.engines.vllm_ascend.netloader import node_env as netloader_env

    env.update(netloader_env(plan, node))     # VLLM_HOST_IP where NetLoader is on
    return env


def node_env(plan: Plan, node: PlanNode) -> dict[str, str]:
    inv = plan.inventory
    user = user_env(inv, node.role)
    preset = preset_env(plan.hardware, node.role, inv.model.name)
    merged = computed_env(plan, node)
    merged.update({k: preset[k] for k in sorted(preset) if k not in merged})
    # the guides unset the proxy variables docker may bring in (multi_node_pd_disaggregation_mooncake.md@v0.11.0)
    merged.update({k: "" for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY") if k not in merged})
    merged.update(user)
    return with_env_keys(merged)


def start_script(plan: Plan, node: PlanNode, launch: NodeLaunch) -> str:
    inv = plan.inventory
    e = cast(VllmAscendSettings, inv.engine)
    mounts = [(p, p, "ro") for p in HOST_MOUNTS] + [(inv.model.weights_path, inv.model.weights_path, "ro")]
    if plan.preset == "pd-split":
        mounts.append(("/etc/hccn.conf", "/etc/hccn.conf", "ro"))    # the PD guide mounts it
    mounts += inventory_mounts(e)
    serves = launch.serves
    shape = (f"{len(serves)} vllm serve processes (external DP)" if len(serves) > 1 else
             "vllm serve (API)" if serves[0].port else "vllm serve --headless")
    head = dict(version=__version__, node=node.name, role=node.role, instance=node.instance,
                is_master=node.is_master, shape=shape, args=[f"serve-{i}.args" for i in range(len(serves))],
                container_name=container_name(plan), image=e.image)
    body = dict(privileged=e.privileged, uid=e.run_as_uid, shm_size=e.shm_size, devices=devices(node),
                mounts=mounts, work_dir=e.work_dir, mooncake=launch.mooncake, launcher=LAUNCHER, ipc_host=False)
    return engine_start(plan, f"{__package__}/templates/start.sh.j2", head, body)


def render(plan: Plan) -> list[Artifact]:
    e = cast(VllmAscendSettings, plan.inventory.engine)
    out = []
    for node, launch in ((plan.node(n), lt) for n, lt in launches(plan).items()):
        header = [f"deployctl {__version__}: environment of node {node.name} ({node.role}, instance {node.instance})",
                  "Use as: docker run --env-file env ...   Do not edit by hand: change the inventory and re-render."]
        out.append(Artifact(kind="env", path=f"{node.name}/env", content=env_file(header, node_env(plan, node)).encode(),
                            mode=0o600))
        out.append(Artifact(kind="start", path=f"{node.name}/start.sh",
                            content=start_script(plan, node, launch).encode(), mode=0o755))
        for i, serve in enumerate(launch.serves):
            out.append(Artifact(kind="args", path=f"{node.name}/serve-{i}.args", content=args_file(serve.argv),
                                mode=0o640))
            if serve.devices is not None:
                out.append(Artifact(kind="args", path=f"{node.name}/serve-{i}.devices",
                                    content=(",".join(map(str, serve.devices)) + "\n").encode(), mode=0o640))
        if launch.proxy is not None:
            out.append(Artifact(kind="args", path=f"{node.name}/proxy.args", content=args_file(launch.proxy),
                                mode=0o640))
            url = f"http://{node.container_ip}:{e.ports.proxy}"
            text = render_template(FRONT_TEMPLATE, version=__version__, what="the prefill/decode proxy", node=node.name,
                                   serves="every P and D endpoint", container_name=proxy_name(plan), image=e.image,
                                   uid=e.run_as_uid, work_dir=e.work_dir, router_env=False,
                                   extra_env=[("DEPLOYCTL_PROXY", PROXY)], launcher=PROXY_LAUNCHER, url=url)
            out.append(Artifact(kind="start", path=f"{node.name}/start-proxy.sh", content=text.encode(), mode=0o755))
    return out
