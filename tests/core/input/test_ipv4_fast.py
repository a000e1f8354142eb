"""The fast IPv4 reading of a large fleet's device IPs (core/input/hostile.py ipv4_packed) agrees with ipaddress:
every address ipaddress accepts gives its bytes, everything it refuses gives None."""

from __future__ import annotations

import ipaddress
import random

import pytest

from deployctl.core.input.hostile import ip_kind, ipv4_packed

ODD = ["01.2.3.4", "1.2.3.256", "1.2.3", "1.2.3.4 ", " 1.2.3.4", "\uff11.2.3.4", "1.2.3.4\n", "1..3.4", "0x1.2.3.4",
       "1.2.3.04", "1.2.3.-4", "+1.2.3.4", "1.2.3.4.5", "", "٣.2.3.4", "1.2.3.4%eth0", "::ffff:1.2.3.4"]


def _ipaddress(value: str) -> bytes | None:
    try:
        return ipaddress.IPv4Address(value).packed
    except ValueError:
        return None


@pytest.mark.parametrize("value", ODD + ["0.0.0.0", "255.255.255.255", "127.0.0.1", "29.32.191.25"])
def test_agrees_with_ipaddress(value):
    assert ipv4_packed(value) == _ipaddress(value)


def test_agrees_on_random_dotted_quads():
    rng = random.Random(42)
    for _ in range(20_000):
        value = ".".join(str(rng.randint(0, 300)) if rng.random() > 0.05 else f"0{rng.randint(0, 9)}"
                         for _ in range(4))
        assert ipv4_packed(value) == _ipaddress(value), value


@pytest.mark.parametrize(("value", "kind"), [("29.0.0.10", (4, False)), ("0.0.0.0", (4, True)),
                                             ("127.0.0.5", (4, True)), ("::", (6, True)), ("::1", (6, True)),
                                             ("fd00::1", (6, False)), ("1.2.3", None), ("fe80::1%eth0", None)])
def test_ip_kind(value, kind):
    assert ip_kind(value) == kind


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0), ("15", 15), ("999", 999), ("1000", 1000), (" 12", 12), ("\t+3x", 3), ("-1", -1), ("007", 7),
    ("1e3", 1), ("", None), ("x1", None), ("\u0663", None), ("\u00a012", None), ("2147483647", 2147483647),
    ("2147483648", None), ("-2147483648", -2147483648), (5, None), (None, None)])
def test_stoi_reads_as_std_stoi(text, value):
    """MindIE's std::stoi (strtol in the C locale: ASCII blanks and digits, int32) for the acceptance checks; the
    cached small ids agree with it."""
    from deployctl.core.engines.mindie.acceptance_custom import stoi

    assert stoi(text) == value
