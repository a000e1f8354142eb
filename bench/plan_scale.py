"""`deployctl plan` and `render` at fleet scale: 1,024 to 8,192 Atlas 800 A3 servers (16 dies each), as a user
runs them (a new process each time), wall time and peak memory (max RSS) of the process, and how the time grows
from the smallest size to the largest (linear: the ratio of the sizes).

Two layouts per size, generated here (every node with its 16 device IPs, as a real inventory lists them):
  * mixed: DeepSeek-V3 W8A8 on MindIE 2.2, preset dp-ep, `replicas: servers / 16` (512 instances x 16 at 8,192);
  * xPyD: DeepSeek-V3 W8A8 on vLLM-Ascend 0.13, prefill instances of 8 servers and decode instances of 16 over
    half the servers each: 16P + 8D at 256 servers, 64P + 32D at 1,024 (16P + 8D over 1,024 servers would make
    instances of 32 and 64 servers, whose expert parallelism exceeds DeepSeek's 256 routed experts).

    .venv/bin/python bench/plan_scale.py [--runs 3] [--sizes 1024,4096,8192]

Prints a markdown table (median of the runs); docs/dev/benchmarks.md keeps the result. `render` runs into a new
directory on a tmpfs (/dev/shm: deployctl's own time), again over that tree (`--force`: the previous tree is swapped
out and removed), and into a new directory on the disk (adds the filesystem's cost of creating thousands of files,
which on a VM disk is most of it). Processes a command forks (render's acceptance check, the second writer) are
included in the wall time; peak RSS is the largest of the process and its children.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "deployctl"]
MODEL = ("model: {name: deepseek-v3, quant: w8a8, weights_path: /data/models/DeepSeek-V3-W8A8, served_name: ds, "
         "max_seq_len: 8192, max_input_len: 4096, max_batch_size: 32}")


def inventory(servers: int, kind: str) -> str:
    lines = [f"cluster: {{name: scale-{kind}-{servers}, hardware: a3}}"]
    if kind == "mixed":
        lines += ["engine: {image: swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie:2.2.RC1-800I-A3-py311-"
                  "openeuler24.03-lts}", MODEL, f"layout: {{preset: dp-ep, replicas: {servers // 16}}}"]
    else:
        half = servers // 2
        names = [f"n{i}" for i in range(servers)]
        lines += ["engine: {kind: vllm-ascend, image: quay.io/ascend/vllm-ascend:v0.13.0-a3}", MODEL, "layout:",
                  "  preset: pd-split",
                  f"  prefill: {{nodes: [{', '.join(names[:half])}], instances: {half // 8}}}",
                  f"  decode: {{nodes: [{', '.join(names[half:])}], instances: {half // 16}}}"]
    lines.append("nodes:")
    for i in range(servers):
        a, b = divmod(i, 250)
        devices = ", ".join(f"{{id: {d}, ip: 29.{a}.{b}.{d + 10}}}" for d in range(16))
        lines += [f"  - name: n{i}", f"    address: 10.{a}.{b}.2", "    interface: eth0", f"    devices: [{devices}]"]
    return "\n".join(lines) + "\n"


def measure(argv: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one run in a new process (its exit code one of ``ok``)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) not in ok:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="1024,4096,8192")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    ram_root = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir=ram_root) as ram:
        for kind in ("mixed", "xpyd"):
            for n in sizes:
                inv = Path(tmp) / f"{kind}-{n}.yaml"
                inv.write_text(inventory(n, kind))
                out = Path(tmp) / f"out-{kind}-{n}"
                shm = Path(ram) / f"out-{kind}-{n}"
                render = CLI + ["render", "-i", str(inv), "--output", "json", "-o"]
                cmds = {"plan": (CLI + ["plan", "-i", str(inv), "--output", "json"], None, False),
                        "render (tmpfs)": (render + [str(shm)], shm, True),
                        "render --force (tmpfs)": (render + [str(shm), "--force"], shm, False),
                        "render (disk)": (render + [str(out)], out, True)}
                for what, (argv, where, fresh) in cmds.items():
                    runs = []
                    for _ in range(args.runs):
                        if fresh and where is not None:      # a first render: into a directory that is not there
                            shutil.rmtree(where, ignore_errors=True)
                        runs.append(measure(argv))
                    wall = statistics.median(r[0] for r in runs)
                    rss = max(r[1] for r in runs)
                    files = sum(1 for _ in where.rglob("*") if _.is_file()) if where else None
                    rows.append((kind, n, what, wall, rss, files, inv.stat().st_size))
                    print(f"{kind:6} {n:5} {what:14} {wall:6.2f} s  {rss:6.0f} MB", file=sys.stderr)
    print(f"{args.runs} runs each (median wall time, largest peak RSS), {platform.system().lower()}, Python "
          f"{platform.python_version()}, {os.cpu_count()} CPUs\n")
    print("| layout | servers | inventory | command | wall (s) | per 100 servers (s) | peak RSS (MB) | files |")
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for kind, n, what, wall, rss, files, size in rows:
        layout = f"{n // 16} x 16 mixed" if kind == "mixed" else f"{n // 16}P x 8 + {n // 32}D x 16"
        print(f"| {layout} | {n:,} | {size / 1024:,.0f} kB | `{what}` | {wall:.2f} | {100 * wall / n:.2f} | "
              f"{rss:.0f} | {files if files is not None else ''} |")
    small, large = min(sizes), max(sizes)
    if small != large:
        print(f"\nTime at {large:,} servers / time at {small:,} (linear: {large / small:g}):")
        walls = {(kind, n, what): wall for kind, n, what, wall, *_ in rows}
        for kind, n, what, *_ in rows:
            if n == large:
                print(f"- {kind} `{what}`: {walls[(kind, large, what)] / walls[(kind, small, what)]:.1f}")


if __name__ == "__main__":
    main()
