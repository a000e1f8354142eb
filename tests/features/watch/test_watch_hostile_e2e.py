"""Day-two surfaces are untrusted input (issue 34), on the simulated cluster (2 x A2):

* observation 1 (the inventory runs a program on the controller): an inventory whose
  deploy.recovery.hooks.command would create a marker file (`[sh, -c, ...]`, as the review did) does not run
  it under `watch --once --no-recover`; the watch says how the operator enables it, and it runs once the
  operator opts in (--allow-hook-command, DEPLOYCTL_ALLOW_HOOK_COMMAND=1) or names a command (--hook-command):
  test_an_inventory_hook_command_does_not_run_without_the_operators_opt_in;
* observation 7 (escapes reach alerting): a node whose `docker restart` answers with an OSC title, a screen
  clear, an OSC 8 hyperlink and a bidi override; the `restart-failed` event that quotes it reaches
  events.jsonl, `--output json`, the webhook and the hook command's stdin as one printable line:
  test_a_docker_restart_error_full_of_escapes_reaches_alerting_clean.

And `watch` against them as a service manager runs it: nothing deployed, text mode with stdout a pipe prints its
lines while it runs and calls the deployment down, as `status` does; a deliberate `down` while a watch with
recovery runs is reported down (not failed) and nothing of it is recovered afterwards.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path


from conftest import DEPLOYCTL, run_cli  # noqa: E402
from fakecluster import default_cluster  # noqa: E402
from support.inventory import on_cluster  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "backends" / "hosts"))   # test_fleet_e2e
from test_watch_e2e import Events  # noqa: E402
from test_watch_hostile import BAD, Webhook, _strings  # noqa: E402

# two single-node instances behind deployctl's router (DeepSeek-R1 W4A8 fits one A2 server)


def inventory(fc, path: Path, deploy: str) -> Path:
    return on_cluster(fc, path, quant="w4a8", max_batch_size=16, preset="single", replicas=2, router=True,
                      extra=deploy)


def test_an_inventory_hook_command_does_not_run_without_the_operators_opt_in(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(2))
    marker = tmp_path / "inventory-ran-this"
    inv = inventory(fc, tmp_path / "inv.yaml", f"""deploy:
  recovery:
    hooks:
      command: [sh, -c, "id > {marker}"]
""")
    runs = tmp_path / "runs"
    # nothing is deployed: `status` says down and so does the watch (exit 1: not serving); its events go to the hook
    res = run_cli("watch", "-i", str(inv), "--once", "--no-recover", "--output", "json", "--run-dir", str(runs))
    assert res.returncode == 1, res.stdout + res.stderr
    events = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    assert [e["event"] for e in events if e["event"] != "note"] == ["deployment-down", "round"], events
    assert "nothing deployed yet" in events[-2]["cause"] and set(events[-1]["states"].values()) == {"down"}
    time.sleep(1)
    assert not marker.exists(), "the inventory's hook command ran without the operator's opt-in"
    assert f"{inv}:" in res.stderr and "deploy.recovery.hooks.command" in res.stderr, res.stderr
    assert "--allow-hook-command" in res.stderr and "DEPLOYCTL_ALLOW_HOOK_COMMAND=1" in res.stderr
    assert "Traceback" not in res.stderr
    note = [e for e in events if e["event"] == "note" and e.get("kind") == "hooks"]
    assert note and "is not run" in note[0]["cause"], events          # recorded and sent: an alert channel is off
    record = max(runs.glob("runs/*-watch/events.jsonl"))
    assert any(json.loads(x).get("kind") == "hooks" for x in record.read_text().splitlines())

    # the operator's opt-in, by flag or by environment: the inventory's command runs
    res = run_cli("watch", "-i", str(inv), "--once", "--no-recover", "--run-dir", str(runs), "--allow-hook-command")
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert marker.exists() and "uid=" in marker.read_text()
    marker.unlink()
    res = run_cli("watch", "-i", str(inv), "--once", "--no-recover", "--run-dir", str(runs),
                  env={"DEPLOYCTL_ALLOW_HOOK_COMMAND": "1"})
    assert marker.exists() and "is not run" not in res.stderr, res.stderr
    marker.unlink()
    # the operator's own command replaces the inventory's
    own = tmp_path / "operator-ran-this"
    res = run_cli("watch", "-i", str(inv), "--once", "--no-recover", "--run-dir", str(runs),
                  "--hook-command", shlex.join(["sh", "-c", f"cat >> {own}; echo >> {own}"]))
    assert own.exists() and not marker.exists(), res.stderr
    assert all(json.loads(x)["event"] for x in own.read_text().splitlines() if x.strip())
    assert "--hook-command replaces it" in res.stderr
    # text mode with stdout a pipe (as under a service manager): lines while it runs, not a screen at its end
    proc = subprocess.Popen([sys.executable, str(DEPLOYCTL), "watch", "-i", str(inv), "--no-recover", "--interval",
                             "1", "--run-dir", str(runs)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HOME": os.environ.get("HOME", "/root")})
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in iter(proc.stdout.readline, "")], daemon=True).start()
    try:
        seen = [lines.get(timeout=60) for _ in range(3)]      # the hooks note, deployment-down, round 1
        running = proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(30)
    assert running, seen
    assert [line.split(" ")[1] for line in seen] == ["note", "deployment-down", "round"], seen
    assert "serving 0/2; down: mixed-0, mixed-1 (nothing deployed yet)" in seen[2], seen
    # a command line that does not split is refused, exit 2, no traceback
    res = run_cli("watch", "-i", str(inv), "--once", "--run-dir", str(runs), "--hook-command", "'unterminated")
    assert res.returncode == 2 and "--hook-command" in res.stderr and "Traceback" not in res.stderr, res.stderr


# `docker restart` on the node answers with what a hostile host prints, and fails; everything else is docker's
DOCKER = r"""#!/bin/sh
if [ "$1" = restart ]; then
  printf '\033]0;pwned\007\033[2J\033[3J\033]8;;http://evil.example/\033\\click me\033]8;;\033\\ '
  printf 'Error response from daemon: \342\200\256evil\342\200\254 cannot restart container\r\n\033[?1049h' >&2
  exit 1
fi
exec /usr/local/bin/docker.real "$@"
"""


def test_a_docker_restart_error_full_of_escapes_reaches_alerting_clean(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(2))
    web = Webhook()
    hook_log = tmp_path / "hook-stdin.jsonl"
    inv = inventory(fc, tmp_path / "inv.yaml", f"""deploy:
  recovery:
    enabled: true
    max_restarts: 1
    backoff_s: 1
    ready_timeout_s: 30
    hooks:
      webhook: "{web.url}"
      command: [sh, -c, "cat >> {hook_log}; echo >> {hook_log}"]
""")
    runs = tmp_path / "runs"
    try:
        res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "90",
                      "--skip-preflight", "--output", "json")
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        fc.ssh("node2", "mv /usr/local/bin/docker /usr/local/bin/docker.real && cat > /usr/local/bin/docker && "
               "chmod 755 /usr/local/bin/docker", check=True, input=DOCKER)
        engine = next(n for n in fc.ssh("node2", "docker ps --format '{{.Names}}'", check=True).stdout.split())
        watch = Events(inv, runs, env={"DEPLOYCTL_ALLOW_HOOK_COMMAND": "1"})     # the operator opts in
        try:
            time.sleep(3)
            fc.ssh("node2", f"docker kill {engine}", check=True)
            failed = watch.wait("restart-failed", "mixed-1", 90)
            watch.wait("left-out", "mixed-1", 60)
            time.sleep(2)
            # a deliberate `down` while the watch runs: down as status says, never failed, nothing recovered
            res = run_cli("down", "-i", str(inv), "--run-dir", str(runs))
            assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
            gone = watch.wait("deployment-down", "", 90)
            while True:                                 # what it says in the rounds after
                try:
                    watch.all.append(watch.q.get(timeout=6))
                except queue.Empty:
                    break
        finally:
            watch.stop()
    finally:
        web.close()
    assert "`deployctl status` says down" in gone["cause"] and "stopped by `deployctl down`" in gone["cause"], gone
    after = [e["event"] for e in watch.all[watch.all.index(gone) + 1:]]
    assert not {"instance-failed", "drained", "restart", "restart-failed", "left-out", "not-recovered"} & set(after), \
        after
    cause = failed["cause"]
    assert "Error response from daemon" in cause and "cannot restart container" in cause, cause
    record = max(runs.glob("runs/*-watch/events.jsonl"))
    rec = [json.loads(x) for x in record.read_text().splitlines()]
    hooked = [json.loads(x) for x in hook_log.read_text().splitlines() if x.strip()]
    for where, docs in (("events.jsonl", rec), ("--output json", watch.all), ("webhook", web.bodies),
                        ("hook stdin", hooked)):
        quoted = [d for d in docs if d["event"] == "restart-failed"]
        assert quoted, (where, [d["event"] for d in docs])
        dirty = [s for d in docs for s in _strings(d) if any(c in s for c in BAD)]
        assert not dirty, (where, dirty[:3])
    assert json.loads(run_cli("status", "-i", str(inv), "--output", "json").stdout)["state"] == "down"
    # a watch started after it: the same (its run record is a new one, after the checks above)
    once = run_cli("watch", "-i", str(inv), "--once", "--output", "json", "--run-dir", str(runs))
    docs = [json.loads(x) for x in once.stdout.splitlines() if x.startswith("{")]
    said = [d["event"] for d in docs if d["event"] not in ("note", "hook-error")]    # (the webhook is closed)
    assert once.returncode == 1 and said == ["deployment-down", "round"], once.stdout
    assert set(docs[-1]["states"].values()) == {"down"}
