"""The fleet commands at a thousand hosts: `preflight`, `status`, `watch` (its first round, then its rounds on open
connections) and `up --dry-run` over a ManyHostCluster (tests/fakecluster/manyhost.py: one sshd answering for every
simulated host, each host its own files and state), as a user runs them: a new deployctl process each time.

Per command: wall time, the deployctl process's CPU (user + system, its children included), its peak memory
(max RSS), and, sampled every 50 ms from /proc: the peak of its open file descriptors, of its TCP sockets
(one per host connection) and of its threads. The simulated hosts run on the same machine (their sshd and the
commands each probe starts cost CPU too), so wall times are an upper bound of what a controller with real hosts
sees; the CPU, memory, descriptors and threads are deployctl's own.

    sudo .venv/bin/python bench/fleet_scale.py [--hosts 1024] [--fan-out 64,256] [--watch-rounds 3] [--only-watch]

Prints a Markdown table; docs/dev/benchmarks.md ("A thousand hosts") keeps the result.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from fakecluster import ManyHostCluster, fleet  # noqa: E402
from fakecluster.hostenv import bench_ready  # noqa: E402
from fakecluster.spec import DEFAULT_IMAGES, DEFAULT_WEIGHTS_DIR  # noqa: E402

DEPLOYCTL = [sys.executable, "-m", "deployctl"]
TAIL = """engine: {{image: {image}}}
model: {{name: deepseek-r1, quant: w8a8, weights_path: {weights}, served_name: ds-r1, max_seq_len: 8192,
        max_input_len: 4096, max_batch_size: 32}}
layout: {{preset: dp-ep, replicas: {replicas}}}
"""
ROUND = re.compile(r"round (\d+) \((\d+(?:\.\d+)?) s\)")


class Sampler(threading.Thread):
    """Peaks of a process's open descriptors, TCP sockets and threads, read from /proc every 50 ms."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.fds, self.sockets, self.threads = pid, 0, 0, 0
        self.done = threading.Event()

    def run(self) -> None:
        proc = Path(f"/proc/{self.pid}")
        while not self.done.wait(0.05):
            try:
                links = [os.readlink(p) for p in (proc / "fd").iterdir()]
                threads = int(next(line.split()[1] for line in (proc / "status").read_text().splitlines()
                                   if line.startswith("Threads:")))
            except (OSError, StopIteration, ValueError):
                continue
            self.fds = max(self.fds, len(links))
            self.sockets = max(self.sockets, sum(1 for link in links if link.startswith("socket:")))
            self.threads = max(self.threads, threads)


def measure(argv: list[str], env: dict, ok: tuple[int, ...], stop_after: float | None = None,
            stdout=subprocess.DEVNULL) -> dict:
    """Run ``argv``; with ``stop_after`` end it with SIGTERM after that many seconds (a watch)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    sampler = Sampler(proc.pid)
    sampler.start()
    timer = threading.Timer(stop_after, proc.send_signal, (signal.SIGTERM,)) if stop_after else None
    if timer:
        timer.start()
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    sampler.done.set()
    if timer:
        timer.cancel()
    code = os.waitstatus_to_exitcode(status)
    if code not in ok:
        raise SystemExit(f"{' '.join(argv)} exited {code}: {err.decode(errors='replace')[-3000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024,
            "fds": sampler.fds, "sockets": sampler.sockets, "threads": sampler.threads, "stderr": err}


def _cpu_seconds(pid: int) -> float:
    """The process's CPU so far (user + system, all its threads), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def watch_rounds(argv: list[str], env: dict, rounds: int, interval: float) -> tuple[dict, list[tuple[float, float]]]:
    """`watch` (text lines: its output is not a terminal) until it printed ``rounds`` rounds: (the run, per round
    its seconds as watch says and deployctl's CPU seconds since the round before; the first round's CPU includes
    the start: reading, planning, the SSH handshakes)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv + ["--interval", f"{interval:g}"], stdout=subprocess.PIPE, stderr=err, cwd=ROOT,
                                env=env, text=True)
        sampler = Sampler(proc.pid)
        sampler.start()
        marks: list[tuple[float, float]] = []
        last = 0.0
        assert proc.stdout is not None
        for line in proc.stdout:
            m = ROUND.search(line)
            if m:
                cpu = _cpu_seconds(proc.pid)
                marks.append((float(m.group(2)), cpu - last))
                last = cpu
                print(f"  round {m.group(1)}: {m.group(2)} s, deployctl CPU {marks[-1][1]:.1f} s", file=sys.stderr)
                if len(marks) >= rounds:
                    break
        proc.send_signal(signal.SIGTERM)
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)
        sampler.done.set()
        err.seek(0)
        text = err.read().decode(errors="replace")
    if len(marks) < rounds:
        raise SystemExit(f"watch ended after {len(marks)} rounds: {text[-3000:]}")
    row = {"wall": time.perf_counter() - t0, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024,
           "fds": sampler.fds, "sockets": sampler.sockets, "threads": sampler.threads, "stderr": text}
    return row, marks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--fan-out", default="64,256", help="values of `deployctl --fan-out` to measure")
    ap.add_argument("--watch-rounds", type=int, default=3, help="rounds of the watch phase (the first opens the "
                    "connections; the others are the steady rounds)")
    ap.add_argument("--interval", type=float, default=2.5, help="watch --interval")
    ap.add_argument("--only-watch", action="store_true", help="measure the watch rounds alone")
    args = ap.parse_args()
    if not bench_ready():
        return 2
    n = args.hosts
    rows = []
    with tempfile.TemporaryDirectory(prefix=f"fleet-scale-{n}-") as tmp:
        work = Path(tmp)
        mc = ManyHostCluster(fleet(n, "a3"), work / "mc")
        try:
            t = time.perf_counter()
            mc.start()
            print(f"{n} simulated A3 hosts up in {time.perf_counter() - t:.0f} s", file=sys.stderr)
            inv = work / "inv.yaml"
            inv.write_text(mc.inventory_snippet() + TAIL.format(image=DEFAULT_IMAGES["a3"],
                                                                   weights=DEFAULT_WEIGHTS_DIR, replicas=n // 16))
            run_dir = work / "runs"
            base = ["-i", str(inv)]
            for width in [int(w) for w in args.fan_out.split(",")]:
                env = dict(os.environ, DEPLOYCTL_FAN_OUT=str(width))
                cmds = {
                    "preflight": (["preflight", *base, "--output", "json", "--run-dir", str(run_dir)], (0, 1)),
                    "status": (["status", *base, "--output", "json", "--run-dir", str(run_dir)], (0, 1, 3)),
                    "watch --once": (["watch", *base, "--once", "--output", "json", "--run-dir", str(run_dir)],
                                     (0, 1)),
                    "up --dry-run": (["up", *base, "--dry-run", "--skip-preflight", "--run-dir", str(run_dir)],
                                     (0, 1)),
                }
                for what, (argv, ok) in ({} if args.only_watch else cmds).items():
                    row = measure(DEPLOYCTL + argv, env, ok)
                    rows.append((width, what, row, None))
                    print(f"fan-out {width:4} {what:14} {row['wall']:6.1f} s  cpu {row['cpu']:6.1f} s  "
                          f"{row['rss']:5.0f} MB  fds {row['fds']}  sockets {row['sockets']}  "
                          f"threads {row['threads']}", file=sys.stderr)
                row, seconds = watch_rounds(DEPLOYCTL + ["watch", *base, "--run-dir", str(run_dir)], env,
                                            args.watch_rounds, args.interval)
                rows.append((width, f"watch (--interval {args.interval:g})", row, seconds))
        finally:
            mc.stop()
    print(f"{n} simulated A3 hosts (tests/fakecluster ManyHostCluster) on this machine: {platform.system().lower()}, "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs; a new deployctl process per command\n")
    print("| fan-out | command | wall (s) | deployctl CPU (s) | peak RSS (MB) | peak fds | peak TCP sockets | "
          "peak threads | watch rounds: seconds / deployctl CPU (s) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for width, what, r, seconds in rows:
        rounds = ", ".join(f"{s:.1f} / {c:.1f}" for s, c in seconds) if seconds else ""
        print(f"| {width} | `{what}` | {r['wall']:.1f} | {r['cpu']:.1f} | {r['rss']:.0f} | {r['fds']} | "
              f"{r['sockets']} | {r['threads']} | {rounds} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
