"""SSH executor (paramiko): one connection per host, reused; host keys always verified."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

from deployctl.executors.base import CommandResult, HostError, HostTarget, join_argv


class _TrustNewHost:
    """Accept a host that known_hosts does not list yet (only with --trust-new-hosts) and remember it.

    A host whose key *changed* is never accepted: paramiko raises BadHostKeyException before any
    policy is asked.
    """

    def __init__(self, path: Path, lock: threading.Lock):
        self.path, self.lock = path, lock

    def missing_host_key(self, client, hostname, key):
        with self.lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)


def _expand(path: str | None) -> Path | None:
    return Path(os.path.expanduser(path)) if path else None


class SshExecutor:
    """Runs commands over SSH. Thread-safe across hosts; one paramiko client per host."""

    def __init__(self, trust_new_hosts: bool = False, connect_timeout: float = 10.0):
        import logging

        # paramiko logs transport failures with tracebacks; deployctl reports them as HostErrors instead
        logging.getLogger("paramiko").addHandler(logging.NullHandler())
        logging.getLogger("paramiko").propagate = False
        self.trust_new_hosts = trust_new_hosts
        self.connect_timeout = connect_timeout
        self._clients: dict[str, object] = {}
        self._lock = threading.Lock()
        self._known_lock = threading.Lock()

    def _connect(self, t: HostTarget):
        import paramiko

        client = paramiko.SSHClient()
        known = _expand(t.known_hosts)
        if known and known.exists():
            client.load_host_keys(str(known))
        if self.trust_new_hosts and known:
            client.set_missing_host_key_policy(_TrustNewHost(known, self._known_lock))
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        key = _expand(t.key)
        if key and not key.exists():
            raise HostError(t.name, "auth", f"ssh key {key} does not exist",
                            "set ssh.key (or nodes[].ssh.key) to your private key file")
        try:
            client.connect(t.address, port=t.port, username=t.user, key_filename=str(key) if key else None,
                           timeout=self.connect_timeout, banner_timeout=self.connect_timeout,
                           auth_timeout=self.connect_timeout, allow_agent=key is None,
                           look_for_keys=key is None)
        except paramiko.BadHostKeyException as exc:
            raise HostError(t.name, "host-key-changed",
                            f"host key of {t.address} CHANGED (now {exc.key.get_name()} "
                            f"{exc.key.get_fingerprint().hex()}); refusing to connect",
                            f"if the host was reinstalled, remove its old key: ssh-keygen -R {t.address} "
                            f"-f {known}; otherwise treat this as an attack") from None
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc) or "Server '" in str(exc):
                raise HostError(t.name, "host-key-unknown", f"{t.address} is not in {known}",
                                "verify the host's key and add it (ssh-keyscan), or pass "
                                "--trust-new-hosts to record it on first use") from None
            if isinstance(exc, paramiko.AuthenticationException):
                raise HostError(t.name, "auth", f"authentication as {t.user} failed: {exc}",
                                "check ssh.user and ssh.key; the key must be in the host's "
                                "authorized_keys") from None
            raise HostError(t.name, "ssh", f"ssh to {t.address}:{t.port} failed: {exc}") from None
        except (socket.timeout, TimeoutError):
            raise HostError(t.name, "unreachable", f"{t.address}:{t.port} did not answer within "
                            f"{self.connect_timeout:.0f} s", "check the address, routing and firewall") from None
        except OSError as exc:
            raise HostError(t.name, "unreachable", f"cannot connect to {t.address}:{t.port}: "
                            f"{exc.strerror or exc}", "check the address and that sshd runs") from None
        return client

    def client(self, t: HostTarget):
        with self._lock:
            existing = self._clients.get(t.name)
        if existing is not None:
            return existing
        client = self._connect(t)
        with self._lock:
            self._clients[t.name] = client
        return client

    def run(self, target: HostTarget, argv: list[str], timeout: float) -> CommandResult:
        """Run ``argv`` (quoted into one command line) and wait at most ``timeout`` seconds."""
        client = self.client(target)
        command = join_argv(argv)
        start = time.monotonic()
        try:
            chan = client.get_transport().open_session(timeout=timeout)
            chan.settimeout(timeout)
            chan.exec_command(command)
            out, err = bytearray(), bytearray()
            while True:
                if chan.recv_ready():
                    out += chan.recv(65536)
                elif chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                elif chan.exit_status_ready():
                    while chan.recv_ready():
                        out += chan.recv(65536)
                    while chan.recv_stderr_ready():
                        err += chan.recv_stderr(65536)
                    break
                elif time.monotonic() - start > timeout:
                    chan.close()
                    raise HostError(target.name, "timeout", f"no answer within {timeout:.0f} s "
                                    f"(running {argv[0]})", "the host is overloaded or a tool hangs; "
                                    "raise --timeout if it is just slow")
                else:
                    time.sleep(0.005)
            rc = chan.recv_exit_status()
        except HostError:
            raise
        except Exception as exc:  # paramiko raises many kinds when a connection dies mid-command
            raise HostError(target.name, "ssh", f"connection lost: {exc}") from None
        return CommandResult(target.name, command, rc, out.decode(errors="replace"),
                             err.decode(errors="replace"), time.monotonic() - start)

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            c.close()
