"""known_hosts is parsed once per SSH executor and version of the file (deployctl/io/ssh.py _host_keys_of), not once
per connection: paramiko's own load_host_keys parses every line each time (0.1 s for 1,024 entries, so 1,024
hosts cost a million lines). Each client still gets exactly the keys the file lists for its host."""

from __future__ import annotations

import subprocess

import paramiko

from deployctl.io.executor import HostTarget
from deployctl.io.ssh import SshExecutor


def _keygen(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def _known(path, hosts):
    keys = {h: paramiko.Ed25519Key.from_private_key_file(str(k)) for h, k in hosts.items()}
    path.write_text("".join(f"{h} {k.get_name()} {k.get_base64()}\n" for h, k in keys.items()))
    return keys


def test_parsed_once_and_each_client_gets_its_own_host_keys(tmp_path, monkeypatch):
    keyfiles = {f"10.9.0.{i + 2}": _keygen(tmp_path / f"k{i}") for i in range(3)}
    known = tmp_path / "known_hosts"
    keys = _known(known, keyfiles)
    loads = []
    real_load = paramiko.HostKeys.load
    monkeypatch.setattr(paramiko.HostKeys, "load", lambda self, f: (loads.append(f), real_load(self, f)))
    ex = SshExecutor()

    clients = {}
    for host in keys:
        client = paramiko.SSHClient()
        ex._host_keys_of(HostTarget(name=host, address=host, known_hosts=str(known)), known, client)
        clients[host] = client
    assert len(loads) == 1
    for host, client in clients.items():
        own = client.get_host_keys()
        assert list(own.keys()) == [host]
        assert own.lookup(host)["ssh-ed25519"] == keys[host]

    known.write_text(known.read_text() + "10.9.0.9 " + " ".join(known.read_text().split()[1:3]) + "\n")
    ex._host_keys_of(HostTarget(name="n9", address="10.9.0.9", known_hosts=str(known)), known, paramiko.SSHClient())
    assert len(loads) == 2                    # the file changed: read again


def test_a_port_other_than_22_is_looked_up_as_paramiko_does(tmp_path):
    key = paramiko.Ed25519Key.from_private_key_file(str(_keygen(tmp_path / "k")))
    known = tmp_path / "known_hosts"
    known.write_text(f"[10.9.0.2]:2222 {key.get_name()} {key.get_base64()}\n10.9.0.2 ssh-ed25519 {key.get_base64()}\n")
    client = paramiko.SSHClient()
    SshExecutor()._host_keys_of(HostTarget(name="n", address="10.9.0.2", port=2222, known_hosts=str(known)), known,
                                client)
    assert list(client.get_host_keys().keys()) == ["[10.9.0.2]:2222"]
