"""Parse /etc/hccn.conf: `address_<device_id>=<ip>` lines; every other key is ignored."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ADDRESS = re.compile(r"^\s*address_(\d+)\s*=\s*(\S*)\s*$")


@dataclass(frozen=True)
class HccnAddress:
    device_id: int
    ip: str
    line: int


def parse_hccn_conf(text: str) -> list[HccnAddress]:
    """Return the device addresses in file order (any key order is accepted).

    Example input (real 910B file)::

        address_0=29.0.0.1
        netmask_0=255.255.255.0
        xsfp_reset_max_times_0=0
    """
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = _ADDRESS.match(line)
        if m:
            out.append(HccnAddress(int(m.group(1)), m.group(2), lineno))
    return out


class HccnReadError(Exception):
    """The hccn_conf path exists but is not a readable text file (device, FIFO, directory, binary, huge)."""
