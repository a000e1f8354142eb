"""--facts: device IPs, SDIDs and super pod ids the inventory leaves out come from preflight facts."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from deployctl.core.errors import InventoryError
from deployctl.core.input.raw import parse_yaml
from deployctl.app.inventory import validate_inventory
from deployctl.core.models.facts import IpConf
from deployctl.core.models.host_facts import DeviceFacts, FactsFile, HostFacts

INV = """
cluster: {name: c1, hardware: HW, super_pod: SP}
engine: {image: mindie:1}
model: {name: deepseek-r1, quant: w4a8, weights_path: /w, served_name: m, max_seq_len: 8192,
        max_input_len: 4096, max_batch_size: 8}
layout: {preset: tp-pp}
nodes:
  - {name: n1, address: 10.0.0.1}
  - name: n2
    address: 10.0.0.2
    DEVICES
"""


def facts(hw: str, unreachable: str | None = None) -> FactsFile:
    per = 8 if hw == "a2" else 16
    hosts = {}
    for k, name in enumerate(("n1", "n2")):
        if name == unreachable:
            hosts[name] = HostFacts(name=name, address=f"10.0.0.{k + 1}", error_kind="unreachable", error="x")
            continue
        devs = {i: DeviceFacts(phy_id=i, ip=IpConf(ip=f"29.{k}.{i}.1", netmask="255.255.255.0"),
                               sdid=(k << 16) + i if hw == "a3" else None, super_pod_id=0 if hw == "a3" else None)
                for i in range(per)}
        hosts[name] = HostFacts(name=name, address=f"10.0.0.{k + 1}", devices=devs)
    return FactsFile(deployctl_version="t", cluster="c1", collected_at="now", hosts=hosts)


def inv(hw="a2", sp="false", devices=""):
    text = INV.replace("HW", hw).replace("SP", sp).replace("DEVICES", devices or "")
    return parse_yaml(text, "inv.yaml", Path("."))


def test_missing_ips_come_from_facts():
    result = validate_inventory(inv(), facts=facts("a2"))
    assert [d.ip for d in result.node("n1").devices] == [f"29.0.{i}.1" for i in range(8)]


def test_inventory_values_win_over_facts():
    listed = "devices: [" + ", ".join(f"{{id: {i}, ip: 30.0.{i}.1}}" for i in range(8)) + "]"
    result = validate_inventory(inv(devices=listed), facts=facts("a2"))
    assert result.node("n2").devices[0].ip == "30.0.0.1"
    assert result.node("n1").devices[0].ip == "29.0.0.1"


def test_a3_super_pod_gets_sdids_and_pod_ids():
    result = validate_inventory(inv("a3", "true"), facts=facts("a3"))
    n2 = result.node("n2")
    assert n2.super_pod_id == "0" and n2.devices[3].sdid == (1 << 16) + 3


def test_an_unreachable_host_leaves_its_gaps_reported():
    with pytest.raises(InventoryError) as err:
        validate_inventory(inv(), facts=facts("a2", unreachable="n2"))
    assert "node 'n2' has no device IPs" in err.value.render()


def test_cli_render_with_facts_file(tmp_path):
    inv_path = tmp_path / "inv.yaml"
    inv_path.write_text(INV.replace("HW", "a2").replace("SP", "false").replace("DEVICES", ""))
    facts_path = tmp_path / "facts.json"
    facts_path.write_text(facts("a2").model_dump_json())
    res = run_cli("validate", "-i", str(inv_path), cwd=tmp_path)      # planned without them, and said
    assert res.returncode == 0 and "left to preflight: device IPs of every device of 2 node(s)" in res.stderr, \
        res.stderr
    assert run_cli("render", "-i", str(inv_path), "-o", str(tmp_path / "o1"), cwd=tmp_path).returncode == 2
    res = run_cli("render", "-i", str(inv_path), "--facts", str(facts_path), "-o", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    assert '"device_ip": "29.1.7.1"' in (tmp_path / "out" / "n2" / "ranktable.json").read_text()


def test_cli_refuses_facts_of_another_cluster(tmp_path):
    inv_path = tmp_path / "inv.yaml"
    inv_path.write_text(INV.replace("HW", "a2").replace("SP", "false").replace("DEVICES", ""))
    other = facts("a2").model_copy(update={"cluster": "other"})
    (tmp_path / "f.json").write_text(other.model_dump_json())
    res = run_cli("plan", "-i", str(inv_path), "--facts", str(tmp_path / "f.json"))
    assert res.returncode == 2 and "cluster 'other'" in res.stderr


def test_cli_bad_facts_file_exits_2(tmp_path):
    (tmp_path / "f.json").write_text("{}")
    res = run_cli("plan", "-i", str(ROOT / "inventories/sample.yaml"), "--facts", str(tmp_path / "f.json"))
    assert res.returncode == 2 and "not a deployctl facts file" in res.stderr and "Traceback" not in res.stderr
