"""Machine-level plumbing the simulated clusters share (FakeCluster: a network namespace per node; ManyHostCluster:
one for all of them): the environment check, the clusters of this process, subnet leases for parallel sessions,
and the teardown of a cluster's namespaces and links by its name prefix (also for clusters left by dead runs).
"""

from __future__ import annotations

import atexit
import errno
import ipaddress
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from typing import TYPE_CHECKING

from .spec import SUBNET_PREFIX

if TYPE_CHECKING:
    from .base import ClusterBase

RUN_DIR = Path("/run/fakecluster")
# persistent per-node namespaces (ManyHostCluster): RUN_DIR/ns/<prefix>/, a private bind mount holding their files
NS_DIR = RUN_DIR / "ns"
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

_live: dict[str, ClusterBase] = {}       # clusters of this process started and not stopped yet (not persistent)


def live_clusters() -> list[ClusterBase]:
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


# ---- ssh files -----------------------------------------------------------------------------------

def sshd_config(*, listen: str, host_key: Path, pid_file: Path, max_startups: str = "200:30:400",
                max_sessions: int = 200, authorized_keys: str = ".ssh/authorized_keys", extra: str = "") -> str:
    """An sshd_config for simulated hosts: root logs in with the cluster's client key, KexAlgorithms paramiko
    (deployctl's client) and the system client agree on."""
    return f"""\
ListenAddress {listen}
Port 22
HostKey {host_key}
PidFile {pid_file}
AuthorizedKeysFile {authorized_keys}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
KexAlgorithms {SSHD_KEX}
MaxStartups {max_startups}
MaxSessions {max_sessions}
PrintMotd no
PrintLastLog no
AcceptEnv LANG LC_*
Subsystem sftp /usr/lib/openssh/sftp-server
LogLevel INFO
{extra}"""


def keygen(key: Path, comment: str) -> subprocess.Popen:
    """Start ssh-keygen for a new ed25519 key at `key` (old files removed); wait with `wait_all`."""
    for f in (key, key.with_suffix(".pub")):
        f.unlink(missing_ok=True)
    return subprocess.Popen(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wait_all(procs: list[subprocess.Popen], what: str, timeout: float = 60) -> None:
    errors = []
    for p in procs:
        _, err = p.communicate(timeout=timeout)
        if p.returncode != 0:
            errors.append(f"{shlex.join(map(str, p.args))}: {(err or b'').decode(errors='replace').strip()}")
    if errors:
        raise FakeClusterError(f"{what} failed:\n" + "\n".join(errors))


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


def _free(candidates, prefixlen: int) -> str | None:
    """Reserve the first of `candidates` (a network's leading octets) that no interface here has an address
    in and no other live process reserved; the reservation ends when this process exits or its cluster stops."""
    in_use = _addresses_in_use()
    for subnet in candidates:
        net = ipaddress.IPv4Network(f"{subnet}{'.0' * (4 - subnet.count('.') - 1)}/{prefixlen}")
        if subnet in _reserved or any(_conflicts(net, a) for a in in_use):
            continue
        if _take_lease(subnet):
            _reserved.add(subnet)
            return subnet
    return None


def free_subnet() -> str:
    """Reserve and return a free '10.200.X' (a /24; see `_free`)."""
    subnet = _free((f"{SUBNET_PREFIX}.{x}" for x in range(256)), 24)
    if subnet is None:
        raise FakeClusterError(f"no free {SUBNET_PREFIX}.X.0/24 subnet left (leases in {RUN_DIR / 'subnets'})")
    return subnet


def free_subnet16() -> str:
    """Reserve and return a free '10.K' (a /16, K in 201..254; see `_free`): many hosts in one network."""
    subnet = _free((f"10.{k}" for k in range(201, 255)), 16)
    if subnet is None:
        raise FakeClusterError(f"no free 10.K.0.0/16 (K 201..254) left (leases in {RUN_DIR / 'subnets'})")
    return subnet


# ---- teardown --------------------------------------------------------------------------------------

def _pids_in_netns(ns: str) -> list[int]:
    r = _run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in r.stdout.split() if p.isdigit()]


def teardown_prefix(prefix: str) -> None:
    """Kill every process in the `<prefix>-*` network namespaces, delete those namespaces, the
    `<prefix>-*` links (veths, bridge) and the persistent per-node namespaces in NS_DIR/<prefix>."""
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
    release_ns_dir(NS_DIR / prefix)
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


def mounted(path: Path) -> bool:
    target = str(path)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == target for line in f)


def release_ns_dir(d: Path) -> None:
    """Unmount a directory of namespace files (its bind mount on itself and every file on it, in one lazy
    detach: the namespaces end once nothing else holds them) and delete it."""
    if mounted(d):
        _run(["umount", "--lazy", str(d)], check=False)
    shutil.rmtree(d, ignore_errors=True)


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


def bench_ready() -> bool:
    """A benchmark's start: False (said on stderr) when simulated hosts cannot run here; else SIGTERM ends the
    process through its `finally` blocks (its clusters stop) and clusters left by crashed runs are removed."""
    import signal
    import sys

    problems = check_environment()
    if problems:
        print("cannot start simulated hosts here:\n  - " + "\n  - ".join(problems), file=sys.stderr)
        return False
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    gc_stale()
    return True
