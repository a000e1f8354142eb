"""hccn_tool and hccn.conf parsers on the real samples (tests/samples/ascend/hccn) and edge cases."""

from __future__ import annotations

import ipaddress
from datetime import datetime, timezone
from pathlib import Path

import pytest
from transcripts import section
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from deployctl.core.models.facts import IpConf
from deployctl.probes.hccn_tool import (
    NO_IP_MESSAGE,
    parse_gateway,
    parse_host_hccn_conf,
    parse_ip_conf,
    parse_link,
    parse_net_health,
    parse_netdetect,
    parse_ping,
    parse_tls,
    parse_vnic,
)

HCCN = Path(__file__).resolve().parent.parent / "samples" / "ascend" / "hccn"
ITOVE = HCCN / "hccn_tool_outputs_8npu_910B3_itove-ascend.txt"
WORKER0 = HCCN / "faultdiag_worker0_npu_info_before.txt"
WORKER9 = HCCN / "faultdiag_worker9_npu_info_after_hccn-ip.txt"
FAULTDIAG_BEFORE = HCCN / "faultdiag_npu_info_before_910A_hccn-npu-smi.txt"



def itove(command_start: str) -> list[str]:
    """Output lines of the `$ <command>` block of the itove transcript (the doc's `...` lines dropped)."""
    blocks, current = {}, None
    for line in ITOVE.read_text().splitlines():
        if line.startswith("$ "):
            current = blocks.setdefault(line[2:], [])
        elif current is not None and line.strip() and line.strip() != "...":
            current.append(line)
    (key,) = [k for k in blocks if k.startswith(command_start)]
    return blocks[key]


def chunks(lines: list[str], size: int) -> list[str]:
    return ["\n".join(lines[i:i + size]) for i in range(0, len(lines), size)]


# --------------------------------------------------------------------------- -ip -g


def test_ip_itove_eight_devices_one_24():
    outs = chunks(itove("for i in {0..7};do hccn_tool -i $i -ip -g"), 2)
    assert [parse_ip_conf(o) for o in outs] == [IpConf(ip=f"11.12.165.{80 + i}", netmask="255.255.255.0")
                                                for i in range(8)]


def test_ip_worker9_per_device_subnets():
    ips = [parse_ip_conf(section(WORKER9, f"/usr/local/Ascend/driver/tools/hccn_tool -i {i} -ip -g")) for i in range(8)]
    assert [c.ip for c in ips] == ["192.1.45.172", "192.2.167.33", "192.3.103.252", "192.4.166.202",
                                   "192.1.157.81", "192.2.8.198", "192.3.26.213", "192.4.32.120"]
    assert {c.netmask for c in ips} == {"255.255.0.0"}


def test_ip_worker0():
    ips = [parse_ip_conf(section(WORKER0, f"/usr/local/Ascend/driver/tools/hccn_tool -i {i} -ip -g")) for i in range(8)]
    assert [c.ip for c in ips] == [f"10.10.0.{10 + i}" for i in range(8)]
    assert {c.netmask for c in ips} == {"255.255.255.0"}


def test_ip_910a_faultdiag_and_its_empty_answer():
    conf = parse_ip_conf(section(FAULTDIAG_BEFORE, "/usr/local/Ascend/driver/tools/hccn_tool -i 0 -ip -g"))
    assert conf == IpConf(ip="192.161.200.10", netmask="255.255.255.0")
    assert parse_ip_conf(section(FAULTDIAG_BEFORE, "/usr/local/Ascend/driver/tools/hccn_tool -i 1 -ip -g")).ip == \
        "192.161.201.10"
    with pytest.raises(ValueError, match="ipaddr:<ip>.*empty output"):    # device 2 printed nothing
        parse_ip_conf(section(FAULTDIAG_BEFORE, "/usr/local/Ascend/driver/tools/hccn_tool -i 2 -ip -g"))


def test_ip_not_preset_is_none():
    assert parse_ip_conf(NO_IP_MESSAGE + "\n") is None


@pytest.mark.parametrize("text, message", [
    ("ipaddr:1.2.3.4\n", "netmask"),
    ("ipaddr:1.2.3.4\nnetmask:255.255.255.0\nipaddr:1.2.3.5\nnetmask:255.255.255.0\n", "one device per call"),
    ("ipaddr:1.2.3.400\nnetmask:255.255.255.0\n", "not an IP address"),
    ("dsmi_get_device_ip_address failed, ret:-8005\n", "ipaddr"),
])
def test_ip_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_ip_conf(text)


@settings(max_examples=examples(50))
@given(st.ip_addresses(v=4), st.integers(8, 32), st.sampled_from(["", " "]))
def test_ip_round_trip(ip, prefix, space):
    mask = str(ipaddress.IPv4Network(f"0.0.0.0/{prefix}").netmask)
    assert parse_ip_conf(f"ipaddr:{space}{ip}\nnetmask:{space}{mask}\n") == IpConf(ip=str(ip), netmask=mask)


# --------------------------------------------------------------------------- vnic, link, health, netdetect, gateway


def test_vnic_doc_example_with_space_after_colon():
    vnic = parse_vnic("vnic link status: UP\nvnic ipaddr: 192.168.2.199\nvnic netmask: 255.255.255.0\n")
    assert (vnic.link_up, vnic.ip, vnic.netmask) == (True, "192.168.2.199", "255.255.255.0")


def test_vnic_down_and_errors():
    assert not parse_vnic("vnic link status: DOWN\nvnic ipaddr: 0.0.0.0\nvnic netmask: 0.0.0.0\n").link_up
    with pytest.raises(ValueError, match="vnic netmask"):
        parse_vnic("vnic link status: UP\nvnic ipaddr: 192.168.2.199\n")
    with pytest.raises(ValueError, match="vnic <link status"):
        parse_vnic("dsmi_get_device_ip_address failed, ret:-8\n")


def test_link_itove_and_down():
    assert [parse_link(ln).up for ln in itove("for i in {0..7}; do hccn_tool -i $i -link -g")] == [True, True]
    assert parse_link("link status: DOWN\n").up is False
    with pytest.raises(ValueError, match="UP or DOWN"):
        parse_link("link status: FLAPPING\n")
    with pytest.raises(ValueError, match="link status"):
        parse_link("")


def test_net_health_itove_and_910a_old_spelling():
    assert [parse_net_health(ln).status for ln in itove("for i in {0..7}; do hccn_tool -i $i -net_health -g")] == \
        ["Success", "Success"]
    old = parse_net_health(section(FAULTDIAG_BEFORE, "/usr/local/Ascend/driver/tools/hccn_tool -i 0 -net_health -g"))
    assert (old.status, old.healthy) == ("Socket failed", False)


@pytest.mark.parametrize("status", ["Success", "Socket fail", "Receive timeout", "Unreachable", "Time exceeded",
                                    "Fault", "Init", "Thread error", "Detect ip set", "Unknown"])
def test_net_health_every_documented_value(status):
    health = parse_net_health(f"net health status: {status}\n")
    assert health.status == status and health.healthy == (status == "Success")


def test_netdetect_itove_older_address_form_and_source_form():
    assert [parse_netdetect(ln).address for ln in itove("for i in {0..7}; do hccn_tool -i $i -netdetect -g")] == \
        ["11.12.165.1", "11.12.165.1"]
    assert parse_netdetect("netdetect addr: 29.0.0.254\n").address == "29.0.0.254"


def test_gateway_itove():
    gws = [parse_gateway(ln) for ln in itove("for i in {0..7}; do hccn_tool -i $i -gateway -g")]
    assert [(g.address, g.iface) for g in gws] == [("11.12.165.1", f"eth{i}") for i in range(8)]
    with pytest.raises(ValueError, match="default gateway"):
        parse_gateway("no gateway\n")


# --------------------------------------------------------------------------- ping


def test_ping_itove_eight_devices():
    lines = itove("for i in {0..7}; do hccn_tool -i $i -ping -g address 11.12.165.80")
    results = [parse_ping(o) for o in chunks(lines, 5)]
    assert [(r.device, r.target, r.sent, r.received, r.loss_pct) for r in results] == [
        (i, "11.12.165.80", 3, 3, 0.0) for i in range(8)]


def test_ping_loss_and_errors():
    lost = parse_ping("device 3 PING 29.0.1.3\n3 packets transmitted, 1 received, 66.67% packet loss\n")
    assert (lost.device, lost.sent, lost.received, lost.loss_pct) == (3, 3, 1, 66.67)
    assert parse_ping("3 packets transmitted, 0 received, 100.00% packet loss").target is None
    with pytest.raises(ValueError, match="packets transmitted"):
        parse_ping("device 0 PING 29.0.1.3\nping failed\n")
    with pytest.raises(ValueError, match="one device per call"):
        parse_ping("\n".join(itove("for i in {0..7}; do hccn_tool -i $i -ping")[:10]))


@settings(max_examples=examples(50))
@given(st.integers(0, 15), st.ip_addresses(v=4), st.integers(1, 100), st.data())
def test_ping_round_trip(device, target, sent, data):
    received = data.draw(st.integers(0, sent))
    loss = round(100 * (sent - received) / sent, 2)
    text = f"device {device} PING {target}\n" + "recv seq=0,time=0.1ms\n" * received + \
        f"{sent} packets transmitted, {received} received, {loss:.2f}% packet loss\n"
    r = parse_ping(text)
    assert (r.device, r.target, r.sent, r.received, r.loss_pct) == (device, str(target), sent, received, loss)


# --------------------------------------------------------------------------- tls


def test_tls_itove_status_lines():
    infos = [parse_tls(ln) for ln in itove("for i in {0..7}; do hccn_tool -i $i -tls -g ; done | grep switch")]
    assert [(t.dev_id, t.enabled, t.preconfigured, t.alarm_days, t.certs) for t in infos] == [
        (i, False, True, 60, ()) for i in range(8)]


OLD_TLS = """\
dev_id:0, tls switch[1](0:disable, 1:enable), tls alarm time threshold[60]days
dev_id:0, [pub cert] info:
         issuer[/C=CN/ST=GD/O=HUAWEI/OU=2012/CN=2_1thCA]
         start_time[Wed Feb 19 03:19:21 2020 GMT]
         end_time[Sat Feb 16 03:19:21 2030 GMT]
dev_id:0, [ca1 cert] info:
         issuer[/C=CN/ST=GD/L=SZ/O=HUAWEI/CN=1thCA]
         start_time[Wed Feb 19 03:19:07 2020 GMT]
         end_time[Sat Feb 16 03:19:07 2030 GMT]
"""

NEW_TLS = """\
dev_id:0, tls switch[0](0:disable, 1:enable), tls preconfigured[0](0:non-preset, 1:preset), tls alarm time threshold[60]days
dev_id:0, [pub cert] info:
\t subject[/C=CN/O=xxx/CN=www.xxx.com]
\t issuer[/C=CN/O=xxx/CN=xxx RSA PSS Sub CA]
\t start_time[Sat Jan 31 03:10:27 2026 GMT]
\t end_time[Wed Jun 18 03:10:27 2053 GMT]
\t tls expiration status[0](0:normal, 1:near expiration, 2:has expired)
dev_id:0, [ca1 cert] info:
\t subject[/C=CN/O=xxx/CN=xxx RSA CA]
\t issuer[/C=CN/O=xxx/CN=xxx RSA CA]
\t start_time[Sat Jan 31 03:10:27 2026 GMT]
\t end_time[Thu Feb  3 03:10:27 2056 GMT]
\t tls expiration status[1](0:normal, 1:near expiration, 2:has expired)
dev_id:0, [crl] info:
\t subject[]
\t issuer[/C=CN/O=xxx/CN=xxx RSA PSS Sub CA]
\t start_time[Sat Jan 31 03:10:27 2026 GMT]
\t end_time[Sun Mar  1 03:10:27 2026 GMT]
"""


def test_tls_older_form_without_preconfigured():
    tls = parse_tls(OLD_TLS)
    assert (tls.dev_id, tls.enabled, tls.preconfigured, tls.alarm_days) == (0, True, None, 60)
    assert [c.kind for c in tls.certs] == ["pub", "ca1"]
    pub = tls.certs[0]
    assert (pub.issuer, pub.subject, pub.expiration_status) == ("/C=CN/ST=GD/O=HUAWEI/OU=2012/CN=2_1thCA", None, None)
    assert pub.start == datetime(2020, 2, 19, 3, 19, 21, tzinfo=timezone.utc)
    assert pub.end == datetime(2030, 2, 16, 3, 19, 21, tzinfo=timezone.utc)


def test_tls_newer_form_with_subject_expiration_and_crl():
    tls = parse_tls(NEW_TLS)
    assert (tls.enabled, tls.preconfigured) == (False, False)
    assert [(c.kind, c.expiration_status) for c in tls.certs] == [("pub", 0), ("ca1", 1), ("crl", None)]
    assert tls.certs[0].subject == "/C=CN/O=xxx/CN=www.xxx.com" and tls.certs[2].subject is None
    assert tls.certs[1].end == datetime(2056, 2, 3, 3, 10, 27, tzinfo=timezone.utc)   # `Feb  3`, two spaces


def test_tls_device_prefix_form():
    tls = parse_tls("device 5, tls switch[1](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset),"
                    " tls alarm time threshold[30]days\n")
    assert (tls.dev_id, tls.enabled, tls.preconfigured, tls.alarm_days) == (5, True, True, 30)


@pytest.mark.parametrize("text, message", [
    ("", "tls switch"),
    (OLD_TLS + OLD_TLS.replace("dev_id:0", "dev_id:1"), "one device per call"),
    (OLD_TLS.replace("end_time[Sat Feb 16 03:19:21 2030 GMT]", "end_time[16/02/2030]"), "not like"),
    (OLD_TLS.replace("         start_time[Wed Feb 19 03:19:07 2020 GMT]\n", ""), "start_time"),
    (OLD_TLS.replace("tls switch[1]", "tls switch[2]"), "neither 0 nor 1"),
    (OLD_TLS.replace("dev_id:0, [ca1", "dev_id:3, [ca1"), "outside its device"),
    (OLD_TLS + "some warning\n", "unexpected line"),
])
def test_tls_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_tls(text)


# --------------------------------------------------------------------------- /etc/hccn.conf


def test_hccn_conf_910b3_unsorted_with_xsfp_keys():
    conf = parse_host_hccn_conf((HCCN / "hccn.conf_910B3_8npu_xsfp_vllm-ascend-issue-2498.conf").read_text())
    assert conf.addresses == {i: f"192.170.100.{100 + i}" for i in range(8)}
    assert conf.netmasks == {i: "255.255.255.0" for i in range(8)}
    assert conf.entries[3] == {"xsfp_reset_max_times": "0", "xsfp_reset_wait_times": "7",
                               "address": "192.170.100.103", "netmask": "255.255.255.0"}


def test_hccn_conf_keys_with_underscores_and_digits_and_errors():
    conf = parse_host_hccn_conf("# comment\n\nmulti_qp_udp_ports_12=4791\n"
                                "dcqcn_rp_time_reset_0 = 300\naddress_15=29.0.0.16\n")
    assert conf.entries == {12: {"multi_qp_udp_ports": "4791"}, 0: {"dcqcn_rp_time_reset": "300"},
                            15: {"address": "29.0.0.16"}}
    assert parse_host_hccn_conf("address_0=1.1.1.1\naddress_0=1.1.1.1\n").addresses == {0: "1.1.1.1"}
    with pytest.raises(ValueError, match="address_0 is set twice"):
        parse_host_hccn_conf("address_0=1.1.1.1\naddress_0=1.1.1.2\n")
    with pytest.raises(ValueError, match="line 2"):
        parse_host_hccn_conf("address_0=1.1.1.1\nmtu=9000\n")
