"""`deployctl watch`'s hang probe on the simulated cluster: two single-node vLLM-Ascend instances behind deployctl's
HAProxy router on two A2 hosts whose driver is HDK 26.0.RC1 (their npu-smi reads the AI Cube usage), recovery on in
the inventory, the hang probe at its defaults (1-token completion, 5 s timeout, 3 failures in a row), the watch at
its default interval.

1. Busy and healthy: clients keep both instances busy through the router; no hang is reported, and the probe did
   reach the engines while they were idle between requests (their answered requests grew beyond the clients').
2. Both engines hang while idle (the stand-in holds every completion; /health, /metrics and /v1/models still answer
   200): mixed-1, whose NPU is idle, is reported hung after 3 probes in a row (on an idle machine within 30 s of the
   hang), killed at once, restarted and put back in the router; mixed-0, whose NPU is busy (AI Cube usage 60 %), is
   not reported although its probes time out just as long: a busy NPU excuses a slow answer.
3. mixed-0's NPU goes idle: it is reported hung with the usage npu-smi read (0 %), and recovered the same way.

Prints the times to detect and to recover."""

from __future__ import annotations

import inspect
import json
import os
import queue
import time
import urllib.request

import yaml
from conftest import run_cli
from fakecluster import default_cluster
from fakecluster.spec import DEFAULT_WEIGHTS_DIR, VLLM_IMAGES
from test_watch_e2e import ROUND_S, Events, set_device  # (puts tests/backends/hosts on the path for test_fleet_e2e)
from test_fleet_e2e import Load  # noqa: I001

from deployctl.core.models.recovery import HangProbe
from deployctl.features.watch.hang import LOAD_TIMEOUT, SSH_S
from deployctl.features.watch.loop import Watcher

INTERVAL = inspect.signature(Watcher).parameters["interval"].default      # the default watch interval
DEFAULTS = HangProbe()
DETECT_S = 30.0          # the hang probe's promise at its defaults (docs/watch.md), on an idle machine
# what a detection is held to here: each probe cycle within the probe's own allowances (reading the load, the probe's
# timeout, SSH_S for the SSH round trip and the node's python3), for the probe that may have gone out just before the
# hang and the 3 that count, then a round to report it (~110 s). Each cycle starts python3 on the node twice, which
# took seconds on a loaded CI machine: 3 cycles then pass the 30 s
BOUND_S = (DEFAULTS.failures + 1) * (LOAD_TIMEOUT + DEFAULTS.timeout_s + SSH_S) + ROUND_S
TIMING = {"ttft_ms": 40, "tpot_ms": 15}
INVENTORY = f"""\
engine: {{kind: vllm-ascend, image: "{VLLM_IMAGES['a2']}"}}
model: {{name: qwen3-235b-a22b, quant: w8a8, weights_path: {DEFAULT_WEIGHTS_DIR}, served_name: qwen3,
        max_seq_len: 8192, max_input_len: 4096, max_batch_size: 16}}
router: {{port: 8080, admin_port: 8081, check_interval_ms: 300}}
layout: {{preset: single, replicas: 2}}
deploy:
  recovery: {{enabled: true, max_restarts: 3, backoff_s: 2, ready_timeout_s: 120}}
"""


def answered(fc, node: str) -> float:
    """The requests the node's engine answered (the stand-in's vllm:time_to_first_token_seconds_count)."""
    with urllib.request.urlopen(f"http://{fc.node(node).ip}:8000/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(ln.split()[-1]) for ln in text.splitlines()
               if ln.startswith("vllm:time_to_first_token_seconds_count"))


def hang(fc, node: str, container: str) -> None:
    """The engine holds every completion from now on (fake_bin/vllm.py HANG_FLAG, in the container's root)."""
    fc.ssh(node, f"touch /var/lib/fakedocker/{container}/rootfs/.fakecluster/hang", check=True)


def drain(watch: Events, seconds: float) -> None:
    """Every event of the next ``seconds`` into ``watch.all``."""
    end = time.time() + seconds
    while time.time() < end:
        try:
            watch.all.append(watch.q.get(timeout=max(0.1, end - time.time())))
        except queue.Empty:
            pass


def hangs(watch: Events, instance: str) -> list[dict]:
    return [e for e in watch.all if e["instance"] == instance and e.get("kind") == "hang"]


def test_a_hung_idle_engine_is_caught_within_30_s_and_restarted_a_busy_one_is_not(fake_cluster_factory, tmp_path):
    assert (DEFAULTS.enabled, DEFAULTS.timeout_s, DEFAULTS.failures) == (True, 5.0, 3)    # the defaults measured
    fc = fake_cluster_factory(default_cluster(2, driver_version="26.0.rc1", engine_timing=TIMING))
    doc = yaml.safe_load(fc.inventory_snippet() + INVENTORY)
    for node in doc["nodes"]:
        node["interface"] = "eth0"
    inv, runs = tmp_path / "inv.yaml", tmp_path / "runs"
    inv.write_text(yaml.safe_dump(doc))
    res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "90", "--skip-preflight",
                  "--output", "json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    engine = next(n for n in fc.ssh("node1", "docker ps --format '{{.Names}}'", check=True).stdout.split()
                  if not n.endswith("_router"))
    before = {n: fc.container_started(n, engine) for n in ("node1", "node2")}
    router = f"http://{fc.node('node1').ip}:8080"
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else None
    watch = Events(inv, runs, "--interval", str(INTERVAL), env=env, fc=fc)   # the last --interval counts: the default
    try:
        # 1. busy and healthy: nothing reported; the probe kept reaching both engines (answered), through the busy
        #    seconds and the idle ones after them
        watch.wait_rounds()
        drain(watch, 2 * INTERVAL)                       # the first rounds, the first probes
        base = answered(fc, "node1") + answered(fc, "node2")
        with Load(router, model="qwen3") as load:
            drain(watch, 20)
        clients = load.ok
        drain(watch, 3 * INTERVAL)
        assert load.failures == [] and clients > 20, (clients, load.failures[:3])
        probed = answered(fc, "node1") + answered(fc, "node2") - base - clients
        assert probed >= 2, (probed, clients)
        assert [e for e in watch.all if e["event"] in ("fault", "instance-failed")] == [], watch.all
        # 2. both engines hang while idle; mixed-0's NPU is busy
        set_device(fc, "node1", 0, "aicore", "60")
        t0 = time.time()
        hang(fc, "node1", engine)
        hang(fc, "node2", engine)
        failed = watch.wait("instance-failed", "mixed-1", 2 * BOUND_S)
        detect = failed["ts"] - t0
        back = watch.wait("back", "mixed-1", 180)
        recover = back["ts"] - t0
        drain(watch, max(0.0, t0 + detect + 3 * (DEFAULTS.timeout_s + INTERVAL) - time.time()))
        excused = time.time() - t0
        busy_hangs = hangs(watch, "mixed-0")
        # 3. mixed-0's NPU goes idle: now its timeouts count
        set_device(fc, "node1", 0, "aicore", "0")
        t1 = time.time()
        failed0 = watch.wait("instance-failed", "mixed-0", 2 * BOUND_S)
        detect0 = failed0["ts"] - t1
        back0 = watch.wait("back", "mixed-0", 180)
        drain(watch, 2)
    finally:
        watch.stop()
    print(f"\nhang probe (defaults: {DEFAULTS.timeout_s:g} s timeout, {DEFAULTS.failures} failures, interval "
          f"{INTERVAL:g} s): idle hung engine detected in {detect:.1f} s (docs/watch.md: within {DETECT_S:g} s idle), "
          f"back in the router after {recover:.1f} s; "
          f"hung engine on a busy NPU not reported for {excused:.1f} s; once its NPU was idle detected in "
          f"{detect0:.1f} s, back after {back0['ts'] - t1:.1f} s; {clients} client requests and {probed:.0f} probes "
          "answered while busy")
    assert failed["kind"] == "hang" and failed["node"] == "node2", failed
    assert failed["cause"].startswith(f"answers its health check but a 1-token completion timed out after "
                                      f"{DEFAULTS.timeout_s:g} s, {DEFAULTS.failures} times in a row"), failed
    assert "AI Cube usage 0 % at most" in failed["cause"], failed
    # three probes of 5 s each at the least (the first may have been sent just before the hang)
    assert (DEFAULTS.failures - 1) * DEFAULTS.timeout_s <= detect < BOUND_S, detect
    restart = next(e for e in watch.all if e["event"] == "restart" and e["instance"] == "mixed-1")
    assert "killed at once: hang" in restart["cause"], restart
    assert busy_hangs == [] and excused > detect + 2 * DEFAULTS.timeout_s, (busy_hangs, excused, detect)
    assert failed0["kind"] == "hang" and failed0["node"] == "node1" and "AI Cube usage 0 %" in failed0["cause"], failed0
    assert detect0 < BOUND_S, detect0
    after = {n: fc.container_started(n, engine) for n in ("node1", "node2")}
    assert after["node1"] != before["node1"] and after["node2"] != before["node2"]
    once = run_cli("watch", "-i", str(inv), "--once", "--output", "json", "--run-dir", str(runs))
    assert once.returncode == 0, once.stdout[-2000:] + once.stderr[-2000:]
    assert json.loads(once.stdout.splitlines()[-1])["states"] == {"mixed-0": "serving", "mixed-1": "serving"}
