"""Host-basics parsers: os-release, uname -m, df, ss, date, and the weights-directory snippet."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from deployctl.core.models.facts import DiskFree, WeightsDir
from deployctl.probes.host import (
    WEIGHTS_SUMMARY_SCRIPT,
    parse_arch,
    parse_df,
    parse_epoch,
    parse_listening_ports,
    parse_os_info,
    parse_os_release,
    parse_weights_dir,
)

OPENEULER = """\
NAME="openEuler"
VERSION="22.03 (LTS-SP3)"
ID="openEuler"
VERSION_ID="22.03"
PRETTY_NAME="openEuler 22.03 (LTS-SP3)"
ANSI_COLOR="0;31"

"""

UBUNTU = """\
PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
"""

KYLIN = """\
NAME='Kylin Linux Advanced Server'
VERSION="V10 (Lance)"
ID="kylin"
VERSION_ID="V10"
PRETTY_NAME="Kylin Linux Advanced Server V10 (Lance)"
ID_LIKE="rhel fedora centos"
"""


# --------------------------------------------------------------------------- OS


def test_os_release_openeuler():
    os_ = parse_os_release(OPENEULER)
    assert (os_.id, os_.version_id, os_.pretty_name, os_.id_like, os_.arch) == (
        "openEuler", "22.03", "openEuler 22.03 (LTS-SP3)", (), None)


def test_os_release_ubuntu_unquoted_and_id_like():
    os_ = parse_os_release(UBUNTU)
    assert (os_.id, os_.version_id, os_.pretty_name, os_.id_like) == (
        "ubuntu", "22.04", "Ubuntu 22.04.4 LTS", ("debian",))


def test_os_release_kylin_single_quotes_and_several_id_like():
    os_ = parse_os_release(KYLIN)
    assert (os_.id, os_.version_id, os_.id_like) == ("kylin", "V10", ("rhel", "fedora", "centos"))


def test_os_info_with_arch():
    os_ = parse_os_info(OPENEULER, "aarch64\n")
    assert (os_.id, os_.arch) == ("openEuler", "aarch64")
    assert parse_arch("x86_64") == "x86_64"


@pytest.mark.parametrize("text, message", [("", "ID="), ("NAME=Foo\n", "ID="), ("garbage line\n", "KEY=value"),
                                           ('ID="unterminated\n', "quotation")])
def test_os_release_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_os_release(text)


@pytest.mark.parametrize("text", ["", "aarch64 x86_64", "uname: command not found"])
def test_arch_errors(text):
    with pytest.raises(ValueError, match="uname -m"):
        parse_arch(text)


# --------------------------------------------------------------------------- df


def test_df_gnu_output():
    text = ("Filesystem         1-blocks        Used   Available Capacity Mounted on\n"
            "/dev/vda       270553174016 23263244288 85681049600      22% /\n")
    assert parse_df(text) == DiskFree(filesystem="/dev/vda", mount_point="/", total_bytes=270553174016,
                                      used_bytes=23263244288, avail_bytes=85681049600)


def test_df_mount_point_with_space_and_long_device_name():
    text = ("Filesystem                              1-blocks         Used    Available Capacity Mounted on\n"
            "/dev/mapper/openeuler-data 3936818626560 1209462800384 2527318142976      33% /mnt/model weights\n")
    df = parse_df(text)
    assert (df.filesystem, df.mount_point, df.avail_bytes) == ("/dev/mapper/openeuler-data", "/mnt/model weights",
                                                              2527318142976)


@pytest.mark.parametrize("text, message", [
    ("", "header"),
    ("Filesystem     1K-blocks  Used Available Use% Mounted on\n/dev/vda 100 50 50 50% /\n", "header"),
    ("Filesystem 1-blocks Used Available Capacity Mounted on\n", "one filesystem row"),
    ("Filesystem 1-blocks Used Available Capacity Mounted on\n/dev/a 1 1 0 100% /\n/dev/b 1 1 0 100% /x\n",
     "one filesystem row"),
    ("Filesystem 1-blocks Used Available Capacity Mounted on\n/dev/a 1G 1G 0 100% /\n", "<total>"),
])
def test_df_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_df(text)


@pytest.mark.skipif(shutil.which("df") is None, reason="needs df")
def test_df_on_this_machine(tmp_path):
    out = subprocess.run(["df", "-P", "-B1", str(tmp_path)], capture_output=True, text=True, check=True).stdout
    df = parse_df(out)
    assert df.total_bytes > 0 and 0 <= df.avail_bytes <= df.total_bytes


@settings(max_examples=examples(50))
@given(st.integers(1, 10**15), st.data(), st.sampled_from(["/", "/data", "/mnt/a b"]))
def test_df_round_trip(total, data, mount):
    used = data.draw(st.integers(0, total))
    avail = data.draw(st.integers(0, total - used))
    text = (f"Filesystem 1-blocks Used Available Capacity Mounted on\n"
            f"/dev/sdb1 {total} {used} {avail} {100 * used // total}% {mount}\n")
    assert parse_df(text) == DiskFree(filesystem="/dev/sdb1", mount_point=mount, total_bytes=total,
                                      used_bytes=used, avail_bytes=avail)


# --------------------------------------------------------------------------- ss


SS = """\
LISTEN 0      4096         0.0.0.0:1025       0.0.0.0:*
LISTEN 0      128          0.0.0.0:22         0.0.0.0:*
LISTEN 0      4096   127.0.0.53%lo:53         0.0.0.0:*
LISTEN 0      4096            [::]:22            [::]:*
LISTEN 0      511                *:80               *:*
LISTEN 0      128    [::ffff:127.0.0.1]:8080        *:*
LISTEN 0      128             :::1120            :::*     users:(("mindieservice_d",pid=42,fd=7))
"""


def test_ss_ipv4_ipv6_wildcard_and_interface_forms():
    assert parse_listening_ports(SS).ports == frozenset({1025, 22, 53, 80, 8080, 1120})


def test_ss_empty_means_nothing_listens_and_header_is_skipped():
    assert parse_listening_ports("").ports == frozenset()
    header = "State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process\n"
    assert parse_listening_ports(header + SS).ports == parse_listening_ports(SS).ports


@pytest.mark.parametrize("text", ["ESTAB 0 0 10.0.0.1:22 10.0.0.2:5000\n", "LISTEN 0 128 0.0.0.0:ssh 0.0.0.0:*\n",
                                  "LISTEN 0 128 0.0.0.0:70000 0.0.0.0:*\n", "ss: command not found\n"])
def test_ss_errors(text):
    with pytest.raises(ValueError, match="ss -H -ltn"):
        parse_listening_ports(text)


@settings(max_examples=examples(50))
@given(st.lists(st.tuples(st.sampled_from(["0.0.0.0", "[::]", "*", "127.0.0.1", "[fe80::1%eth0]"]),
                          st.integers(0, 65535)), max_size=20))
def test_ss_round_trip(listeners):
    text = "".join(f"LISTEN 0      4096   {addr}:{port}   0.0.0.0:*\n" for addr, port in listeners)
    assert parse_listening_ports(text).ports == frozenset(p for _, p in listeners)


# --------------------------------------------------------------------------- date


def test_epoch():
    assert parse_epoch("1732233600.123456789\n") == pytest.approx(1732233600.123456789)
    assert parse_epoch("1732233600") == 1732233600.0
    for bad in ("", "1732233600.N", "Fri Nov 22 00:00:00 UTC 2024"):
        with pytest.raises(ValueError, match="date"):
            parse_epoch(bad)


# --------------------------------------------------------------------------- weights directory


def test_weights_summary_parsed():
    text = "exists=1\nreadable=1\nconfig_json=1\nsafetensors=163\nbytes=688123456789\n"
    assert parse_weights_dir(text) == WeightsDir(exists=True, readable=True, config_json=True,
                                                 safetensors_files=163, total_bytes=688123456789)
    assert parse_weights_dir("exists=0\n") == WeightsDir(exists=False)
    assert parse_weights_dir("exists=1\nreadable=0\nconfig_json=0\nsafetensors=0\nbytes=\n").total_bytes is None


@pytest.mark.parametrize("text, message", [
    ("", "exists=0|1"), ("exists=1\n", "readable="), ("exists=yes\n", "0 or 1"),
    ("exists=0\nbytes=1\n", "more keys"), ("exists=1\nexists=1\n", "once each"),
    ("exists=1\nreadable=1\nconfig_json=1\nsafetensors=many\nbytes=1\n", "non-negative integer"),
    ("du: cannot access\n", "once each"),
])
def test_weights_summary_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_weights_dir(text)


def run_snippet(path) -> str:
    return subprocess.run(["sh", "-c", WEIGHTS_SUMMARY_SCRIPT, "deployctl-weights", str(path)],
                          capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(shutil.which("sh") is None or shutil.which("du") is None, reason="needs sh and du")
def test_weights_snippet_output_is_what_the_parser_reads(tmp_path):
    weights = tmp_path / "DeepSeek R1"                      # a space: the path is $1, never spliced
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    for i in range(3):
        (weights / f"model-{i:05d}.safetensors").write_bytes(b"\0" * 1000)
    blob = tmp_path / "blob"
    blob.write_bytes(b"\0" * 5000)
    (weights / "model-00003.safetensors").symlink_to(blob)  # HF-cache style link: counted and sized
    summary = parse_weights_dir(run_snippet(weights))
    assert (summary.exists, summary.readable, summary.config_json, summary.safetensors_files) == (True, True, True, 4)
    assert summary.total_bytes >= 8000
    assert parse_weights_dir(run_snippet(tmp_path / "missing")) == WeightsDir(exists=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert parse_weights_dir(run_snippet(empty)).config_json is False
