"""Many simulated Ascend hosts (a thousand on a 2-core machine) behind ONE sshd, for fleet probing.

FakeCluster gives every node an sshd and a network namespace of its own; here every node's address sits in one
network namespace (the hub: a veth to this machine, which routes the cluster's /16 to it) and one sshd there
answers on all of them. A node is a pair of persistent mount + UTS namespaces with no process in them (files
under hostenv.NS_DIR/<prefix>/, named by the node's address) holding the same overlays and files as a
FakeCluster node (base.mount_lines, tools.install_node). sshd's ForceCommand (`bin/node-shell`, a POSIX sh
script) enters the namespaces of the address the client connected to (3rd field of $SSH_CONNECTION) and runs
the command there with root's shell: exit status, stdin, stdout and stderr are the command's.

    with ManyHostCluster(fleet(1024, "a3"), tmp_path) as mc:
        print(mc.ssh("node700", "hostname; npu-smi info -t health -i 0").stdout)

Network faults per address (`unreachable`, also changed at runtime with update_node): "refused"/True moves the
address into a second namespace where nothing listens (TCP reset), "down" leaves it unanswered (ARP fails:
EHOSTUNREACH after ~3 s), as on a FakeCluster. `changed_host_key`: known_hosts lists another key for the node.
Not supported: `listen_ports` / `port_busy` (the nodes share one network stack: a port one node holds would be
busy on every node; for the same reason engine containers binding wildcard ports cannot run on two nodes).
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import shutil
import subprocess
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from . import tools
from .base import ClusterBase, FakeNode, mount_lines
from .hostenv import NS_DIR, SSHD, FakeClusterError, _run, keygen, sshd_config, wait_all
from .spec import NodeSpec

SHELL = "/bin/bash"          # root's login shell on the nodes (sshd would run it for the command)
# how many processes write node files and set up namespaces at once (the machine this runs on has 2 cores)
WORKERS = max(1, min(4, os.cpu_count() or 1))
_NODE_SHELL = """#!/bin/sh
# sshd ForceCommand of a many-host cluster: run the command in the simulated host owning the address the
# client connected to (the 3rd field of SSH_CONNECTION), in its mount and UTS namespaces
set -- $SSH_CONNECTION
unset SHLVL
n={ns_dir}/$3
[ -e "$n.mnt" ] || {{ echo "no simulated host at $3" >&2; exit 255; }}
if [ -z "$SSH_ORIGINAL_COMMAND" ]; then
  exec nsenter --mount="$n.mnt" --uts="$n.uts" -- {shell} -l
fi
exec nsenter --mount="$n.mnt" --uts="$n.uts" -- {shell} -c "$SSH_ORIGINAL_COMMAND"
"""


@dataclass
class ManyNode(FakeNode):
    """A node of a ManyHostCluster: its namespaces are files named by its address in `ns_dir`."""

    ns_dir: Path = field(default_factory=Path)
    cluster_dir: Path = field(default_factory=Path)

    @property
    def mnt(self) -> Path:
        return self.ns_dir / f"{self.ip}.mnt"

    @property
    def uts(self) -> Path:
        return self.ns_dir / f"{self.ip}.uts"

    @property
    def sshd_log(self) -> Path:            # the one sshd's
        return self.cluster_dir / "sshd.log"

    @property
    def host_key_pub(self) -> Path:
        key = "other_host_key" if self.spec.changed_host_key else "ssh_host_ed25519_key"
        return self.cluster_dir / f"{key}.pub"


def in_workers(items: list, fn: Callable, workers: int, what: str, errors_to: Path) -> None:
    """fn(item) for every item, split over `workers` processes (forked: they inherit everything loaded)."""
    chunks = [items[i::workers] for i in range(workers) if items[i::workers]]
    pids = []
    try:
        for i, chunk in enumerate(chunks[1:], 1):
            pid = os.fork()
            if pid == 0:                               # child: its share, then leave without cleanups
                code = 0
                try:
                    for item in chunk:
                        fn(item)
                except BaseException:
                    (errors_to / f"worker{i}.err").write_text(traceback.format_exc())
                    code = 1
                os._exit(code)
            pids.append(pid)
        for item in chunks[0] if chunks else ():
            fn(item)
    finally:
        failed = [pid for pid in pids if os.waitpid(pid, 0)[1] != 0]
    if failed:
        logs = "\n".join(f.read_text() for f in sorted(errors_to.glob("worker*.err")))
        raise FakeClusterError(f"{what} failed in {len(failed)} worker(s):\n{logs}")


class ManyHostCluster(ClusterBase):
    """`ManyHostCluster(specs, workdir)` (specs: `spec.fleet(n)`, all in one /16); used like FakeCluster."""

    PREFIX = "mh"
    FIXED = ClusterBase.FIXED - {"unreachable"}

    def __init__(self, specs: Iterable[NodeSpec], workdir: str | os.PathLike, *, prefix: str | None = None,
                 persistent: bool = False, workers: int = WORKERS):
        self._setup(specs, workdir, prefix, persistent)
        nets = {ipaddress.IPv4Interface(f"{s.ip}/16").network for s in self.specs}
        if len(nets) != 1:
            raise ValueError(f"all node IPs must be in one /16: {sorted(map(str, nets))}")
        self.network = nets.pop()
        self.subnet = str(self.network.network_address).rsplit(".", 2)[0]        # "10.K", the lease
        base = self.network.network_address
        # this machine .0.1 <-> hub .0.2; hub .0.5 <-> the namespace of refused addresses .0.6
        self.local_ip, self.hub_ip, self.void_gw, self.void_ip = (str(base + i) for i in (1, 2, 5, 6))
        taken = [s.name for s in self.specs if ipaddress.IPv4Address(s.ip) < base + 8]
        if taken:
            raise ValueError(f"{taken}: {self.subnet}.0.0 .. .0.7 are the cluster's own addresses")
        busy = [s.name for s in self.specs if s.busy_ports]
        if busy:
            raise ValueError(f"{busy}: listen_ports / port_busy need a network namespace per node (FakeCluster); "
                             "the nodes of a ManyHostCluster share one")
        self.hub = f"{self.prefix}-hub"
        self.void = f"{self.prefix}-void"
        self.veth = f"{self.prefix}-h"
        self.ns_dir = NS_DIR / self.prefix
        self.shared_usr_local = self.ns_dir / "usr_local"      # the lower layer of every node's /usr/local
        self.workers = max(1, workers)
        self.bindir = self.workdir / "bin"
        self.nodes: list[ManyNode] = [
            ManyNode(spec=s, dir=self.workdir / "nodes" / s.name, netns=self.hub, veth=self.veth,
                     ns_dir=self.ns_dir, cluster_dir=self.workdir) for s in self.specs]
        self._void_up = False

    # ---- start -----------------------------------------------------------------------------------
    def _start_steps(self, t0: float) -> None:
        marks = [("files", self._prepare_files), ("network", self._network_up),
                 ("namespaces", self._namespaces_up), ("sshd", self._sshd_up)]
        last = t0
        for name, step in marks:
            step()
            now = time.monotonic()
            self.phase_seconds[name] = now - last
            last = now

    def _prepare_files(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.bindir.mkdir(exist_ok=True)
        for f in self.bindir.glob("worker*.err"):
            f.unlink()
        keys = [keygen(self.client_key, f"fakecluster-{self.prefix}"),
                keygen(self.workdir / "ssh_host_ed25519_key", f"root@{self.prefix}")]
        if any(s.changed_host_key for s in self.specs):        # listed for those nodes, held by no sshd
            keys.append(keygen(self.workdir / "other_host_key", "not the sshd's"))
        self._files_up()
        wait_all(keys, "ssh-keygen")
        pub = self.client_key.with_suffix(".pub").read_text()
        hosts = self._write_cluster_state()
        tools.preload()                        # once, before the workers (they inherit it)

        tools.install_usr_local(self.shared_usr_local, str(self.cluster_state))

        def install(n: ManyNode) -> None:
            n.dir.mkdir(parents=True)
            self._install(n, hosts, pub, shared_usr_local=True)
        in_workers(self.nodes, install, self.workers if len(self.nodes) >= 32 else 1, "writing node files",
                   self.bindir)
        self._write_known_hosts(lambda n: n.host_key_pub)
        self._write_ssh_config()
        shell = self.bindir / "node-shell"
        shell.write_text(_NODE_SHELL.format(ns_dir=shlex.quote(str(self.ns_dir)), shell=SHELL))
        shell.chmod(0o755)
        (self.workdir / "sshd_config").write_text(sshd_config(
            listen="0.0.0.0", host_key=self.workdir / "ssh_host_ed25519_key", pid_file=self.workdir / "sshd.pid",
            max_startups="4096", max_sessions=1000, authorized_keys=str(self.workdir / "authorized_keys"),
            # sshd runs the ForceCommand with root's shell of this machine, whose bash reads this machine's
            # ~/.bashrc when started by sshd with SHLVL < 2 (Debian's SSH_SOURCE_BASHRC); node-shell unsets it
            extra=f"ForceCommand {shell}\nSetEnv SHLVL=1\n"))
        (self.workdir / "authorized_keys").write_text(pub)

    def _files_up(self) -> None:
        """ns_dir: a private mount (a mount namespace file may not be bound where the new namespace would see
        it); a tmpfs that also holds the nodes' files (workdir/nodes links to it): a thousand nodes write 300k
        small files, tens of seconds on a disk. Both go at stop()."""
        d = shlex.quote(str(self.ns_dir))
        self.ns_dir.mkdir(parents=True, exist_ok=True)
        _run(["sh", "-ec", f"mount -t tmpfs -o mode=0755 fakecluster-{self.prefix} {d}; mount --make-private {d}"])
        (self.ns_dir / "nodes").mkdir()
        link = self.workdir / "nodes"
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.exists():
            shutil.rmtree(link)
        link.symlink_to(self.ns_dir / "nodes")

    def _net(self, commands: list[str]) -> None:
        """Run `ip` commands, "-n NS ..." ones in that namespace: one `ip -batch` per namespace, in the order
        the namespaces first appear, this machine's first (they make the namespaces the others use)."""
        batches: dict[str, list[str]] = {"": []}
        for c in commands:
            ns, cmd = c[3:].split(" ", 1) if c.startswith("-n ") else ("", c)
            batches.setdefault(ns, []).append(cmd)
        for ns, cmds in batches.items():
            if cmds:
                _run(["ip", *(["-n", ns] if ns else []), "-force", "-batch", "-"],
                     input="\n".join(cmds) + "\n")

    def _hub_sysctl(self, netns: str, settings: dict[str, str]) -> None:
        script = "; ".join(f"echo {v} > /proc/sys/net/ipv4/{k}" for k, v in settings.items())
        _run(["ip", "netns", "exec", netns, "sh", "-c", script])

    def _network_up(self) -> None:
        """The hub namespace, its veth to this machine (which routes the /16 to it), every reachable node's address
        on it; the hub forwards (to the namespace of refused addresses, and back out for "down" ones)."""
        net, hub = self.network, self.hub
        self._void_up = False
        self._net([f"netns add {hub}", f"link add {self.veth} type veth peer name eth0 netns {hub}",
                   f"addr add {self.local_ip}/30 dev {self.veth}", f"link set {self.veth} up",
                   f"route add {net} via {self.hub_ip} dev {self.veth}",
                   f"-n {hub} addr add {self.hub_ip}/30 dev eth0", f"-n {hub} link set eth0 up",
                   f"-n {hub} link set lo up"])
        self._hub_sysctl(hub, {"ip_forward": 1, "conf/all/send_redirects": 0, "conf/eth0/send_redirects": 0})
        self._net([c for n in self.nodes for c in self._reach(n, n.spec.unreachable, add=True)])

    def _reach(self, n: ManyNode, mode: bool | str, *, add: bool) -> list[str]:
        """`ip -batch` lines that put (add) or take away (not add) the node's address for `mode`
        (False: on the hub, sshd answers; "down": unanswered; True / "refused": in the void namespace)."""
        verb, ip, hub = ("add" if add else "del"), n.ip, self.hub
        if mode is False:
            return [f"-n {hub} addr {verb} {ip}/32 dev eth0"]
        if mode == "down":
            return [f"-n {hub} route {verb} {ip}/32 dev eth0"]
        return self._void_lines() + [f"-n {self.void} addr {verb} {ip}/32 dev eth0",
                                     f"-n {hub} route {verb} {ip}/32 via {self.void_ip}"]

    def _void_lines(self) -> list[str]:
        if self._void_up:
            return []
        self._void_up = True
        return [f"netns add {self.void}", f"-n {self.hub} link add vd0 type veth peer name eth0 netns {self.void}",
                f"-n {self.hub} addr add {self.void_gw}/30 dev vd0", f"-n {self.hub} link set vd0 up",
                f"-n {self.void} addr add {self.void_ip}/30 dev eth0", f"-n {self.void} link set eth0 up",
                f"-n {self.void} link set lo up", f"-n {self.void} route add default via {self.void_gw}"]

    def _namespaces_up(self) -> None:
        """Every node's mount + UTS namespaces, made by `unshare --mount=FILE --uts=FILE` in the hub's network
        namespace (its /sys shows the hub's interfaces), a few shell loops at once. Each new namespace drops its
        copy of ns_dir once its overlays are mounted, so it holds no other node's namespace."""
        d = shlex.quote(str(self.ns_dir))
        scripts = []
        chunks = [self.nodes[i::self.workers] for i in range(self.workers) if self.nodes[i::self.workers]]
        for i, chunk in enumerate(chunks):
            lines = ["set -e"]
            for n in chunk:
                inner = "; ".join(["set -e", *mount_lines(n, self.shared_usr_local), f"umount -l {d}", "umount -l /sys",
                                   "mount -t sysfs sysfs /sys"])
                lines += [f"touch {shlex.quote(str(n.mnt))} {shlex.quote(str(n.uts))}",
                          f"nsenter --net=/run/netns/{self.hub} unshare --mount={shlex.quote(str(n.mnt))} "
                          f"--uts={shlex.quote(str(n.uts))} --propagation private /bin/sh -c {shlex.quote(inner)}"]
            script = self.bindir / f"namespaces{i}.sh"
            script.write_text("\n".join(lines) + "\n")
            scripts.append(script)
        procs = [subprocess.Popen(["/bin/sh", str(s)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE) for s in scripts]
        wait_all(procs, "setting up the nodes' namespaces", timeout=60 + 0.5 * len(self.nodes))

    def _sshd_up(self) -> None:
        log = self.workdir / "sshd.log"
        # -r: a connection's sshd is a fork of the listener, not a new exec: it shares its pages (PSS with a
        # connection per host open: 0.7 MB a connection instead of 1.7)
        _run(["nsenter", f"--net=/run/netns/{self.hub}", SSHD, "-r", "-f", str(self.workdir / "sshd_config"),
              "-E", str(log)])
        # one listener on 0.0.0.0: when one address answers, all do
        self._wait_tcp([n for n in self.nodes if n.spec.reachable][:1],
                       lambda n: log.read_text() if log.exists() else "(no log)")

    # ---- using the cluster -----------------------------------------------------------------------
    def update_node(self, node: str | FakeNode | NodeSpec, **changes) -> NodeSpec:
        """As FakeCluster's, and `unreachable` may change too: the address moves at once (connections open to it
        stop getting answers)."""
        n = self.node(node)
        before = n.spec.unreachable
        spec = super().update_node(n, **changes)
        if "unreachable" in changes and self.started and spec.unreachable != before:
            self._net(self._reach(n, before, add=False) + self._reach(n, spec.unreachable, add=True))
        return spec

    def _write_state(self, n: ManyNode) -> None:
        """Through the node's overlays: files replaced in an upper directory from outside are not seen by an
        overlay that already looked them up (the fakes' answer cache would stay stale)."""
        if not self.started:
            return super()._write_state(n)
        stage = tools.NodeDirs(self.workdir / "stage" / n.name)
        shutil.rmtree(stage.base, ignore_errors=True)
        stage.state_file.parent.mkdir(parents=True)
        shutil.copyfile(n.state_file, stage.state_file)          # the answers of the old state go
        tools.write_state(n.spec, stage, str(self.cluster_state))
        tools.write_weights(n.spec, n.dirs)                       # a bind mount: no overlay in between
        q = shlex.quote
        _run(["nsenter", f"--mount={n.mnt}", "--", "sh", "-ec",
              f"rm -rf /etc/fakecluster/cache; cp -a {q(str(stage.etc))}/. /etc/; "
              f"cp -a {q(str(stage.usr_local))}/. /usr/local/"])
        shutil.rmtree(stage.base)

    def sshd_pids(self) -> list[int]:
        """The sshd listener and every sshd process serving a connection."""
        r = _run(["ip", "netns", "pids", self.hub], check=False)
        pids = []
        for p in r.stdout.split():
            try:
                if os.readlink(f"/proc/{p}/exe") == SSHD:
                    pids.append(int(p))
            except OSError:
                continue
        return pids

    def describe(self) -> dict:
        return {"prefix": self.prefix, "subnet": str(self.network), "hub": self.hub, "workdir": str(self.workdir),
                "ns_dir": str(self.ns_dir), "client_key": str(self.client_key), "known_hosts": str(self.known_hosts),
                "ssh_config": str(self.ssh_config), "start_seconds": self.start_seconds,
                "phase_seconds": self.phase_seconds,
                "nodes": [{"name": n.name, "ip": n.ip, "dir": str(n.dir), "reachable": n.spec.reachable,
                           "device_ips": n.device_ips} for n in self.nodes]}
