"""What a ManyHostCluster (tests/fakecluster/manyhost.py: many simulated hosts behind one sshd) costs: start-up time
(by phase), memory (the sshd processes' RSS and PSS idle and with one connection per host open, the tmpfs of the
nodes' files, kernel slab for the namespaces and mounts), and commands over paramiko as deployctl runs them (a
connection per host, `true` on each): one host after another, then from 64 threads, then every host at once.

    sudo .venv/bin/python bench/manyhost.py [--sizes 64,256,1024] [--hardware a3] [--threads 64]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from fakecluster import ManyHostCluster, fleet  # noqa: E402
from fakecluster.hostenv import bench_ready  # noqa: E402


def meminfo(key: str) -> int:
    """kB"""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def sshd_memory(mc: ManyHostCluster) -> tuple[int, float, float]:
    """(processes, RSS MB, PSS MB) of the cluster's sshd processes."""
    rss = pss = 0
    pids = mc.sshd_pids()
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except OSError:
            continue
    return len(pids), rss / 1024, pss / 1024


def connect(mc: ManyHostCluster, node):
    import paramiko

    from deployctl.io.ssh import _nodelay_transport

    client = paramiko.SSHClient()
    client.load_host_keys(str(mc.known_hosts))
    client.connect(node.ip, username="root", key_filename=str(mc.client_key), allow_agent=False,
                   look_for_keys=False, timeout=60, banner_timeout=60, auth_timeout=60,
                   transport_factory=_nodelay_transport)
    return client


def run(client, cmd: str = "true") -> int:
    chan = client.get_transport().open_session(timeout=60)
    chan.exec_command(cmd)
    return chan.recv_exit_status()


def connect_and_run(mc, node, clients: list | None, lock: threading.Lock) -> float:
    """Connect and run `true`; the connection stays open when `clients` is a list (every open paramiko
    connection has a thread polling its socket: a thousand of them starve one Python process)."""
    t = time.monotonic()
    c = connect(mc, node)
    assert run(c) == 0
    if clients is None:
        c.close()
    else:
        with lock:
            clients.append(c)
    return time.monotonic() - t


def fan(mc: ManyHostCluster, threads: int, keep: bool) -> tuple[float, float, list]:
    """(wall s, slowest host s, clients left open) for connect + `true` on every host from `threads` threads."""
    clients: list | None = [] if keep else None
    lock = threading.Lock()
    t = time.monotonic()
    if threads == 1:
        each = [connect_and_run(mc, n, clients, lock) for n in mc.nodes]
    else:
        with ThreadPoolExecutor(threads) as pool:
            each = list(pool.map(lambda n: connect_and_run(mc, n, clients, lock), mc.nodes))
    return time.monotonic() - t, max(each), clients or []


def close(clients: list) -> None:
    for c in clients:
        c.close()


def bench(n: int, hardware: str, threads: int, at_once: bool) -> dict:
    shm0, slab0 = meminfo("Shmem"), meminfo("Slab")
    row: dict = {"n": n}
    with tempfile.TemporaryDirectory(prefix=f"manyhost-{n}-") as tmp:
        mc = ManyHostCluster(fleet(n, hardware), Path(tmp) / "mc")
        try:
            mc.start()
            row |= {"start": mc.start_seconds, **{f"phase_{k}": v for k, v in mc.phase_seconds.items()},
                   "tmpfs_mb": (meminfo("Shmem") - shm0) / 1024, "slab_mb": (meminfo("Slab") - slab0) / 1024}
            row["sshd_idle"] = sshd_memory(mc)
            c = connect(mc, mc.nodes[0])
            t = time.monotonic()
            for _ in range(50):
                run(c)
            row["per_command_ms"] = (time.monotonic() - t) / 50 * 1000
            c.close()
            row["sequential"], _, _ = fan(mc, 1, keep=False)
            row["parallel"], row["parallel_slowest"], clients = fan(mc, threads, keep=n <= 256)
            row["sshd_open"] = sshd_memory(mc) if clients else (0, float("nan"), float("nan"))
            close(clients)
            row["all_at_once"] = row["all_at_once_slowest"] = float("nan")
            if at_once:
                time.sleep(1)
                row["all_at_once"], row["all_at_once_slowest"], _ = fan(mc, n, keep=False)
        finally:
            t = time.monotonic()
            mc.stop()
            row["stop"] = time.monotonic() - t
    print(row, file=sys.stderr, flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="64,256,1024")
    ap.add_argument("--hardware", default="a3", choices=("a2", "a3"))
    ap.add_argument("--threads", type=int, default=64)
    ap.add_argument("--at-once-max", type=int, default=256,
                    help="connect to every host at once (a thread each) up to this many hosts")
    args = ap.parse_args()
    if not bench_ready():
        return 2
    rows = [bench(int(s), args.hardware, args.threads, int(s) <= args.at_once_max) for s in args.sizes.split(",")]
    print(f"| hosts ({args.hardware}) | start (s): files / network / namespaces / sshd | stop (s) | node files "
          "on tmpfs (MB) | kernel slab (MB) | sshd idle: procs, RSS MB | sshd, a connection per host open: procs, "
          f"RSS / PSS MB | one command on an open connection (ms) | connect + `true`, every host: one by one (s) | "
          f"{args.threads} threads (s, slowest host) | all at once (s, slowest host) |")
    print("|---:|---|---:|---:|---:|---|---|---:|---:|---|---|")
    for r in rows:
        phases = " / ".join(f"{r[f'phase_{k}']:.1f}" for k in ("files", "network", "namespaces", "sshd"))
        print(f"| {r['n']} | {r['start']:.1f}: {phases} | {r['stop']:.1f} | {r['tmpfs_mb']:.0f} | {r['slab_mb']:.0f} | "
              f"{r['sshd_idle'][0]}, {r['sshd_idle'][1]:.0f} | {r['sshd_open'][0]}, {r['sshd_open'][1]:.0f} / "
              f"{r['sshd_open'][2]:.0f} | {r['per_command_ms']:.1f} | {r['sequential']:.1f} | "
              f"{r['parallel']:.1f} ({r['parallel_slowest']:.1f}) | {r['all_at_once']:.1f} "
              f"({r['all_at_once_slowest']:.1f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
