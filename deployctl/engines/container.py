"""What every Ascend engine container gets, whichever engine runs in it: the NPU devices of its node and the
mounts the inventory asks for (engine.mounts, the host's device logs)."""

from __future__ import annotations

# the NPU control devices next to /dev/davinciN (MindIE's and vLLM-Ascend's `docker run` guides alike)
CONTROL_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
# device logs on the host, so they survive `docker rm` (engine.device_logs): slog as the field guide mounts it,
# plog where CANN writes it in a root container ($HOME/ascend/log, ASCEND_PROCESS_LOG_PATH unset)
DEVICE_LOGS = (("/var/log/npu/slog", "/var/log/npu/slog"), ("/var/log/npu/plog", "/root/ascend/log"))


def container_name(inv, role: str) -> str:
    """The name of one of a deployment's containers: ``deployctl_<cluster>_<role>`` (role: the engine's kind or
    ``engine.container_name``, with its own suffixes, or ``router``). A cluster name has no '_' ([a-z0-9-]),
    so everything up to the second '_' names exactly one deployment: two deployments on one host never share a
    container name, whatever their roles, and no other program's container looks like deployctl's."""
    return f"deployctl_{inv.cluster.name}_{role}"


def devices(node) -> list[str]:
    """--device arguments of a node's engine container: its NPUs, then the control devices."""
    return [f"/dev/davinci{i}" for i in node.device_ids] + list(CONTROL_DEVICES)


def inventory_mounts(engine) -> list[tuple[str, str, str]]:
    """(host, container, ro|rw) of engine.mounts, then the device logs unless engine.device_logs is off."""
    out = [(m.host, m.container, "rw" if m.rw else "ro") for m in engine.mounts]
    return out + ([(h, c, "rw") for h, c in DEVICE_LOGS] if engine.device_logs else [])
