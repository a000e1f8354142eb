"""The known_hosts file deployctl reads host keys from, and appends to with --trust-new-hosts.

The path comes from the inventory (ssh.known_hosts, nodes[].ssh.known_hosts), so it is input too: with
--trust-new-hosts deployctl appends only to a file that exists, is a regular file and holds nothing but
known_hosts lines (an empty file is fine), and creates a missing one only inside ~/.ssh (mode 0600, as
ssh does). A missing file anywhere else is refused with a hint (create it: `touch PATH`) instead of being
created wherever the inventory points; any other file (/etc/passwd, a directory, /dev/zero, a binary) is
refused without being written.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
import threading
from pathlib import Path

from deployctl.io.executor import HostError, HostTarget

MAX_KNOWN_HOSTS = 64 * 2**20       # read at most this much of a known_hosts file


def ssh_dir() -> Path:
    return Path(os.path.expanduser("~/.ssh"))


def _entry_problem(line: str) -> str | None:
    """Why ``line`` (stripped, not blank, not a comment) is not a known_hosts entry, or None."""
    fields = line.split()
    if fields and fields[0].startswith("@"):            # @cert-authority / @revoked markers
        fields = fields[1:]
    if len(fields) < 3:
        return "not `hosts keytype base64-key`"
    keytype, blob = fields[1], fields[2]
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return f"the key of type {keytype[:40]!r} is not base64"
    n = int.from_bytes(raw[:4], "big") if len(raw) >= 4 else -1
    if n <= 0 or raw[4:4 + n] != keytype.encode(errors="replace"):
        return f"the key does not hold a {keytype[:40]!r} key"
    return None


def known_hosts_problem(path: Path) -> str | None:
    """Why ``path`` (which exists) is not a real known_hosts file deployctl may append to, or None."""
    try:
        st = path.stat()
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_size > MAX_KNOWN_HOSTS:
        return f"is {st.st_size} bytes, far larger than a known_hosts file"
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_KNOWN_HOSTS + 1)
        text = data.decode("utf-8")
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    except UnicodeDecodeError:
        return "is not text"
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        why = _entry_problem(line)
        if why:
            return f"is not a known_hosts file (line {lineno}: {why})"
    return None


def _hint(path: Path) -> str:
    return (f"point ssh.known_hosts at your known_hosts file (default ~/.ssh/known_hosts), or fix {path}: one "
            "`host keytype base64-key` line per host (ssh-keyscan HOST prints them)")


def _inside(path: Path, parent: Path) -> bool:
    try:
        path.resolve().relative_to(parent.resolve())
        return True
    except ValueError:
        return False


def check_trust_target(t: HostTarget, path: Path) -> bool:
    """Raise HostError unless --trust-new-hosts may record keys in ``path``; True when it must be created
    (missing, inside ~/.ssh)."""
    if os.path.lexists(path):
        why = known_hosts_problem(path)
        if why:
            raise HostError(t.name, "host-key-unknown", f"known_hosts file {path} {why}; --trust-new-hosts "
                            "appends only to a real known_hosts file, nothing was written", _hint(path))
        return False
    if _inside(path, ssh_dir()):
        return True
    raise HostError(t.name, "host-key-unknown", f"known_hosts file {path} does not exist; --trust-new-hosts "
                    "creates one only inside ~/.ssh",
                    f"create it if that is where the keys should go (touch {path}), or use ~/.ssh/known_hosts")


def load_problem(t: HostTarget, path: Path, exc: BaseException) -> HostError:
    """The HostError for a known_hosts file paramiko could not load (any exception it raised)."""
    detail = str(exc) or type(exc).__name__
    if type(exc).__name__ == "InvalidHostKey":
        detail = "a line holds a key that is not base64"
    elif isinstance(exc, UnicodeDecodeError):
        detail = "it is not text"
    return HostError(t.name, "host-key-unknown", f"cannot read known_hosts file {path}: {detail}"[:400],
                     _hint(path))


class TrustNewHost:
    """Accept a host that known_hosts does not list yet (only with --trust-new-hosts) and remember it.

    A host whose key *changed* is never accepted: paramiko raises BadHostKeyException before any
    policy is asked. The file was checked by ``check_trust_target`` before connecting; it is opened
    without O_CREAT unless it is to be created inside ~/.ssh.
    """

    def __init__(self, path: Path, lock: threading.Lock, create: bool = False):
        self.path, self.lock, self.create = path, lock, create

    def missing_host_key(self, client, hostname, key):
        with self.lock:
            flags = os.O_WRONLY | os.O_APPEND
            if self.create:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                flags |= os.O_CREAT
            try:
                fd = os.open(self.path, flags, 0o600)
            except OSError as exc:
                raise HostError(str(hostname), "host-key-unknown", f"cannot record the key of {hostname} in "
                                f"{self.path}: {exc.strerror or exc}", _hint(self.path)) from None
            with os.fdopen(fd, "a", encoding="utf-8") as fh:
                fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)
