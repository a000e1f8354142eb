"""What every Ascend engine container gets, whichever engine runs in it: the NPU devices of its node and the
mounts the inventory asks for (engine.mounts, the host's device logs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deployctl.core.models.engine import EngineBase
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import PlanNode

# the NPU control devices next to /dev/davinciN (MindIE's and vLLM-Ascend's `docker run` guides alike)
CONTROL_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
# device logs on the host, so they survive `docker rm` (engine.device_logs): slog as a published two-server MindIE
# guide mounts it (-v /var/log/npu/slog/:/var/log/npu/slog, https://ai6s.net/6953e139836da3214488e6da.html),
# plog where CANN writes it in a root container ($HOME/ascend/log, ASCEND_PROCESS_LOG_PATH unset)
DEVICE_LOGS = (("/var/log/npu/slog", "/var/log/npu/slog"), ("/var/log/npu/plog", "/root/ascend/log"))


def container_name(inv: Inventory, role: str) -> str:
    """The name of one of a deployment's containers: ``deployctl_<cluster>_<role>`` (role: the engine's kind or
    ``engine.container_name``, with its own suffixes, or ``router``). A cluster name has no '_' ([a-z0-9-]),
    so everything up to the second '_' names exactly one deployment: two deployments on one host never share a
    container name, whatever their roles, and no other program's container looks like deployctl's."""
    return f"deployctl_{inv.cluster.name}_{role}"


def devices(node: PlanNode) -> list[str]:
    """--device arguments of a node's engine container: its NPUs, then the control devices."""
    return [f"/dev/davinci{i}" for i in node.device_ids] + list(CONTROL_DEVICES)


def inventory_mounts(engine: EngineBase) -> list[tuple[str, str, str]]:
    """(host, container, ro|rw) of engine.mounts, then the device logs unless engine.device_logs is off."""
    out = [(m.host, m.container, "rw" if m.rw else "ro") for m in engine.mounts]
    return out + ([(h, c, "rw") for h, c in DEVICE_LOGS] if engine.device_logs else [])


# The variables deployctl sets (every key of the node's env) are listed in this one, so the launcher can put them
# back after the image's set_env.sh scripts ran: those export defaults of their own, e.g. nnal/atb/set_env.sh
# `ATB_WORKSPACE_MEM_ALLOC_ALG_TYPE=1` (hicann/ascend-transformer-boost scripts/set_env.sh L54-71), which would
# replace a tuned value that docker's --env-file (or the pod's envFrom) set before. MindIE-Motor's boot.sh
# does the same in its own order: set_env first (L71), its exports after (L130, L152).
ENV_KEYS = "DEPLOYCTL_ENV_KEYS"


def with_env_keys(env: dict[str, str]) -> dict[str, str]:
    """The node's env plus DEPLOYCTL_ENV_KEYS naming every variable in it (validated names: no quoting needed)."""
    return {**env, ENV_KEYS: " ".join(k for k in env if k != ENV_KEYS)}


def source_set_env(scripts: tuple[str, ...]) -> str:
    """bash: source the image's set_env.sh scripts that exist, then restore every variable DEPLOYCTL_ENV_KEYS
    names to the value it had before (values are never evaluated: `export "NAME=value"` assigns text)."""
    return ('_keep=(); for _k in ${' + ENV_KEYS + ':-}; do if [ -n "${!_k+x}" ]; then _keep+=("$_k=${!_k}"); fi; '
            f'done; for f in {" ".join(scripts)}; do if [ -f "$f" ]; then source "$f"; fi; done; '
            'for _kv in "${_keep[@]}"; do export "$_kv"; done; ')


# the start scripts every engine shares: templates/engine-start.sh.j2 (an engine's own start.sh.j2 extends it with
# its header lines, steps before `docker run` and DEPLOYCTL_* variables) and templates/front-start.sh.j2 (the
# container of a P/D front: vLLM-Ascend's proxy, SGLang's router)
FRONT_TEMPLATE = f"{__package__}/templates/front-start.sh.j2"


def args_file(argv: tuple[str, ...]) -> bytes:
    """An argument file: one argument per line, read back in the container with ``mapfile -t ARGS``."""
    return ("\n".join(argv) + "\n").encode()
