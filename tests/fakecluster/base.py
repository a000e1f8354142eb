"""What the simulated clusters share, whatever runs the hosts: `FakeNode`, and `ClusterBase` with the node
files (tools.install_node), the SSH client files (key, known_hosts, ssh_config), the sshd settings, a node's
mounts, the start/stop frame (environment check, subnet lease, registration for gc, cleanup after a failed
start) and the ways to use a cluster (ssh, update_node, inventories).

`cluster.FakeCluster` runs each node as an sshd in a network namespace of its own, `manyhost.ManyHostCluster`
runs every node behind one sshd in one network namespace.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import tools
from .hostenv import (
    KEX, RUN_DIR, SSH_CONNECT_TIMEOUT, START_TIMEOUT, FakeClusterError, _addresses_in_use, _conflicts,
    _lease_owner, _lease_path, _ledger, _link_names, _live, _netns_names, _pid_alive, _release_lease, _reserved,
    _take_lease, check_environment, teardown_prefix)
from .spec import NodeSpec, a3_sdid


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


def mount_lines(n: FakeNode, shared_usr_local: Path | None = None) -> list[str]:
    """Shell lines that give a new mount namespace the node's view: overlays on /usr/local, /etc and /var/lib
    (upper: the node's directories; `shared_usr_local`: a layer under /usr/local's), its /root and weights
    directory bound in, its hostname."""
    d, q = n.dir, shlex.quote
    for layer in ("usr_local", "etc", "var_lib"):
        (d / layer / "work").mkdir(parents=True, exist_ok=True)
    n.dirs.var_lib.mkdir(parents=True, exist_ok=True)
    shared = q(f"{shared_usr_local}:") if shared_usr_local else ""
    lines = [f"mount -t overlay overlay -o lowerdir={shared if layer == 'usr_local' else ''}{lower},"
             f"upperdir={q(str(upper))},workdir={q(str(d / layer / 'work'))} {lower}"
             for lower, upper, layer in (("/usr/local", n.dirs.usr_local, "usr_local"), ("/etc", n.dirs.etc, "etc"),
                                         ("/var/lib", n.dirs.var_lib, "var_lib"))]
    binds = [("/root", n.dirs.root)]
    top = tools.weights_top(n.spec)
    if top:
        binds.append(("/" + top, n.dirs.mount_dir(top)))
    lines += [f"mount --bind {q(str(source))} {q(target)}" for target, source in binds]
    return lines + [f"hostname {q(n.name)}"]


class ClusterBase:
    """The part of a simulated cluster that does not depend on how its hosts run. A subclass sets `nodes` and
    `network` (what its subnet lease covers) and implements `_start_steps()`."""

    PREFIX = "fc"                       # name prefixes: PREFIX + 4 hex
    FIXED = {"name", "ip", "listen_ports", "port_busy", "unreachable", "changed_host_key", "weights_dir"}
    nodes: list[FakeNode]
    network: ipaddress.IPv4Network
    subnet: str                         # the lease's name

    def _setup(self, specs: Iterable[NodeSpec], workdir: str | os.PathLike, prefix: str | None,
               persistent: bool) -> None:
        self.specs = list(specs)
        if not self.specs:
            raise ValueError("a fake cluster needs at least one node")
        names = [s.name for s in self.specs]
        ips = [s.ip for s in self.specs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate node names: {names}")
        if len(set(ips)) != len(ips):
            raise ValueError(f"duplicate node IPs: {ips}")
        self.workdir = Path(workdir).resolve()
        for forbidden in ("/root", "/etc", "/usr/local", "/var/lib") + tuple(
                "/" + t for t in {tools.weights_top(s) for s in self.specs} if t):
            if self.workdir == Path(forbidden) or Path(forbidden) in self.workdir.parents:
                raise ValueError(f"workdir {self.workdir} is under {forbidden}, which every node mounts "
                                 "privately; use a directory under /tmp or /var/tmp")
        self.prefix = prefix or self._new_prefix()
        self.persistent = persistent
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
    @classmethod
    def _new_prefix(cls) -> str:
        taken = set(_netns_names()) | set(_link_names())
        for _ in range(100):
            p = cls.PREFIX + secrets.token_hex(2)
            if not any(n.startswith(p + "-") for n in taken):
                return p
        raise FakeClusterError("could not pick a free name prefix")

    def node(self, which: str | FakeNode | NodeSpec) -> FakeNode:
        name = which if isinstance(which, str) else which.name
        for n in self.nodes:
            if n.name == name or n.ip == name:
                return n
        raise KeyError(f"no node {name!r} in {[n.name for n in self.nodes][:20]}")

    def __getitem__(self, name: str) -> FakeNode:
        return self.node(name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.prefix}, {[str(n) for n in self.nodes]}, started={self.started})"

    # ---- lifecycle -------------------------------------------------------------------------------
    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self):
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
            self._start_steps(t0)
        except BaseException:
            self.stop()
            raise
        self.started = True
        self.started_at = time.time()
        self.start_seconds = time.monotonic() - t0
        return self

    def _start_steps(self, t0: float) -> None:
        raise NotImplementedError

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

    def _write_cluster_state(self) -> dict[str, str]:
        """cluster.json (every node's state file, for the fakes' pings); returns the /etc/hosts entries."""
        shutil.rmtree(tools.answers_dir(str(self.cluster_state)), ignore_errors=True)   # a previous run's
        state = {"prefix": self.prefix, "nodes": {n.name: str(n.state_file) for n in self.nodes}}
        self.cluster_state.write_text(json.dumps(state, indent=1) + "\n")
        return {n.name: n.ip for n in self.nodes}

    def _install(self, n: FakeNode, hosts: dict[str, str], pub: str, shared_usr_local: bool = False) -> None:
        tools.install_node(n.spec, n.dirs, cluster_state=str(self.cluster_state), hosts=hosts, client_pubkey=pub,
                           shared_usr_local=shared_usr_local)

    def _write_known_hosts(self, key_of) -> None:
        """known_hosts: `key_of(node)` -> the public key file listed for it."""
        lines = []
        for n in self.nodes:
            keytype, key = key_of(n).read_text().split()[:2]
            lines.append(f"{n.ip},{n.name} {keytype} {key}\n")
        self.known_hosts.write_text("".join(lines))

    def _write_ssh_config(self) -> None:
        hosts = "".join(f"Host {n.name} {n.ip}\n  HostName {n.ip}\n" for n in self.nodes)
        self.ssh_config.write_text(f"""\
# ssh -F {self.ssh_config} {self.nodes[0].name}
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

    def _wait_tcp(self, nodes: Sequence[FakeNode], log) -> None:
        """Until every node's port 22 accepts (START_TIMEOUT); `log(node)` is shown for those that do not."""
        pending = {n.name: n for n in nodes}
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
                logs = {name: log(n) for name, n in list(pending.items())[:10]}
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
        if self.FIXED & set(changes):
            raise ValueError(f"{sorted(self.FIXED & set(changes))} cannot change on a running node; build a new cluster")
        n.spec = n.spec.replace(**changes)
        self.specs = [n.spec if s.name == n.name else s for s in self.specs]
        self._write_state(n)
        return n.spec

    def _write_state(self, n: FakeNode) -> None:
        tools.write_state(n.spec, n.dirs, str(self.cluster_state))

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
