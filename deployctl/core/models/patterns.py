"""Patterns shared by what the inventory states and what preflight reads from a host (issue 21): a value that
lands in a rendered file or a command passes the same check whichever side it came from."""

from __future__ import annotations

import ipaddress
import re

# a Linux network interface name as deployctl accepts it (IFNAMSIZ-1 characters, nothing a shell, an env file
# or a template would read): inventory `nodes[].interface` and the interfaces of `ip -o addr`
INTERFACE_PATTERN = r"^[A-Za-z0-9_.-]{1,15}$"
# driver/firmware/CANN/npu-smi/docker versions: 23.0.7, 24.1.rc2.2, 7.1.0.11.220, V100R001C21SPC002B220, 8.3.RC2, 24.1.
VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+~-]{0,63}$"
# npu-smi chip names: 910B3, Ascend910, Ascend910_9391, `Ascend 910B4` (info -m), Mcu
CHIP_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,39}$"
# a PCI bus id as npu-smi prints it (0000:9D:00.0), or masked in shared logs (xxxx:xx:xx.x)
BUS_ID_PATTERN = r"^[0-9A-Fa-fxX:.]{1,32}$"
# a key of a `key=value` file (version.info, hccn.conf, os-release) or of a `key : value` npu-smi answer
KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _.()/-]{0,63}$"
OS_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
ARCH_PATTERN = r"^[A-Za-z0-9_]{1,32}$"

MAX_TEXT = 1024          # one line of host text kept in a fact (a process name, an issuer, a mount point)
# controls, DEL, C1, bidi overrides/isolates, line/paragraph separators, surrogates: never in a fact
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def check_text(value: str) -> str:
    """One line of printable host text, at most ``MAX_TEXT`` characters (else ValueError)."""
    if len(value) > MAX_TEXT:
        raise ValueError(f"longer than {MAX_TEXT} characters")
    bad = _UNPRINTABLE.search(value)
    if bad:
        raise ValueError(f"contains the control character {bad.group()!r}")
    return value


def check_ip(value: str) -> str:
    """An IPv4 or IPv6 address as printed (no zone id, no prefix length), else ValueError."""
    if len(value) > 45 or "%" in value:
        raise ValueError(f"{value[:60]!r} is not an IP address")
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"{value[:60]!r} is not an IP address") from None
    return value


def is_interface(name: str) -> bool:
    return re.fullmatch(INTERFACE_PATTERN[1:-1], name) is not None
