#!/usr/bin/env python3
"""Benchmark: `render --target helm` and `up | diff | status --target k8s`, as a user runs them.

Usage:

    .venv/bin/python bench/k8s_up.py [--runs 5]

For each example inventory: `render -t helm --values-only` (no helm), `render -t helm` (+ `helm template`),
then against a real control plane (tests/k8scluster.py: kube-apiserver/controller-manager/scheduler
v1.36, etcd, kwok nodes whose pods become ready within a second, helm v3.22 built from Go modules; one
cluster for the whole run, a namespace per example and run): a first `up -t k8s -y`, a no-op re-run,
`diff -t k8s` and `status -t k8s`, then `down`. Each command is a new process. Prints a Markdown table of
medians; results are recorded in docs/dev/benchmarks.md. MindIE pd-split examples are left out (refused for
Kubernetes).
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
    from k8scluster import start_cluster

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    opts = ap.parse_args()
    cluster = start_cluster(watch_pid=os.getpid())
    rows = []
    try:
        for inv_path in sorted(EXAMPLES.glob("*.yaml")):
            if "pd-split" in inv_path.read_text() and "kind: vllm-ascend" not in inv_path.read_text():
                continue
            rows.append((inv_path.stem, bench_example(cluster, inv_path, opts.runs)))
    finally:
        cluster.stop()
    names = list(rows[0][1])
    print(f"{opts.runs} runs each, medians in seconds, Python {sys.version.split()[0]}\n")
    print("| example | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for stem, t in rows:
        print(f"| {stem} | " + " | ".join(f"{t[n]:.2f}" for n in names) + " |")
    return 0


def bench_example(cluster, inv_path: Path, runs: int) -> dict[str, float]:
    raw = yaml.safe_load(inv_path.read_text())
    per = 8 if raw["cluster"]["hardware"] == "a2" else 16
    accel = "module-910b-8" if per == 8 else (
        "module-a3-16-super-pod" if raw["cluster"].get("super_pod") else "module-a3-16")
    cluster.add_nodes([{"name": n["name"], "ip": n["address"], "accelerator_type": accel, "npus": per}
                       for n in raw["nodes"]])
    times: dict[str, list[float]] = {}
    for i in range(runs):
        ns = f"bench-{inv_path.stem}-{i}"[:63]
        tmp = Path(tempfile.mkdtemp(prefix="bench-k8s-"))
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "COLUMNS": "120", **cluster.env()}
        inv = tmp / inv_path.name
        inv.write_text(inv_path.read_text().replace("hccn/", str(EXAMPLES / "hccn") + "/")
                       + f"\nkubernetes:\n  namespace: {ns}\n  kubeconfig: {cluster.kubeconfig}\n")
        try:
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
            cluster.delete_namespace(ns, wait=True)
    cluster.remove_nodes([n["name"] for n in raw["nodes"]])
    return {k: statistics.median(v) for k, v in times.items()}


if __name__ == "__main__":
    sys.exit(main())
