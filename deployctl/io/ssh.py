"""SSH executor (paramiko): one connection per host, reused; host keys always verified.

Every way a connection can fail becomes a HostError with a cause-specific hint (``describe_connect_error``,
a pure function: feed it the exception, get the HostError back).
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

from deployctl.io.executor import (DEFAULT_OUTPUT_MB, OUTPUT_ENV, CommandResult, HostError, HostTarget,
                                      OutputLimitExceeded, join_argv, limit_bytes, short_command)
from deployctl.io.knownhosts import TrustNewHost, check_trust_target, load_problem

# what paramiko tries when no key file is given (look_for_keys=True), in its order
DEFAULT_KEYS = ("~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ed25519", "~/.ssh/id_dsa")
_BANNER_ERRORS = ("Error reading SSH protocol banner", "Indecipherable protocol version", "Invalid SSH banner",
                  "Incompatible version")

CHUNK = 65536
Sink = Callable[[bytes], bool]     # takes a chunk of output; False: no more (the cap is reached)


@dataclass(frozen=True)
class StreamResult:
    """What `SshExecutor.stream` wrote: rc (None when stopped), bytes kept, why it stopped early (None,
    "limit", "timeout")."""

    rc: int | None
    nbytes: int
    stopped: str | None
    seconds: float


def _expand(path: str | None) -> Path | None:
    return Path(os.path.expanduser(path)) if path else None


def keys_tried(key: Path | None) -> tuple[tuple[str, ...], bool]:
    """(key files paramiko will offer, whether it asks the ssh-agent): the given key only, or agent + defaults."""
    if key is not None:
        return (str(key),), False
    return tuple(p for p in DEFAULT_KEYS if Path(os.path.expanduser(p)).is_file()), True


def _ssh_cmd(t: HostTarget) -> str:
    port = f" -p {t.port}" if t.port != 22 else ""
    return f"ssh -v{port} {t.user}@{t.address} true"


def _socket_errno(exc: BaseException) -> int | None:
    """The errno of a connect failure; paramiko wraps refused/unreachable per address family."""
    import paramiko

    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        codes = {getattr(e, "errno", None) for e in exc.errors.values()}
        for code in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH):
            if code in codes:
                return code
        return next(iter(codes), None)
    return getattr(exc, "errno", None)


def _banner_problem(exc: BaseException, timeout: float) -> str:
    """What went wrong before the SSH banner: paramiko keeps the cause as the exception's context."""
    text, cause = str(exc), exc.__cause__ or exc.__context__
    if text.startswith("Incompatible version"):
        return f"speaks an SSH protocol version deployctl cannot use ({text}; SSH 2.0 is needed)"
    if not text.startswith(_BANNER_ERRORS[0]):
        return f"answered with something that is not SSH ({text})"
    if isinstance(cause, (socket.timeout, TimeoutError)):
        return f"sent no SSH banner within {timeout:g} s"
    if isinstance(cause, EOFError):
        return "closed it without sending an SSH banner"
    if isinstance(cause, ConnectionResetError):
        return "reset it before sending an SSH banner"
    detail = text[len(_BANNER_ERRORS[0]):].strip()
    return "sent no SSH banner" + (f" ({detail})" if detail else "")


def _banner_hint(t: HostTarget) -> str:
    return (f"port {t.port} on {t.address} is not an SSH server (another service listens there: check ssh.port), "
            "or sshd is overloaded and drops new connections (MaxStartups in /etc/ssh/sshd_config; probe fewer "
            "hosts at once: preflight --workers)")


def describe_connect_error(exc: BaseException, t: HostTarget, *, timeout: float, known_hosts: Path | None = None,
                           keys: tuple[str, ...] = (), agent: bool = False) -> HostError:
    """Map what ``SSHClient.connect`` raised for target ``t`` to a HostError with a hint for that cause.

    ``keys``/``agent`` say what authentication offered (see ``keys_tried``). Pure: no I/O.
    """
    import paramiko

    where = f"{t.address}:{t.port}"
    if isinstance(exc, paramiko.BadHostKeyException):
        return HostError(t.name, "host-key-changed",
                         f"host key of {t.address} CHANGED (now {exc.key.get_name()} "
                         f"{exc.key.get_fingerprint().hex()}); refusing to connect",
                         f"if the host was reinstalled, remove its old key: ssh-keygen -R {t.address} "
                         f"-f {known_hosts or '~/.ssh/known_hosts'}; otherwise treat this as an attack")
    if isinstance(exc, paramiko.AuthenticationException):
        offered = (f"key file {', '.join(keys)}" if keys and not agent else
                   "the ssh-agent and the default keys " + (", ".join(keys) if keys else
                                                              f"({', '.join(DEFAULT_KEYS)}: none exists)"))
        if isinstance(exc, paramiko.PasswordRequiredException):
            return HostError(t.name, "auth", f"key file {', '.join(keys)} is encrypted (needs a passphrase)",
                             "load it into ssh-agent (ssh-add KEY) and leave ssh.key unset, or point ssh.key at "
                             "an unencrypted deployment key")
        why = "timed out" if "timeout" in str(exc).lower() else "was refused"
        allowed = getattr(exc, "allowed_types", None)
        extra = f"; the server only allows {', '.join(allowed)}" if allowed else ""
        return HostError(t.name, "auth", f"authentication as {t.user} at {where} {why}: tried {offered}{extra}",
                         f"check ssh.user ({t.user}) and ssh.key (or nodes[].ssh.key); the public key must be in "
                         f"~{t.user}/.ssh/authorized_keys on {t.address}: ssh-copy-id -i KEY.pub"
                         f"{'' if t.port == 22 else f' -p {t.port}'} {t.user}@{t.address}; test with "
                         f"{_ssh_cmd(t)}")
    if isinstance(exc, paramiko.SSHException):
        text = str(exc)
        if "not found in known_hosts" in text:
            return HostError(t.name, "host-key-unknown", f"{t.address} is not in {known_hosts or 'known_hosts'}",
                             f"verify the host's key and add it: ssh-keyscan -p {t.port} {t.address} >> "
                             f"{known_hosts or '~/.ssh/known_hosts'}, or pass --trust-new-hosts to record it on "
                             "first use")
        if text == "No existing session" and timeout:
            # the connect timeout ran out before the banner timeout did: the handshake never completed
            return HostError(t.name, "ssh", f"{where} accepted the TCP connection but the SSH handshake did not "
                             f"complete within {timeout:g} s", _banner_hint(t))
        if any(text.startswith(b) for b in _BANNER_ERRORS):
            return HostError(t.name, "ssh", f"{where} accepted the TCP connection but {_banner_problem(exc, timeout)}",
                             _banner_hint(t))
        if "No authentication methods available" in text:
            return HostError(t.name, "auth", f"no key to authenticate as {t.user} at {where}: no ssh-agent and "
                             f"none of {', '.join(DEFAULT_KEYS)} exists",
                             "set ssh.key (or nodes[].ssh.key) to your private key file, or start ssh-agent and "
                             "ssh-add the key")
        if "private key file" in text or "not a valid" in text:
            return HostError(t.name, "auth", f"key file {', '.join(keys) or '?'} cannot be used: {text}",
                             "ssh.key must be an OpenSSH private key (not the .pub file, not a PuTTY .ppk)")
        return HostError(t.name, "ssh", f"ssh to {where} failed: {text or type(exc).__name__}",
                         f"see where it stops with {_ssh_cmd(t)}")
    if isinstance(exc, socket.gaierror):
        return HostError(t.name, "unreachable", f"cannot resolve host name {t.address!r}: {exc.strerror or exc}",
                         f"check the spelling of {t.address} in the inventory (nodes[].address), /etc/hosts and "
                         "DNS on this machine, or use the IP address")
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return HostError(t.name, "unreachable", f"{where} did not answer within {timeout:g} s",
                         f"the host is down, a firewall drops port {t.port}, or {t.address} is the wrong address: "
                         f"check with `nc -vz -w 5 {t.address} {t.port}`; raise --connect-timeout if the network "
                         "is just slow")
    code = _socket_errno(exc)
    if code == errno.ECONNREFUSED:
        return HostError(t.name, "unreachable", f"{where} refused the connection",
                         f"{t.address} answers but nothing listens on port {t.port}: start sshd there "
                         "(systemctl start sshd), or set ssh.port to the port sshd listens on")
    if code in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return HostError(t.name, "unreachable", f"no route to {where}",
                         f"{t.address} is down or not on a network this machine reaches: check the address "
                         f"and `ip route get {t.address}`")
    if isinstance(exc, OSError):
        return HostError(t.name, "unreachable", f"cannot connect to {where}: {exc.strerror or exc}",
                         f"check the address and that sshd runs there: {_ssh_cmd(t)}")
    return HostError(t.name, "ssh", f"ssh to {where} failed: {type(exc).__name__}: {exc}",
                     f"see where it stops with {_ssh_cmd(t)}")


IDLE_WAKE_S = 5.0     # how often an idle connection's reader thread wakes (paramiko: 10 times a second)


def _quiet_when_idle(client) -> None:
    """An open connection's reader thread (one per host) wakes when its socket times out, 10 times a second by
    paramiko's default, to check for a close or a keepalive. A command keeps one connection per host: with
    1,024 hosts that was 10,000 wake-ups a second competing for the interpreter, 420 s of CPU in a 13-minute
    preflight (docs/dev/benchmarks.md, "A thousand hosts"). Once the handshake is done the thread wakes every
    IDLE_WAKE_S instead; data still wakes it at once, a command's own deadlines are the channel's (``pump``), and
    ``close()`` closes the socket, which ends the thread's wait."""
    transport = client.get_transport()
    if transport is not None and transport.sock is not None:
        try:
            transport.sock.settimeout(IDLE_WAKE_S)
        except OSError:
            pass


def _nodelay_transport(sock, **kwargs):
    """A paramiko Transport over ``sock`` with Nagle's algorithm off.

    With it on, a small SSH packet waits while an earlier one is unacknowledged, and the peer delays its
    ACK (Linux: 40 ms): every request/response step stalls, i.e. the handshake's round trips and each
    channel's open and exec (the OpenSSH client turns it off for interactive sessions for this reason).
    Measured on the simulated hosts: connect 70 -> 20 ms, opening a channel 40 -> 0.3 ms, so a command
    on a connected host 45 -> 6 ms.
    """
    import paramiko

    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except (OSError, AttributeError):     # not a TCP socket
        pass
    return paramiko.Transport(sock, **kwargs)


def pump(chan, deadline: float, on_out: Sink, on_err: Sink) -> str | None:
    """Feed a channel's stdout/stderr to the sinks until it exits (None), a sink returns False ("limit") or
    ``deadline`` (time.monotonic) passes ("timeout") - checked before every read, so a host that never
    stops printing cannot hold the loop past it.

    It sleeps until something arrives instead of polling every few ms: many hosts' channels are in flight at
    once and each wake-up costs CPU under the GIL. paramiko sets `ready` when output is buffered (and for good
    at EOF; after EOF the exit status is awaited instead). paramiko buffers at most its window (2 MB) per
    channel, so what waits unread is bounded as well.
    """
    ready = threading.Event()
    chan.in_buffer.set_event(ready)
    chan.in_stderr_buffer.set_event(ready)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return "timeout"
        if chan.recv_ready():
            if not on_out(chan.recv(CHUNK)):
                return "limit"
        elif chan.recv_stderr_ready():
            if not on_err(chan.recv_stderr(CHUNK)):
                return "limit"
        elif chan.exit_status_ready():
            return None               # both buffers drained above: everything before the exit status was read
        elif chan.eof_received:
            chan.status_event.wait(min(left, 0.2))
        else:
            ready.wait(min(left, 0.2))
            ready.clear()             # the checks above run again: a wake-up cannot be lost


FDS_WANTED = 16384     # one socket per host kept open, plus files and pipes: a region of 8,192 hosts fits


def _room_for_connections() -> None:
    """Raise this process's open-file limit towards FDS_WANTED (never above the hard limit): an executor keeps
    one connection per host it reached, and a soft limit of 1,024 (common) ends a 1,024-host fleet with EMFILE."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = FDS_WANTED if hard == resource.RLIM_INFINITY else min(FDS_WANTED, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError):          # not allowed here: the fleet commands say which host failed
            pass


class SshExecutor:
    """Runs commands over SSH. Thread-safe across hosts; one paramiko client per host."""

    def __init__(self, trust_new_hosts: bool = False, connect_timeout: float = 10.0,
                 output_limit: int | None = None):
        import logging

        # paramiko logs transport failures with tracebacks; deployctl reports them as HostErrors instead
        logging.getLogger("paramiko").addHandler(logging.NullHandler())
        logging.getLogger("paramiko").propagate = False
        self.trust_new_hosts = trust_new_hosts
        self.connect_timeout = connect_timeout
        # bytes one command may print (stdout + stderr); default: DEPLOYCTL_MAX_OUTPUT_MB, else 4 MB
        self.output_limit = output_limit or limit_bytes(OUTPUT_ENV, DEFAULT_OUTPUT_MB)
        self._clients: dict[str, object] = {}
        self._lock = threading.Lock()
        self._known_lock = threading.Lock()
        self._known_keys: dict[Path, tuple[tuple[int, int, int], object]] = {}   # known_hosts parsed, by file
        _room_for_connections()

    def _connect(self, t: HostTarget):
        import paramiko

        client = paramiko.SSHClient()
        known = _expand(t.known_hosts)
        create = self.trust_new_hosts and known is not None and check_trust_target(t, known)
        if known and known.exists() and not create:
            try:
                self._host_keys_of(t, known, client)
            except Exception as exc:       # OSError, SSHException, InvalidHostKey, UnicodeDecodeError, ...
                raise load_problem(t, known, exc) from None
        if self.trust_new_hosts and known:
            client.set_missing_host_key_policy(TrustNewHost(known, self._known_lock, create))
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        key = _expand(t.key)
        if key and not key.is_file():
            raise HostError(t.name, "auth", f"ssh key {key} does not exist",
                            "set ssh.key (or nodes[].ssh.key) to your private key file")
        if key and not os.access(key, os.R_OK):
            raise HostError(t.name, "auth", f"ssh key {key} is not readable by this user",
                            f"run deployctl as the key's owner, or chmod 600 {key} and chown it to yourself")
        keys, agent = keys_tried(key)
        try:
            client.connect(t.address, port=t.port, username=t.user, key_filename=str(key) if key else None,
                           timeout=self.connect_timeout, banner_timeout=self.connect_timeout,
                           auth_timeout=self.connect_timeout, allow_agent=agent, look_for_keys=agent,
                           transport_factory=_nodelay_transport)
        except HostError as exc:                 # the known_hosts file could not take the new key
            client.close()
            raise HostError(t.name, exc.kind, exc.message, exc.hint) from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            client.close()
            raise describe_connect_error(exc, t, timeout=self.connect_timeout, known_hosts=known, keys=keys,
                                         agent=agent) from None
        _quiet_when_idle(client)
        return client

    def _host_keys_of(self, t: HostTarget, known: Path, client) -> None:
        """Give ``client`` the keys known_hosts lists for ``t`` (what paramiko's load_host_keys would leave it to
        check). The file is parsed once per executor and version of the file, not once per connection: paramiko
        parses every line each time, 0.1 s for 1,024 entries, so a fleet of N hosts cost N x N lines."""
        import paramiko

        st = known.stat()
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._known_lock:
            cached = self._known_keys.get(known)
            if cached is None or cached[0] != stamp:
                keys = paramiko.HostKeys()
                keys.load(str(known))
                cached = (stamp, keys)
                self._known_keys[known] = cached
        name = t.address if t.port == 22 else f"[{t.address}]:{t.port}"   # as paramiko's client looks it up
        entries = cached[1].lookup(name)
        own = client.get_host_keys()
        for keytype, key in (entries or {}).items():
            own.add(name, keytype, key)

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
        """Run ``argv`` (quoted into one command line) and wait at most ``timeout`` seconds.

        At most ``output_limit`` bytes (stdout + stderr) are read: beyond that the channel is closed and
        OutputLimitExceeded (a HostError, kind "output-limit") names the host and the command.
        """
        out, err = bytearray(), bytearray()

        def keep(buf: bytearray):
            def sink(chunk: bytes) -> bool:
                buf.extend(chunk)
                return len(out) + len(err) <= self.output_limit
            return sink

        rc, stop, seconds, command = self._session(target, argv, timeout, keep(out), keep(err))
        if stop == "limit":
            out += err                    # what was read goes with the error (no copy), for the caller to label
            del err[:]
            raise OutputLimitExceeded(target.name, short_command(argv), self.output_limit, out)
        if stop == "timeout":
            raise self._timeout(target, argv, timeout)
        return CommandResult(target.name, command, rc, out.decode(errors="replace"), err.decode(errors="replace"),
                             seconds)

    def stream(self, target: HostTarget, argv: list[str], timeout: float, sink: BinaryIO,
               limit: int) -> StreamResult:
        """Run ``argv`` and write what it prints (stdout and stderr as they arrive) to ``sink``, at most
        ``limit`` bytes and ``timeout`` seconds; past either the channel is closed and the result says why."""
        written, failed = 0, []

        def write(chunk: bytes) -> bool:
            nonlocal written
            room = limit - written
            try:
                sink.write(chunk[:max(room, 0)])
            except OSError as exc:            # the local disk, not the host: stop, and say so
                failed.append(exc)
                return False
            written += min(len(chunk), max(room, 0))
            return len(chunk) <= room

        rc, stop, seconds, _ = self._session(target, argv, timeout, write, write)
        if failed:
            raise OSError(failed[0].errno, f"cannot write the output of {argv[0]} from {target.name}: "
                          f"{failed[0].strerror or failed[0]}")
        return StreamResult(rc if stop is None else None, written, stop, seconds)

    @staticmethod
    def _timeout(target: HostTarget, argv: list[str], timeout: float) -> HostError:
        return HostError(target.name, "timeout", f"no answer within {timeout:.0f} s (running {argv[0]})",
                         "the host is overloaded or a tool hangs; raise --timeout if it is just slow")

    def _session(self, target: HostTarget, argv: list[str], timeout: float, on_out: Sink, on_err: Sink):
        """Run ``argv`` on a new channel, feeding its output to the sinks; (rc, stop, seconds, command).

        ``stop`` is None (the command exited: rc is its status), "limit" (a sink refused more) or "timeout";
        in both latter cases the channel is closed at once. The deadline holds while data streams too.
        """
        client = self.client(target)
        command = join_argv(argv)
        start = time.monotonic()
        try:
            chan = client.get_transport().open_session(timeout=timeout)
            chan.settimeout(timeout)
            chan.exec_command(command)
            stop = pump(chan, start + timeout, on_out, on_err)
            if stop is not None:
                chan.close()
                return None, stop, time.monotonic() - start, command
            rc = chan.recv_exit_status()
            chan.close()
        except Exception as exc:  # paramiko raises many kinds when a connection dies mid-command
            with self._lock:
                dead = self._clients.pop(target.name, None)
            if dead is not None:
                dead.close()
            raise HostError(target.name, "ssh", f"connection to {target.address}:{target.port} lost while running "
                            f"{argv[0]}: {str(exc) or type(exc).__name__}",
                            f"the host rebooted, sshd restarted or the network dropped; check that "
                            f"{_ssh_cmd(target)} works, then rerun") from None
        return rc, None, time.monotonic() - start, command

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            c.close()
