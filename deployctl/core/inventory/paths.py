"""The cluster directory on the hosts (``<engine.deploy_dir>/<cluster.name>``) must be deployctl's alone.

`up` writes there and `down --purge` deletes there, on every host at once, as root. A directory that is, holds
or sits inside something the inventory names for another purpose (the weights, a mounted directory, the device
logs, SSH keys, the kubeconfig) or a directory the system or the container runtime owns would put that data in
reach of a purge (`deploy_dir: /data` with `cluster.name: models` is the weights of every host; `/var/lib` with
`docker` is every image and container). Such a directory is refused at validation, naming the key.

Two lists, two rules:

* ``SYSTEM_PATHS``: the cluster directory may not be one of these nor a parent of one (it may sit below most
  of them: ``/var/lib/deployctl/<cluster>`` is the default).
* ``OWNED_TREES``: trees another program manages (kernel file systems, the image stores, the Ascend driver and
  toolkits, kubelet): the cluster directory may not be inside them either.
* Every path the inventory names (``named_paths``): neither equal, parent nor child.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import posixpath

from deployctl.core.errors import Problem

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.input.raw import RawInventory

# the file system's skeleton, the directories operators put data under by convention (/data, /mnt, /models,
# /srv: weights roots), the container runtimes' state and the Ascend installation
SYSTEM_PATHS = (
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/media", "/mnt", "/opt", "/proc",
    "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/bin", "/usr/lib", "/usr/lib64", "/usr/local",
    "/usr/local/bin", "/usr/local/lib", "/usr/local/sbin", "/usr/sbin", "/usr/share", "/var", "/var/cache",
    "/var/lib", "/var/log", "/var/log/npu", "/var/run", "/var/spool", "/var/tmp",
    "/data", "/models", "/weights", "/nfs",
    "/var/lib/docker", "/var/lib/containerd", "/var/lib/kubelet", "/var/lib/etcd", "/var/lib/containers",
    "/etc/docker", "/etc/containerd", "/etc/kubernetes", "/etc/hccn.conf", "/etc/ascend_install.info",
    "/usr/local/Ascend", "/usr/local/dcmi",
)
OWNED_TREES = ("/proc", "/sys", "/dev", "/boot", "/run", "/var/run", "/var/lib/docker", "/var/lib/containerd",
               "/var/lib/containers", "/var/lib/kubelet", "/var/lib/etcd", "/usr/local/Ascend",
               "/usr/local/dcmi", "/etc/docker", "/etc/containerd", "/etc/kubernetes")
HINT = ("keep engine.deploy_dir for deployctl's own files (default /var/lib/deployctl): `down --purge` removes "
        "what deployctl wrote there, and `up` writes there as root on every host")


def _norm(path: str) -> str:
    return posixpath.normpath("/" + path.strip("/")) if path.startswith("/") else path


def _within(child: str, parent: str) -> bool:
    """child is parent or below it (normalised absolute paths)."""
    return child == parent or child.startswith(parent.rstrip("/") + "/")


def named_paths(inv: Inventory, inventory_dir: str | None = None, home: str = "") -> list[tuple[tuple, str, str]]:
    """(key path, absolute path, what it is) of every path the inventory names for something other than
    deployctl's files. Host paths as given; controller paths (SSH keys, known_hosts, kubeconfig) when absolute
    or under ~ (``home``: the controller user's home directory; the controller may be one of the hosts)."""
    from deployctl.core.engine_spec.container import DEVICE_LOGS

    e = inv.engine
    out: list[tuple[tuple, str, str]] = [(("model", "weights_path"), inv.model.weights_path, "the model weights")]
    out += [(("engine", "mounts", i, "host"), m.host, "a directory mounted into the engine")
            for i, m in enumerate(e.mounts)]
    if e.device_logs:
        out += [(("engine", "device_logs"), host, "the NPU device logs") for host, _ in DEVICE_LOGS]
    controller: list[tuple[tuple, str | None, str]] = [
        (("ssh", "key"), inv.ssh.key, "the SSH key"),
        (("ssh", "known_hosts"), inv.ssh.known_hosts, "the SSH known_hosts file"),
        (("kubernetes", "kubeconfig"), inv.kubernetes.kubeconfig, "the kubeconfig")]
    for i, n in enumerate(inv.nodes):
        if n.ssh is not None:
            controller += [(("nodes", i, "ssh", "key"), n.ssh.key, "an SSH key"),
                           (("nodes", i, "ssh", "known_hosts"), n.ssh.known_hosts, "an SSH known_hosts file")]
    for key, path, what in controller:
        if not path:
            continue
        full = home.rstrip("/") + path[1:] if home and (path == "~" or path.startswith("~/")) else path
        if not full.startswith("/") and inventory_dir and key[0] == "kubernetes":
            full = posixpath.join(inventory_dir, full)
        if full.startswith("/"):
            out.append((key, full, what))
    return [(k, _norm(p), w) for k, p, w in out if p.startswith("/")]


def cluster_dir_problems(inv: Inventory, raw: RawInventory, home: str = "") -> list[Problem]:
    """The cluster directory against the system paths and the inventory's own paths (see the module doc)."""
    e = inv.engine
    cdir = _norm(f"{e.deploy_dir.rstrip('/')}/{inv.cluster.name}")
    # point at deploy_dir when the file sets it, else at the cluster name that makes the directory
    key = ("engine", "deploy_dir") if ("engine", "deploy_dir") in raw.lines else ("cluster", "name")
    shown = f"{e.deploy_dir.rstrip('/') or ''}/{inv.cluster.name}"
    out = []
    for system in SYSTEM_PATHS:
        if _within(system, cdir):
            what = "is a system directory" if system == cdir else f"contains the system directory {system}"
            out.append(raw.problem(key, f"the cluster directory {shown} {what}", HINT))
            break
    else:
        for tree in OWNED_TREES:
            if _within(cdir, tree):
                out.append(raw.problem(key, f"the cluster directory {shown} is inside {tree}, which another "
                                       "program manages", HINT))
                break
    for where, path, what in named_paths(inv, str(raw.base_dir), home):
        if _within(path, cdir):
            rel = "is" if path == cdir else "contains"
        elif _within(cdir, path):
            rel = "is inside"
        else:
            continue
        out.append(raw.problem(key, f"the cluster directory {shown} {rel} {path}, {what} "
                               f"({_dotted(where)})", HINT))
    return out


def _dotted(key: tuple) -> str:
    out = ""
    for part in key:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
