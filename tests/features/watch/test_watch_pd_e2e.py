"""`deployctl watch` recovering a vLLM-Ascend 0.18 prefill/decode split on the simulated cluster: 2 prefill
instances (p1, p2) and 2 decode instances (d1, d2) behind the P/D proxy on p1, steady load through the proxy,
recovery enabled in the inventory.

1. The engine container of p2 (prefill-1) killed: detected, removed from the proxy (POST /instances/remove),
   restarted whole, verified, added back (POST /instances/add); decode and the other prefill are never
   restarted. The only failed requests are the ones the proxy sent to the dead P before it was removed: every
   failure started before the `drained` event, none after (requests from then on go to prefill-0).
2. The engine of d2 (decode-1) hung (its process group SIGSTOPped: alive, its ports accept, nothing answers):
   detected as hung within 10 s, removed, restarted, put back; a client that starts after the removal gets every
   answer from decode-0 while decode-1 recovers.

Each restart is then an entry of the hosts' history (`deployctl history`, read back from the hosts).

Prints the times to detect (fault -> `instance-failed`) and to recover (-> `back`), and the failed requests."""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import run_cli
from fakecluster import default_cluster
from support.inventory import from_example
from test_watch_e2e import HOOK, ROUND_S, Events  # (puts tests/backends/hosts on the path for test_fleet_e2e)
from test_fleet_e2e import Load  # noqa: I001

IMAGE = "quay.io/ascend/vllm-ascend:v0.18.0-a3"     # its proxy removes safely (support.yaml proxy_instances_api)
TIMING = {"ttft_ms": 40, "tpot_ms": 15}
# a killed container is a fault the first round that reads it, a hang once `confirm` (2) rounds in a row saw it
# (idle machine: 1-3 s and 7-9 s); bounds in rounds (ROUND_S, test_watch_e2e) hold on a loaded machine too
KILL_DETECT_S, HANG_DETECT_S = 2 * ROUND_S, 3 * ROUND_S
IN_FLIGHT = 2.0       # s: how long before a fault a request may have started and still be on the failed instance
CLUSTER = "qwen3-pdw"
ENGINE = f"deployctl_{CLUSTER}_vllm"
PROXY = f"deployctl_{CLUSTER}_vllm-proxy"


class TimedLoad(Load):
    """Load that notes when each failed request started, and when each successful one started."""

    def __init__(self, url: str, model: str):
        super().__init__(url, model=model)
        self.started_ok: list[float] = []
        self.failed_at: list[tuple[float, str]] = []

    def work(self, k: int) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            t = time.time()
            try:
                self.one(stream=(k + n) % 2 == 0)
                with self.lock:
                    self.ok += 1
                    self.started_ok.append(t)
            except Exception as exc:   # noqa: BLE001 - every failure is the test's business
                with self.lock:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                    self.failed_at.append((t, f"{type(exc).__name__}: {str(exc)[:120]}"))


def inventory(fc, path: Path, hook_log: Path) -> Path:
    return from_example(
        "vllm-a3-1p1d-qwen3", path, fc=fc, cluster={"name": CLUSTER}, engine={"image": IMAGE},
        layout={"preset": "pd-split", "prefill": {"nodes": ["p1", "p2"], "instances": 2},
                "decode": {"nodes": ["d1", "d2"], "instances": 2}},
        deploy={"recovery": {"enabled": True, "max_restarts": 3, "backoff_s": 2, "ready_timeout_s": 120,
                             "hooks": {"command": ["python3", "-c", HOOK, str(hook_log)]}}})


def test_pd_split_prefill_killed_and_decode_hung_recover_through_the_proxy(fake_cluster_factory, tmp_path):
    specs = default_cluster(4, "a3", weights_dir="/data/models/Qwen3-235B-A22B-W8A8", engine_join_timeout=20,
                            engine_timing=TIMING, images=(IMAGE,))
    fc = fake_cluster_factory([s.replace(name=n) for s, n in zip(specs, ("p1", "p2", "d1", "d2"))])
    runs, hook_log = tmp_path / "runs", tmp_path / "hook.jsonl"
    inv = inventory(fc, tmp_path / "inv.yaml", hook_log)
    res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "90", "--skip-preflight",
                  "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    plan = json.loads(run_cli("plan", "-i", str(inv), "--output", "json").stdout)
    where = {i["name"]: (i["role"], i["nodes"]) for i in plan["instances"]}
    assert where == {"prefill-0": ("prefill", ["p1"]), "prefill-1": ("prefill", ["p2"]),
                     "decode-0": ("decode", ["d1"]), "decode-1": ("decode", ["d2"])}, where
    once = run_cli("watch", "-i", str(inv), "--once", "--output", "json", "--run-dir", str(runs))
    assert once.returncode == 0, once.stdout + once.stderr
    before = {n: fc.container_started(n, ENGINE) for n in ("p1", "p2", "d1", "d2")}
    proxy_before = fc.container_started("p1", PROXY)
    url = f"http://{fc.node('p1').ip}:1999"        # the proxy's default port (engine.ports.proxy)

    watch = Events(inv, runs, "--allow-hook-command", fc=fc)   # the inventory's hook command: the operator opts in
    try:
        watch.wait_rounds()
        with TimedLoad(url, model="qwen3") as load:
            deadline = time.time() + 60                      # 5 s when the machine is idle
            while load.ok <= 5 and not load.failures and time.time() < deadline:
                time.sleep(0.5)
            assert load.ok > 5 and not load.failures, (load.ok, load.failures[:3])
            # 1. prefill-1's engine container killed
            t0 = time.time()
            fc.ssh("p2", f"docker kill {ENGINE}", check=True)
            failed = watch.wait("instance-failed", "prefill-1", 60)
            drained = watch.wait("drained", "prefill-1", 60)
            back = watch.wait("back", "prefill-1", 240)
            p_detect, p_recover = failed["ts"] - t0, back["ts"] - t0
            p_ok_during = sum(1 for t in load.started_ok if drained["ts"] < t < back["ts"])
            time.sleep(3)
            # 2. decode-1's engine hung: every process of the container stopped (alive, its ports accept, no answer)
            pid = fc.ssh("d2", f"docker inspect --format '{{{{.State.Pid}}}}' {ENGINE}", check=True).stdout.strip()
            assert pid.isdigit(), pid
            t1 = time.time()
            fc.ssh("d2", f"kill -STOP -- -{pid}", check=True)
            hung = watch.wait("instance-failed", "decode-1", 60)
            drained2 = watch.wait("drained", "decode-1", 60)
            with TimedLoad(url, model="qwen3") as during:      # clients that start once decode-1 is out
                back2 = watch.wait("back", "decode-1", 240)
            d_detect, d_recover = hung["ts"] - t1, back2["ts"] - t1
            time.sleep(3)
    finally:
        watch.stop()
    assert failed["node"] == "p2" and failed["kind"] == "container", failed
    assert "prefill keeps serving on prefill-0" in drained["cause"], drained
    assert hung["node"] == "d2" and hung["kind"] == "not-ready", hung
    assert "decode keeps serving on decode-0" in drained2["cause"], drained2
    # the only failed requests are the failed instance's: in flight on it at the fault (started up to IN_FLIGHT s
    # before it: a request takes well under a second here) or sent to it before it was taken out; none started
    # at any other time
    p_failed = [f for f in load.failed_at if t0 - IN_FLIGHT <= f[0] < drained["ts"]]
    d_failed = [f for f in load.failed_at if t1 - IN_FLIGHT <= f[0] < drained2["ts"]]
    other = [(round(t - t0, 2), why) for t, why in load.failed_at if (t, why) not in p_failed + d_failed]
    assert other == [], (other, round(drained["ts"] - t0, 2), round(t1 - t0, 2), round(drained2["ts"] - t0, 2))
    assert p_ok_during > 0            # prefill-0 and both D served while prefill-1 recovered
    assert during.failures == [] and during.ok > 5, (during.ok, during.failures[:3])    # decode-0 served alone
    print(f"\nP/D: prefill-1 killed: detected in {p_detect:.1f} s, back in the proxy after {p_recover:.1f} s, "
          f"requests failed {len(p_failed)} (all sent before its removal), ok while it recovered {p_ok_during}; "
          f"decode-1 hung: detected in {d_detect:.1f} s, back after {d_recover:.1f} s, requests failed "
          f"{len(d_failed)} (all sent before its removal), requests started after its removal ok {during.ok}, "
          f"failed {len(during.failures)}; total ok {load.ok}", sorted({f[1] for f in load.failed_at})[:4])
    assert p_detect < KILL_DETECT_S and d_detect < HANG_DETECT_S, (p_detect, d_detect)
    # the proxy and the instances that did not fail were never restarted
    assert fc.container_started("p1", PROXY) == proxy_before
    assert fc.container_started("p1", ENGINE) == before["p1"] and fc.container_started("d1", ENGINE) == before["d1"]
    assert fc.container_started("p2", ENGINE) != before["p2"] and fc.container_started("d2", ENGINE) != before["d2"]
    # the proxy was told: each failed instance's servers removed (or tainted) and added back
    log = fc.ssh("p1", f"docker logs {PROXY} 2>&1", check=True).stdout
    p2, d2 = fc.node("p2").ip, fc.node("d2").ip
    assert any(p2 in ln and ("Remove prefiller" in ln or "taint prefill" in ln) for ln in log.splitlines()), log[-2000:]
    assert any(d2 in ln and ("Remove decoder" in ln or "taint decode" in ln) for ln in log.splitlines()), log[-2000:]
    assert any(p2 in ln.split("Status")[0] and "Add prefiller" in ln for ln in log.splitlines()), log[-2000:]
    assert any(d2 in ln.split("Status")[0] and "Add decoder" in ln for ln in log.splitlines()), log[-2000:]
    st = run_cli("watch", "-i", str(inv), "--once", "--output", "json", "--run-dir", str(runs))
    assert st.returncode == 0, st.stdout[-2000:] + st.stderr[-2000:]
    # each restart is an entry of the hosts' history, read back from them by `deployctl history`
    h = run_cli("history", "-i", str(inv), "--output", "json")
    assert h.returncode == 0, h.stdout + h.stderr
    revs = json.loads(h.stdout)["revisions"]
    restarts = [(r["operation"], r["result"], r["summary"].split(":")[0]) for r in revs if r["operation"] == "restart"]
    assert restarts == [("restart", "successful", "watch restarted prefill-1 on p2"),
                        ("restart", "successful", "watch restarted decode-1 on d2")], revs
    assert [r["operation"] for r in revs if r["live"]] == ["up"], revs
    hooked = [json.loads(x)["event"] for x in hook_log.read_text().splitlines()]
    assert {"instance-failed", "drained", "restart", "back"} <= set(hooked), hooked
