#!/usr/bin/env python3
"""Benchmark: how long `deployctl scale --apply` takes to add a decode instance on a spare server and to remove it,
with the new instance loading its weights from disk or from the running decode instance (vLLM-Ascend NetLoader).

Usage (root: the simulated hosts are sshd processes in network namespaces, see tests/fakecluster):

    .venv/bin/python bench/scale_up.py [--disk 30] [--peer 3] [--runs 2]

A simulated vLLM-Ascend 1P1D on 3 x A3 (p1 prefill + proxy, d1 decode, d2 spare); the stand-in engine spends
`--disk` seconds loading weights from disk (`engine_slow_start`) and `--peer` seconds copying them from a
running peer (`engine_load_from_peer_s`): numbers you choose (real loads take minutes; MindIE-Motor's D2D log
shows about 3.6 s per device). For each mode (disk: engine.netloader off; peer: on) the deployment is brought up,
then --runs times: `scale --apply` with the decode minimum raised to 2 (the add, timed from the command's start to
the new instance verified and behind the proxy) and back to 1 on an idle deployment (the remove: drained and
stopped). The add's stages come from its `up` record (stages.json): read + preflight + render + diff (before
the change), apply (push, start, weights, ready, router add), verify, record.

Prints a Markdown table (medians); results are written into docs/scaling.md by hand.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

IMAGE = "quay.io/ascend/vllm-ascend:v0.18.0-a3"
DEPLOYCTL = str(Path(sys.executable).parent / "deployctl")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([DEPLOYCTL, *args], capture_output=True, text=True)


def inventory(fc, path: Path, netloader: bool, low: int) -> Path:
    import yaml

    doc = yaml.safe_load((ROOT / "inventories/examples/vllm-a3-1p1d-qwen3.yaml").read_text())
    doc["engine"]["image"] = IMAGE
    if netloader:
        doc["engine"]["netloader"] = {"enabled": True}
    doc["ssh"] = {"user": "root", "key": str(fc.client_key), "known_hosts": str(fc.known_hosts)}
    doc["nodes"] = [{"name": n.name, "address": n.ip} for n in fc.nodes]
    doc["deploy"] = {"scaling": {"interval_s": 2, "spares": ["d2"], "roles": {"decode": {"min": low, "max": 2}},
                                 "scale_down": {"for_s": 4}, "cooldown_down_s": 0}}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def change_of(res: subprocess.CompletedProcess) -> dict:
    if res.returncode != 0:
        raise SystemExit(res.stdout[-3000:] + res.stderr[-3000:])
    [change] = [json.loads(x) for x in res.stdout.splitlines() if '"change"' in x]
    if not change["ok"]:
        raise SystemExit(f"not changed: {change}")
    return change


def one_mode(work: Path, netloader: bool, disk: float, peer: float, runs: int) -> list[dict]:
    from fakecluster import FakeCluster, default_cluster

    specs = default_cluster(3, "a3", weights_dir="/data/models/Qwen3-235B-A22B-W8A8", engine_join_timeout=20,
                            images=(IMAGE,), engine_slow_start=disk, engine_load_from_peer_s=peer)
    specs = [specs[0].replace(name="p1"), specs[1].replace(name="d1"), specs[2].replace(name="d2")]
    fc = FakeCluster(specs, work / "fc").start()
    out = []
    try:
        runs_dir, inv = work / "runs", work / "inv.yaml"
        inventory(fc, inv, netloader, 1)
        for args in (("preflight", "-i", str(inv), "--run-dir", str(runs_dir)),
                     ("up", "-i", str(inv), "-y", "--run-dir", str(runs_dir), "--ready-timeout", "600")):
            res = cli(*args)
            if res.returncode != 0:
                raise SystemExit(res.stdout[-3000:] + res.stderr[-3000:])
        scale = ("scale", "-i", str(inv), "--run-dir", str(runs_dir), "--output", "json", "--apply",
                 "--interval", "2", "--ready-timeout", "600")
        for _ in range(runs):
            inventory(fc, inv, netloader, 2)
            t0 = time.monotonic()
            add = change_of(cli(*scale, "--rounds", "1"))
            wall = time.monotonic() - t0
            stages = {s["stage"]: s["seconds"] for s in
                      json.loads((Path(add["run"]) / "stages.json").read_text())}
            inventory(fc, inv, netloader, 1)
            remove = change_of(cli(*scale, "--rounds", "4"))
            out.append({"add_wall": wall, "add": add["seconds"], "remove": remove["seconds"], **stages})
    finally:
        fc.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--disk", type=float, default=30.0, help="seconds the stand-in loads weights from disk")
    ap.add_argument("--peer", type=float, default=3.0, help="seconds it copies them from a running peer")
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()
    rows = []
    for mode, netloader in (("disk", False), ("peer (NetLoader)", True)):
        with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
            got = one_mode(Path(tmp), netloader, a.disk, a.peer, a.runs)
        med = {k: statistics.median(r[k] for r in got) for k in got[0]}
        before = sum(med.get(k, 0.0) for k in ("read", "preflight", "render", "diff", "confirm", "lock"))
        rows.append(f"| {mode} | {a.disk if not netloader else a.peer:g} | {med['add_wall']:.1f} | {before:.1f} | "
                    f"{med.get('apply', 0):.1f} | {med.get('verify', 0):.1f} | {med.get('record', 0):.1f} | "
                    f"{med['remove']:.1f} |")
    print("| weights from | load (s, stand-in) | add: command wall (s) | read + preflight + render + diff + lock | "
          "apply: push, start, load, ready, router add | verify | record | remove (drain, stop, record) |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
