"""`deployctl status` and `up --dry-run` over fleets of simulated hosts: 2, 8, 16 and 64 A2 hosts (tests/fakecluster:
a real sshd per host in its own network and mount namespace), a fleet of 2-server tp-pp replicas behind the
router. Wall time and peak memory (max RSS) of the deployctl process, a new process each time, as a user runs it.

Nothing is deployed: `status` reads every host (revision links, containers, history, the router), `up --dry-run
--skip-preflight` reads every host, renders every revision and diffs them (what `up` does before it asks).

    sudo .venv/bin/python bench/fleet_fanout.py [--sizes 2,8,16,64] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]

from fakecluster import FakeCluster, default_cluster  # noqa: E402
from fakecluster.hostenv import bench_ready  # noqa: E402
from fakecluster.spec import DEFAULT_IMAGES, DEFAULT_WEIGHTS_DIR  # noqa: E402
from plan_scale import measure  # noqa: E402

DEPLOYCTL = ROOT / ".venv" / "bin" / "deployctl"
TAIL = """engine: {{image: {image}}}
model: {{name: deepseek-r1, quant: w8a8, weights_path: {weights}, served_name: ds-r1, max_seq_len: 8192,
        max_input_len: 4096, max_batch_size: 32}}
layout: {{preset: tp-pp, replicas: {replicas}}}
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="2,8,16,64")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.05, help="seconds per simulated npu-smi/hccn_tool call")
    args = ap.parse_args()
    if not bench_ready():
        return 2
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory(prefix=f"fleet-bench-{n}-") as tmp:
            work = Path(tmp)
            fc = FakeCluster(default_cluster(n, "a2", slow=args.latency), work / "fc")
            try:
                t0 = time.perf_counter()
                fc.start()
                started = time.perf_counter() - t0
                inv = work / "inv.yaml"
                inv.write_text(fc.inventory_snippet() + TAIL.format(image=DEFAULT_IMAGES["a2"],
                                                                    weights=DEFAULT_WEIGHTS_DIR, replicas=n // 2))
                cmds = {"status": [str(DEPLOYCTL), "status", "-i", str(inv), "--output", "json"],
                        "up --dry-run": [str(DEPLOYCTL), "up", "-i", str(inv), "--dry-run", "--skip-preflight",
                                         "--run-dir", str(work / "runs"), "--output", "json"]}
                for what, argv in cmds.items():
                    runs = [measure(argv, ok=(0, 1)) for _ in range(args.runs)]
                    rows.append((n, what, statistics.median(r[0] for r in runs), max(r[1] for r in runs), started))
                    print(f"  {n:3} hosts {what:13} {rows[-1][2]:.2f} s {rows[-1][3]:.0f} MB", file=sys.stderr)
            finally:
                fc.stop()
    print(f"median of {args.runs} runs, simulated tool latency {args.latency * 1000:.0f} ms, {os.cpu_count()} CPUs\n")
    print("| hosts | command | wall (s) | vs 2 hosts | peak RSS (MB) | starting the simulated hosts (s) |")
    print("|---:|---|---:|---:|---:|---:|")
    base = {what: wall for n, what, wall, _, _ in rows if n == rows[0][0]}
    for n, what, wall, rss, started in rows:
        print(f"| {n} | `{what}` | {wall:.2f} | {wall / base[what]:.2f}x | {rss:.0f} | {started:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
