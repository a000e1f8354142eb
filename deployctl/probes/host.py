"""The facts about host basics, with their parsers: /etc/os-release, `uname -m`, `df`, `ss`, `ip -o addr`, the
weights directory (and the parser of `date`).

Owns ``WEIGHTS_SUMMARY_SCRIPT``, the one shell snippet whose output format deployctl defines itself;
everything else here reads what standard Linux tools print. Pure functions; bad input raises ValueError.
"""

from __future__ import annotations

import re
import shlex

from deployctl.core.models.facts import MAX_ROWS, DiskFree, ListeningPorts, OsInfo, WeightsDir
from deployctl.core.models.patterns import INTERFACE_PATTERN, check_ip, is_interface
from deployctl.probes.fact import Fact

# Summarises a weights directory in one SSH round trip. Run it with the directory as $1:
#     sh -c "$WEIGHTS_SUMMARY_SCRIPT" deployctl-weights /path/to/weights
# (the word after the script is $0). The output is the format parse_weights_dir reads.
WEIGHTS_SUMMARY_SCRIPT = r"""d="$1"
if [ ! -d "$d" ]; then echo exists=0; exit 0; fi
echo exists=1
if [ -r "$d" ] && [ -x "$d" ]; then echo readable=1; else echo readable=0; fi
if [ -f "$d/config.json" ]; then echo config_json=1; else echo config_json=0; fi
echo "safetensors=$(find "$d" -maxdepth 1 -name '*.safetensors' 2>/dev/null | wc -l)"
echo "bytes=$(du -sbL "$d" 2>/dev/null | cut -f1)"
"""

_OS_LINE = re.compile(r"^([A-Za-z0-9_]+)=(.*)$")
_ARCH = re.compile(r"^[A-Za-z0-9_]+$")
_DF_ROW = re.compile(r"^(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+%|-)\s+(\S.*)$")
_EPOCH = re.compile(r"^\d+(\.\d+)?$")
_WEIGHTS_KEYS = ("exists", "readable", "config_json", "safetensors", "bytes")


def _snippet(text: str) -> str:
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return repr(first[:80]) if first else "empty output"


# --------------------------------------------------------------------------- OS


def parse_os_release(text: str) -> OsInfo:
    """Parse /etc/os-release (``KEY=value``, values optionally shell-quoted); ``arch`` stays None.

    Raises:
        ValueError: a line that is not ``KEY=value`` or a comment, bad quoting, or no ``ID=``.
    """
    values: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        m = _OS_LINE.match(s)
        if m is None:
            raise ValueError(f"os-release line {lineno}: expected `KEY=value`, got {s[:80]!r}")
        try:
            values[m.group(1)] = " ".join(shlex.split(m.group(2)))
        except ValueError as e:
            raise ValueError(f"os-release line {lineno}: {e} in {s[:80]!r}") from None
    if not values.get("ID"):
        raise ValueError(f"os-release: expected an `ID=` line, got {_snippet(text)}")
    return OsInfo(id=values["ID"], version_id=values.get("VERSION_ID") or None,
                  pretty_name=values.get("PRETTY_NAME") or None, id_like=tuple(values.get("ID_LIKE", "").split()))


def parse_arch(text: str) -> str:
    """Parse `uname -m` (``aarch64``, ``x86_64``)."""
    s = text.strip()
    if not _ARCH.match(s):
        raise ValueError(f"uname -m: expected one word like aarch64, got {_snippet(text)}")
    return s


def parse_os_info(os_release: str, uname_m: str) -> OsInfo:
    """/etc/os-release and `uname -m` together."""
    info = parse_os_release(os_release)
    return OsInfo(**{**info.model_dump(), "arch": parse_arch(uname_m)})


# --------------------------------------------------------------------------- disk, ports, clock


def parse_df(text: str) -> DiskFree:
    """Parse `df -P -B1 <path>`: the ``Filesystem 1-blocks Used Available Capacity Mounted on`` header and one row.

    Raises:
        ValueError: no header, not exactly one row (df of one path), sizes not in bytes.
    """
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines or not lines[0].startswith("Filesystem") or "1-blocks" not in lines[0]:
        raise ValueError("df -P -B1: expected the `Filesystem 1-blocks Used Available ...` header, "
                         f"got {_snippet(text)}")
    if len(lines) != 2:
        raise ValueError(f"df -P -B1: expected one filesystem row, got {len(lines) - 1}")
    m = _DF_ROW.match(lines[1])
    if m is None:
        raise ValueError(f"df -P -B1: expected `<fs> <total> <used> <avail> <n>% <mount>`, got {lines[1][:80]!r}")
    return DiskFree(filesystem=m.group(1), total_bytes=int(m.group(2)), used_bytes=int(m.group(3)),
                    avail_bytes=int(m.group(4)), mount_point=m.group(6))


def parse_listening_ports(text: str) -> ListeningPorts:
    """Parse `ss -H -ltn`: ``LISTEN <recv-q> <send-q> <local addr:port> <peer addr:port> [process]``.

    Local addresses may be ``0.0.0.0:1025``, ``[::]:22``, ``*:80``, ``:::22`` or ``127.0.0.53%lo:53``;
    the port is what follows the last colon. An empty output means nothing listens. A header line
    (``State Recv-Q ...``, when ``-H`` was not given) is skipped.
    """
    ports: set[int] = set()
    for line in text.splitlines():
        tokens = line.split()
        if not tokens or (tokens[0] == "State" and "Local" in line):
            continue
        if len(tokens) < 5 or tokens[0] != "LISTEN" or ":" not in tokens[3]:
            raise ValueError(f"ss -H -ltn: expected `LISTEN <q> <q> <addr:port> <addr:*>`, got {line.strip()[:80]!r}")
        port = tokens[3].rsplit(":", 1)[1]
        if not port.isdigit() or int(port) > 65535:
            raise ValueError(f"ss -H -ltn: {tokens[3]!r} does not end in a port number")
        ports.add(int(port))
    return ListeningPorts(ports=frozenset(ports))


def parse_addresses(text: str) -> dict[str, str]:
    """Parse `ip -o addr show`: address -> the interface that carries it.

    Lines look like ``2: eth0    inet 10.200.2.2/24 brd 10.200.2.255 scope global eth0\\ ...``; ``inet6``
    lines too (``fe80::1%eth0`` zone ids are not part of the address here).

    The interface becomes GLOO_SOCKET_IFNAME in env files when the inventory names none, so it must match the
    inventory's ``nodes[].interface`` pattern; the address must be an IP address.

    Raises:
        ValueError: a line of another shape, an interface name or an address deployctl would not accept from the
            inventory, more than ``MAX_ROWS`` addresses.
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) < 4 or not tokens[0].rstrip(":").isdigit() or tokens[2] not in ("inet", "inet6"):
            raise ValueError(f"ip -o addr: expected `N: <if> inet <addr>/<len> ...`, got {line.strip()[:80]!r}")
        iface = tokens[1].split("@", 1)[0]
        if not is_interface(iface):
            raise ValueError(f"ip -o addr: interface name {iface[:40]!r} does not match {INTERFACE_PATTERN} "
                             "(the pattern of nodes[].interface); not used")
        address = check_ip(tokens[3].split("/", 1)[0])
        out.setdefault(address, iface)
        if len(out) > MAX_ROWS:
            raise ValueError(f"ip -o addr: more than {MAX_ROWS} addresses")
    return out


def parse_epoch(text: str) -> float:
    """Parse `date +%s.%N`: seconds since the epoch, e.g. ``1732233600.123456789``.

    Raises:
        ValueError: anything else, e.g. ``1732233600.N`` from a `date` without ``%N``.
    """
    s = text.strip()
    if not _EPOCH.match(s):
        raise ValueError(f"date +%s.%N: expected `<seconds>.<nanoseconds>`, got {_snippet(text)}")
    return float(s)


# --------------------------------------------------------------------------- weights directory


def parse_weights_dir(text: str) -> WeightsDir:
    """Parse the output of ``WEIGHTS_SUMMARY_SCRIPT``.

    Exact format, one ``key=value`` per line, in this order::

        exists=1          1 if the path is a directory (after symlinks), else 0 and nothing follows
        readable=1        1 if the directory can be listed (-r and -x)
        config_json=1     1 if <dir>/config.json is a regular file
        safetensors=163   number of *.safetensors entries directly in <dir>
        bytes=688123456   `du -sbL` total in bytes (symlinks followed); empty if du printed nothing

    Raises:
        ValueError: a missing, unknown or repeated key, a flag other than 0/1, a non-numeric count.
    """
    values: dict[str, str] = {}
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        key, eq, value = s.partition("=")
        if not eq or key not in _WEIGHTS_KEYS or key in values:
            raise ValueError(f"weights summary: expected one of {', '.join(k + '=' for k in _WEIGHTS_KEYS)} "
                             f"once each, got {s[:80]!r}")
        values[key] = value.strip()
    if "exists" not in values:
        raise ValueError(f"weights summary: expected `exists=0|1`, got {_snippet(text)}")
    if not _flag(values, "exists"):
        if len(values) > 1:
            raise ValueError("weights summary: exists=0 but more keys follow")
        return WeightsDir(exists=False)
    missing = [k for k in _WEIGHTS_KEYS if k not in values]
    if missing:
        raise ValueError(f"weights summary: expected `{missing[0]}=` after exists=1")
    return WeightsDir(exists=True, readable=_flag(values, "readable"), config_json=_flag(values, "config_json"),
                      safetensors_files=_count(values["safetensors"], "safetensors"),
                      total_bytes=_count(values["bytes"], "bytes") if values["bytes"] else None)


def _flag(values: dict[str, str], key: str) -> bool:
    if values[key] not in ("0", "1"):
        raise ValueError(f"weights summary: {key} must be 0 or 1, got {values[key]!r}")
    return values[key] == "1"


def _count(value: str, key: str) -> int:
    if not value.isdigit():
        raise ValueError(f"weights summary: {key} must be a non-negative integer, got {value!r}")
    return int(value)


# --------------------------------------------------------------------------- the facts

# `df` of the weights path, or of its nearest existing parent when it does not exist yet (the path is $1)
WEIGHTS_DF_SCRIPT = 'p="$1"; while [ ! -e "$p" ]; do p=$(dirname "$p"); done; df -P -B1 "$p"'

OS_RELEASE: Fact[OsInfo] = Fact("os-release", lambda: ["cat", "/etc/os-release"], parse_os_release)
ARCH: Fact[str] = Fact("uname-m", lambda: ["uname", "-m"], parse_arch)
SHM: Fact[DiskFree] = Fact("shm-df", lambda: ["df", "-P", "-B1", "/dev/shm"], parse_df)
WEIGHTS: Fact[WeightsDir] = Fact(
    "weights-dir", lambda path: ["sh", "-c", WEIGHTS_SUMMARY_SCRIPT, "deployctl-weights", path], parse_weights_dir)
WEIGHTS_DISK: Fact[DiskFree] = Fact("weights-df", lambda path: ["sh", "-c", WEIGHTS_DF_SCRIPT, "deployctl-df", path],
                                    parse_df)
PORTS: Fact[ListeningPorts] = Fact("listening-ports", lambda: ["ss", "-H", "-ltn"], parse_listening_ports)
ADDRESSES: Fact[dict[str, str]] = Fact("ip-addresses", lambda: ["ip", "-o", "addr", "show"], parse_addresses)
