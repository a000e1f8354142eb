#!/usr/bin/env python3
"""Benchmark: wall time of `deployctl recommend` (deployctl.core.sizing.recommend) on the examples and on 64 servers.

Usage: .venv/bin/python bench/recommend_speed.py [--runs N]
Each run is a new Python process, as a user runs the command: it loads and validates the inventory, then ranks
every layout (`recommend_report`, objective 3500 in / 1500 out, TPOT <= 50 ms, TTFT <= 2 s). The 64-server
inventories are generated from inventories/examples/a2-4x8-dp-ep.yaml (A2, DeepSeek-R1 W8A8, MindIE) with 64
nodes, and the same on A3 (16 dies per server, no super pod). Prints a Markdown table (median and best of N runs);
results are recorded in docs/dev/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "inventories" / "examples"

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from deployctl.cli.commands import load_and_validate
from deployctl.core.sizing.recommend import Objective, recommend_report
inv = load_and_validate(sys.argv[1])
t1 = time.perf_counter()
rec = recommend_report(inv, Objective(input_len=3500, output_len=1500, slo_tpot_ms=50, slo_ttft_ms=2000))
t2 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "recommend": t2 - t1, "considered": rec.considered,
                  "candidates": len(rec.candidates)}))
"""


def big_inventory(hardware: str, servers: int, out: Path) -> Path:
    """The 4 x A2 example grown to `servers` servers (and moved to A3), with a layout that plans."""
    doc = yaml.safe_load((EXAMPLES / "a2-4x8-dp-ep.yaml").read_text())
    per = 8 if hardware == "a2" else 16
    doc["cluster"].update(hardware=hardware, name=f"bench-{hardware}-{servers}")
    doc["engine"]["image"] = doc["engine"]["image"].replace("-A2-", f"-{hardware.upper()}-")
    doc["nodes"] = [{"name": f"n{i}", "address": f"10.9.{i // 250}.{i % 250 + 2}",
                     "devices": [{"id": d, "ip": f"29.{i // 100}.{i % 100}.{d + 2}"} for d in range(per)]}
                    for i in range(servers)]
    names = [n["name"] for n in doc["nodes"]]
    half = servers // 2
    split = {} if hardware == "a2" else {"moe_tp": 2}      # EP over 32 A3 servers (512 dies) needs expert TP 2
    doc["layout"] = {"preset": "pd-split", "prefill": {"nodes": names[:half], **split},
                     "decode": {"nodes": names[half:], **split}}
    path = out / f"{hardware}-{servers}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def timed(path: Path, runs: int) -> dict:
    rows = []
    for _ in range(runs):
        start = time.perf_counter()
        got = subprocess.run([sys.executable, "-c", CHILD, str(path)], cwd=ROOT, check=True, capture_output=True,
                             text=True)
        row = json.loads(got.stdout)
        row["process"] = time.perf_counter() - start
        rows.append(row)
    pick = lambda k: (statistics.median(r[k] for r in rows), min(r[k] for r in rows))  # noqa: E731
    return {"recommend": pick("recommend"), "load": pick("load"), "process": pick("process"),
            "considered": rows[0]["considered"], "candidates": rows[0]["candidates"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(p.stem, p) for p in sorted(EXAMPLES.glob("*.yaml"))]
        cases += [(f"64 x {hw.upper()} (generated)", big_inventory(hw, 64, Path(tmp))) for hw in ("a2", "a3")]
        print(f"{runs} runs each (a new process each), {sys.platform}, Python {sys.version.split()[0]}\n")
        print("| inventory | layouts considered | proposed | recommend median (s) | best (s) "
              "| load + validate (s) | whole process (s) |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for label, path in cases:
            r = timed(path, runs)
            print(f"| {label} | {r['considered']} | {r['candidates']} | {r['recommend'][0]:.3f} | "
                  f"{r['recommend'][1]:.3f} | {r['load'][0]:.3f} | {r['process'][0]:.2f} |")


if __name__ == "__main__":
    main()
