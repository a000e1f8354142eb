"""Run a list of `NodeSpec`s as real SSH hosts on this machine (root, Linux namespaces).

Each node is an OpenSSH sshd in its own network namespace (veth on a per-cluster bridge, its own IP)
and its own mount + UTS namespace: overlays on /usr/local and /etc (fake npu-smi, hccn_tool, docker,
version.info, /etc/hccn.conf, /etc/hostname, /etc/hosts) and on /var/lib (deployctl's deploy_dir, the fake
docker's containers under /var/lib/fakedocker), private /root (authorized_keys) and a private
data directory (/data by default, for the weights). Writes a node makes land in its directory under
`workdir/nodes/<name>/` (see `FakeNode.host_path`).

    with FakeCluster(default_cluster(2), tmp_path) as fc:
        print(fc.ssh("node1", "npu-smi info").stdout)

Names (bridge, veths, namespaces) carry a random per-cluster prefix ("fc" + 4 hex), and
`default_cluster()` reserves a free 10.200.X.0/24, so parallel test sessions do not collide.
`stop()` kills every process in the cluster's namespaces and deletes namespaces, veths and bridge; it is
idempotent and also cleans up after a failed `start()`. `gc_stale()` removes clusters whose owning
process died without stopping them.
"""


from __future__ import annotations

import ipaddress
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

from . import tools
# the machine-level helpers moved to hostenv.py; these names stay importable from here
from .base import ClusterBase, FakeNode, mount_lines
from .hostenv import (  # noqa: F401
    KEX, LEDGER_ENV, PYTHON_IN_NODE, RUN_DIR, SSH_CONNECT_TIMEOUT, SSHD, SSHD_KEX, START_TIMEOUT, FakeClusterError,
    _addresses_in_use, _conflicts, _lease_owner, _lease_path, _link_names, _netns_names, _pid_alive, _pids_in_netns,
    _release_lease, _run, _take_lease, check_environment, free_subnet, gc_stale, live_clusters, registered_clusters,
    keygen, sshd_config, stop_all, tcp_port_open, teardown_prefix, wait_all)
from .spec import NodeSpec

__all__ = ["FakeCluster", "FakeClusterError", "FakeNode", "check_environment", "free_subnet", "gc_stale",
           "tcp_port_open", "teardown_prefix"]


class FakeCluster(ClusterBase):
    """`FakeCluster(specs, workdir)`; `start()` / `stop()` or use as a context manager.

    workdir must not lie under /root, /etc, /usr/local, /var/lib or the weights' top directory (those are
    per-node mounts, hidden inside the nodes).
    """

    def __init__(self, specs: Iterable[NodeSpec], workdir: str | os.PathLike, *, prefix: str | None = None,
                 persistent: bool = False):
        self._setup(specs, workdir, prefix, persistent)
        ips = [s.ip for s in self.specs]
        nets = {ipaddress.IPv4Interface(f"{ip}/24").network for ip in ips}
        if len(nets) != 1:
            raise ValueError(f"all node IPs must be in one /24: {ips}")
        self.network = nets.pop()
        self.subnet = str(self.network.network_address).rsplit(".", 1)[0]
        self.gateway = str(self.network.network_address + 1)
        if self.gateway in ips:
            raise ValueError(f"{self.gateway} is the bridge address; give the nodes other IPs")
        self.bridge = f"{self.prefix}-br"
        self.nodes: list[FakeNode] = [
            FakeNode(spec=s, dir=self.workdir / "nodes" / s.name, netns=f"{self.prefix}-{s.name}",
                     veth=f"{self.prefix}-v{i}") for i, s in enumerate(self.specs)]

    def _start_steps(self, t0: float) -> None:
        self._prepare_files()
        t1 = time.monotonic()
        self._bridge_up()
        self._start_nodes()
        t2 = time.monotonic()
        self._wait_sshd()
        t3 = time.monotonic()
        self.phase_seconds = {"files": t1 - t0, "namespaces+sshd": t2 - t1, "wait_tcp": t3 - t2}

    def _prepare_files(self) -> None:
        w = self.workdir
        w.mkdir(parents=True, exist_ok=True)
        bindir = w / "bin"
        bindir.mkdir(exist_ok=True)
        shutil.copyfile(tools.FAKE_BIN / "listener.py", bindir / "listener.py")
        keygens = [keygen(self.client_key, f"fakecluster-{self.prefix}")]
        for n in self.nodes:
            if n.dir.exists():
                shutil.rmtree(n.dir)
            n.dir.mkdir(parents=True)
            keygens.append(self._keygen(n))
        wait_all(keygens, "ssh-keygen")
        pub = self.client_key.with_suffix(".pub").read_text()
        hosts = self._write_cluster_state()
        for n in self.nodes:
            self._install(n, hosts, pub)
            (n.dir / "sshd_config").write_text(sshd_config(listen=n.ip, host_key=n.dir / "ssh_host_ed25519_key",
                                                           pid_file=n.dir / "sshd.pid"))
            self._write_scripts(n)
        # known_hosts gets every node's key as generated ...
        self._write_known_hosts(lambda n: n.host_key_pub)
        # ... and changed_host_key nodes get a new key afterwards
        changed = [n for n in self.nodes if n.spec.changed_host_key]
        wait_all([self._keygen(n) for n in changed], "ssh-keygen")
        self._write_ssh_config()

    @staticmethod
    def _keygen(n: FakeNode) -> subprocess.Popen:
        return keygen(n.dir / "ssh_host_ed25519_key", f"root@{n.name}")

    def _write_scripts(self, n: FakeNode) -> None:
        d, q = n.dir, shlex.quote
        lines = ["set -e", *mount_lines(n)]
        ports = n.spec.busy_ports
        if ports:
            lines.append(f"{PYTHON_IN_NODE} {q(str(self.workdir / 'bin' / 'listener.py'))} "
                         + " ".join(map(str, ports)) + f" </dev/null >{q(str(d / 'listener.log'))} 2>&1 &")
            lines.append(f"echo $! > {q(str(d / 'listener.pid'))}")
        if n.spec.reachable:
            lines.append(f"exec {SSHD} -f {q(str(d / 'sshd_config'))} -E {q(str(d / 'sshd.log'))}")
        (d / "init.sh").write_text("\n".join(lines) + "\n")

    def _bridge_up(self) -> None:
        _run(["ip", "-batch", "-"], input=f"link add {self.bridge} type bridge\n"
                                          f"addr add {self.gateway}/24 dev {self.bridge}\n"
                                          f"link set {self.bridge} up\n")
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)   # sshd's privilege separation directory
        for n in self.nodes:
            top = tools.weights_top(n.spec)
            if top:
                Path("/" + top).mkdir(exist_ok=True)            # mount point on the host (left in place)

    def _start_nodes(self) -> None:
        procs = []
        for n in self.nodes:
            state = "down" if n.spec.unreachable == "down" else "up"
            script = "\n".join([
                "set -e",
                f"ip netns add {n.netns}",
                f"ip link add {n.veth} type veth peer name eth0 netns {n.netns}",
                f"ip link set {n.veth} master {self.bridge} {state}",
                f"ip -n {n.netns} addr add {n.ip}/24 dev eth0",
                f"ip -n {n.netns} link set eth0 up",
                f"ip -n {n.netns} link set lo up",
                f"ip -n {n.netns} route add default via {self.gateway}",
                f"exec ip netns exec {n.netns} unshare --mount --uts --propagation private /bin/sh "
                f"{shlex.quote(str(n.dir / 'init.sh'))}",
            ])
            procs.append(subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        errors = []
        for n, p in zip(self.nodes, procs):
            out, err = p.communicate(timeout=60)
            if p.returncode != 0:
                log = n.sshd_log.read_text() if n.sshd_log.exists() else ""
                errors.append(f"{n}: exit {p.returncode}: {err.decode(errors='replace').strip()} {log.strip()}")
        if errors:
            raise FakeClusterError("starting nodes failed:\n" + "\n".join(errors))

    def _wait_sshd(self) -> None:
        self._wait_tcp([n for n in self.nodes if n.spec.reachable],
                       lambda n: n.sshd_log.read_text() if n.sshd_log.exists() else "(no log)")

    def describe(self) -> dict:
        return {"prefix": self.prefix, "subnet": self.subnet, "bridge": self.bridge, "workdir": str(self.workdir),
                "client_key": str(self.client_key), "known_hosts": str(self.known_hosts),
                "ssh_config": str(self.ssh_config), "start_seconds": self.start_seconds,
                "nodes": [{"name": n.name, "ip": n.ip, "netns": n.netns, "dir": str(n.dir),
                           "reachable": n.spec.reachable, "device_ips": n.device_ips} for n in self.nodes]}
