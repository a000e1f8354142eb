"""Probe output is untrusted (issue 21, observation 5 / deliverable 1): a value a host prints reaches a fact only
when it passes the pattern of the equivalent inventory key; otherwise it is a probe error (a per-host finding),
never a fact, a crash or a rendered line.

Seen: an interface name from `ip -o addr` skipped the `nodes[].interface` pattern and was rendered as
``GLOO_SOCKET_IFNAME=e$(id)'";{{x}}`` in the env files.
"""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, run_cli
from deployctl.io.executor import HostTarget
from deployctl.core.models.host_facts import HostFacts
from deployctl.io.batch import ProbeOutput
from deployctl.features.preflight.probes import MAX_PROBE_TEXT, assemble, host_commands
from deployctl.features.preflight.rules import check_host_basics

HOSTILE_IF = "e$(id)'\";{{x}}"
EXAMPLE = ROOT / "inventories" / "examples" / "vllm-a3-1p1d-qwen3.yaml"


def _outputs(**texts: str) -> dict[str, ProbeOutput]:
    """Every phase-1 probe of an A2 host answering nothing useful, except ``texts`` (name with _ for .)."""
    out = {name: ProbeOutput(name, 1, "") for name, _ in host_commands("a2", "img", "/w")}
    for key, text in texts.items():
        name = key.replace("_", ".")
        out[name] = ProbeOutput(name, 0, text)
    return out


def _assemble(**texts: str) -> HostFacts:
    return assemble(HostTarget(name="node1", address="10.0.0.1"), "a2", _outputs(**texts), None, 0.1)


def test_hostile_interface_name_is_a_probe_error_not_a_fact():
    f = _assemble(host_addr=f"2: {HOSTILE_IF}    inet 10.0.0.1/24 brd 10.0.0.255 scope global x\\ valid_lft forever")
    assert f.addresses == {}
    assert "host.addr" in f.probe_errors and "nodes[].interface" in f.probe_errors["host.addr"]
    from deployctl.app.plan import for_discovery

    inv = for_discovery(ROOT / "inventories" / "sample.yaml").inventory
    findings = list(check_host_basics(inv, {"node1": f}))
    assert any(x.host == "node1" and "host.addr" in x.message for x in findings)


@pytest.mark.parametrize("line", [
    "2: eth0 inet 10.0.0.1%eth0/24 scope global eth0",            # a zone id where an address belongs
    "2: eth0 inet $(id)/24 scope global eth0",
    "2: eth0 inet 10.0.0.999/24 scope global eth0",
    "2: averyveryverylongname inet 10.0.0.1/24 scope global",     # longer than IFNAMSIZ
    "2: eth\x1b[2J inet 10.0.0.1/24 scope global",
])
def test_addresses_are_ips_on_interfaces_the_inventory_would_accept(line):
    f = _assemble(host_addr=line)
    assert f.addresses == {} and "host.addr" in f.probe_errors


def test_good_addresses_still_become_facts():
    f = _assemble(host_addr="1: lo inet 127.0.0.1/8 scope host lo\n"
                            "2: enp189s0f0 inet 10.0.0.1/24 brd 10.0.0.255 scope global enp189s0f0\n"
                            "3: veth1@if5 inet6 fe80::1/64 scope link")
    assert f.addresses == {"127.0.0.1": "lo", "10.0.0.1": "enp189s0f0", "fe80::1": "veth1"}
    assert "host.addr" not in f.probe_errors


@pytest.mark.parametrize("probe, text", [
    ("npu.info", "| npu-smi 23.0.7 Version: 23.0.7$(id) |"),
    ("ver.driver", "Version=23.0.7;touch /tmp/x\npackage_version=23.0.7"),
    ("ver.firmware", "Version=7.1.0\x1b]0;title\x07"),
    ("host.docker", "24.0.7 $(reboot)"),
    ("host.os", 'ID="openEuler;id"\nVERSION_ID=22.03'),
    ("host.arch", "aarch64\x1b[2J"),
    ("hccn.ip.0", "ipaddr:10.0.0.1;id\nnetmask:255.255.255.0"),
    ("hccn.conf", "address_0=10.0.0.1\x1b[2J"),
    ("hccn.health.0", "net health status: Success\x1b]0;x\x07"),
])
def test_host_values_outside_their_pattern_are_probe_errors(probe, text):
    f = _assemble(**{probe.replace(".", "_"): text})
    assert probe in f.probe_errors, f"{probe} accepted {text!r}"
    json.loads(f.model_dump_json())         # the facts stay writable


def test_oversized_probe_output_is_a_probe_error():
    f = _assemble(host_addr="2: eth0 inet 10.0.0.1/24 scope global eth0\n" * (MAX_PROBE_TEXT // 40))
    assert "host.addr" in f.probe_errors and "more than" in f.probe_errors["host.addr"]


def test_probe_errors_quote_no_control_characters():
    f = _assemble(host_arch="\x1b]0;pwned\x07\x1b[2J\x9bx")
    assert not any(c in f.probe_errors["host.arch"] for c in "\x1b\x07\x9b")


def test_a_facts_file_with_a_hostile_interface_is_refused_and_never_rendered(tmp_path):
    """A facts file carries what hosts said: loading it applies the same patterns (tampered, or from a
    deployctl that did not check), so the hostile interface never reaches GLOO_SOCKET_IFNAME."""
    text = "\n".join(ln for ln in EXAMPLE.read_text().splitlines() if "interface:" not in ln)
    inv = tmp_path / "inv.yaml"
    inv.write_text(text)
    hosts = {name: {"name": name, "address": addr, "addresses": {addr: HOSTILE_IF}}
             for name, addr in (("p1", "10.202.0.2"), ("d1", "10.202.0.3"))}
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"deployctl_version": "t", "cluster": "qwen3-pd", "collected_at": "now",
                                 "hosts": hosts}))
    out = tmp_path / "out"
    res = run_cli("render", "-i", str(inv), "--facts", str(facts), "-o", str(out))
    rendered = [p.read_text(errors="replace") for p in out.rglob("*") if p.is_file()] if out.exists() else []
    assert not any("$(id)" in r for r in rendered), "the host's interface name was rendered"
    assert res.returncode == 2 and "not a deployctl facts file" in res.stderr, res.stdout + res.stderr
    assert "Traceback" not in res.stderr


def test_a_docker_probe_without_an_answer_is_a_probe_error_not_a_missing_runtime():
    """A busy host's batch cut short, or `docker version` timed out: no evidence that no runtime answers. docker's
    own failure (exit 1, no daemon) still is."""
    from deployctl.app.plan import for_discovery

    inv = for_discovery(ROOT / "inventories" / "sample.yaml").inventory
    target = HostTarget(name="node1", address="10.0.0.1")
    cut = "no output (the batch was cut short)"
    for docker, error in ((None, cut), (ProbeOutput("host.docker", 124, ""), "timed out"),
                          (ProbeOutput("host.docker", -1, ""), cut)):
        out = _outputs()
        del out["host.docker"]
        if docker is not None:
            out["host.docker"] = docker
        f = assemble(target, "a2", out, None, 0.1)
        assert f.runtime_version is None and f.probe_errors["host.docker"] == error, docker
        assert [x for x in check_host_basics(inv, {"node1": f}) if x.rule == "image"] == [], docker
    failed = _assemble()                       # every probe exit 1: docker answered, with an error
    assert "host.docker" not in failed.probe_errors
    [image] = [x for x in check_host_basics(inv, {"node1": failed}) if x.rule == "image"]
    assert (image.severity, image.message) == ("FAIL", "no container runtime answers (docker version)")
