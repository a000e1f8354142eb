"""Mutators for the host-output fuzzer (issue 21, deliverable 9): real outputs of Ascend tools and of the Linux
tools preflight runs, turned into what a lying or broken host could print.

Baselines are the real samples (tests/samples/ascend, tests/fakecluster/real_samples) where the project has them,
else outputs in the exact format the parsers document. Mutations act on the text: payloads spliced in anywhere
(shell metacharacters, templates, escape sequences, control bytes, unicode, huge numbers), lines deleted,
duplicated, swapped or truncated, digit runs replaced by boundary numbers, the whole text repeated.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
ASCEND = ROOT / "tests" / "samples" / "ascend"
REAL = ROOT / "tests" / "fakecluster" / "real_samples"


def _read(*paths: Path) -> list[str]:
    return [p.read_text(errors="replace") for p in paths if p.is_file()]


def _glob(base: Path, pattern: str) -> list[Path]:
    return sorted(base.glob(pattern))


NPU_INFO = _read(*_glob(ASCEND / "npu-smi", "npu-smi-info_*.txt"), *_glob(REAL / "npu-smi", "npu-smi-info_*.txt"))
NPU_LIST = _read(*_glob(ASCEND / "npu-smi", "npu-smi-info-l_*.txt"))
CHIP_MAP = _read(*_glob(ASCEND / "npu-smi", "npu-smi-info-m_*.txt"))
VERSIONS = _read(*_glob(ASCEND / "versions", "*version.info*.txt"), *_glob(ASCEND / "versions", "*install.info*"),
                 *_glob(REAL / "versions", "*.txt"))
# what the image-version probe prints (tests/probes/fixtures/image-versions: the real CANN 8.3.RC2 install file inside)
IMAGE_VERSIONS = _read(*_glob(ROOT / "tests" / "probes" / "fixtures" / "image-versions", "*/output"))
HCCN_CONF = _read(*_glob(ASCEND / "hccn", "hccn.conf_*.conf"), ROOT / "tests" / "samples" / "hccn.conf_910B3_8npu_xsfp.conf")
HCCN_TRANSCRIPTS = _read(*_glob(ASCEND / "hccn", "hccn_tool_outputs_*.txt"))

BOARD = ["NPU ID                         : 0\nProduct Name                   : IT21PDDA01\nModel                          : NA\n"
         "Manufacturer                   : Huawei\nSerial Number                  : 102447301NC0\n"
         "Software Version               : 23.0.7\nFirmware Version               : 7.1.0.11.220\n"
         "Compatibility                  : OK\nBoard ID                       : 0x02\nPCB ID                         : A\n"
         "BOM ID                         : 1\nPCIe Bus Info                  : 0000:C1:00.0\n"
         "Slot ID                        : 0\nClass ID                       : NA\nPCI Vendor ID                  : 0x19E5\n"
         "PCI Device ID                  : 0xD802\nChip Count                     : 1\n"]
HEALTH = ["Health Status                  : OK\nError Code                     : NA\nError Information              : NA\n"]
SPOD = ["SDID                           : 37748736\nSuper Pod Size                 : 48\nSuper Pod ID                   : 1\n"
        "Server Index                   : 0\n"]
HCCN_ONE = {
    "ip": ["ipaddr:29.0.0.1\nnetmask:255.255.255.0\n", "Get ipconf failed, because no ip was preset there!\n"],
    "vnic": ["vnic link status: UP\nvnic ipaddr: 192.168.1.199\nvnic netmask: 255.255.0.0\n"],
    "link": ["link status: UP\n", "link status: DOWN\n"],
    "health": ["net health status: Success\n", "net health status: Socket fail\n"],
    "netdetect": ["netdetect address: 29.0.0.254\n"],
    "gateway": ["default gateway:29.0.0.254, Iface:eth0\n"],
    "ping": ["device 0 PING 29.0.1.1\nrecv seq=0,time=0.161000ms\nrecv seq=1,time=0.127000ms\n"
             "2 packets transmitted, 2 received, 0.00% packet loss\n"],
    "tls": ["dev_id:0, tls switch[0](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset), "
            "tls alarm time threshold[60]days\n"
            "dev_id:0, [pub] info:\nissuer[/C=CN/O=Huawei/CN=Huawei Equipment CA]\n"
            "start time[Wed Feb 19 03:19:21 2020 GMT]\nend time[Sat Feb 16 03:19:21 2030 GMT]\n"],
}
HOST = {
    "os": ['NAME="openEuler"\nVERSION="22.03 (LTS-SP1)"\nID="openEuler"\nVERSION_ID="22.03"\n'
           'PRETTY_NAME="openEuler 22.03 (LTS-SP1)"\nANSI_COLOR="0;31"\n',
           'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\n'],
    "arch": ["aarch64\n", "x86_64\n"],
    "df": ["Filesystem     1-blocks        Used   Available Capacity Mounted on\n"
           "tmpfs        541165625344 12288 541165613056       1% /dev/shm\n"],
    "ss": ["LISTEN 0      4096         0.0.0.0:22         0.0.0.0:*\nLISTEN 0      511          [::]:1025        [::]:*\n"
           "LISTEN 0      4096   127.0.0.53%lo:53         0.0.0.0:*\n"],
    "addr": ["1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n"
             "2: enp189s0f0    inet 10.200.2.2/24 brd 10.200.2.255 scope global enp189s0f0\\ valid_lft forever\n"
             "3: docker0@if4    inet6 fe80::42:acff:fe11:2/64 scope link \\       valid_lft forever\n"],
    "weights": ["exists=1\nreadable=1\nconfig_json=1\nsafetensors=163\nbytes=688123456\n", "exists=0\n"],
    "epoch": ["1732233600.123456789\n"],
    "docker": ["24.0.7\n", "26.1.4\n"],
}

PAYLOADS = [
    "$(id)", "`id`", ";id;", "'\";id;'", "{{ lookup('pipe', 'id') }}", "{% raw %}", "${IFS}", "|", "&&",
    "e$(id)'\";{{x}}", "\x1b]0;title\x07", "\x1b[2J", "\x1b[31m", "\x9b31m", "\x85", "\x00", "\r", "\x07", "\x7f",
    "\u202e", "\u2028", "\ud800", "\ufeff", "\U0001F600", "٣", "Ｆ", "[red]x[/red]", "[link=http://x]y[/link]",
    "[]", "{}", "null", "-", "NA", "nan", "inf", "-1", "1e999", "99999999999999999999999", "9" * 5000, "0x10",
    ":", "=", "|", ",", "/", "\\", "\t", "\n", "\n\n", " " * 200, "A" * 5000, "..", "../../etc/passwd",
]
BOUNDARY = ["0", "-1", "65535", "65536", "2147483648", "18446744073709551616", "1" + "0" * 40, "00", "1.5", "-0"]


@st.composite
def mutated(draw, baselines: list[str]) -> str:
    """One baseline with 0-6 mutations applied."""
    text = draw(st.sampled_from(baselines))
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.integers(0, 8))
        lines = text.split("\n")
        if op == 0:                                   # splice a payload in
            pos = draw(st.integers(0, len(text)))
            text = text[:pos] + draw(st.sampled_from(PAYLOADS)) + text[pos:]
        elif op == 1 and lines:                       # delete a line
            del lines[draw(st.integers(0, len(lines) - 1))]
            text = "\n".join(lines)
        elif op == 2 and lines:                       # duplicate a line
            i = draw(st.integers(0, len(lines) - 1))
            text = "\n".join(lines[:i + 1] + lines[i:])
        elif op == 3 and len(lines) > 1:              # swap two lines
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        elif op == 4:                                 # truncate
            text = text[:draw(st.integers(0, len(text)))]
        elif op == 5:                                 # a digit run becomes a boundary number
            runs = list(re.finditer(r"\d+", text))
            if runs:
                m = runs[draw(st.integers(0, len(runs) - 1))]
                text = text[:m.start()] + draw(st.sampled_from(BOUNDARY)) + text[m.end():]
        elif op == 6:                                 # a word becomes arbitrary text
            words = list(re.finditer(r"[A-Za-z0-9_.:/-]+", text))
            if words:
                m = words[draw(st.integers(0, len(words) - 1))]
                text = text[:m.start()] + draw(st.text(max_size=12)) + text[m.end():]
        elif op == 7:                                 # repeated (a host that prints a lot)
            text = text * draw(st.integers(2, 50))
        else:                                         # random bytes, decoded as the executor does
            text += draw(st.binary(max_size=64)).decode("utf-8", errors="replace")
    return text
