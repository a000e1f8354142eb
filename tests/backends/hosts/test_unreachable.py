"""Exit codes when a host cannot be reached (observation 6): `logs` fails (exit 1) instead of printing
nothing and exiting 0; `status` says "unknown" (exit 1); `up` and `history` stop before any change, each
naming the host with a hint. A closed port on loopback stands in for a host whose sshd is down."""

from __future__ import annotations

import json
import socket

from conftest import EXAMPLES, run_cli


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                      # nothing listens there now: connection refused
    return port


def inventory(tmp_path):
    text = (EXAMPLES / "a2-1x8-single.yaml").read_text().replace("address: 10.200.1.2", "address: 127.0.0.1")
    text = text.replace("cluster:", f"ssh: {{port: {closed_port()}, key: {tmp_path / 'key'}, known_hosts: "
                                    f"{tmp_path / 'known'}}}\ncluster:", 1)
    (tmp_path / "key").write_text("not a key\n")
    path = tmp_path / "inv.yaml"
    path.write_text(text)
    return path


def test_logs_status_up_history_on_an_unreachable_host(tmp_path):
    inv = inventory(tmp_path)
    runs = tmp_path / "runs"
    res = run_cli("logs", "-i", str(inv), "--run-dir", str(runs), "--output", "json")
    assert res.returncode == 1, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["failed"] == ["a2-node1"] and "refused" in doc["logs"]["a2-node1"]["error"]

    res = run_cli("logs", "-i", str(inv), "--run-dir", str(runs))
    assert res.returncode == 1 and "could not read the logs of: a2-node1" in res.stdout

    res = run_cli("status", "-i", str(inv), "--output", "json")
    assert res.returncode == 1
    doc = json.loads(res.stdout)
    assert doc["state"] == "unknown" and "refused" in doc["nodes"][0]["problem"]

    res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--skip-preflight")
    assert res.returncode == 1
    assert "cannot read the deployment on 1 host(s): nothing was changed" in res.stderr
    assert "a2-node1: 127.0.0.1:" in res.stderr and "refused the connection" in res.stderr
    assert "start sshd there" in res.stderr          # the hint for this cause
    assert "Traceback" not in res.stderr

    res = run_cli("history", "-i", str(inv))
    assert res.returncode == 1 and "no host could be read" in res.stderr
