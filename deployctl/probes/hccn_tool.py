"""The hccn_tool facts: `hccn_tool -i N ... -g` and the host's /etc/hccn.conf, with their parsers.

Formats: the driver's hccn_tool source, hicann/driver@ef377e95 src/custom/network/hccn/ascend910B/hccn_tool/
(cfg.c: hccn.conf keys `<name>_<phy_id>`; tool_ops.c, tool_ops_ext.c, tool_tls.c, cmd.c: the printed lines), and real
outputs in itove/ascend@78ca5993 mdbook/src/deepseekv3-multi-nodes-deploy.md and Ascend/mind-cluster@22bb3d98
component/ascend-faultdiag test fixtures; a real hccn.conf in github.com/vllm-project/vllm-ascend issue #2498.

One call = one device's output: a second device in the same text is an error, never silently merged.
Every parser raises ValueError naming the line it expected; the probe runner reports it per host.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import datetime, timezone
from typing import Callable

from deployctl.core.models.facts import (
    Gateway,
    HccnConf,
    IpConf,
    LinkStatus,
    NetDetect,
    NetHealth,
    PingResult,
    TlsCert,
    TlsInfo,
    VnicInfo,
)
from deployctl.probes.fact import Fact

HCCN = "hccn_tool"

NO_IP_MESSAGE = "Get ipconf failed, because no ip was preset there!"

_IPADDR = re.compile(r"^ipaddr:\s*(\S+)$")
_NETMASK = re.compile(r"^netmask:\s*(\S+)$")
_VNIC = re.compile(r"^vnic (link status|ipaddr|netmask):\s*(\S+)$")
_LINK = re.compile(r"^link status:\s*(\S+)$")
_NET_HEALTH = re.compile(r"^net health status:\s*(\S.*?)\s*$")
_NETDETECT = re.compile(r"^netdetect (?:addr|address):\s*(\S+)$")
_GATEWAY = re.compile(r"^default gateway:\s*(\S+?),\s*Iface:\s*(\S+)$")
_PING_HEAD = re.compile(r"^device (\d+) PING (\S+)$")
_PING_RECV = re.compile(r"^recv seq=\d+")
_PING_SUMMARY = re.compile(r"^(\d+) packets transmitted, (\d+) received, ([\d.]+)% packet loss$")
# `dev_id:0, ...` (910B tool, phy id) or `device 0, ...` (newer tool)
_TLS_DEV = r"^(?:dev_id:\s*|device\s+)(\d+),\s*"
_TLS_STATUS = re.compile(_TLS_DEV + r"tls switch\[(\d+)\]")
_TLS_PRESET = re.compile(r"tls preconfigured\[(\d+)\]")
_TLS_ALARM = re.compile(r"tls alarm time threshold\[(\d+)\]\s*days")
_TLS_CERT = re.compile(_TLS_DEV + r"\[([^\]]+)\]\s*info:$")
_TLS_FIELD = re.compile(r"^(\w+)\[(.*)\]$")
_TLS_EXPIRY = re.compile(r"^tls expiration status\[(\d+)\]")
# `Wed Feb 19 03:19:21 2020 GMT`, `Thu Feb  3 ...`: weekday, month, day, time, year
_CERT_TIME = re.compile(r"^(?:[A-Za-z]{3}\s+)?([A-Za-z]{3})\s+(\d{1,2})\s+(\d{2}):(\d{2}):(\d{2})\s+(\d{4})"
                        r"(?:\s+GMT)?$")
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), start=1)}
_CONF_LINE = re.compile(r"^([A-Za-z0-9_]+)_(\d+)\s*=\s*(.*?)\s*$")


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def _snippet(text: str) -> str:
    first = next(iter(_lines(text)), "")
    return repr(first[:80]) if first else "empty output"


def _one(pattern: re.Pattern[str], text: str, what: str, expected: str) -> re.Match[str]:
    """The single line of ``text`` matching ``pattern``; none or several raise."""
    found = [m for m in map(pattern.match, _lines(text)) if m]
    if not found:
        raise ValueError(f"{what}: expected `{expected}`, got {_snippet(text)}")
    if len(found) > 1:
        raise ValueError(f"{what}: expected one `{expected}` line, got {len(found)} (one device per call)")
    return found[0]


def _ip(value: str, what: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise ValueError(f"{what}: {value!r} is not an IP address") from None


def _up_down(value: str, what: str) -> bool:
    word = value.upper()
    if word not in ("UP", "DOWN"):
        raise ValueError(f"{what}: expected UP or DOWN, got {value!r}")
    return word == "UP"


# --------------------------------------------------------------------------- addresses and links


def parse_ip_conf(text: str) -> IpConf | None:
    """Parse `hccn_tool -i N -ip -g`: ``ipaddr:1.2.3.4`` / ``netmask:255.255.255.0`` (no space after ``:``).

    Returns:
        The address, or None for ``Get ipconf failed, because no ip was preset there!``.

    Raises:
        ValueError: empty output, a missing line, more than one device, a value that is not an IP.
    """
    if NO_IP_MESSAGE in text:
        return None
    ip = _one(_IPADDR, text, "hccn_tool -ip -g", "ipaddr:<ip>").group(1)
    mask = _one(_NETMASK, text, "hccn_tool -ip -g", "netmask:<mask>").group(1)
    return IpConf(ip=_ip(ip, "hccn_tool -ip -g ipaddr"), netmask=_ip(mask, "hccn_tool -ip -g netmask"))


def parse_vnic(text: str) -> VnicInfo:
    """Parse `hccn_tool -i N -vnic -g` (A3): ``vnic link status: UP`` / ``vnic ipaddr: X`` / ``vnic netmask: Y``."""
    values: dict[str, str] = {}
    for line in _lines(text):
        m = _VNIC.match(line)
        if m is None:
            raise ValueError("hccn_tool -vnic -g: expected `vnic <link status|ipaddr|netmask>: value`, "
                             f"got {line[:80]!r}")
        if m.group(1) in values:
            raise ValueError(f"hccn_tool -vnic -g: `vnic {m.group(1)}` twice (one device per call)")
        values[m.group(1)] = m.group(2)
    missing = [k for k in ("link status", "ipaddr", "netmask") if k not in values]
    if missing:
        raise ValueError(f"hccn_tool -vnic -g: expected `vnic {missing[0]}: ...`, got {_snippet(text)}")
    return VnicInfo(link_up=_up_down(values["link status"], "hccn_tool -vnic -g link status"),
                    ip=_ip(values["ipaddr"], "hccn_tool -vnic -g ipaddr"),
                    netmask=_ip(values["netmask"], "hccn_tool -vnic -g netmask"))


def parse_link(text: str) -> LinkStatus:
    """Parse `hccn_tool -i N -link -g`: ``link status: UP`` or ``DOWN``."""
    m = _one(_LINK, text, "hccn_tool -link -g", "link status: UP|DOWN")
    return LinkStatus(up=_up_down(m.group(1), "hccn_tool -link -g"))


def parse_net_health(text: str) -> NetHealth:
    """Parse `hccn_tool -i N -net_health -g`: ``net health status: <s>``, s kept verbatim (may be several words)."""
    return NetHealth(status=_one(_NET_HEALTH, text, "hccn_tool -net_health -g", "net health status: <s>").group(1))


def parse_netdetect(text: str) -> NetDetect:
    """Parse `hccn_tool -i N -netdetect -g`: ``netdetect addr: X`` (source) or ``netdetect address: X`` (older doc)."""
    m = _one(_NETDETECT, text, "hccn_tool -netdetect -g", "netdetect address: <ip>")
    return NetDetect(address=_ip(m.group(1), "hccn_tool -netdetect -g"))


def parse_gateway(text: str) -> Gateway:
    """Parse `hccn_tool -i N -gateway -g`: ``default gateway:11.12.165.1, Iface:eth0``."""
    m = _one(_GATEWAY, text, "hccn_tool -gateway -g", "default gateway:<ip>, Iface:<name>")
    return Gateway(address=_ip(m.group(1), "hccn_tool -gateway -g"), iface=m.group(2))


def parse_ping(text: str) -> PingResult:
    """Parse `hccn_tool -i N -ping -g address X`.

    Expected: ``device 0 PING X``, ``recv seq=...`` lines, then
    ``3 packets transmitted, 3 received, 0.00% packet loss``. The summary is required.
    """
    head = [m for m in map(_PING_HEAD.match, _lines(text)) if m]
    if len(head) > 1:
        raise ValueError(f"hccn_tool -ping -g: expected one `device N PING X` line, got {len(head)} "
                         "(one device per call)")
    m = _one(_PING_SUMMARY, text, "hccn_tool -ping -g", "<n> packets transmitted, <n> received, <x>% packet loss")
    sent, received = int(m.group(1)), int(m.group(2))
    if received > sent:
        raise ValueError(f"hccn_tool -ping -g: {received} received of {sent} transmitted")
    return PingResult(device=int(head[0].group(1)) if head else None, target=head[0].group(2) if head else None,
                      sent=sent, received=received, loss_pct=float(m.group(3)))


# --------------------------------------------------------------------------- tls


def parse_tls(text: str) -> TlsInfo:
    """Parse `hccn_tool -i N -tls -g`.

    The status line ``dev_id:0, tls switch[0](0:disable, 1:enable), tls preconfigured[1](...), tls alarm
    time threshold[60]days`` (older drivers omit ``tls preconfigured``, newer tools start ``device 0,``)
    and per-certificate blocks ``dev_id:0, [pub cert] info:`` with tab-indented ``subject[...]``,
    ``issuer[...]``, ``start_time[Wed Feb 19 03:19:21 2020 GMT]``, ``end_time[...]`` and (newer)
    ``tls expiration status[0](...)``. Other ``name[value]`` lines in a block are ignored.

    Raises:
        ValueError: no status line, a second device, a certificate without issuer/start/end, a date
            that is not ``Www Mmm dd hh:mm:ss yyyy GMT``, a switch other than 0/1, an unknown line.
    """
    info: dict | None = None
    certs: list[dict] = []
    for line in _lines(text):
        if (m := _TLS_STATUS.match(line)) is not None:
            if info is not None:
                raise ValueError("hccn_tool -tls -g: two `tls switch[...]` lines (one device per call)")
            info = _tls_status(line, m)
        elif (m := _TLS_CERT.match(line)) is not None:
            if info is None or int(m.group(1)) != info["dev_id"]:
                raise ValueError(f"hccn_tool -tls -g: certificate block {line[:60]!r} outside its device's status")
            certs.append({"kind": m.group(2).removesuffix(" cert").strip()})
        elif certs and (m := _TLS_EXPIRY.match(line)) is not None:
            certs[-1]["expiration_status"] = int(m.group(1))
        elif certs and (m := _TLS_FIELD.match(line)) is not None:
            certs[-1][m.group(1)] = m.group(2)
        else:
            raise ValueError(f"hccn_tool -tls -g: unexpected line {line[:80]!r}")
    if info is None:
        raise ValueError(f"hccn_tool -tls -g: expected `dev_id:N, tls switch[0|1]...`, got {_snippet(text)}")
    return TlsInfo(**info, certs=tuple(_tls_cert(c) for c in certs))


def _tls_status(line: str, m: re.Match[str]) -> dict:
    switch = int(m.group(2))
    if switch not in (0, 1):
        raise ValueError(f"hccn_tool -tls -g: tls switch[{switch}] is neither 0 nor 1")
    alarm = _TLS_ALARM.search(line)
    if alarm is None:
        raise ValueError(f"hccn_tool -tls -g: expected `tls alarm time threshold[N]days` in {line[:80]!r}")
    preset = _TLS_PRESET.search(line)
    return {"dev_id": int(m.group(1)), "enabled": switch == 1,
            "preconfigured": None if preset is None else preset.group(1) == "1", "alarm_days": int(alarm.group(1))}


def _tls_cert(fields: dict) -> TlsCert:
    kind = fields["kind"]
    for key in ("issuer", "start_time", "end_time"):
        if key not in fields:
            raise ValueError(f"hccn_tool -tls -g: the [{kind}] block has no `{key}[...]` line")
    return TlsCert(kind=kind, subject=fields.get("subject") or None, issuer=fields["issuer"],
                   start=_cert_time(fields["start_time"], kind), end=_cert_time(fields["end_time"], kind),
                   expiration_status=fields.get("expiration_status"))


def _cert_time(value: str, kind: str) -> datetime:
    # parsed by hand: strptime's %a/%b follow the locale, hccn_tool always prints English C-locale dates
    m = _CERT_TIME.match(value.strip())
    if m is None or m.group(1) not in _MONTHS:
        raise ValueError(f"hccn_tool -tls -g: [{kind}] date {value!r} is not like `Wed Feb 19 03:19:21 2020 GMT`")
    mon, day, hh, mm, ss, year = _MONTHS[m.group(1)], *map(int, m.group(2, 3, 4, 5, 6))
    try:
        return datetime(year, mon, day, hh, mm, ss, tzinfo=timezone.utc)
    except ValueError as e:
        raise ValueError(f"hccn_tool -tls -g: [{kind}] date {value!r}: {e}") from None


# --------------------------------------------------------------------------- /etc/hccn.conf


def parse_host_hccn_conf(text: str) -> HccnConf:
    """Parse a host's /etc/hccn.conf (what `cat /etc/hccn.conf` printed) into ``{phy_id: {key: value}}``.

    Lines are ``<key>_<phy_id>=<value>`` in any order (``address_0=...``, ``xsfp_reset_max_times_3=0``);
    blank and ``#`` lines are skipped. Unlike ``deployctl.core.inventory.hccn.parse_hccn_conf`` (addresses
    with line numbers, for inventory errors) this keeps every key, for comparing a host with the plan.

    Raises:
        ValueError: a line that is not ``key_N=value``, or one key of one device set twice differently.
    """
    entries: dict[int, dict[str, str]] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _CONF_LINE.match(line)
        if m is None:
            raise ValueError(f"hccn.conf line {lineno}: expected `<key>_<device>=<value>`, got {line[:80]!r}")
        key, dev, value = m.group(1), int(m.group(2)), m.group(3)
        known = entries.setdefault(dev, {})
        if known.get(key, value) != value:
            raise ValueError(f"hccn.conf line {lineno}: {key}_{dev} is set twice ({known[key]!r}, {value!r})")
        known[key] = value
    return HccnConf(entries=entries)


# --------------------------------------------------------------------------- the facts


def _query(major: str) -> Callable[[int], list[str]]:
    """`hccn_tool -i <dev> <major> -g`: one device's answer."""
    return lambda dev: [HCCN, "-i", str(dev), major, "-g"]


# `hccn_tool -i N -ip -g`; the tool exits non-zero when no IP is set, printing NO_IP_MESSAGE (parsed to None)
IP: Fact[IpConf | None] = Fact("hccn-ip", _query("-ip"), parse_ip_conf)
VNIC: Fact[VnicInfo] = Fact("hccn-vnic", _query("-vnic"), parse_vnic)                      # A3
LINK: Fact[LinkStatus] = Fact("hccn-link", _query("-link"), parse_link)
NET_HEALTH: Fact[NetHealth] = Fact("hccn-net-health", _query("-net_health"), parse_net_health)
TLS: Fact[TlsInfo] = Fact("hccn-tls", _query("-tls"), parse_tls)
NETDETECT: Fact[NetDetect] = Fact("hccn-netdetect", _query("-netdetect"), parse_netdetect)
GATEWAY: Fact[Gateway] = Fact("hccn-gateway", _query("-gateway"), parse_gateway)
# `hccn_tool -i N -ping -g address X`: device N pings a peer device's address
PING: Fact[PingResult] = Fact(
    "hccn-ping", lambda dev, address: [HCCN, "-i", str(dev), "-ping", "-g", "address", address], parse_ping)
HCCN_CONF: Fact[HccnConf] = Fact("hccn-conf", lambda: ["cat", "/etc/hccn.conf"], parse_host_hccn_conf)
