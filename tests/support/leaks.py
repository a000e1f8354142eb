"""The session's leak check: what this test run started must be gone when it ends.

How it knows what the run created (and never flags anything else on the machine):

* a token: ``DEPLOYCTL_TEST_SESSION=<random>`` is put in the environment at configure time (xdist workers
  inherit it from the controller), so every process the run starts carries it, unless a test replaced the
  environment; the process scan reads ``/proc/<pid>/environ`` for it, and also takes processes whose command
  line or working directory is under the run's pytest temporary directory (``--basetemp``, per run) for the
  ones started with an environment of their own (stand-in engines, sshd);
* a ledger: ``DEPLOYCTL_TEST_NETNS_LEDGER`` names a file to which every FakeCluster of the run appends its
  name prefix (``fc`` + 4 hex) when it starts; the network namespaces and links named ``<prefix>-*`` of those
  prefixes are the run's, nothing else is looked at (another session's clusters have other prefixes, and a
  ``scripts/fake-cluster up`` cluster is never in the ledger);
* a cluster object still running in a test process at the end of its session (its test or fixture did not
  stop it): an xdist worker reports those to the controller (``workeroutput``).

At the end (in the controller, after the workers are gone) what is left is listed, the run fails (exit
status 1 unless it already failed) and the leftovers are removed so that the next run starts clean. An
interrupted run (Ctrl-C, SIGTERM: pytest skips fixture teardown then) removes what it left without blaming a
test for it; SIGTERM is turned into KeyboardInterrupt so that this happens.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

SESSION_ENV = "DEPLOYCTL_TEST_SESSION"
LEDGER_ENV = "DEPLOYCTL_TEST_NETNS_LEDGER"      # fakecluster.cluster.LEDGER_ENV
GRACE_S = 10.0                                  # processes exiting at the end (the workers' own children)

_notes: list[str] = []                           # the workers' reports (controller)


def is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def _sigterm(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def configure(config) -> None:
    """Give the run its token and ledger, SIGTERM -> KeyboardInterrupt (controller, or a run without xdist:
    workers are stopped by their controller, and get the terminal's Ctrl-C themselves)."""
    if is_worker(config):
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _sigterm)
    token = secrets.token_hex(8)
    os.environ[SESSION_ENV] = token
    ledger = Path(tempfile.gettempdir()) / f"deployctl-test-{token}.netns"
    ledger.touch()
    os.environ[LEDGER_ENV] = str(ledger)
    config._deployctl_ledger = ledger


def _stop_live_clusters(interrupted: bool) -> list[str]:
    """Stop the clusters this process still runs; a note for each when the session was not interrupted."""
    import sys

    cluster = sys.modules.get("fakecluster.cluster")   # never imported: never started one
    if cluster is None:
        return []
    left = [f"fake cluster {c.prefix} ({', '.join(n.name for n in c.nodes)}, {c.workdir}) was still running "
            "at the end of the session: the test or fixture that started it did not stop it"
            for c in cluster.live_clusters()]
    cluster.stop_all()
    return [] if interrupted else left


def worker_finish(session) -> None:
    """In an xdist worker: stop what this worker still runs and tell the controller."""
    interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.shouldstop)
    session.config.workeroutput["deployctl_leaks"] = _stop_live_clusters(interrupted)


def node_down(node) -> None:
    _notes.extend(getattr(node, "workeroutput", {}).get("deployctl_leaks", []))


# ---------------------------------------------------------------------------------------- what is left

def _run(*argv: str) -> str:
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    return r.stdout if r.returncode == 0 else ""


def _namespaces(prefixes: set[str]) -> list[str]:
    names = [line.split()[0] for line in _run("ip", "netns", "list").splitlines() if line.strip()]
    links = [line.split(":", 2)[1].strip().split("@")[0] for line in _run("ip", "-o", "link", "show").splitlines()
             if line.count(":") >= 2]
    return sorted({n for n in names + links if n.split("-", 1)[0] in prefixes and "-" in n})


def _mine(pid: int, token: str, roots: list[str]) -> str | None:
    """The process's command line when this run started it, else None (gone, a zombie, or someone else's)."""
    proc = Path(f"/proc/{pid}")
    try:
        if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return None
        cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        environ = (proc / "environ").read_bytes().split(b"\0")
        try:
            cwd = os.readlink(proc / "cwd")
        except OSError:
            cwd = ""
    except (OSError, IndexError):
        return None
    if f"{SESSION_ENV}={token}".encode() in environ:
        return cmdline or f"pid {pid}"
    for root in roots:      # /tmp/pytest-of-root/pytest-12, not pytest-123: the run's directory or under it
        if re.search(re.escape(root) + r"(/|\s|$)", cmdline) or cwd == root or cwd.startswith(root + "/"):
            return cmdline or f"pid {pid}"
    return None


def _processes(token: str, roots: list[str]) -> dict[int, str]:
    me = os.getpid()
    out = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != me:
            what = _mine(int(entry.name), token, roots)
            if what is not None:
                out[int(entry.name)] = what
    return out


def _leftovers(token: str, roots: list[str], prefixes: set[str]) -> tuple[dict[int, str], list[str]]:
    deadline = time.monotonic() + GRACE_S
    while True:
        procs, names = _processes(token, roots), _namespaces(prefixes)
        if (not procs and not names) or time.monotonic() > deadline:
            return procs, names
        time.sleep(0.25)


def _remove(procs: dict[int, str], prefixes: set[str]) -> None:
    for pid in procs:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if prefixes:
        from fakecluster.cluster import teardown_prefix

        for prefix in sorted(prefixes):
            teardown_prefix(prefix)


def session_finish(session) -> None:
    """Controller (or a run without xdist): list and remove what the run left; fail the run if anything."""
    config = session.config
    token = os.environ.get(SESSION_ENV)
    ledger: Path | None = getattr(config, "_deployctl_ledger", None)
    if not token or ledger is None:
        return
    interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
    notes = _notes + _stop_live_clusters(interrupted)
    prefixes = {p for p in ledger.read_text().split() if p} if ledger.exists() else set()
    basetemp = getattr(getattr(config, "_tmp_path_factory", None), "_basetemp", None)
    roots = [str(basetemp)] if basetemp else []
    procs, names = _leftovers(token, roots, prefixes)
    leaked = {p.split("-", 1)[0] for p in names}
    _remove(procs, leaked)
    ledger.unlink(missing_ok=True)
    if interrupted:
        return
    lines = list(notes)
    lines += [f"network namespace or link {n} (a fake cluster of this run) was left" for n in names]
    lines += [f"process {pid} started by this run is still running: {cmd[:300]}" for pid, cmd in sorted(procs.items())]
    if not lines:
        return
    message = ("this test run left behind what it started (removed now; fix the test or fixture that did not "
               "stop it, with try/finally or a yield fixture):\n  - " + "\n  - ".join(lines))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", "leftovers", red=True, bold=True)
        reporter.write_line(message)
    else:
        import sys

        print(message, file=sys.stderr)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
