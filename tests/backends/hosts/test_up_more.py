"""More `deployctl up` end to end on simulated hosts: 4-node A2 DP+EP, A3 2P+2D pd-split (a change that
only touches decode restarts only decode), every failure mode with the previous revision still serving,
how fast a failure is named, --dry-run and Ctrl-C.

Clusters are shared per module (each test brings the deployment into the state it needs first), the
rendezvous timeout of the stand-in engine is 12 s and readiness timeouts are small, to keep this file
around three minutes.

Failure modes with a previous revision: only `engine_crash_on` is scoped to a revision by the fake; the
others (`engine_never_ready`, `engine_reject_config`, `engine_slow_start`) apply to every container a node
starts. The fake snapshots a node's faults into the container when `docker run` starts it, so the tests
set the fault, run `up`, and clear it as soon as `up` prints that the bad revision's start.sh returned on
that node: the bad revision keeps the fault, the rollback's restart of the previous revision does not. A
failure on a first `up` (nothing to roll back to) is tested separately: everything the run started is
removed.

How fast a failure is named: the line `  <host>: <task> FAILED` is timestamped as `up` prints it (a pipe,
read line by line) and compared with the last engine log timestamp in the failure text (the moment the
engine died or the rendezvous timed out; the fake hosts share this machine's clock). The bound is 5 s:
the readiness loop polls once a second and ansible adds well under a second, so 5 s leaves room for a
loaded 2-CPU machine. The never-ready case has no engine event to measure from (the failure is the
readiness timeout itself). The host's rank range, last log lines and the rollback must follow within the
same bound, without waiting for the other hosts' readiness loops (test_crash_report_and_rollback_follow_...).

A failed rollback is said in both output modes (this was a bug; it is now a plain test).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest
from conftest import DEPLOYCTL, ROOT, run_cli
from fakecluster import FakeCluster, default_cluster, with_faults
from fakecluster.fixtures import require_fake_cluster_support
from fakecluster.spec import DEFAULT_IMAGES, DEFAULT_WEIGHTS_DIR
from test_up_cluster import chat, fc_cluster, inventory, up

ENV = {"COLUMNS": "120", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
JOIN_TIMEOUT = 12           # the stand-in engine's rendezvous timeout on the shared clusters (6 s was missed by a peer
                            # starting on a loaded 2-core runner)
MASTER_WAIT = 15            # the master's rendezvous timeout in the crash run (the fake's default)
REPORT_WITHIN = 5.0         # seconds from the engine's failure to the FAILED line
# to the start of the rollback: the canceled playbook must end first (ansible-runner's cancel), 3-5 s here
# on an idle machine, so 3x that keeps the test true on a loaded one
ROLLBACK_WITHIN = 15.0


# ---- helpers ---------------------------------------------------------------------------------------

@dataclass
class UpRun:
    rc: int
    doc: dict                                     # the --output json document ({} in text mode)
    lines: list[tuple[float, str]] = field(default_factory=list)   # (wall time, progress line)
    started: float = 0.0

    @property
    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def first(self, needle: str) -> tuple[float, str] | None:
        return next(((t, line) for t, line in self.lines if needle in line), None)


def up_live(inv: Path, runs: Path, *extra: str, json_out: bool = True, on_line=None, timeout: float = 240) -> UpRun:
    """`deployctl up -y` as a user runs it, reading its progress line by line as it comes (stderr with
    --output json, stdout otherwise). `on_line(line, proc)` may act on the hosts or signal the process
    (its own session, as a terminal's foreground job: os.killpg is what Ctrl-C does)."""
    args = [str(DEPLOYCTL), "up", "-i", str(inv), "-y", "--run-dir", str(runs), *extra]
    if json_out:
        args += ["--output", "json"]
    run = UpRun(rc=-1, doc={}, started=time.time())
    with tempfile.TemporaryFile("w+") as other:
        proc = subprocess.Popen(args, stdout=other if json_out else subprocess.PIPE,
                                stderr=subprocess.PIPE if json_out else other, stdin=subprocess.DEVNULL,
                                text=True, cwd=ROOT, env=ENV, start_new_session=True,
                                # as from a terminal: a test run started in the background (`pytest &` in a
                                # script ignores SIGINT, and children inherit an ignored signal) must not make
                                # deployctl deaf to the Ctrl-C a test sends
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        guard = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        guard.start()
        try:
            for line in proc.stderr if json_out else proc.stdout:
                run.lines.append((time.time(), line.rstrip("\n")))
                if on_line:
                    on_line(line, proc)
            run.rc = proc.wait()
        finally:
            guard.cancel()
        other.seek(0)
        rest = other.read()
    if json_out:
        assert rest.strip().startswith("{"), f"exit {run.rc}, no JSON on stdout:\n{rest}\n{run.text}"
        run.doc = json.loads(rest)
    return run


def tagged_inventory(fc: FakeCluster, path: Path, tag: str, preset: str = "tp-pp") -> Path:
    """The helper inventory with one more engine env var: each tag is its own revision."""
    inventory(fc, path, preset=preset)
    text = path.read_text()
    assert "env: {MINDIE_LOG_LEVEL: info}" in text
    path.write_text(text.replace("env: {MINDIE_LOG_LEVEL: info}",
                                 f"env: {{MINDIE_LOG_LEVEL: info, TEST_REVISION: {tag}}}"))
    return path


def status(inv: Path) -> tuple[int, list[dict]]:
    st = run_cli("status", "-i", str(inv), "--output", "json")
    assert st.stdout.strip().startswith("{"), st.stdout + st.stderr
    return st.returncode, json.loads(st.stdout)["nodes"]


def started_at(fc: FakeCluster, node: str, container: str) -> str:
    r = fc.ssh(node, f"docker inspect --format '{{{{.State.Status}}}} {{{{.State.StartedAt}}}}' {container}")
    return r.stdout.strip() if r.returncode == 0 else "absent"


def host_snapshot(fc: FakeCluster) -> dict[str, str]:
    """Containers (id, state, start) and every file under /var/lib/deployctl on every node."""
    cmd = ("for c in $(docker ps -aq --no-trunc); do docker inspect --format "
           "'{{.Id}} {{.Name}} {{.State.Status}} {{.State.StartedAt}}' $c; done; echo ---; "
           "find /var/lib/deployctl -printf '%p %s %T@\\n' 2>/dev/null | sort")
    return {n.name: fc.ssh(n.name, cmd, check=True).stdout for n in fc.nodes}


LOG_TIME = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+[+-]\d\d:\d\d)\]")


def last_engine_time(text: str) -> float:
    """The last MindIE log timestamp in a failure text (as wall time)."""
    stamps = [datetime.strptime(s, "%Y-%m-%d %H:%M:%S.%f%z").timestamp() for s in LOG_TIME.findall(text)]
    assert stamps, f"no engine log line with a timestamp in:\n{text}"
    return max(stamps)


def make_cluster(tmp_path_factory, specs) -> FakeCluster:
    require_fake_cluster_support()
    return FakeCluster(specs, tmp_path_factory.mktemp("fakecluster")).start()


# ---- 4 x A2, DP + EP; --dry-run ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def a2x4(tmp_path_factory):
    fc = make_cluster(tmp_path_factory, default_cluster(4))
    try:
        yield fc
    finally:
        fc.stop()


def test_dry_run_changes_nothing_on_the_hosts_and_prints_the_change_table(a2x4, tmp_path):
    inv = tagged_inventory(a2x4, tmp_path / "inv.yaml", "dry", preset="dp-ep")
    before = host_snapshot(a2x4)
    res = run_cli("up", "-i", str(inv), "--dry-run", "--skip-preflight", "--run-dir", str(tmp_path / "runs"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "What up will change" in res.stdout and "dry-run: nothing was changed" in res.stdout
    for n in ("node1", "node2", "node3", "node4"):
        assert re.search(rf"│ {n} +│", res.stdout), res.stdout
    assert host_snapshot(a2x4) == before
    fresh = all(v == "---\n" for v in before.values())    # no container, no file (this test runs first)
    res = run_cli("up", "-i", str(inv), "--dry-run", "--skip-preflight", "--output", "json",
                  "--run-dir", str(tmp_path / "runs"))
    doc = json.loads(res.stdout)
    assert res.returncode == 0 and doc["status"] == "dry-run"
    assert {h["action"] for h in doc["changes"]["hosts"]} == ({"start"} if fresh else {"restart"})
    assert host_snapshot(a2x4) == before


def test_dp_ep_on_four_a2_nodes(a2x4, tmp_path):
    inv = inventory(a2x4, tmp_path / "inv.yaml", preset="dp-ep")
    runs = tmp_path / "runs"
    res, doc = up(inv, runs)                     # with preflight
    assert res.returncode == 0, res.stdout + res.stderr
    assert doc["status"] == "successful"
    assert [h["node"] for h in doc["changes"]["hosts"]] == ["node1", "node2", "node3", "node4"]
    rc, rows = status(inv)
    assert rc == 0, rows
    assert [(r["node"], r["engine"], r["ready"], r["problem"]) for r in rows] == [
        (n, "running", True, "") for n in ("node1", "node2", "node3", "node4")]
    assert [r["ranks"] for r in rows] == ["0-7", "8-15", "16-23", "24-31"]
    assert len({r["revision"] for r in rows}) == 4
    assert chat(a2x4.node("node1").ip)["choices"][0]["message"]["content"]
    again, doc2 = up(inv, runs, "--skip-preflight")
    assert again.returncode == 0 and doc2["status"] == "nothing-to-do"
    assert {h["action"] for h in doc2["changes"]["hosts"]} == {"keep"}


# ---- A3 2P + 2D pd-split ----------------------------------------------------------------------------

A3_TAIL = """\
engine:
  image: {image}
model: {{name: deepseek-r1, quant: w8a8, weights_path: {weights}, served_name: ds-r1,
        max_seq_len: 8192, max_input_len: 4096, max_batch_size: 32}}
layout:
  preset: pd-split
  prefill: {{nodes: [node1, node2]}}
  decode:  {{nodes: [node3, node4], o_proj_tp: {o_proj_tp}}}
"""
COORDINATOR = 1035


def a3_inventory(fc: FakeCluster, path: Path, o_proj_tp: int = 2) -> Path:
    path.write_text(fc.inventory_snippet() + A3_TAIL.format(image=DEFAULT_IMAGES["a3"], weights=DEFAULT_WEIGHTS_DIR,
                                                            o_proj_tp=o_proj_tp))
    return path


@dataclass
class A3:
    fc: FakeCluster
    inv: Path
    runs: Path
    first: UpRun
    engine: str
    ms: tuple[str, str]


@pytest.fixture(scope="module")
def a3_pd(tmp_path_factory):
    """4 x A3, prefill node1+node2, decode node3+node4, deployed once by a text-mode `up` (with preflight)."""
    fc = make_cluster(tmp_path_factory, default_cluster(4, "a3"))
    try:
        work = tmp_path_factory.mktemp("a3pd")
        inv = a3_inventory(fc, work / "inv.yaml")
        first = up_live(inv, work / "runs", "--ready-timeout", "60", json_out=False)
        assert first.rc == 0, first.text
        engine = f"deployctl_{fc_cluster(inv)}_mindie"
        yield A3(fc, inv, work / "runs", first, engine, (f"{engine}-ms-controller", f"{engine}-ms-coordinator"))
    finally:
        fc.stop()


def test_pd_split_serves_through_the_coordinator(a3_pd):
    fc = a3_pd.fc
    answer = chat(fc.node("node1").ip, COORDINATOR)
    assert answer["choices"][0]["message"]["content"]
    rc, rows = status(a3_pd.inv)
    assert rc == 0, rows
    assert [(r["node"], r["instance"], r["ranks"], r["engine"], r["ready"], r["problem"]) for r in rows] == [
        ("node1", "prefill", "0-15", "running", True, ""), ("node2", "prefill", "16-31", "running", True, ""),
        ("node3", "decode", "0-15", "running", True, ""), ("node4", "decode", "16-31", "running", True, "")]
    # `status` has no column for MindIE-MS; it reports it as a problem of the MS node when it is not running
    # (checked in test_pd_split_dead_coordinator_...); here both run:
    for name in a3_pd.ms:
        assert started_at(fc, "node1", name).startswith("running "), name


def test_pd_split_up_prints_the_coordinator_url(a3_pd):
    ip = a3_pd.fc.node("node1").ip
    assert f"✓ serving (verified on every node): http://{ip}:{COORDINATOR}/v1/chat/completions" in a3_pd.first.text, a3_pd.first.text


def test_pd_split_decode_change_restarts_only_decode(a3_pd, tmp_path):
    fc, inv = a3_pd.fc, a3_pd.inv
    res, doc = up(inv, a3_pd.runs, "--skip-preflight")          # back to the fixture's revision if needed
    assert res.returncode == 0 and doc["status"] in ("nothing-to-do", "successful"), res.stdout + res.stderr
    before = {n: started_at(fc, n, a3_pd.engine) for n in ("node1", "node2", "node3", "node4")}
    changed = a3_inventory(fc, tmp_path / "inv.yaml", o_proj_tp=8)   # decode's o_proj TP only (default 2)
    res, doc = up(changed, a3_pd.runs, "--skip-preflight")
    assert res.returncode == 0, res.stdout + res.stderr
    hosts = {h["node"]: h for h in doc["changes"]["hosts"]}
    assert {n: h["action"] for n, h in hosts.items()} == {
        "node1": "keep", "node2": "keep", "node3": "restart", "node4": "restart"}
    # decode is distributed DP (deepseek-r1 on atb: tp1 -> 16 DP servers per A3 node, config1..16.json)
    dp_configs = {f"config{i}.json" for i in range(1, 17)}
    assert {n: {f["path"] for f in h["files"] if f["kind"] != "unchanged"} for n, h in hosts.items()} == {
        "node1": set(), "node2": set(), "node3": dp_configs, "node4": dp_configs}
    # MindIE-MS restarts with a restarted instance (the coordinator reconnects to the new decode master)
    assert hosts["node1"]["ms_action"] == "restart"
    after = {n: started_at(fc, n, a3_pd.engine) for n in ("node1", "node2", "node3", "node4")}
    assert after["node1"] == before["node1"] and after["node2"] == before["node2"], (before, after)
    assert after["node3"] != before["node3"] and after["node4"] != before["node4"], (before, after)
    assert all(v.startswith("running ") for v in after.values()), after
    assert chat(fc.node("node1").ip, COORDINATOR)["choices"][0]["message"]["content"]
    rc, rows = status(changed)
    assert rc == 0, rows


def test_pd_split_dead_coordinator_shows_in_status_and_up_restarts_only_mindie_ms(a3_pd):
    fc, inv = a3_pd.fc, a3_pd.inv
    fc.ssh("node1", f"docker stop -t 2 {a3_pd.ms[1]}", check=True)
    rc, rows = status(inv)
    assert rc == 1 and rows[0]["problem"] == "coordinator exited", rows
    engines = {n: started_at(fc, n, a3_pd.engine) for n in ("node1", "node2", "node3", "node4")}
    res, doc = up(inv, a3_pd.runs, "--skip-preflight")
    assert res.returncode == 0, res.stdout + res.stderr
    hosts = {h["node"]: h for h in doc["changes"]["hosts"]}
    # whichever revision the decode nodes ran, the prefill engines stay; MindIE-MS comes back
    assert hosts["node1"]["action"] == "keep" and hosts["node2"]["action"] == "keep"
    assert hosts["node1"]["ms_action"] in ("start", "restart")
    for n in ("node1", "node2"):
        assert started_at(fc, n, a3_pd.engine) == engines[n]
    assert started_at(fc, "node1", a3_pd.ms[1]).startswith("running ")
    assert chat(fc.node("node1").ip, COORDINATOR)["choices"][0]["message"]["content"]
    assert status(inv)[0] == 0


# ---- failure modes on 2 x A2 ------------------------------------------------------------------------

@dataclass
class A2:
    fc: FakeCluster
    work: Path
    runs: Path


@pytest.fixture(scope="module")
def a2x2(tmp_path_factory):
    specs = default_cluster(2)
    specs = with_faults(specs, **{s.name: {"engine_join_timeout": JOIN_TIMEOUT} for s in specs})
    fc = make_cluster(tmp_path_factory, specs)
    try:
        work = tmp_path_factory.mktemp("a2x2")
        yield A2(fc, work, work / "runs")
    finally:
        fc.stop()


def deploy_good(c: A2) -> dict[str, str]:
    """The good revision running on both nodes (up or no-op); its revision per node."""
    inv = tagged_inventory(c.fc, c.work / "good.yaml", "good")
    res, doc = up(inv, c.runs, "--skip-preflight")
    assert res.returncode == 0 and doc["status"] in ("successful", "nothing-to-do"), res.stdout + res.stderr
    assert chat(c.fc.node("node1").ip)["choices"][0]["message"]["content"]
    return {h["node"]: h["rev"] for h in doc["changes"]["hosts"]}


def clear_when_started(fc: FakeCluster, node: str, **clear):
    """on_line callback: once the bad revision's container runs on `node` (start.sh returned; the fault
    is in its snapshot), take the fault away so the rollback's restart does not get it."""
    def on_line(line: str, proc) -> None:
        if f"{node}: Run start.sh" in line:
            fc.update_node(node, **clear)
    return on_line


def assert_previous_revision_serves(c: A2, good: dict[str, str]) -> None:
    inv = c.work / "good.yaml"
    rc, rows = status(inv)
    assert rc == 0, rows
    assert {r["node"]: r["revision"] for r in rows} == good
    for n in ("node1", "node2"):
        env = c.fc.ssh(n, f"cat /var/lib/fakedocker/deployctl_{fc_cluster(inv)}_mindie/env").stdout
        assert "TEST_REVISION=good" in env.splitlines(), env
    assert chat(c.fc.node("node1").ip)["choices"][0]["message"]["content"]


def test_failure_on_a_first_up_stops_everything_it_started(a2x2):
    """Nothing ran before: node2 never gets ready; node1 (ready, serving) is stopped too, no current link."""
    c = a2x2
    dn = run_cli("down", "-i", str(tagged_inventory(c.fc, c.work / "good.yaml", "good")), "--purge",
                 "--run-dir", str(c.runs))
    assert dn.returncode == 0, dn.stdout + dn.stderr
    c.fc.update_node("node2", engine_never_ready=True)
    # the failure under test is node2's readiness timeout (4 s after its wait starts); the master's HCCL
    # rendezvous must not time out first, even when a loaded machine delays node2's start: 10x margin
    for n in ("node1", "node2"):
        c.fc.update_node(n, engine_join_timeout=40)
    try:
        inv = tagged_inventory(c.fc, c.work / "first.yaml", "first")
        run = up_live(inv, c.runs, "--skip-preflight", "--ready-timeout", "4")
    finally:
        c.fc.update_node("node2", engine_never_ready=False)
        for n in ("node1", "node2"):
            c.fc.update_node(n, engine_join_timeout=JOIN_TIMEOUT)
    assert run.rc == 1, run.text
    assert run.doc["status"] == "failed"
    assert run.doc["failure"].startswith("node2 (mixed instance, ranks 8-15): Wait for"), run.doc["failure"]
    assert "not ready after 4 s" in run.doc["failure"] and "Warming up the model" in run.doc["failure"]
    assert run.doc["restored"] == []
    assert "node1: Wait for \"Daemon start success!\" ✓" in run.text     # node1 was up and ready
    for n in ("node1", "node2"):
        assert c.fc.ssh(n, "docker ps -aq").stdout.strip() == "", n
        assert c.fc.ssh(n, f"test -e /var/lib/deployctl/{fc_cluster(inv)}/current").returncode == 1, n
    assert (Path(run.doc["run"]) / "status").read_text() == "failed\n"


@dataclass
class CrashRun:
    run: UpRun
    good: dict[str, str]
    crash: float                 # when node2's engine died (its last log timestamp)


@pytest.fixture(scope="module")
def crash_run(a2x2) -> CrashRun:
    """Text output, as users see it; the new revision crashes on node2 only (~0.3 s after it starts), while
    the master node1 waits MASTER_WAIT s in the rendezvous for it (the fake's default; real HCCL waits
    longer)."""
    c = a2x2
    good = deploy_good(c)
    c.fc.update_node("node2", engine_crash_on="TEST_REVISION=crash")
    c.fc.update_node("node1", engine_join_timeout=MASTER_WAIT)
    try:
        run = up_live(tagged_inventory(c.fc, c.work / "bad.yaml", "crash"), c.runs, "--skip-preflight",
                      "--ready-timeout", "30", json_out=False)
    finally:
        c.fc.update_node("node2", engine_crash_on="")
        c.fc.update_node("node1", engine_join_timeout=JOIN_TIMEOUT)
    assert run.rc == 1, run.text
    summary = run.first("✗ node2 (mixed instance, ranks 8-15): Wait for")
    assert summary, run.text
    return CrashRun(run, good, last_engine_time(run.text[run.text.index(summary[1]):]))


def test_crash_of_a_new_revision_is_named_within_seconds_and_rolled_back(a2x2, crash_run):
    run, crash = crash_run.run, crash_run.crash
    failed = run.first("FAILED")
    assert failed and failed[1].strip() == 'node2: Wait for "Daemon start success!" FAILED', run.text
    summary = run.first("✗ node2 (mixed instance, ranks 8-15): Wait for")
    report = run.text[run.text.index(summary[1]):]
    assert "HBM ECC error while loading weights (TEST_REVISION=crash)" in report
    assert "Daemon is killing..." in report
    print(f"crash: FAILED line {failed[0] - crash:.2f} s after the crash, host + ranks + log lines "
          f"{summary[0] - crash:.2f} s after, up ended {run.lines[-1][0] - crash:.2f} s after")
    assert failed[0] - crash <= REPORT_WITHIN, f"FAILED printed {failed[0] - crash:.1f} s after the crash"
    assert "✗ up failed; previous revision restored on: node1, node2" in run.text
    record = Path(run.text.rsplit("Logs: ", 1)[1].split()[0])
    assert (record / "status").read_text() == "failed\n" and (record / "rc").read_text() == "1\n"
    assert "HBM ECC error" in (record / "hosts" / "node2" / "failure.txt").read_text()
    assert_previous_revision_serves(a2x2, crash_run.good)


def test_crash_report_and_rollback_follow_within_seconds(crash_run):
    """README: 'at the first failure the failing host, its rank range and its last log lines are printed at
    once, what this run started is stopped ...'."""
    run, crash = crash_run.run, crash_run.crash
    summary = run.first("✗ node2 (mixed instance, ranks 8-15)")
    rolling = run.first("rolling back")
    assert summary[0] - crash <= REPORT_WITHIN, f"rank range and log lines {summary[0] - crash:.1f} s after the crash"
    assert rolling[0] - crash <= ROLLBACK_WITHIN, f"rollback started {rolling[0] - crash:.1f} s after the crash"


# (fault on node2, how to clear it, the failing host and ranks named, text expected in the failure, ready timeout)
FAILURES = {
    "never-ready": ({"engine_never_ready": True}, {"engine_never_ready": False}, "node2 (mixed instance, ranks 8-15)",
                    ["not ready after 5 s", "Warming up the model"], 5),
    "reject-config": ({"engine_reject_config": "maxPrefillTokens too small for this test"},
                      {"engine_reject_config": False}, "node2 (mixed instance, ranks 8-15)",
                      ["container deployctl_fake-a2-2_mindie is exited", "maxPrefillTokens too small for this test"], 20),
    # node2 loads its weights longer than the rendezvous waits: the master (node1) gives up, naming node2
    "slow-start": ({"engine_slow_start": JOIN_TIMEOUT + 3.0}, {"engine_slow_start": 0.0},
                   "node1 (mixed instance, ranks 0-7)", ["[EI0006] Getting socket times out", "{node2_ip}"], 30),
}


@pytest.mark.parametrize("mode", list(FAILURES))
def test_failure_of_a_new_revision_names_the_host_and_keeps_the_previous_one(a2x2, mode):
    c = a2x2
    fault, clear, where, expected, ready_timeout = FAILURES[mode]
    good = deploy_good(c)
    c.fc.update_node("node2", **fault)
    try:
        run = up_live(tagged_inventory(c.fc, c.work / "bad.yaml", mode), c.runs, "--skip-preflight",
                      "--ready-timeout", str(ready_timeout), on_line=clear_when_started(c.fc, "node2", **clear))
    finally:
        c.fc.update_node("node2", **clear)
    doc = run.doc
    assert run.rc == 1, run.text
    assert doc["status"] == "failed"
    assert doc["failure"].startswith(f"{where}: Wait for \"Daemon start success!\" failed"), doc["failure"]
    for text in expected:
        assert text.format(node2_ip=c.fc.node("node2").ip) in doc["failure"], doc["failure"]
    assert sorted(doc["restored"]) == ["node1", "node2"]
    failed = run.first("FAILED")
    assert failed and failed[1].strip().startswith(where.split()[0] + ":"), run.text
    if mode != "never-ready":             # there the failure is the timeout itself, no engine event
        delay = failed[0] - last_engine_time(doc["failure"])
        print(f"{mode}: FAILED line {delay:.2f} s after the engine failed")
        assert delay <= REPORT_WITHIN, f"FAILED printed {delay:.1f} s after the engine failed"
    assert_previous_revision_serves(c, good)


def test_ctrl_c_while_waiting_for_readiness_cancels_and_restores(a2x2):
    c = a2x2
    good = deploy_good(c)
    # node2 loads its weights for 20 s, in this revision and in the restored one: the Ctrl-C comes about a second
    # into the wait, and the fault is never changed during the run (an engine reads it whenever it starts, which
    # on a loaded machine can be seconds after ansible reported start.sh done)
    c.fc.update_node("node2", engine_slow_start=20.0)
    # the ranks wait for each other far longer than the Ctrl-C takes to come, however loaded the machine: the run
    # must end canceled, not failed by a join timeout first
    for n in ("node1", "node2"):
        c.fc.update_node(n, engine_join_timeout=90)
    sent = []

    def on_line(line: str, proc) -> None:
        if "Wait until every node is ready" in line and not sent:
            time.sleep(1.0)
            os.killpg(proc.pid, signal.SIGINT)       # Ctrl-C in a terminal: the foreground process group
            sent.append(time.time())

    try:
        run = up_live(tagged_inventory(c.fc, c.work / "bad.yaml", "ctrl-c"), c.runs, "--skip-preflight",
                      "--ready-timeout", "120", on_line=on_line)
    finally:
        c.fc.update_node("node2", engine_slow_start=0.0)
        for n in ("node1", "node2"):
            c.fc.update_node(n, engine_join_timeout=JOIN_TIMEOUT)
    assert sent, run.text
    assert run.rc != 0, run.text
    assert run.doc["status"] == "canceled", run.doc
    record = Path(run.doc["run"])
    assert (record / "status").read_text() == "canceled\n" and (record / "rc").read_text() != "0\n"
    assert sorted(run.doc["restored"]) == ["node1", "node2"]
    # the canceled playbook is gone (it does not go on starting things after the rollback)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(record) not in ps, ps
    assert_previous_revision_serves(c, good)


def test_a_failed_rollback_is_not_reported_as_restored(a2x2):
    """node2 crashes on every start, so the restart of the previous revision fails as well."""
    c = a2x2
    deploy_good(c)
    c.fc.update_node("node2", engine_crash=True)
    try:
        run = up_live(tagged_inventory(c.fc, c.work / "bad.yaml", "both-bad"), c.runs, "--skip-preflight",
                      "--ready-timeout", "20")
    finally:
        c.fc.update_node("node2", engine_crash=False)
    assert run.rc == 1 and run.doc["status"] == "failed", run.text
    assert "rollback also failed" in run.doc["failure"]
    assert "node2" not in run.doc["restored"], run.doc["restored"]


def test_a_failed_rollback_is_said_in_the_text_output(a2x2):
    """The same in text mode: after `rolling back ...` the user must read that the rollback failed, and no
    line may claim node2 restored or that nothing ran before."""
    c = a2x2
    deploy_good(c)
    c.fc.update_node("node2", engine_crash=True)
    try:
        run = up_live(tagged_inventory(c.fc, c.work / "bad.yaml", "both-bad-text"), c.runs, "--skip-preflight",
                      "--ready-timeout", "20", json_out=False)
    finally:
        c.fc.update_node("node2", engine_crash=False)
    assert run.rc == 1, run.text
    tail = run.text[run.text.index("rolling back"):]
    assert "rollback also failed" in tail or "rollback failed" in tail, tail
    assert "nothing ran before" not in tail, tail
    assert not re.search(r"restored on: [^\n]*node2", tail), tail
