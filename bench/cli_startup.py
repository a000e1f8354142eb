#!/usr/bin/env python3
"""Benchmark: wall time of `deployctl --help`, `validate`, `plan` and `render` on the examples.

Usage: .venv/bin/python bench/cli_startup.py [--runs N]
Prints a Markdown table (median and best of N runs); results are recorded in docs/dev/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEPLOYCTL = Path(sys.executable).parent / "deployctl"


def timed(args: list[str], runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([str(DEPLOYCTL), *args], cwd=ROOT, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    cases = [("deployctl --help", ["--help"])]
    for inv in sorted((ROOT / "inventories" / "examples").glob("*.yaml")):
        rel = str(inv.relative_to(ROOT))
        cases.append((f"validate {inv.stem}", ["validate", "-i", rel]))
        cases.append((f"plan {inv.stem}", ["plan", "-i", rel]))
    with tempfile.TemporaryDirectory() as tmp:
        for inv in sorted((ROOT / "inventories" / "examples").glob("*.yaml")):
            rel = str(inv.relative_to(ROOT))
            cases.append((f"render {inv.stem}", ["render", "-i", rel, "-o", f"{tmp}/{inv.stem}"]))
        print(f"{runs} runs each, {sys.platform}, Python {sys.version.split()[0]}\n")
        print("| command | median (ms) | best (ms) |")
        print("|---|---:|---:|")
        for label, args in cases:
            med, best = timed(args, runs)
            print(f"| `{label}` | {med * 1000:.0f} | {best * 1000:.0f} |")


if __name__ == "__main__":
    main()
