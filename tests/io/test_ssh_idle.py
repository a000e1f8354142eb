"""An open SSH connection costs nothing while idle (deployctl/io/ssh.py _quiet_when_idle): its reader thread
wakes every IDLE_WAKE_S, not paramiko's 10 times a second (1,024 open connections burnt 420 s of CPU in a
13-minute preflight), and a command on it still answers at once; closing ends the threads."""

from __future__ import annotations

import threading
import time

from deployctl.io.executor import HostTarget
from deployctl.io.ssh import IDLE_WAKE_S, SshExecutor


def test_idle_connections_sleep_and_still_answer(fake_cluster_2a2):
    fc = fake_cluster_2a2
    ex = SshExecutor()
    targets = [HostTarget(name=n.name, address=n.ip, key=str(fc.client_key), known_hosts=str(fc.known_hosts))
               for n in fc.nodes]
    try:
        assert all(ex.run(t, ["true"], 30).rc == 0 for t in targets)
        for t in targets:
            assert ex.client(t).get_transport().sock.gettimeout() == IDLE_WAKE_S
        result = ex.run(targets[0], ["echo", "still here"], 30)
        assert result.stdout == "still here\n"
    finally:
        before = threading.active_count()
        ex.close()
    deadline = time.monotonic() + 2 * IDLE_WAKE_S
    while threading.active_count() > before - len(targets) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert threading.active_count() <= before - len(targets)
