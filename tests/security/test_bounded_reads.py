"""Issue 21, observation 2 (memory exhaustion) and observation 9 (--trust-new-hosts and known_hosts).

A host that prints without end (its lock file a link to /dev/zero, a tool that streams zeros) must cost the
controller a bounded amount of memory and time: every SSH command has an output cap and a deadline that holds
while data streams; the finding names the host and the command; the other hosts' results still arrive.
`logs` streams to disk with its own cap. --trust-new-hosts appends only to a real known_hosts file.

The simulated-host tests run deployctl under an address-space limit (RLIMIT_AS) and a timeout, so the code
before the fix fails them with a MemoryError or a timeout instead of exhausting the machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import DEPLOYCTL, ROOT
from deployctl.io.executor import HostError, HostTarget, OutputLimitExceeded, limit_bytes
from deployctl.io.ssh import SshExecutor
from deployctl.io.batch import batch_argv
from deployctl.io.fanout import fan_out
from fakecluster import default_cluster
from support import FakeExecutor

MB = 2**20
T = HostTarget("node1", "10.0.0.1")


# ---------------------------------------------------------------- a paramiko channel stand-in

class _Buf:
    def set_event(self, event):
        event.set()


class FakeChannel:
    """Prints ``chunk`` on stdout while ``more()`` says so, then exits 0. Counts what was read."""

    def __init__(self, more, chunk: bytes = b"\0" * 65536, stderr: bool = False):
        self.more, self.chunk, self.stderr = more, chunk, stderr
        self.in_buffer, self.in_stderr_buffer = _Buf(), _Buf()
        self.status_event = threading.Event()
        self.eof_received = False
        self.closed = False
        self.read = 0

    def settimeout(self, t): pass

    def exec_command(self, cmd): self.command = cmd

    def recv_ready(self): return not self.stderr and not self.closed and self.more(self.read)

    def recv_stderr_ready(self): return self.stderr and not self.closed and self.more(self.read)

    def _take(self, n):
        self.read += len(self.chunk)
        return self.chunk

    recv = recv_stderr = _take

    def exit_status_ready(self): return not self.more(self.read)

    def recv_exit_status(self): return 0

    def close(self): self.closed = True


class FakeClient:
    def __init__(self, chan): self.chan = chan

    def get_transport(self): return self

    def open_session(self, timeout=None): return self.chan

    def close(self): pass


def executor_with(chan, output_limit: int = 4 * MB) -> SshExecutor:
    ex = SshExecutor()
    ex.output_limit = output_limit
    ex._clients[T.name] = FakeClient(chan)
    return ex


# ---------------------------------------------------------------- unit: the executor

@pytest.mark.parametrize("stderr", [False, True])
def test_output_cap_stops_reading_and_names_host_and_command(stderr):
    # the stand-in stops on its own after 64 MB: without a cap run() returns all of it (the bug), bounded
    chan = FakeChannel(lambda n: n < 64 * MB, stderr=stderr)
    ex = executor_with(chan, output_limit=2 * MB)
    with pytest.raises(OutputLimitExceeded) as info:
        ex.run(T, ["cat", "/var/lib/deployctl/c/lock"], timeout=30)
    err = info.value
    assert isinstance(err, HostError) and err.kind == "output-limit"
    assert err.message == "output of `cat /var/lib/deployctl/c/lock` on node1 exceeded 2 MB"
    assert "DEPLOYCTL_MAX_OUTPUT_MB" in err.hint
    assert chan.closed and chan.read <= 2 * MB + 65536


def test_deadline_holds_while_data_streams():
    # data is always waiting for 8 s: the old loop looked at its deadline only when nothing was
    start = time.monotonic()
    chan = FakeChannel(lambda n: time.monotonic() - start < 8, chunk=b"x" * 16)
    ex = executor_with(chan, output_limit=1024 * MB)
    with pytest.raises(HostError) as info:
        ex.run(T, ["docker", "logs", "e"], timeout=0.5)
    assert info.value.kind == "timeout" and time.monotonic() - start < 4
    assert chan.closed


def test_output_below_the_cap_is_returned():
    chan = FakeChannel(lambda n: n < 3 * 65536, chunk=b"a" * 65536)
    res = executor_with(chan, output_limit=4 * MB).run(T, ["true"], timeout=5)
    assert res.rc == 0 and len(res.stdout) == 3 * 65536


def test_default_cap_and_environment(monkeypatch):
    monkeypatch.delenv("DEPLOYCTL_MAX_OUTPUT_MB", raising=False)
    assert SshExecutor().output_limit == 4 * MB
    monkeypatch.setenv("DEPLOYCTL_MAX_OUTPUT_MB", "0.5")
    assert SshExecutor().output_limit == MB // 2
    monkeypatch.setenv("DEPLOYCTL_MAX_OUTPUT_MB", "lots")
    from deployctl.core.errors import UsageError
    with pytest.raises(UsageError, match="DEPLOYCTL_MAX_OUTPUT_MB"):
        SshExecutor()
    assert limit_bytes("X_UNSET_ENV", 32) == 32 * MB


def test_stream_to_a_file_is_capped(tmp_path):
    chan = FakeChannel(lambda n: n < 64 * MB)
    path = tmp_path / "log"
    with open(path, "wb") as fh:
        res = executor_with(chan).stream(T, ["docker", "logs", "e"], 30, fh, 3 * MB)
    assert res.stopped == "limit" and res.nbytes == 3 * MB and path.stat().st_size == 3 * MB and chan.closed


def test_stream_reports_a_local_write_failure():
    class Full:
        def write(self, b):
            raise OSError(28, "No space left on device")
    with pytest.raises(OSError, match="No space left"):
        executor_with(FakeChannel(lambda n: n < MB)).stream(T, ["docker", "logs", "e"], 30, Full(), 3 * MB)


def flood(target, argv):
    """node1's batch floods (the lock probe): the cap is hit mid-batch; node2 answers."""
    if target.name == "node1":
        out = b"@@deployctl-begin dep.current\nrev\n@@deployctl-end 0\n@@deployctl-begin dep.lock\n" + b"\0" * MB
        return OutputLimitExceeded("node1", "sh -c …", MB, out)
    from deployctl.io.executor import CommandResult
    return CommandResult(target.name, "", 0, "@@deployctl-begin dep.lock\n\n@@deployctl-end 0\n")


def test_fan_out_names_the_flooding_probe_and_keeps_the_others():
    runs = fan_out(FakeExecutor(flood), [T, HostTarget("node2", "10.0.0.2")],
                   lambda t: [("dep.current", ["readlink", "/d/current"]), ("dep.lock", ["cat", "/d/lock"])],
                   timeout=10, measure_clock=False)
    err = runs["node1"].error
    assert err.kind == "output-limit" and err.message == "output of `cat /d/lock` on node1 exceeded 1 MB"
    assert err.output is None                   # the error kept holds no output
    assert runs["node2"].error is None and "dep.lock" in runs["node2"].outputs


def test_batch_markers_stay_what_fan_out_reads():
    assert "@@deployctl-begin" in batch_argv([("dep.lock", ["cat", "x"])])[2]


# ---------------------------------------------------------------- simulated hosts

MEMORY_BOUND = 400 * MB        # deployctl on 2 hosts needs ~80 MB; an unbounded read passes 1 GB in seconds
AS_LIMIT = 2048 * MB           # the run before the fix dies here (MemoryError) instead of taking the machine
TIME_BOUND = 120               # seconds; the commands take a few


def kill_group(p: subprocess.Popen) -> None:
    """SIGKILL the process group ``p`` leads (its session), then reap ``p``."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        p.communicate(timeout=10)       # a grandchild that left the group could hold the pipes open
    except subprocess.TimeoutExpired:
        p.wait()


def run_bounded(*args: str, timeout: float = 240, env: dict | None = None
                ) -> tuple[subprocess.CompletedProcess, int, float]:
    """Run deployctl under RLIMIT_AS in a wrapper whose only child it is: (result, child's max RSS, seconds)."""
    wrapper = ("import resource, subprocess, sys\n"
               f"resource.setrlimit(resource.RLIMIT_AS, ({AS_LIMIT}, {AS_LIMIT}))\n"
               "p = subprocess.run(sys.argv[1:], capture_output=True)\n"
               "sys.stdout.buffer.write(p.stdout)\nsys.stderr.buffer.write(p.stderr)\n"
               "open(sys.argv[0] + '.rss', 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
               "sys.exit(p.returncode)\n")
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "wrap.py"
        script.write_text(wrapper)
        start = time.monotonic()
        argv = [sys.executable, str(script), str(DEPLOYCTL), *args]
        # a process group of its own: on a timeout (or an interrupt) the wrapper, deployctl and its ssh
        # children all go, not only the wrapper (subprocess.run's timeout kills that one process)
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                              start_new_session=True,
                              env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "NO_COLOR": "1", **(env or {})}) as p:
            try:
                out, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                kill_group(p)
                pytest.fail(f"deployctl {' '.join(args)} did not finish within {timeout} s")
            except BaseException:
                kill_group(p)
                raise
            res = subprocess.CompletedProcess(argv, p.returncode, out, err)
        seconds = time.monotonic() - start
        rss_file = Path(str(script) + ".rss")
        rss = int(rss_file.read_text()) * 1024 if rss_file.exists() else -1
    return res, rss, seconds


@pytest.fixture(scope="module")
def flooding(tmp_path_factory):
    """2 x A2; on node1 the deployment's lock file is a link to /dev/zero and `date` prints zeros forever."""
    from fakecluster.cluster import FakeCluster

    work = tmp_path_factory.mktemp("flood")
    with FakeCluster(default_cluster(2), work / "fc") as fc:
        inv = work / "inv.yaml"
        inv.write_text(fc.hosts_inventory())
        cluster = fc.inventory_snippet().split("name: ", 1)[1].split("\n", 1)[0]
        cdir = f"/var/lib/deployctl/{cluster}"
        fc.ssh("node1", f"mkdir -p {cdir} && ln -s /dev/zero {cdir}/lock && printf '#!/bin/sh\\nexec cat /dev/zero\\n' "
                        "> /usr/local/bin/date && chmod 755 /usr/local/bin/date", check=True)
        yield fc, inv, cdir


def _bounded(res, rss, seconds):
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    assert 0 < rss < MEMORY_BOUND, f"deployctl peaked at {rss / MB:.0f} MB ({res.stderr[-2000:]})"
    assert seconds < TIME_BOUND


def test_history_on_a_host_whose_lock_is_dev_zero(flooding):
    fc, inv, cdir = flooding
    res, rss, seconds = run_bounded("history", "-i", str(inv))
    _bounded(res, rss, seconds)
    out = res.stdout + res.stderr
    assert f"output of `cat {cdir}/lock` on node1 exceeded 4 MB" in " ".join(out.split()), out
    assert "no host could be read" not in out          # node2 was read


def test_status_on_a_host_whose_lock_is_dev_zero(flooding):
    fc, inv, cdir = flooding
    res, rss, seconds = run_bounded("--max-output-mb", "2", "status", "-i", str(inv), "--output", "json")
    _bounded(res, rss, seconds)
    doc = json.loads(res.stdout)
    rows = {r["node"]: r for r in doc["nodes"]}
    assert f"output of `cat {cdir}/lock` on node1 exceeded 2 MB" in rows["node1"]["problem"]
    assert "exceeded" not in (rows["node2"].get("problem") or "") and rows["node2"]["engine"] != "unknown"


def test_preflight_on_a_host_that_prints_zeros(flooding, tmp_path):
    fc, inv, _ = flooding
    res, rss, seconds = run_bounded("preflight", "-i", str(inv), "--output", "json", "--run-dir",
                                    str(tmp_path / "runs"))
    _bounded(res, rss, seconds)
    doc = json.loads(res.stdout)
    node1 = doc["hosts"]["node1"]
    assert node1["error_kind"] == "output-limit"
    assert node1["error"] == "output of `date +%s.%N` on node1 exceeded 4 MB"
    assert doc["hosts"]["node2"]["error"] in (None, "") and doc["hosts"]["node2"]["npu"]


def test_logs_of_a_container_that_logs_forever(flooding, tmp_path):
    fc, inv, _ = flooding
    # node1's docker prints zeros for `docker logs`; everything else goes to the fake docker
    fc.ssh("node1", "[ -e /usr/local/bin/docker.real ] || mv /usr/local/bin/docker /usr/local/bin/docker.real; "
                    "printf '#!/bin/sh\\n[ \"$1\" = logs ] && exec cat /dev/zero\\nexec docker.real \"$@\"\\n' "
                    "> /usr/local/bin/docker && chmod 755 /usr/local/bin/docker", check=True)
    try:
        res, rss, seconds = run_bounded("logs", "-i", str(inv), "--run-dir", str(tmp_path / "runs"),
                                        env={"DEPLOYCTL_MAX_LOG_MB": "8"})
        # the option wins over the environment
        res2, rss2, seconds2 = run_bounded("logs", "-i", str(inv), "--run-dir", str(tmp_path / "runs2"),
                                           "--max-log-mb", "1", "--output", "json", env={"DEPLOYCTL_MAX_LOG_MB": "8"})
    finally:
        fc.ssh("node1", "mv /usr/local/bin/docker.real /usr/local/bin/docker", check=True)
    _bounded(res, rss, seconds)
    out = " ".join(res.stdout.split())
    assert "node1" in out and "log truncated (longer than 8 MB: only its first 8 MB was saved)" in out, out
    saved = list((tmp_path / "runs").glob("runs/*-logs/hosts/node1/*.log"))
    assert saved and saved[0].stat().st_size == 8 * MB
    assert list((tmp_path / "runs").glob("runs/*-logs/hosts/node2/*.log"))      # node2 was read too
    _bounded(res2, rss2, seconds2)
    doc = json.loads(res2.stdout)
    assert doc["failed"] == [] and set(doc["logs"]) == {"node1", "node2"}
    assert list(doc["truncated"]) == ["node1"] and "1 MB" in next(iter(doc["truncated"]["node1"].values()))
    assert len(next(iter(doc["logs"]["node1"].values()))) <= 256 * 1024     # the end shown, not the whole log


# ---------------------------------------------------------------- observation 9: --trust-new-hosts

def _preflight_with_known_hosts(fc, tmp_path, known: Path, *extra: str) -> dict:
    inv = tmp_path / "inv.yaml"
    inv.write_text(fc.hosts_inventory().replace(f"known_hosts: {fc.known_hosts}", f"known_hosts: {known}"))
    assert f"known_hosts: {known}" in inv.read_text()
    res = subprocess.run([str(DEPLOYCTL), "preflight", "-i", str(inv), "--output", "json", "--run-dir",
                          str(tmp_path / "runs"), *extra], capture_output=True, text=True, timeout=180,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "COLUMNS": "200"})
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    return json.loads(res.stdout)


def test_trust_new_hosts_never_appends_to_a_file_that_is_not_known_hosts(fake_cluster_2a2, tmp_path):
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n")
    doc = _preflight_with_known_hosts(fake_cluster_2a2, tmp_path, passwd, "--trust-new-hosts")
    assert passwd.read_text().count("\n") == 2                      # nothing appended
    host = doc["hosts"]["node1"]
    assert host["error_kind"] == "host-key-unknown"
    assert f"known_hosts file {passwd} is not a known_hosts file (line 1" in host["error"]
    assert "ssh.known_hosts" in host["error_hint"]


def test_trust_new_hosts_does_not_create_a_file_outside_dot_ssh(fake_cluster_2a2, tmp_path):
    elsewhere = tmp_path / "etc" / "somewhere" / "known"
    doc = _preflight_with_known_hosts(fake_cluster_2a2, tmp_path, elsewhere, "--trust-new-hosts")
    assert not elsewhere.exists() and not elsewhere.parent.exists()
    host = doc["hosts"]["node1"]
    assert host["error_kind"] == "host-key-unknown" and "creates one only inside ~/.ssh" in host["error"]
    assert f"touch {elsewhere}" in host["error_hint"]
    # inside ~/.ssh (HOME is tmp_path/home) it is created, private, and the next run needs no flag
    inside = tmp_path / "home" / ".ssh" / "known_hosts"
    doc = _preflight_with_known_hosts(fake_cluster_2a2, tmp_path, inside, "--trust-new-hosts")
    assert all(not h.get("error") for h in doc["hosts"].values()), doc["hosts"]
    assert inside.stat().st_mode & 0o777 == 0o600 and inside.read_text().count("\n") == 2
    doc = _preflight_with_known_hosts(fake_cluster_2a2, tmp_path, inside)
    assert all(not h.get("error") for h in doc["hosts"].values())


@pytest.mark.parametrize("trust", [False, True])
def test_known_hosts_with_a_bad_key_line_is_a_finding_not_a_crash(fake_cluster_2a2, tmp_path, trust):
    bad = tmp_path / "known"
    bad.write_text(fake_cluster_2a2.known_hosts.read_text() + "10.9.9.9 ssh-ed25519 not*base64*at*all\n")
    before = bad.read_text()
    doc = _preflight_with_known_hosts(fake_cluster_2a2, tmp_path, bad, *(["--trust-new-hosts"] if trust else []))
    host = doc["hosts"]["node1"]
    assert host["error_kind"] == "host-key-unknown" and str(bad) in host["error"]
    assert "base64" in host["error"] and host["error_hint"]
    assert bad.read_text() == before
