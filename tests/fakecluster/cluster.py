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

import atexit
import errno
import ipaddress
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import tools
from .spec import SUBNET_PREFIX, NodeSpec, a3_sdid

RUN_DIR = Path("/run/fakecluster")
SSHD = "/usr/sbin/sshd"
PYTHON_IN_NODE = "/usr/bin/python3"
KEX = "curve25519-sha256"
# sshd also offers the libssh.org name: paramiko (deployctl's SSH client) only knows that one
SSHD_KEX = "curve25519-sha256,curve25519-sha256@libssh.org"
START_TIMEOUT = 20.0
# the system ssh client's connect + banner exchange with a node's sshd: instant when the machine is idle, seconds
# when it is loaded (2 cores shared by parallel runs); a node that does not answer is not waited on this way
SSH_CONNECT_TIMEOUT = 20
# a test session's list of the name prefixes its clusters used (tests/support/leaks.py sets it in the
# environment, so that the session's check at the end looks for exactly its own namespaces and links)
LEDGER_ENV = "DEPLOYCTL_TEST_NETNS_LEDGER"

_live: dict[str, FakeCluster] = {}       # clusters of this process started and not stopped yet (not persistent)


def live_clusters() -> list[FakeCluster]:
    return list(_live.values())


def stop_all() -> list[str]:
    """Stop every cluster of this process still running (the end of a session that was interrupted, or the
    interpreter's exit); returns their prefixes."""
    stopped = []
    for cluster in list(_live.values()):
        try:
            cluster.stop()
        except Exception:                      # the next one still gets its chance
            pass
        stopped.append(cluster.prefix)
    return stopped


atexit.register(stop_all)


def _ledger(prefix: str) -> None:
    path = os.environ.get(LEDGER_ENV)
    if path:
        with open(path, "a") as f:             # one short line per write: appends do not interleave
            f.write(prefix + "\n")


class FakeClusterError(RuntimeError):
    pass


# ---- environment ---------------------------------------------------------------------------------

def check_environment() -> list[str]:
    """Problems that prevent running fake clusters here, each with the fix (empty list: all good)."""
    problems = []
    if os.geteuid() != 0:
        problems.append("not running as root: network/mount namespaces need root (run the tests as root, "
                        "e.g. in the CI container)")
    if not Path(SSHD).exists():
        problems.append(f"{SSHD} not found: apt-get install -y --no-install-recommends openssh-server")
    for tool, pkg in (("ssh", "openssh-client"), ("ssh-keygen", "openssh-client"), ("ip", "iproute2"),
                      ("unshare", "util-linux"), ("mount", "mount")):
        if shutil.which(tool) is None:
            problems.append(f"`{tool}` not found: apt-get install -y {pkg}")
    if not Path(PYTHON_IN_NODE).exists():
        problems.append(f"{PYTHON_IN_NODE} not found (the fake npu-smi/hccn_tool run with it): "
                        "apt-get install -y python3")
    if shutil.which("ip") and os.geteuid() == 0:
        r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
        if r.returncode != 0:
            problems.append(f"`ip netns` does not work ({r.stderr.strip()}): apt-get install -y iproute2, and "
                            "the kernel needs network namespaces")
    try:
        if "overlay" not in Path("/proc/filesystems").read_text():
            problems.append("the kernel has no overlayfs (modprobe overlay)")
    except OSError:
        pass
    return problems


# ---- small helpers -------------------------------------------------------------------------------

def _run(cmd: Sequence[str], *, check: bool = True, input: str | None = None,
         timeout: float = 30) -> subprocess.CompletedProcess:
    r = subprocess.run(list(cmd), capture_output=True, text=True, input=input, timeout=timeout)
    if check and r.returncode != 0:
        raise FakeClusterError(f"{shlex.join(cmd)} failed ({r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
    return r


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _addresses_in_use() -> list[ipaddress.IPv4Interface]:
    r = _run(["ip", "-o", "-4", "addr", "show"], check=False)
    out = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if "inet" in parts:
            out.append(ipaddress.IPv4Interface(parts[parts.index("inet") + 1]))
    return out


def _netns_names() -> list[str]:
    r = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def _link_names() -> list[str]:
    r = _run(["ip", "-o", "link", "show"], check=False)
    names = []
    for line in r.stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) > 1:
            names.append(parts[1].strip().split("@")[0])
    return names


# ---- subnet reservations (parallel sessions) ----------------------------------------------------

def _conflicts(net: ipaddress.IPv4Network, addr: ipaddress.IPv4Interface) -> bool:
    """An address on this machine makes `net` unusable (same /24, or a narrower-than-/16 overlap)."""
    return addr.ip in net or (net.overlaps(addr.network) and addr.network.prefixlen >= 16)


_reserved: set[str] = set()   # subnets reserved by this process (default_cluster, running clusters)


def _lease_path(subnet: str) -> Path:
    return RUN_DIR / "subnets" / f"{subnet}.lease"


def _lease_owner(subnet: str) -> int | None:
    try:
        return int(_lease_path(subnet).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _take_lease(subnet: str) -> bool:
    path = _lease_path(subnet)
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            owner = _lease_owner(subnet)
            if owner == os.getpid():
                return True
            if owner is not None and _pid_alive(owner):
                return False
            path.unlink(missing_ok=True)     # stale: its process is gone
            continue
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()}\n")
        return True
    return False


def _release_lease(subnet: str) -> None:
    _reserved.discard(subnet)
    if _lease_owner(subnet) == os.getpid():
        _lease_path(subnet).unlink(missing_ok=True)


def free_subnet() -> str:
    """Reserve and return a free '10.200.X' (no interface on this machine has an address in it, no other
    live process reserved it). The reservation ends when this process exits or its cluster stops."""
    in_use = _addresses_in_use()
    for x in range(256):
        subnet = f"{SUBNET_PREFIX}.{x}"
        net = ipaddress.IPv4Network(f"{subnet}.0/24")
        if subnet in _reserved or any(_conflicts(net, a) for a in in_use):
            continue
        if _take_lease(subnet):
            _reserved.add(subnet)
            return subnet
    raise FakeClusterError(f"no free {SUBNET_PREFIX}.X.0/24 subnet left (leases in {RUN_DIR / 'subnets'})")


# ---- nodes ---------------------------------------------------------------------------------------

@dataclass
class FakeNode:
    """A running (or unreachable) fake host."""

    spec: NodeSpec
    dir: Path           # workdir/nodes/<name>
    netns: str
    veth: str

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def ip(self) -> str:
        return self.spec.ip

    @property
    def dirs(self) -> tools.NodeDirs:
        return tools.NodeDirs(self.dir)

    @property
    def device_ips(self) -> dict[int, str]:
        """phy_id -> device IP the host reports (hccn.conf / hccn_tool -ip -g)."""
        return self.spec.configured_device_ips

    @property
    def state_file(self) -> Path:
        return self.dirs.state_file

    @property
    def sshd_log(self) -> Path:
        return self.dir / "sshd.log"

    @property
    def host_key_pub(self) -> Path:
        return self.dir / "ssh_host_ed25519_key.pub"

    def host_path(self, path: str) -> Path:
        """Where a write to `path` (absolute, inside the node) lands on this machine."""
        return self.dirs.host_path(path)

    def __str__(self) -> str:
        return f"{self.name}({self.ip})"


class FakeCluster:
    """`FakeCluster(specs, workdir)`; `start()` / `stop()` or use as a context manager.

    workdir must not lie under /root, /etc, /usr/local, /var/lib or the weights' top directory (those are
    per-node mounts, hidden inside the nodes).
    """

    def __init__(self, specs: Iterable[NodeSpec], workdir: str | os.PathLike, *, prefix: str | None = None,
                 persistent: bool = False):
        self.specs = list(specs)
        if not self.specs:
            raise ValueError("a fake cluster needs at least one node")
        names = [s.name for s in self.specs]
        ips = [s.ip for s in self.specs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate node names: {names}")
        if len(set(ips)) != len(ips):
            raise ValueError(f"duplicate node IPs: {ips}")
        nets = {ipaddress.IPv4Interface(f"{ip}/24").network for ip in ips}
        if len(nets) != 1:
            raise ValueError(f"all node IPs must be in one /24: {ips}")
        self.network = nets.pop()
        self.subnet = str(self.network.network_address).rsplit(".", 1)[0]
        self.gateway = str(self.network.network_address + 1)
        if self.gateway in ips:
            raise ValueError(f"{self.gateway} is the bridge address; give the nodes other IPs")
        self.workdir = Path(workdir).resolve()
        for forbidden in ("/root", "/etc", "/usr/local", "/var/lib") + tuple(
                "/" + t for t in {tools.weights_top(s) for s in self.specs} if t):
            if self.workdir == Path(forbidden) or Path(forbidden) in self.workdir.parents:
                raise ValueError(f"workdir {self.workdir} is under {forbidden}, which every node mounts "
                                 "privately; use a directory under /tmp or /var/tmp")
        self.prefix = prefix or self._new_prefix()
        self.persistent = persistent
        self.bridge = f"{self.prefix}-br"
        self.nodes: list[FakeNode] = [
            FakeNode(spec=s, dir=self.workdir / "nodes" / s.name, netns=f"{self.prefix}-{s.name}",
                     veth=f"{self.prefix}-v{i}") for i, s in enumerate(self.specs)]
        self.client_key = self.workdir / "client_key"
        self.known_hosts = self.workdir / "known_hosts"
        self.ssh_config = self.workdir / "ssh_config"
        self.cluster_state = self.workdir / "cluster.json"
        self.started = False
        self._owns_lease = False
        self.start_seconds: float | None = None   # wall time of the last start()
        self.started_at: float | None = None      # time.time() when it finished
        self.phase_seconds: dict[str, float] = {}

    # ---- naming ----------------------------------------------------------------------------------
    @staticmethod
    def _new_prefix() -> str:
        taken = set(_netns_names()) | set(_link_names())
        for _ in range(100):
            p = "fc" + secrets.token_hex(2)
            if not any(n.startswith(p + "-") for n in taken):
                return p
        raise FakeClusterError("could not pick a free name prefix")

    def node(self, which: str | FakeNode | NodeSpec) -> FakeNode:
        name = which if isinstance(which, str) else which.name
        for n in self.nodes:
            if n.name == name or n.ip == name:
                return n
        raise KeyError(f"no node {name!r} in {[n.name for n in self.nodes]}")

    def __getitem__(self, name: str) -> FakeNode:
        return self.node(name)

    def __repr__(self) -> str:
        return f"FakeCluster({self.prefix}, {[str(n) for n in self.nodes]}, started={self.started})"

    # ---- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> FakeCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> FakeCluster:
        if self.started:
            return self
        problems = check_environment()
        if problems:
            raise FakeClusterError("cannot run a fake cluster on this machine:\n  - " + "\n  - ".join(problems))
        t0 = time.monotonic()
        if not self.persistent:          # `scripts/fake-cluster up` leaves its cluster running on purpose
            _live[self.prefix] = self
        _ledger(self.prefix)
        try:
            self._claim_subnet()
            self._register()
            self._prepare_files()
            t1 = time.monotonic()
            self._bridge_up()
            self._start_nodes()
            t2 = time.monotonic()
            self._wait_sshd()
            t3 = time.monotonic()
            self.phase_seconds = {"files": t1 - t0, "namespaces+sshd": t2 - t1, "wait_tcp": t3 - t2}
        except BaseException:
            self.stop()
            raise
        self.started = True
        self.started_at = time.time()
        self.start_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Kill everything in the cluster's namespaces, delete namespaces, veths and bridge. Idempotent."""
        teardown_prefix(self.prefix)
        _live.pop(self.prefix, None)
        if self._owns_lease:
            _release_lease(self.subnet)
            self._owns_lease = False
        (RUN_DIR / "clusters" / f"{self.prefix}.json").unlink(missing_ok=True)
        self.started = False

    # ---- start steps -----------------------------------------------------------------------------
    def _claim_subnet(self) -> None:
        for a in _addresses_in_use():
            if _conflicts(self.network, a):
                raise FakeClusterError(
                    f"{self.network} is already in use on this machine ({a} on some interface, maybe another "
                    "fake cluster): use default_cluster(..., subnet=None) to get a free one, or "
                    "`scripts/fake-cluster gc` to remove leftovers of crashed runs")
        owner = _lease_owner(self.subnet)
        if owner is not None and owner != os.getpid() and _pid_alive(owner):
            raise FakeClusterError(f"{self.network} is reserved by process {owner} ({_lease_path(self.subnet)})")
        if not _take_lease(self.subnet):
            raise FakeClusterError(f"could not reserve {self.network}")
        _reserved.add(self.subnet)
        self._owns_lease = True

    def _register(self) -> None:
        path = RUN_DIR / "clusters" / f"{self.prefix}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"prefix": self.prefix, "pid": os.getpid(), "persistent": self.persistent,
                                    "workdir": str(self.workdir), "subnet": self.subnet,
                                    "nodes": [n.name for n in self.nodes]}) + "\n")

    def _prepare_files(self) -> None:
        w = self.workdir
        w.mkdir(parents=True, exist_ok=True)
        bindir = w / "bin"
        bindir.mkdir(exist_ok=True)
        shutil.copyfile(tools.FAKE_BIN / "listener.py", bindir / "listener.py")
        for f in (self.client_key, self.client_key.with_suffix(".pub")):
            f.unlink(missing_ok=True)
        keygens = [subprocess.Popen(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"fakecluster-{self.prefix}",
                                     "-f", str(self.client_key)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)]
        for n in self.nodes:
            if n.dir.exists():
                shutil.rmtree(n.dir)
            n.dir.mkdir(parents=True)
            keygens.append(self._keygen(n))
        self._wait_all(keygens, "ssh-keygen")
        pub = self.client_key.with_suffix(".pub").read_text()
        hosts = {n.name: n.ip for n in self.nodes}
        state = {"prefix": self.prefix, "nodes": {n.name: str(n.state_file) for n in self.nodes}}
        self.cluster_state.write_text(json.dumps(state, indent=1) + "\n")
        for n in self.nodes:
            tools.install_node(n.spec, n.dirs, cluster_state=str(self.cluster_state), hosts=hosts,
                               client_pubkey=pub)
            self._write_sshd_config(n)
            self._write_scripts(n)
        # known_hosts gets every node's key as generated ...
        lines = []
        for n in self.nodes:
            keytype, key = n.host_key_pub.read_text().split()[:2]
            lines.append(f"{n.ip},{n.name} {keytype} {key}\n")
        self.known_hosts.write_text("".join(lines))
        # ... and changed_host_key nodes get a new key afterwards
        changed = [n for n in self.nodes if n.spec.changed_host_key]
        self._wait_all([self._keygen(n) for n in changed], "ssh-keygen")
        self._write_ssh_config()

    def _keygen(self, n: FakeNode) -> subprocess.Popen:
        key = n.dir / "ssh_host_ed25519_key"
        for f in (key, n.host_key_pub):
            f.unlink(missing_ok=True)
        return subprocess.Popen(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{n.name}",
                                 "-f", str(key)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    @staticmethod
    def _wait_all(procs: list[subprocess.Popen], what: str) -> None:
        errors = []
        for p in procs:
            _, err = p.communicate(timeout=60)
            if p.returncode != 0:
                errors.append(f"{shlex.join(map(str, p.args))}: {(err or b'').decode(errors='replace').strip()}")
        if errors:
            raise FakeClusterError(f"{what} failed:\n" + "\n".join(errors))

    def _write_sshd_config(self, n: FakeNode) -> None:
        (n.dir / "sshd_config").write_text(f"""\
ListenAddress {n.ip}
Port 22
HostKey {n.dir}/ssh_host_ed25519_key
PidFile {n.dir}/sshd.pid
AuthorizedKeysFile .ssh/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
KexAlgorithms {SSHD_KEX}
MaxStartups 200:30:400
MaxSessions 200
PrintMotd no
PrintLastLog no
AcceptEnv LANG LC_*
Subsystem sftp /usr/lib/openssh/sftp-server
LogLevel INFO
""")

    def _mounts(self, n: FakeNode) -> list[tuple[str, Path]]:
        """Bind mounts besides the overlays: (target in node, source on host)."""
        out = [("/root", n.dirs.root)]
        top = tools.weights_top(n.spec)
        if top:
            out.append(("/" + top, n.dirs.mount_dir(top)))
        return out

    def _write_scripts(self, n: FakeNode) -> None:
        d, q = n.dir, shlex.quote
        for layer in ("usr_local", "etc", "var_lib"):
            (d / layer / "work").mkdir(parents=True, exist_ok=True)
        n.dirs.var_lib.mkdir(parents=True, exist_ok=True)
        lines = ["set -e",
                 f"mount -t overlay overlay -o lowerdir=/usr/local,upperdir={q(str(n.dirs.usr_local))},"
                 f"workdir={q(str(d / 'usr_local' / 'work'))} /usr/local",
                 f"mount -t overlay overlay -o lowerdir=/etc,upperdir={q(str(n.dirs.etc))},"
                 f"workdir={q(str(d / 'etc' / 'work'))} /etc",
                 f"mount -t overlay overlay -o lowerdir=/var/lib,upperdir={q(str(n.dirs.var_lib))},"
                 f"workdir={q(str(d / 'var_lib' / 'work'))} /var/lib"]
        for target, source in self._mounts(n):
            lines.append(f"mount --bind {q(str(source))} {q(target)}")
        lines.append(f"hostname {q(n.name)}")
        ports = n.spec.busy_ports
        if ports:
            lines.append(f"{PYTHON_IN_NODE} {q(str(self.workdir / 'bin' / 'listener.py'))} "
                         + " ".join(map(str, ports)) + f" </dev/null >{q(str(d / 'listener.log'))} 2>&1 &")
            lines.append(f"echo $! > {q(str(d / 'listener.pid'))}")
        if n.spec.reachable:
            lines.append(f"exec {SSHD} -f {q(str(d / 'sshd_config'))} -E {q(str(d / 'sshd.log'))}")
        (d / "init.sh").write_text("\n".join(lines) + "\n")

    def _write_ssh_config(self) -> None:
        hosts = "".join(f"Host {n.name} {n.ip}\n  HostName {n.ip}\n" for n in self.nodes)
        self.ssh_config.write_text(f"""\
# ssh -F {self.ssh_config} node1
{hosts}
Host *
  User root
  IdentityFile {self.client_key}
  IdentitiesOnly yes
  UserKnownHostsFile {self.known_hosts}
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  KexAlgorithms {KEX}
  BatchMode yes
  ConnectTimeout {SSH_CONNECT_TIMEOUT}
  ControlMaster no
  LogLevel ERROR
""")

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
        pending = {n.name: n for n in self.nodes if n.spec.reachable}
        deadline = time.monotonic() + START_TIMEOUT
        while pending:
            for name, n in list(pending.items()):
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.settimeout(0.5)
                    try:
                        s.connect((n.ip, 22))
                        del pending[name]
                    except OSError:
                        pass
            if pending and time.monotonic() > deadline:
                logs = {name: (n.sshd_log.read_text() if n.sshd_log.exists() else "(no log)")
                        for name, n in pending.items()}
                raise FakeClusterError(f"sshd did not accept TCP within {START_TIMEOUT}s on {sorted(pending)}: {logs}")
            if pending:
                time.sleep(0.002)

    # ---- using the cluster -----------------------------------------------------------------------
    def ssh_args(self, node: str | FakeNode | NodeSpec, *, strict: bool = True,
                 extra: Sequence[str] = ()) -> list[str]:
        """argv for the system `ssh` client to `node` (append the remote command)."""
        n = self.node(node)
        return ["ssh", "-F", "/dev/null", "-i", str(self.client_key), "-o", "IdentitiesOnly=yes",
                "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
                "-o", f"StrictHostKeyChecking={'yes' if strict else 'no'}", "-o", "BatchMode=yes",
                "-o", f"KexAlgorithms={KEX}", "-o", f"ConnectTimeout={SSH_CONNECT_TIMEOUT}", "-o", "ControlMaster=no",
                "-o", "LogLevel=ERROR", *extra, f"root@{n.ip}"]

    def ssh(self, node: str | FakeNode | NodeSpec, cmd: str, *, timeout: float = 60, check: bool = False,
            input: str | None = None, strict: bool = True) -> subprocess.CompletedProcess:
        """Run `cmd` on `node` with the system ssh client; returns the CompletedProcess (text)."""
        r = subprocess.run(self.ssh_args(node, strict=strict) + [cmd], capture_output=True, text=True,
                           timeout=timeout, input=input, stdin=None if input is not None else subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise FakeClusterError(f"ssh {self.node(node)} {cmd!r}: exit {r.returncode}: {r.stderr.strip()}")
        return r

    def container_started(self, node: str | FakeNode | NodeSpec, name: str) -> str:
        """When the container ``name`` on ``node`` last started (docker inspect .State.StartedAt): a restart
        changes it."""
        return self.ssh(node, f"docker inspect --format '{{{{.State.StartedAt}}}}' {name}", check=True).stdout.strip()

    def update_node(self, node: str | FakeNode | NodeSpec, **changes) -> NodeSpec:
        """Change a running node's spec (faults, versions, images, weights, device IPs...) and rewrite its
        files; takes effect on the next command. Not for name/ip/ports/reachability/host keys."""
        n = self.node(node)
        fixed = {"name", "ip", "listen_ports", "port_busy", "unreachable", "changed_host_key", "weights_dir"}
        if fixed & set(changes):
            raise ValueError(f"{sorted(fixed & set(changes))} cannot change on a running node; build a new cluster")
        n.spec = n.spec.replace(**changes)
        self.specs = [n.spec if s.name == n.name else s for s in self.specs]
        tools.write_state(n.spec, n.dirs, str(self.cluster_state))
        return n.spec

    def inventory_snippet(self) -> str:
        """deployctl inventory YAML (cluster, ssh, nodes with device IPs) for this cluster."""
        hw = self.specs[0].hardware
        a3 = hw == "a3"
        out = [f"# fake cluster {self.prefix}: {len(self.nodes)} x {hw.upper()} "
               f"(ssh -F {self.ssh_config} {self.nodes[0].name})",
               "cluster:", f"  name: fake-{hw}-{len(self.nodes)}", f"  hardware: {hw}"]
        if a3:
            out.append("  super_pod: true")
        out += ["ssh:", "  user: root", f"  key: {self.client_key}", f"  known_hosts: {self.known_hosts}",
                "# engine.image present on the nodes (docker image inspect):",
                f"#   {(self.specs[0].docker_images or ('<none>',))[0]}",
                f"# model.weights_path present on the nodes: {self.specs[0].weights_dir}", "nodes:"]
        for n in self.nodes:
            out += [f"  - name: {n.name}", f"    address: {n.ip}"]
            if a3:
                out.append(f"    super_pod_id: \"{n.spec.pod_id}\"")
            out.append("    devices:")
            ips = n.device_ips
            for phy in n.spec.present_phy_ids:
                fields = [f"id: {phy}"] + ([f"ip: {ips[phy]}"] if phy in ips else [])
                if a3:
                    fields.append(f"sdid: {n.spec.sdids.get(phy, a3_sdid(n.spec.server_index, phy))}")
                out.append("      - {" + ", ".join(fields) + "}")
        return "\n".join(out) + "\n"

    def hosts_inventory(self) -> str:
        """A whole deployctl inventory as a user first writes it: the hosts (no device IPs, no SDIDs: the
        first `deployctl preflight` discovers them), the image and weights present on the nodes, DeepSeek-R1
        W8A8 with the tp-pp preset (a2) or dp-ep (a3)."""
        from .spec import DEFAULT_IMAGES

        hw = self.specs[0].hardware
        out = [f"# fake cluster {self.prefix}: {len(self.nodes)} x {hw.upper()}; device IPs come from preflight",
               "cluster:", f"  name: fake-{hw}-{len(self.nodes)}", f"  hardware: {hw}"]
        if hw == "a3":
            out.append("  super_pod: true")
        out += ["ssh:", "  user: root", f"  key: {self.client_key}", f"  known_hosts: {self.known_hosts}",
                "engine:", f"  image: {DEFAULT_IMAGES[hw]}", "  env: {MINDIE_LOG_LEVEL: info}",
                "model:", "  name: deepseek-r1", "  quant: w8a8", f"  weights_path: {self.specs[0].weights_dir}",
                "  served_name: ds-r1", "  max_seq_len: 8192", "  max_input_len: 4096", "  max_batch_size: 32",
                "layout:", f"  preset: {'tp-pp' if hw == 'a2' else 'dp-ep'}", "nodes:"]
        for n in self.nodes:
            out += [f"  - name: {n.name}", f"    address: {n.ip}"]
        return "\n".join(out) + "\n"

    def describe(self) -> dict:
        return {"prefix": self.prefix, "subnet": self.subnet, "bridge": self.bridge, "workdir": str(self.workdir),
                "client_key": str(self.client_key), "known_hosts": str(self.known_hosts),
                "ssh_config": str(self.ssh_config), "start_seconds": self.start_seconds,
                "nodes": [{"name": n.name, "ip": n.ip, "netns": n.netns, "dir": str(n.dir),
                           "reachable": n.spec.reachable, "device_ips": n.device_ips} for n in self.nodes]}


# ---- teardown --------------------------------------------------------------------------------------

def _pids_in_netns(ns: str) -> list[int]:
    r = _run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in r.stdout.split() if p.isdigit()]


def teardown_prefix(prefix: str) -> None:
    """Kill every process in the `<prefix>-*` network namespaces, delete those namespaces and the
    `<prefix>-*` links (veths, bridge)."""
    if not prefix or "-" in prefix:
        raise ValueError(f"bad prefix {prefix!r}")
    namespaces = [ns for ns in _netns_names() if ns.startswith(prefix + "-")]
    pids = [p for ns in namespaces for p in _pids_in_netns(ns) if p != os.getpid()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (0.5 if sig == signal.SIGTERM else 3.0)
        while time.monotonic() < deadline and any(_pid_alive(p) and not _is_zombie(p) for p in pids):
            time.sleep(0.01)
        pids = [p for p in pids if _pid_alive(p) and not _is_zombie(p)]
        if not pids:
            break
    cmds = [f"netns del {ns}" for ns in namespaces]
    cmds += [f"link del {name}" for name in _link_names() if name.startswith(prefix + "-")
             and not name.endswith("-br")]
    cmds += [f"link del {name}" for name in _link_names() if name == f"{prefix}-br"]
    if cmds:
        _run(["ip", "-force", "-batch", "-"], input="\n".join(cmds) + "\n", check=False)
    left = [x for x in _netns_names() + _link_names() if x.startswith(prefix + "-")]
    if left:   # veths of deleted namespaces vanish asynchronously
        deadline = time.monotonic() + 3
        while left and time.monotonic() < deadline:
            time.sleep(0.02)
            left = [x for x in _netns_names() + _link_names() if x.startswith(prefix + "-")]
        for name in left:
            _run(["ip", "link", "del", name], check=False)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def registered_clusters() -> list[dict]:
    out = []
    for f in sorted((RUN_DIR / "clusters").glob("*.json")):
        try:
            out.append(json.loads(f.read_text()))
        except (OSError, ValueError):
            continue
    return out


def gc_stale(include_persistent: bool = False) -> list[str]:
    """Tear down clusters whose owning process is gone (and, if asked, `scripts/fake-cluster up` ones).
    Returns the prefixes removed."""
    removed = []
    for info in registered_clusters():
        if info.get("persistent") and not include_persistent:
            continue
        if not info.get("persistent") and _pid_alive(int(info.get("pid", 0))):
            continue
        teardown_prefix(info["prefix"])
        (RUN_DIR / "clusters" / f"{info['prefix']}.json").unlink(missing_ok=True)
        lease = _lease_path(info["subnet"])
        owner = _lease_owner(info["subnet"])
        if owner is None or not _pid_alive(owner):
            lease.unlink(missing_ok=True)
        removed.append(info["prefix"])
    return removed


def tcp_port_open(ip: str, port: int, timeout: float = 1.0) -> bool | str:
    """True if something accepts on ip:port; otherwise the errno name (ECONNREFUSED, EHOSTUNREACH...)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect((ip, port))
            return True
        except socket.timeout:
            return "ETIMEDOUT"
        except OSError as e:
            return errno.errorcode.get(e.errno or 0, str(e))
