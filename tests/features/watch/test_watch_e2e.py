"""`deployctl watch` on the simulated cluster: 3 replicas of a 2-node MindIE instance behind deployctl's
HAProxy, a steady load through the router; a killed engine container (mixed-1) and an NPU set to Alarm
(mixed-2) are each detected, drained, restarted and put back, with recovery enabled in the inventory. Prints
the times to detect (fault injected -> `instance-failed` event) and to recover (-> `back`), and counts the
requests that failed: only the killed instance's requests in flight may fail (the router's retries and
redispatch move the rest), none at all while the NPU in Alarm is drained. A device link down (hccn_tool) on the
router's node is detected the same way."""

from __future__ import annotations

import inspect
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path


from conftest import DEPLOYCTL, run_cli  # noqa: E402
from fakecluster import default_cluster  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "backends" / "hosts"))   # test_fleet_e2e
from test_fleet_e2e import TIMING, Load  # noqa: E402
from support.inventory import on_cluster  # noqa: E402

from deployctl.features.watch.loop import Watcher  # noqa: E402

# A watch round takes at most the interval (--interval 2: Events) plus the round timeout (the Watcher's). A fault
# read once (a dead container, an NPU in Alarm, a link down) is reported by the round after it at the latest:
# within two rounds, however long a loaded machine makes them (idle: a few seconds).
ROUND_S = 2 + inspect.signature(Watcher).parameters["round_timeout"].default
DETECT_S = 2 * ROUND_S

HOOK = "import sys; open(sys.argv[1], 'a').write(sys.stdin.read().strip() + chr(10))"
RECOVERY = """deploy:
  recovery: {{enabled: true, max_restarts: 3, backoff_s: 2, ready_timeout_s: 120,
             hooks: {{command: [python3, -c, "{hook}", {log}]}}}}
"""


# the node's own files, changed from inside the node (through its overlay mounts, as its tools read them): the
# device's health in the state file the fake npu-smi reads, and the precomputed answers dropped
SET_DEVICE = """import json, shutil, sys
p = "/etc/fakecluster/node.json"
st = json.load(open(p))
for d in st["devices"]:
    if d["phy"] == int(sys.argv[1]):
        d[sys.argv[2]] = sys.argv[3]
open(p, "w").write(json.dumps(st))
shutil.rmtree("/etc/fakecluster/cache", ignore_errors=True)
"""


def set_device(fc, node: str, phy: int, key: str, value: str) -> None:
    """A device's health (npu-smi) or link (hccn_tool), as the node's tools report it from the next call."""
    import shlex

    fc.ssh(node, shlex.join(["python3", "-c", SET_DEVICE, str(phy), key, value]), check=True)


def logins(node) -> int:
    """The SSH logins the node's sshd accepted so far."""
    return node.sshd_log.read_text().count("Accepted publickey") if node.sshd_log.exists() else 0


class Events:
    """`deployctl watch --output json` in the background: its events as they come.

    ``fc``: the simulated cluster it watches, whose SSH logins so far are noted before the watch starts
    (``wait_rounds``)."""

    def __init__(self, inv: Path, runs: Path, *extra: str, env: dict | None = None, fc=None):
        self.runs, self.fc = runs, fc
        self.logins = {n.name: logins(n) for n in fc.nodes} if fc is not None else {}
        env = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HOME": os.environ.get("HOME", "/root"), **(env or {})}
        self.proc = subprocess.Popen([sys.executable, "-X", "faulthandler", str(DEPLOYCTL), "watch", "-i", str(inv),
                                      "--output", "json", "--interval", "2", "--run-dir", str(runs), *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.q: queue.Queue = queue.Queue()
        self.all: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.q.put(json.loads(line))

    def wait(self, kind: str, instance: str, timeout: float) -> dict:
        end = time.time() + timeout
        while time.time() < end:
            try:
                ev = self.q.get(timeout=max(0.1, end - time.time()))
            except queue.Empty:
                break
            self.all.append(ev)
            if ev["event"] == kind and ev["instance"] == instance:
                return ev
        raise AssertionError(f"no {kind} of {instance} in {timeout} s; events: {self.all[-15:]}; "
                             f"stderr: {self.proc.stderr.read() if self.proc.poll() is not None else ''}")

    def wait_rounds(self, timeout: float = 60) -> None:
        """Until the watch runs its rounds: its run record says running and it has logged in to every node (its first
        round's connections). Starting the process alone took 15-20 s on a loaded CI machine: a time to detect is
        measured from a fault injected after this, not from the start."""
        assert self.fc is not None, "Events(..., fc=...) notes the logins before the watch starts"
        end = time.time() + timeout
        running, late = False, list(self.logins)
        while time.time() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"the watch exited ({self.proc.returncode}): {self.proc.stderr.read()[-3000:]}")
            running = running or any(p.read_text().strip() == "running" for p in self.runs.glob("runs/*-watch/status"))
            late = [n.name for n in self.fc.nodes if logins(n) <= self.logins[n.name]]
            if running and not late:
                return
            time.sleep(0.2)
        raise AssertionError(f"the watch not running its rounds after {timeout} s: run record running: {running}; "
                             f"not logged in to {late}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def test_watch_detects_drains_restarts_and_puts_back(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(6))
    for n in fc.nodes:
        fc.update_node(n.name, engine_timing=TIMING)
    hook_log = tmp_path / "hook.jsonl"
    inv = tmp_path / "inv.yaml"
    on_cluster(fc, inv, level="info", replicas=3, router=True, extra=RECOVERY.format(hook=HOOK, log=hook_log))
    runs = tmp_path / "runs"
    res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "90", "--skip-preflight",
                  "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    once = run_cli("watch", "-i", str(inv), "--once", "--output", "json", "--run-dir", str(runs))
    assert once.returncode == 0, once.stdout + once.stderr
    assert json.loads(once.stdout.splitlines()[-1])["states"] == {f"mixed-{i}": "serving" for i in range(3)}

    engine = next(n for n in fc.ssh("node3", "docker ps --format '{{.Names}}'", check=True).stdout.split()
                  if not n.endswith("_router"))
    router = f"http://{fc.node('node1').ip}:8080"
    watch = Events(inv, runs, "--allow-hook-command", fc=fc)   # the inventory's hook command: the operator opts in
    try:
        with Load(router) as load:
            watch.wait_rounds()
            deadline = time.time() + 60                      # a few seconds when the machine is idle
            while load.ok <= 5 and not load.failures and time.time() < deadline:
                time.sleep(0.5)
            assert load.ok > 5 and not load.failures, (load.ok, load.failures[:3])
            # 1. the engine container of node3 (mixed-1) killed
            before = load.ok
            t0 = time.time()
            fc.ssh("node3", f"docker kill {engine}", check=True)
            failed = watch.wait("instance-failed", "mixed-1", 60)
            back = watch.wait("back", "mixed-1", 240)
            kill_detect, kill_recover = failed["ts"] - t0, back["ts"] - t0
            kill_failures = len(load.failures)
            assert failed["node"] == "node3" and failed["kind"] == "container", failed
            # 2. an NPU of node5 (mixed-2) in Alarm: drained, then the NPU comes back and the instance restarts
            t1 = time.time()
            set_device(fc, "node5", 3, "health", "Alarm")
            try:
                failed2 = watch.wait("instance-failed", "mixed-2", 60)
            except AssertionError:
                once = run_cli("watch", "-i", str(inv), "--once", "--output", "json", "--run-dir", str(runs))
                import signal
                watch.proc.send_signal(signal.SIGABRT)
                time.sleep(2)
                smi = fc.ssh("node5", "npu-smi info; echo rc=$?")
                raise AssertionError(once.stdout[-3000:] + once.stderr[-2000:] + smi.stdout + smi.stderr)
            watch.wait("drained", "mixed-2", 60)
            set_device(fc, "node5", 3, "health", "OK")
            back2 = watch.wait("back", "mixed-2", 240)
            npu_detect, npu_recover = failed2["ts"] - t1, back2["ts"] - t1
            assert failed2["node"] == "node5" and failed2.get("device") == 3 and "Alarm" in failed2["cause"], \
                (failed2, watch.all[-12:])
            # 3. a device link of node1 (mixed-0, the router's node: the router keeps running) down, then up again
            npu_failures = len(load.failures) - kill_failures
            t2 = time.time()
            set_device(fc, "node1", 2, "link", "DOWN")
            failed3 = watch.wait("instance-failed", "mixed-0", 60)
            watch.wait("drained", "mixed-0", 60)
            set_device(fc, "node1", 2, "link", "UP")
            back3 = watch.wait("back", "mixed-0", 240)
            link_detect, link_recover = failed3["ts"] - t2, back3["ts"] - t2
            assert failed3["node"] == "node1" and failed3.get("device") == 2 and failed3["kind"] == "link", failed3
            time.sleep(3)
    finally:
        watch.stop()
    print(f"\nkilled container: detected in {kill_detect:.1f} s, back in the router after {kill_recover:.1f} s; "
          f"NPU Alarm: detected in {npu_detect:.1f} s, back after {npu_recover:.1f} s (Alarm cleared by the test); "
          f"requests ok {load.ok} (during the faults {load.ok - before}), failed {len(load.failures)} "
          f"(kill: {kill_failures}, NPU: {npu_failures}); link down: detected in {link_detect:.1f} s, back after "
          f"{link_recover:.1f} s", [f[:200] for f in load.failures[:5]])
    assert kill_detect < DETECT_S and npu_detect < DETECT_S and link_detect < DETECT_S, (kill_detect, npu_detect,
                                                                                          link_detect)
    # only the killed instance's requests in flight may fail (4 clients: at most 4); none while an NPU is drained
    assert kill_failures <= 4, load.failures
    assert len(load.failures) == kill_failures, load.failures
    assert load.ok > 50
    st = json.loads(run_cli("status", "-i", str(inv), "--output", "json").stdout)
    assert {(i["state"], i["router"]) for i in st["instances"]} == {("serving", "UP")}, st["instances"]
    # each restart is an entry of the hosts' history, read back from them
    h = json.loads(run_cli("history", "-i", str(inv), "--output", "json").stdout)["revisions"]
    assert [(r["result"], r["summary"].split(":")[0]) for r in h if r["operation"] == "restart"] == [
        ("successful", "watch restarted mixed-1 on node3, node4"),
        ("successful", "watch restarted mixed-2 on node5, node6"),
        ("successful", "watch restarted mixed-0 on node1, node2")], h
    # every event recorded and sent to the hook command
    # the watch under test started last (after `watch --once`): run directories are named by their start time
    record = max(runs.glob("runs/*-watch/events.jsonl"))
    recorded = [json.loads(x)["event"] for x in record.read_text().splitlines()]
    assert {"fault", "instance-failed", "drained", "restart", "back"} <= set(recorded), recorded
    hooked = [json.loads(x)["event"] for x in hook_log.read_text().splitlines()]
    assert "back" in hooked and len(hooked) >= len(recorded) - 2, (hooked, recorded)
