#!/usr/bin/env python3
"""Benchmark: `deployctl preflight` wall time over 1 to 64 simulated hosts, against the same probes run
through an `ansible` ad-hoc command on the same hosts.

Usage (root: the simulated hosts are sshd processes in network namespaces, see tests/fakecluster):

    .venv/bin/python bench/preflight_fanout.py [--sizes 1,4,16,32,64] [--runs 3] [--hardware a2] [--latency 0.05]
        [--workers N] [--no-ansible]

For each size it starts a fake cluster, then times (median of --runs, each a new process as a user runs it)

* `deployctl preflight -i INV --output json`: phase 1 (clock + one batch of every probe per host, 8 at a
  time), phase 2 (each host pings up to 16 peers' device IPs, as soon as those peers' facts are in), the
  rules and the facts file;
* `ansible all -i HOSTS -m ansible.builtin.shell -a '<batch>' -f <hosts>`, twice: with the phase-1 probes one
  after another (`batch_argv(host_commands(...))`: what one ad-hoc command or shell task does), and with
  deployctl's own concurrent phase-1 script (`parallel=PROBE_CONCURRENCY`); over OpenSSH with the fake's
  key and known_hosts, pipelining on, ControlMaster=no, KexAlgorithms=curve25519-sha256. Ansible does less
  than preflight (no clock, no pings, no parsing or rules).

It also counts CPU: the timed process's (getrusage of children) and the simulated hosts' (every process
under the nodes' sshds: sshd, sh, timeout, the fake tools), since all hosts share this machine's cores,
and what the largest cluster costs to start (seconds, RSS of its processes, disk).

`--latency S` makes every simulated npu-smi / hccn_tool call take S seconds longer (default 0.05; real tools
are slower; with 0 a simulated host is pure CPU work). Prints Markdown tables; results are recorded in
docs/dev/benchmarks.md. Clusters are torn down on exit, on SIGTERM (`timeout`) and on Ctrl-C; clusters of
earlier runs that died are removed first.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))        # tests/fakecluster
BIN = Path(sys.executable).parent
DEPLOYCTL = BIN / "deployctl"

from fakecluster import FakeCluster, check_environment, default_cluster  # noqa: E402
from fakecluster.cluster import _pids_in_netns, gc_stale  # noqa: E402
from fakecluster.spec import DEFAULT_IMAGES, DEFAULT_WEIGHTS_DIR  # noqa: E402

from deployctl.io.batch import END, PROBE_CONCURRENCY, batch_argv  # noqa: E402
from deployctl.features.preflight.probes import host_commands  # noqa: E402

TAIL = """\
engine:
  image: {image}
model:
  name: deepseek-r1
  quant: w8a8
  weights_path: {weights}
  served_name: ds-r1
  max_seq_len: 8192
  max_input_len: 4096
  max_batch_size: 32
layout:
{layout}
"""
HZ = os.sysconf("SC_CLK_TCK")


def find_ansible() -> Path | None:
    for candidate in (BIN / "ansible", shutil.which("ansible")):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    return None


def write_deployctl_inventory(fc: FakeCluster, path: Path) -> Path:
    """The fake's cluster/ssh/nodes + engine/model/layout; a layout the model accepts for the node count
    (one instance spans at most 60 servers: above that, prefill and decode instances of half each)."""
    hw = fc.specs[0].hardware
    names = [n.name for n in fc.nodes]
    if len(names) == 1:
        layout = "  preset: single"
    elif len(names) <= 60:
        layout = "  preset: dp-ep"
    else:
        half = len(names) // 2
        layout = (f"  preset: pd-split\n  prefill: {{nodes: [{', '.join(names[:half])}]}}\n"
                  f"  decode: {{nodes: [{', '.join(names[half:])}]}}")
    path.write_text(fc.inventory_snippet() + TAIL.format(image=DEFAULT_IMAGES[hw], weights=DEFAULT_WEIGHTS_DIR,
                                                         layout=layout))
    return path


def write_ansible_files(fc: FakeCluster, work: Path) -> tuple[Path, dict[str, str]]:
    """An INI inventory of the fake hosts and the environment (config) for `ansible`."""
    hosts = work / "hosts.ini"
    hosts.write_text("[all]\n" + "".join(f"{n.name} ansible_host={n.ip}\n" for n in fc.nodes) + "\n[all:vars]\n"
                     "ansible_user=root\n"
                     f"ansible_ssh_private_key_file={fc.client_key}\n"
                     "ansible_python_interpreter=/usr/bin/python3\n")
    ssh_args = " ".join([
        "-o ControlMaster=no", "-o KexAlgorithms=curve25519-sha256", f"-o UserKnownHostsFile={fc.known_hosts}",
        "-o GlobalKnownHostsFile=/dev/null", "-o StrictHostKeyChecking=yes", "-o IdentitiesOnly=yes",
        "-o BatchMode=yes", "-o ConnectTimeout=10"])
    cfg = work / "ansible.cfg"
    cfg.write_text("[defaults]\nhost_key_checking = True\ninterpreter_python = /usr/bin/python3\n"
                   "retry_files_enabled = False\n"
                   f"local_tmp = {work / 'ansible-tmp'}\n"
                   "[ssh_connection]\npipelining = True\n"
                   f"ssh_args = {ssh_args}\n")
    env = {**os.environ, "ANSIBLE_CONFIG": str(cfg), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_HOME": str(work / "ah")}
    return hosts, env


def ansible_arg(parallel: bool | int, commands) -> str:
    sh, dash_c, script = batch_argv(commands, per_command_timeout=60, parallel=parallel)
    # ansible templates ad-hoc arguments with Jinja2: keep `{{.Server.Version}}` (docker --format) literal
    # (and an argument starting with "{" would be read as JSON)
    return f"{sh} {dash_c} {{% raw %}}{shlex.quote(script)}{{% endraw %}}"


def sshd_pids(fc: FakeCluster) -> list[int]:
    pids = []
    for n in fc.nodes:
        try:
            pids.append(int((n.dir / "sshd.pid").read_text()))
        except (OSError, ValueError):
            pass
    return pids


def reaped_cpu(pids: list[int]) -> float:
    """CPU seconds of the sshds and of every descendant they have reaped (each connection's processes)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / HZ        # utime stime cutime cstime
    return total


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def disk_mib(path: Path) -> float:
    """Disk the cluster's files use (the weights' shards are sparse: blocks used, not their size)."""
    res = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True)
    return int(res.stdout.split()[0]) / 1024 if res.returncode == 0 else 0.0


def cluster_rss_mib(fc: FakeCluster) -> tuple[float, int]:
    """RSS of every process in the cluster's namespaces (the sshds, between runs) and how many there are."""
    rss, count = 0, 0
    for n in fc.nodes:
        for pid in _pids_in_netns(n.netns):
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            count += 1
            rss += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return rss / 1024, count


def timed(argv: list[str], runs: int, check, fc: FakeCluster, env: dict | None = None):
    """Wall seconds per run, and the median run's CPU: (timed process tree, simulated hosts)."""
    times, cpu = [], []
    pids = sshd_pids(fc)
    for _ in range(runs):
        c0, h0 = children_cpu(), reaped_cpu(pids)
        t0 = time.perf_counter()
        res = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
        times.append(time.perf_counter() - t0)
        time.sleep(0.3)                     # the nodes' sshds reap the closed connections' processes
        cpu.append((children_cpu() - c0, reaped_cpu(pids) - h0))
        check(res)
    median = sorted(range(runs), key=lambda i: times[i])[runs // 2]
    return times, cpu[median]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,4,16,32,64", help="cluster sizes (comma-separated)")
    parser.add_argument("--runs", type=int, default=3, help="runs per tool and size (median reported)")
    parser.add_argument("--hardware", choices=("a2", "a3"), default="a2")
    parser.add_argument("--latency", type=float, default=0.05,
                        help="seconds every simulated npu-smi/hccn_tool call takes (default 0.05)")
    parser.add_argument("--workers", type=int, default=None, help="deployctl preflight --workers (default: its own)")
    parser.add_argument("--no-ansible", action="store_true", help="time deployctl only")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    problems = check_environment()
    if problems:
        print("cannot start simulated hosts here:\n  - " + "\n  - ".join(problems), file=sys.stderr)
        return 2
    ansible = None if args.no_ansible else find_ansible()
    if ansible is None and not args.no_ansible:
        print("`ansible` not found (the comparison runs the probes through ansible-core); install it into the "
              f"venv:\n  {BIN / 'pip'} install ansible-core\n"
              "or pass --no-ansible to time deployctl only", file=sys.stderr)
        return 2
    # `timeout` sends SIGTERM: turn it into an exception so that the `finally` below stops the cluster
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    gc_stale()                              # clusters of earlier benchmark or test runs that were killed
    if ansible:
        version = subprocess.run([str(ansible), "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    hw = args.hardware
    commands = host_commands(hw, DEFAULT_IMAGES[hw], DEFAULT_WEIGHTS_DIR)
    variants = {"one by one": ansible_arg(False, commands), "concurrent": ansible_arg(PROBE_CONCURRENCY, commands)}

    rows, start_cost = [], None
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix=f"pf-bench-{n}-") as tmp:
            work = Path(tmp)
            fc = FakeCluster(default_cluster(n, hw, slow=args.latency), work / "fc")
            try:
                fc.start()
                time.sleep(1)               # the sshds are up (daemonized, pid files written)
                rss, procs = cluster_rss_mib(fc)
                start_cost = (n, fc.start_seconds, fc.phase_seconds, rss, procs, disk_mib(work / "fc"))
                inv = write_deployctl_inventory(fc, work / "inventory.yaml")

                def check_deployctl(res, n=n):
                    if res.returncode != 0:
                        raise SystemExit(f"deployctl preflight on {n} hosts exited {res.returncode}:\n"
                                         f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}")

                workers = ["--workers", str(args.workers)] if args.workers else []
                dc = timed([str(DEPLOYCTL), "preflight", "-i", str(inv), "--output", "json",
                            "--run-dir", str(work / "runs"), *workers], args.runs, check_deployctl, fc)
                an = {}
                if ansible:
                    hosts, env = write_ansible_files(fc, work)

                    def check_ansible(res, n=n):
                        ok = res.stdout.count(" | CHANGED | rc=0 >>")
                        ends = res.stdout.count(END + " ")
                        if res.returncode != 0 or ok != n or ends != n * len(commands):
                            raise SystemExit(f"ansible on {n} hosts: exit {res.returncode}, {ok} hosts ok, "
                                             f"{ends} of {n * len(commands)} probe outputs:\n"
                                             f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}")

                    for label, arg in variants.items():
                        an[label] = timed([str(ansible), "all", "-i", str(hosts), "-m", "ansible.builtin.shell",
                                           "-a", arg, "-f", str(n)], args.runs, check_ansible, fc, env)
            finally:
                fc.stop()
        rows.append((n, dc, an))
        print(f"  {n} hosts: deployctl {statistics.median(dc[0]):.2f} s"
              + "".join(f", ansible {k} {statistics.median(v[0]):.2f} s" for k, v in an.items()), file=sys.stderr)

    cpus = os.cpu_count()
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    print(f"{hw.upper()} hosts, {len(commands)} probes per host, simulated tool latency {args.latency * 1000:.0f} ms; "
          f"median of {args.runs} runs; {cpus} CPUs, {mem_gib:.0f} GiB, {sys.platform}, "
          f"Python {sys.version.split()[0]}" + (f", {version}" if ansible else "") + "\n")
    base = statistics.median(rows[0][1][0]) if rows else 0
    head = "| hosts | deployctl preflight (s) | vs first size |"
    if ansible:
        head += " ansible, probes one by one (s) | ansible / deployctl | ansible, deployctl's concurrent script (s) |"
    print(head)
    print("|" + "---:|" * (head.count("|") - 1))
    for n, dc, an in rows:
        t = statistics.median(dc[0])
        line = f"| {n} | {t:.2f} | {t / base:.2f}x |"
        if an:
            seq, conc = statistics.median(an["one by one"][0]), statistics.median(an["concurrent"][0])
            line += f" {seq:.2f} | {seq / t:.1f}x | {conc:.2f} |"
        print(line)
    print("\nCPU seconds of the median run: the timed process (and its children) / the simulated hosts; "
          f"the floor is their sum over {cpus} CPUs\n")
    head = "| hosts | deployctl: own / hosts' CPU-s | floor (s) |"
    if ansible:
        head += " ansible one by one: own / hosts' CPU-s | ansible concurrent: own / hosts' CPU-s |"
    print(head)
    print("|" + "---:|" * (head.count("|") - 1))
    for n, dc, an in rows:
        own, hosts_cpu = dc[1]
        line = f"| {n} | {own:.2f} / {hosts_cpu:.2f} | {(own + hosts_cpu) / cpus:.2f} |"
        for label in an:
            a_own, a_hosts = an[label][1]
            line += f" {a_own:.2f} / {a_hosts:.2f} |"
        print(line)
    if start_cost:
        n, secs, phases, rss, procs, disk = start_cost
        print(f"\nStarting the {n}-host cluster: {secs:.1f} s ("
              + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items())
              + f"); idle it is {procs} processes (one sshd per node) with {rss:.0f} MiB RSS in all, "
              f"and {disk:.0f} MiB of files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
