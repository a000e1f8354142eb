#!/usr/bin/env python3
"""Benchmark: `deployctl preflight` wall time over 1, 4, 16 and 32 simulated hosts, against the same
probes run through an `ansible` ad-hoc command on the same hosts.

Usage (root: the simulated hosts are sshd processes in network namespaces, see tests/fakecluster):

    .venv/bin/python bench/preflight_fanout.py [--sizes 1,4,16,32] [--runs 3] [--hardware a2] [--latency 0]

For each size it starts a fake cluster, then times (median of --runs, each a new process as a user runs it)

* `deployctl preflight -i INV --output json`: phase 1 (clock + one batch of every probe per host),
  phase 2 (each host pings up to 16 peers' device IPs), the rules and the facts file;
* `ansible all -i HOSTS -m ansible.builtin.shell -a '<batch>' -f <hosts>`: the very batch script deployctl
  runs in phase 1 (`batch_argv(host_commands(...))`), over OpenSSH with the fake's key and known_hosts,
  pipelining on, ControlMaster=no, KexAlgorithms=curve25519-sha256. Ansible does less than preflight
  (no clock, no pings, no parsing or rules).

`--latency S` makes every simulated npu-smi / hccn_tool call take S seconds longer (real tools are not
instant; with 0 a simulated host is pure CPU work and the machine's core count bounds the fan-out).
Prints a Markdown table; results are recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
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
from fakecluster.spec import DEFAULT_IMAGES, DEFAULT_WEIGHTS_DIR  # noqa: E402

from deployctl.preflight.batch import END, batch_argv  # noqa: E402
from deployctl.preflight.probes import host_commands  # noqa: E402

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
  preset: {preset}
"""


def find_ansible() -> Path | None:
    for candidate in (BIN / "ansible", shutil.which("ansible")):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    return None


def write_deployctl_inventory(fc: FakeCluster, path: Path) -> Path:
    hw = fc.specs[0].hardware
    preset = "single" if len(fc.nodes) == 1 else "dp-ep"
    path.write_text(fc.inventory_snippet() + TAIL.format(image=DEFAULT_IMAGES[hw], weights=DEFAULT_WEIGHTS_DIR,
                                                         preset=preset))
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


def timed(argv: list[str], runs: int, check, env: dict | None = None) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        res = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
        times.append(time.perf_counter() - t0)
        check(res)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,4,16,32", help="cluster sizes (comma-separated)")
    parser.add_argument("--runs", type=int, default=3, help="runs per tool and size (median reported)")
    parser.add_argument("--hardware", choices=("a2", "a3"), default="a2")
    parser.add_argument("--latency", type=float, default=0.0,
                        help="seconds every simulated npu-smi/hccn_tool call takes (default 0)")
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
    if ansible:
        version = subprocess.run([str(ansible), "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    hw = args.hardware
    commands = host_commands(hw, DEFAULT_IMAGES[hw], DEFAULT_WEIGHTS_DIR)
    sh, dash_c, script = batch_argv(commands, per_command_timeout=60)
    # ansible templates ad-hoc arguments with Jinja2: keep `{{.Server.Version}}` (docker --format) literal
    # (and an argument starting with "{" would be read as JSON)
    ansible_arg = f"{sh} {dash_c} {{% raw %}}{shlex.quote(script)}{{% endraw %}}"

    rows = []
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix=f"pf-bench-{n}-") as tmp:
            work = Path(tmp)
            fc = FakeCluster(default_cluster(n, hw, slow=args.latency), work / "fc").start()
            try:
                inv = write_deployctl_inventory(fc, work / "inventory.yaml")

                def check_deployctl(res, n=n):
                    if res.returncode != 0:
                        raise SystemExit(f"deployctl preflight on {n} hosts exited {res.returncode}:\n"
                                         f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}")

                t_dc = timed([str(DEPLOYCTL), "preflight", "-i", str(inv), "--output", "json",
                              "--run-dir", str(work / "runs")], args.runs, check_deployctl)
                t_an = None
                if ansible:
                    hosts, env = write_ansible_files(fc, work)

                    def check_ansible(res, n=n):
                        ok = res.stdout.count(" | CHANGED | rc=0 >>")
                        ends = res.stdout.count(END + " ")
                        if res.returncode != 0 or ok != n or ends != n * len(commands):
                            raise SystemExit(f"ansible on {n} hosts: exit {res.returncode}, {ok} hosts ok, "
                                             f"{ends} of {n * len(commands)} probe outputs:\n"
                                             f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}")

                    t_an = timed([str(ansible), "all", "-i", str(hosts), "-m", "ansible.builtin.shell",
                                  "-a", ansible_arg, "-f", str(n)], args.runs, check_ansible, env)
            finally:
                fc.stop()
        rows.append((n, t_dc, t_an))
        print(f"  {n} hosts: deployctl {statistics.median(t_dc):.2f} s"
              + (f", ansible {statistics.median(t_an):.2f} s" if t_an else ""), file=sys.stderr)

    cpus = os.cpu_count()
    print(f"{hw.upper()} hosts, {len(commands)} probes per host, simulated tool latency {args.latency * 1000:.0f} ms; "
          f"median of {args.runs} runs; {cpus} CPUs, {sys.platform}, Python {sys.version.split()[0]}"
          + (f", {version}" if ansible else "") + "\n")
    base = statistics.median(rows[0][1]) if rows else 0
    if ansible:
        print("| hosts | deployctl preflight (s) | vs first size | ansible ad-hoc, same probes (s) | ansible / deployctl |")
        print("|---:|---:|---:|---:|---:|")
    else:
        print("| hosts | deployctl preflight (s) | vs first size |")
        print("|---:|---:|---:|")
    for n, t_dc, t_an in rows:
        dc = statistics.median(t_dc)
        line = f"| {n} | {dc:.2f} | {dc / base:.2f}x |"
        if t_an:
            an = statistics.median(t_an)
            line += f" {an:.2f} | {an / dc:.1f}x |"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
