#!/usr/bin/env python3
"""Benchmark: `render --target helm` and `up | diff | status --target k8s`, as a user runs them.

Usage:

    .venv/bin/python bench/k8s_up.py [--runs 5]

For each example inventory: `render -t helm --values-only` (no helm), `render -t helm` (+ `helm template`),
then against the in-repo fake API server (tests/fakek8s, pods become ready at once, so what is measured is
deployctl's own work: rendering, helm, API reads, diffing, polling): a first `up -t k8s -y`, a no-op
re-run, `diff -t k8s` and `status -t k8s`, then `down`. Each command is a new process. Prints a Markdown
table of medians; results are recorded in docs/benchmarks.md. helm: $DEPLOYCTL_HELM or node_modules/.bin/helm.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
EXAMPLES = ROOT / "inventories" / "examples"
DEPLOYCTL = Path(sys.executable).parent / "deployctl"
NPU = "huawei.com/Ascend910"


def run(args: list[str], cwd: Path, env: dict) -> float:
    start = time.perf_counter()
    res = subprocess.run([str(DEPLOYCTL), *args], cwd=cwd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return took


def main() -> int:
    from fakek8s.server import FakeKubeAPI

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    opts = ap.parse_args()
    helm = os.environ.get("DEPLOYCTL_HELM") or str(ROOT / "node_modules" / ".bin" / "helm")
    rows = []
    for inv_path in sorted(EXAMPLES.glob("*.yaml")):
        times: dict[str, list[float]] = {}
        for _ in range(opts.runs):
            api = FakeKubeAPI(validate=False)
            api.start()
            try:
                tmp = Path(tempfile.mkdtemp(prefix="bench-k8s-"))
                env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "DEPLOYCTL_HELM": helm, "COLUMNS": "120"}
                raw = yaml.safe_load(inv_path.read_text())
                per = 8 if raw["cluster"]["hardware"] == "a2" else 16
                accel = "module-910b-8" if per == 8 else (
                    "module-a3-16-super-pod" if raw["cluster"].get("super_pod") else "module-a3-16")
                for node in raw["nodes"]:
                    api.add_node(node["name"], node["address"], labels={"accelerator-type": accel},
                                 allocatable={NPU: str(per)})
                kc = api.write_kubeconfig(tmp / "kubeconfig")
                inv = tmp / inv_path.name
                inv.write_text(inv_path.read_text().replace("hccn/", str(EXAMPLES / "hccn") + "/")
                               + f"\nkubernetes:\n  namespace: bench\n  kubeconfig: {kc}\n")
                steps = [("render --values-only", ["render", "-t", "helm", "--values-only", "-i", str(inv),
                                                   "-o", str(tmp / "v")]),
                         ("render (helm template)", ["render", "-t", "helm", "-i", str(inv), "-o", str(tmp / "r")]),
                         ("up (install)", ["up", "-t", "k8s", "-y", "-i", str(inv)]),
                         ("up (no change)", ["up", "-t", "k8s", "-y", "-i", str(inv)]),
                         ("diff", ["diff", "-t", "k8s", "-i", str(inv)]),
                         ("status", ["status", "-t", "k8s", "-i", str(inv)]),
                         ("down", ["down", "-t", "k8s", "-i", str(inv)])]
                for name, args in steps:
                    times.setdefault(name, []).append(run(args, tmp, env))
            finally:
                api.stop()
        rows.append((inv_path.stem, {k: statistics.median(v) for k, v in times.items()}))
    names = list(rows[0][1])
    print(f"{opts.runs} runs each, medians in seconds, Python {sys.version.split()[0]}\n")
    print("| example | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for stem, t in rows:
        print(f"| {stem} | " + " | ".join(f"{t[n]:.2f}" for n in names) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
