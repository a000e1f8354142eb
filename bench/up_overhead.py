#!/usr/bin/env python3
"""Benchmark: what `deployctl up` adds on top of the engine's own start, over 2, 4 and 8 simulated hosts.

Usage (root: the simulated hosts are sshd processes in network namespaces, see tests/fakecluster):

    .venv/bin/python bench/up_overhead.py [--sizes 2,4,8] [--runs 2] [--engine-start 2]

For each size it starts a fake A2 cluster (2 hosts: preset tp-pp, more: dp-ep, DeepSeek-R1 W8A8) whose
stand-in MindIE spends `--engine-start` seconds "loading weights" on every node (`engine_slow_start`), then
--runs times: `deployctl up -i INV -y --skip-preflight --output json` as a user runs it (a new process),
timed from launch to exit (every node ready + the smoke chat completion), then `deployctl down --purge`
(so each run is a first deployment: push, start, wait, smoke).

* engine = the engine's own start: per node, the container's StartedAt to its `Daemon start success!` log
  line (both from the fake docker's files), the longest over the nodes that are not instance masters (a
  master also waits in the rendezvous for nodes deployctl starts after it: that wait is deployctl's);
* overhead = up wall time - engine;
* CPU: the whole machine's busy CPU-seconds during `up` (/proc/stat; the simulated hosts, their sshd,
  ansible's module runs on them, the fake docker and engines share this machine's CPUs) and the part used
  by deployctl and its children (ansible-playbook, its forks, the ssh clients);
* phases, from the run record (ansible-runner's job events): before ansible (process start, SSH read of
  the deployed state, render, diff, ansible-playbook start-up), push, start masters, start workers, wait
  ready, smoke (+ MindIE-MS), after ansible (rc/record, exit).

Prints a Markdown table (medians over the runs); results are recorded in docs/dev/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))        # tests/fakecluster
DEPLOYCTL = Path(sys.executable).parent / "deployctl"

from fakecluster import FakeCluster, check_environment, default_cluster  # noqa: E402
from fakecluster.spec import DEFAULT_IMAGES, DEFAULT_WEIGHTS_DIR  # noqa: E402

TAIL = """\
engine:
  image: {image}
model: {{name: deepseek-r1, quant: w8a8, weights_path: {weights}, served_name: ds-r1,
        max_seq_len: 8192, max_input_len: 4096, max_batch_size: 32}}
layout: {{preset: {preset}}}
"""
ENV = {"PATH": "/usr/bin:/bin", "COLUMNS": "120", "NO_COLOR": "1"}
PHASES = [("Push revisions", "push"), ("Start instance masters", "masters"), ("Start the other nodes", "workers"),
          ("Wait until every node is ready", "wait"), ("Start MindIE-MS (controller and coordinator)", "smoke"),
          ("Smoke test (one chat completion)", "smoke")]
COLUMNS = ["before", "push", "masters", "workers", "wait", "smoke", "after"]


def ts(text: str | float) -> float:
    """Epoch seconds (the fake docker's state.json) or RFC 3339 (ansible's created, docker's log time with
    nanoseconds) -> epoch seconds."""
    if isinstance(text, (int, float)):
        return float(text)
    text = text.strip().replace("Z", "+00:00")
    if "." in text:
        head, rest = text.split(".", 1)
        frac = "".join(c for c in rest if c.isdigit())
        tz = rest[len(frac):]
        text = f"{head}.{frac[:6]}{tz}"
    return datetime.fromisoformat(text).timestamp()


def machine_busy() -> float:
    """CPU-seconds this machine has been busy (all CPUs, /proc/stat): the simulated hosts run here too."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def engine_seconds(fc: FakeCluster, container: str, masters: set[str]) -> float:
    """Longest container start -> `Daemon start success!` over the nodes that are not instance masters."""
    spans = {}
    for n in fc.nodes:
        d = n.host_path(f"/var/lib/fakedocker/{container}")
        started = ts(json.loads((d / "state.json").read_text())["StartedAt"])
        ready = None
        for line in (d / "container.log").read_text().splitlines():
            rec = json.loads(line)
            if "Daemon start success!" in rec.get("log", ""):
                ready = ts(rec.get("ts", rec["time"]))
                break
        if ready is None:
            raise SystemExit(f"{n.name}: no `Daemon start success!` in {container}'s log")
        spans[n.name] = ready - started
    others = [v for k, v in spans.items() if k not in masters] or list(spans.values())
    return max(others)


def phases(record: Path, t_launch: float, t_exit: float) -> dict[str, float]:
    events = []
    for f in (record / "ansible" / "artifacts" / "up" / "job_events").glob("*.json"):
        e = json.loads(f.read_text())
        events.append((int(f.name.split("-", 1)[0]), e))
    events.sort(key=lambda x: x[0])
    marks = []                                   # (name, start time)
    t_first = t_last = None
    for _, e in events:
        t = ts(e["created"])
        if e["event"] == "playbook_on_start":
            t_first = t
        elif e["event"] == "playbook_on_play_start":
            name = dict(PHASES).get(e["event_data"].get("play", ""), e["event_data"].get("play", ""))
            marks.append((name, t))
        elif e["event"] == "playbook_on_stats":
            t_last = t
    out = {c: 0.0 for c in COLUMNS}
    out["before"] = (t_first or t_launch) - t_launch
    bounds = marks + [("end", t_last or t_exit)]
    for (name, t0), (_, t1) in zip(bounds, bounds[1:]):
        out[name] = out.get(name, 0.0) + (t1 - t0)
    out["after"] = t_exit - (t_last or t_exit)
    return out


def one_size(n: int, runs: int, engine_start: float) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"up-bench-{n}-") as tmp:
        work = Path(tmp)
        specs = [s.replace(engine_slow_start=engine_start) for s in default_cluster(n, "a2")]
        fc = FakeCluster(specs, work / "fc").start()
        try:
            inv = work / "inventory.yaml"
            inv.write_text(fc.inventory_snippet() + TAIL.format(image=DEFAULT_IMAGES["a2"], weights=DEFAULT_WEIGHTS_DIR,
                                                                preset="tp-pp" if n == 2 else "dp-ep"))
            container = f"fake-a2-{n}-mindie"
            samples = []
            for i in range(runs):
                busy0, ru0, t0 = machine_busy(), resource.getrusage(resource.RUSAGE_CHILDREN), time.time()
                res = subprocess.run([str(DEPLOYCTL), "up", "-i", str(inv), "-y", "--skip-preflight",
                                      "--output", "json", "--ready-timeout", "300", "--run-dir", str(work / "runs")],
                                     capture_output=True, text=True, env=ENV, cwd=ROOT)
                busy1, ru1, t1 = machine_busy(), resource.getrusage(resource.RUSAGE_CHILDREN), time.time()
                cpu_ctl = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
                doc = json.loads(res.stdout) if res.stdout.strip().startswith("{") else {}
                if res.returncode != 0 or doc.get("status") != "successful":
                    raise SystemExit(f"up on {n} hosts (run {i + 1}) exited {res.returncode}:\n"
                                     f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
                record = Path(doc["run"])
                groups = yaml.safe_load((record / "ansible" / "inventory" / "hosts.yml").read_text())["all"]["children"]
                masters = set(groups["start_masters"]["hosts"])
                eng = engine_seconds(fc, container, masters)
                ph = phases(record, t0, t1)
                samples.append({"wall": t1 - t0, "engine": eng, **ph, "cpu": busy1 - busy0, "cpu_ctl": cpu_ctl})
                print(f"  {n} hosts, run {i + 1}: up {t1 - t0:.2f} s, engine {eng:.2f} s, "
                      f"CPU busy {busy1 - busy0:.1f} s (deployctl + ansible {cpu_ctl:.1f} s), "
                      + ", ".join(f"{k} {ph[k]:.2f}" for k in COLUMNS), file=sys.stderr)
                dn = subprocess.run([str(DEPLOYCTL), "down", "-i", str(inv), "--purge",
                                     "--run-dir", str(work / "runs")],
                                    capture_output=True, text=True, env=ENV, cwd=ROOT)
                if dn.returncode != 0:
                    raise SystemExit(f"down on {n} hosts exited {dn.returncode}:\n{dn.stdout}\n{dn.stderr}")
        finally:
            fc.stop()
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2,4,8", help="cluster sizes (comma-separated)")
    parser.add_argument("--runs", type=int, default=2, help="runs per size (median reported)")
    parser.add_argument("--engine-start", type=float, default=2.0,
                        help="seconds the stand-in engine spends loading weights on every node (default 2)")
    args = parser.parse_args()
    problems = check_environment()
    if problems:
        print("cannot start simulated hosts here:\n  - " + "\n  - ".join(problems), file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    rows = [(n, one_size(n, args.runs, args.engine_start)) for n in sizes]
    from importlib.metadata import version

    print(f"A2 hosts, stand-in engine weight loading {args.engine_start:g} s per node; median of {args.runs} runs "
          f"(down --purge between runs); {os.cpu_count()} CPUs, {sys.platform}, Python {sys.version.split()[0]}, "
          f"ansible-core {version('ansible-core')}, ansible-runner {version('ansible-runner')}\n")
    print("| hosts | up, all ready + smoke (s) | engine's own start (s) | overhead (s) | before ansible | push "
          "| start masters | start workers | wait ready | smoke | after | CPU busy, machine (CPU-s) "
          "| of which deployctl + ansible |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, m in rows:
        print(f"| {n} | {m['wall']:.1f} | {m['engine']:.1f} | {m['wall'] - m['engine']:.1f} | "
              + " | ".join(f"{m[c]:.1f}" for c in COLUMNS) + f" | {m['cpu']:.0f} | {m['cpu_ctl']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
