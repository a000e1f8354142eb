"""`deployctl watch` recovering an SGLang P/D split on the simulated cluster: one prefill server on p1, one decode
server over d1 + d2, the real sglang-router 0.3.2 on p1. The decode server's rank 1 container (d2) is killed: its
rank 0 on d1 loses the process group and dies too (`Scheduler hit an exception`, exit 137 on both); watch detects the
failed decode instance within a round, says the role is down (the only decode server: nothing to fail over to),
restarts both its containers at once, waits for it and puts it back in the router (POST /workers when the router
dropped it): the router and the prefill server keep running, and requests through the router answer again
(engines/sglang/control.py)."""

from __future__ import annotations

import json
import os
import time
import urllib.request

from conftest import run_cli
from fakecluster import default_cluster
from support.sglang_inventory import IMAGE, PD_LAYOUT, PD_NODES, WEIGHTS, require_router, sglang_inventory
from test_watch_e2e import HOOK, ROUND_S, Events  # (puts tests/backends/hosts on the path for test_fleet_e2e)
from test_fleet_e2e import Load  # noqa: I001

CLUSTER = "qwen3-sgl-watch"
ENGINE = f"deployctl_{CLUSTER}_sglang"
ROUTER = f"{ENGINE}-router"


def test_watch_recovers_a_killed_decode_server_behind_the_sglang_router(fake_cluster_factory, tmp_path):
    require_router()
    specs = default_cluster(3, "a3", weights_dir=WEIGHTS, engine_join_timeout=20,
                            engine_timing={"ttft_ms": 40, "tpot_ms": 15}, images=(IMAGE,))
    fc = fake_cluster_factory([s.replace(name=n) for s, n in zip(specs, PD_NODES)])
    runs, hook_log = tmp_path / "runs", tmp_path / "hook.jsonl"
    inv = sglang_inventory(fc, tmp_path / "inv.yaml", name=CLUSTER, layout=PD_LAYOUT, deploy={
        "recovery": {"enabled": True, "max_restarts": 3, "backoff_s": 2, "ready_timeout_s": 120,
                     "hooks": {"command": ["python3", "-c", HOOK, str(hook_log)]}}})
    res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "90", "--skip-preflight",
                  "--output", "json")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    once = run_cli("watch", "-i", str(inv), "--once", "--output", "json", "--run-dir", str(runs))
    assert once.returncode == 0, once.stdout[-3000:] + once.stderr[-3000:]
    before = {n: fc.container_started(n, ENGINE) for n in PD_NODES}
    router_before = fc.container_started("p1", ROUTER)
    url = f"http://{fc.node('p1').ip}:6688"
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else None
    watch = Events(inv, runs, "--allow-hook-command", env=env, fc=fc)
    try:
        watch.wait_rounds()
        with Load(url, model="qwen3") as load:
            deadline = time.time() + 60
            while load.ok <= 5 and not load.failures and time.time() < deadline:
                time.sleep(0.5)
            assert load.ok > 5 and not load.failures, (load.ok, load.failures[:3])
        t0 = time.time()
        fc.ssh("d2", f"docker kill {ENGINE}", check=True)
        failed = watch.wait("instance-failed", "decode", 4 * ROUND_S)
        back = watch.wait("back", "decode", 240)
        detect = failed["ts"] - t0
    finally:
        watch.stop()
    # detected: both decode nodes down (rank 1 killed, rank 0 lost its process group: the fatal line, exit 137)
    assert failed["kind"] in ("container", "fatal-log"), failed
    assert any("Scheduler hit an exception" in c for c in failed["causes"]), failed
    # the containers' exits: in the failure's causes, or in the decode faults reported before it is restarted. On a
    # loaded machine a round can probe d2 just before the kill lands and d1 just after its fatal line: the failure
    # is then the fatal line alone and the restart comes before either exit is read (seen in CI); a failure said
    # from the containers names the killed one
    faults = [f"{e['node']}: {e['cause']}" for e in watch.all
              if e["event"] == "fault" and e.get("instance") == "decode" and e["ts"] <= back["ts"]]
    exited = {c.split(":")[0] for c in failed["causes"] + faults if "exited (exit 137)" in c}
    assert exited <= {"d1", "d2"}, (failed, faults)
    assert failed["kind"] == "fatal-log" or "d2" in exited, (failed, faults)
    assert detect < 2 * ROUND_S, detect
    # the only decode server: nothing to fail over to (watch says so) and nothing to drain; restarted at once
    kinds = [(e["event"], e["instance"]) for e in watch.all]
    assert ("role-down", "decode") in kinds and ("restart", "decode") in kinds, kinds
    with Load(url, model="qwen3") as after:
        deadline = time.time() + 60
        while after.ok <= 5 and not after.failures and time.time() < deadline:
            time.sleep(0.5)
    print(f"\nSGLang P/D: decode rank 1 (d2) killed: detected in {detect:.1f} s, back after "
          f"{back['ts'] - t0:.1f} s; then ok {after.ok}, failed {len(after.failures)}")
    assert after.failures == [] and after.ok > 5, (after.ok, after.failures[:3])
    log = fc.ssh("d1", f"docker logs {ENGINE} 2>&1", check=True).stdout
    assert "The server is fired up and ready to roll!" in log
    assert fc.container_started("d1", ENGINE) != before["d1"] and fc.container_started("d2", ENGINE) != before["d2"]
    assert fc.container_started("p1", ENGINE) == before["p1"]               # the prefill server never restarted
    assert fc.container_started("p1", ROUTER) == router_before              # nor the router: its worker API took d out
    with urllib.request.urlopen(f"{url}/workers", timeout=10) as answer:
        workers = json.loads(answer.read())["workers"]
    assert sorted(w["worker_type"] for w in workers) == ["decode", "prefill"], workers
    st = run_cli("status", "-i", str(inv), "--output", "json")
    assert st.returncode == 0 and json.loads(st.stdout)["state"] == "serving", st.stdout[-3000:]
    # the inventory's hook heard of the failure (the hooks run asynchronously: at least its first event)
    hooked = [json.loads(x)["event"] for x in hook_log.read_text().splitlines() if x.strip().endswith("}")]
    assert {"fault", "instance-failed"} & set(hooked), hooked
