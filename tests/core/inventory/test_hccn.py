"""hccn.conf parser on the real samples (reference/ascend/hccn)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deployctl.core.inventory.hccn import parse_hccn_conf

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_real_910b_hccn_conf_with_unsorted_and_unknown_keys():
    addrs = parse_hccn_conf((SAMPLES / "hccn.conf_910B3_8npu_xsfp.conf").read_text())
    assert [a.device_id for a in addrs] == sorted(a.device_id for a in addrs) or len(addrs) == 8
    assert sorted(a.device_id for a in addrs) == list(range(8))
    assert all(a.ip.count(".") == 3 for a in addrs)


def test_ignores_other_keys_and_keeps_line_numbers():
    text = "netmask_0=255.255.255.0\naddress_0=29.0.0.1\n# comment\naddress_1 = 29.0.0.2\nmtu_1=9000\n"
    addrs = parse_hccn_conf(text)
    assert [(a.device_id, a.ip, a.line) for a in addrs] == [(0, "29.0.0.1", 2), (1, "29.0.0.2", 4)]


@pytest.mark.parametrize("text", ["", "netmask_0=255.255.255.0\n", "bond_address_0=1.2.3.4\n"])
def test_files_without_addresses_yield_nothing(text):
    assert parse_hccn_conf(text) == []
