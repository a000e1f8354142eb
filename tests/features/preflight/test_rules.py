"""Unit tests of every preflight rule (deployctl/features/preflight/rules.py) on synthetic HostFacts.

No SSH here: each test builds a healthy cluster of facts, breaks one thing and checks the rule id,
severity, host and device of what `check_facts` reports (the end-to-end versions over real SSH are in
test_preflight_cluster.py).
"""

from __future__ import annotations

import pytest

from deployctl.core.models.facts import (DiskFree, HccnConf, IpConf, ListeningPorts, NpuChip, NpuProcess, NpuSmiInfo,
                                    OsInfo, TlsInfo, VersionInfo, WeightsDir)
from deployctl.core.models.host_facts import DeviceFacts, Finding, HostFacts, PingCheck
from deployctl.app.inventory import with_engine
from deployctl.core.models.inventory import Inventory
from deployctl.features.preflight.rules import check_facts, not_checked

GIB = 2**30
A2_IMAGE = "swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie:2.2.RC1-800I-A2-py311-openeuler24.03-lts"
DRV_FW_OK = (("23.0.0", "23.0.0."), ("24.0", "24.0."), ("24.1", "24.1."), ("25.0", "25.0."))


# --------------------------------------------------------------------------- synthetic cluster

def dev_ip(k: int, phy: int) -> str:
    return f"172.16.{k}.{100 + phy}"


def sdid(k: int, phy: int) -> int:
    return 0x06C00000 | (phy // 2) << 18 | (phy % 2) << 16 | ((k - 1) & 0xFF) << 8 | phy


def driver(version="25.0.rc1.1", fw_range=(("7.0.0", "7.7.99"),)) -> VersionInfo:
    return VersionInfo(version=version, package_version=version, compatible_version_fw=fw_range)


def firmware(version="7.7.0.1.231", drv=DRV_FW_OK, package="25.0.rc1.1") -> VersionInfo:
    return VersionInfo(version=version, package_version=package, compatible_version_drv=drv)


def chip(phy: int, hw: str = "a2", health: str = "OK", hbm: int = 65536) -> NpuChip:
    npu, c = divmod(phy, 2) if hw == "a3" else (phy, 0)
    return NpuChip(npu=npu, chip=c, phy_id=phy, name="910B3" if hw == "a2" else "Ascend910", health=health,
                   power_w=95.0, temp_c=50, aicore_pct=0, hugepages_used=0, hugepages_total=0,
                   memory_used_mb=0, memory_total_mb=0, hbm_used_mb=3338, hbm_total_mb=hbm,
                   bus_id=f"0000:C{phy:x}:00.0")


def tls(phy: int, on: bool = False) -> TlsInfo:
    return TlsInfo(dev_id=phy, enabled=on, preconfigured=True, alarm_days=60)


def healthy(name: str, k: int, hw: str = "a2") -> HostFacts:
    """Host `name` (the k-th node): every fact present and as a ready node reports it."""
    n = 8 if hw == "a2" else 16
    devices = {p: DeviceFacts(phy_id=p, ip=IpConf(ip=dev_ip(k, p), netmask="255.255.0.0"), link_up=True,
                              net_health="Success", tls=tls(p),
                              sdid=sdid(k, p) if hw == "a3" else None, super_pod_id=0 if hw == "a3" else None)
               for p in range(n)}
    return HostFacts(
        name=name, address=f"10.200.0.{10 + k}",
        os=OsInfo(id="openEuler", version_id="24.03", arch="aarch64"),
        npu=NpuSmiInfo(tool_version="25.0.rc1.1", driver_version="25.0.rc1.1", layout=hw,
                       chips=tuple(chip(p, hw) for p in range(n))),
        driver=driver(), firmware=firmware(),
        hccn_conf=HccnConf(entries={p: {"address": dev_ip(k, p), "netmask": "255.255.0.0"} for p in range(n)}),
        devices=devices,
        shm=DiskFree(filesystem="tmpfs", mount_point="/dev/shm", total_bytes=500 * GIB, used_bytes=0,
                     avail_bytes=500 * GIB),
        weights=WeightsDir(exists=True, readable=True, config_json=True, safetensors_files=163,
                           total_bytes=700 * GIB),
        weights_disk=DiskFree(filesystem="/dev/nvme0n1", mount_point="/data", total_bytes=3000 * GIB,
                              used_bytes=700 * GIB, avail_bytes=2300 * GIB),
        runtime_version="24.0.7", image_present=True, ports=ListeningPorts(ports=frozenset({22})),
        clock_offset_s=0.02, seconds=1.0)


def upd(h: HostFacts, **changes) -> HostFacts:
    return h.model_copy(update=changes)


def upd_dev(h: HostFacts, phy: int, **changes) -> HostFacts:
    return upd(h, devices={**h.devices, phy: h.devices[phy].model_copy(update=changes)})


def cluster(n: int = 2, hw: str = "a2") -> dict[str, HostFacts]:
    return {f"node{k}": healthy(f"node{k}", k, hw) for k in range(1, n + 1)}


def inventory(n: int = 2, hw: str = "a2", *, super_pod: bool | None = None, hbm_gb: int = 64,
              pods: dict[str, str] | None = None, sdids: dict[tuple[str, int], int] | None = None,
              ips: dict[tuple[str, int], str | None] | None = None) -> Inventory:
    per = 8 if hw == "a2" else 16
    sp = (hw == "a3") if super_pod is None else super_pod
    nodes = []
    for k in range(1, n + 1):
        name = f"node{k}"
        devs = []
        for p in range(per):
            d: dict = {"id": p}
            ip = (ips or {}).get((name, p), dev_ip(k, p))
            if ip is not None:
                d["ip"] = ip
            if sp:
                d["sdid"] = (sdids or {}).get((name, p), sdid(k, p))
            devs.append(d)
        node = {"name": name, "address": f"10.200.0.{10 + k}", "devices": devs}
        if sp:
            node["super_pod_id"] = (pods or {}).get(name, "0")
        nodes.append(node)
    return with_engine(Inventory.model_validate({
        "cluster": {"name": "t", "hardware": hw, "hbm_gb": hbm_gb, "super_pod": sp},
        "engine": {"image": A2_IMAGE},
        "model": {"name": "deepseek-r1", "quant": "w8a8", "weights_path": "/data/models/DeepSeek-R1-W8A8",
                  "served_name": "ds-r1", "max_seq_len": 8192, "max_input_len": 4096, "max_batch_size": 32},
        "layout": {"preset": "tp-pp"},
        "nodes": nodes}))


def findings(facts: dict[str, HostFacts], inv: Inventory | None = None) -> list[Finding]:
    n = len(facts)
    hw = next(iter(facts.values())).npu.layout if next(iter(facts.values())).npu else "a2"
    return check_facts(inv or inventory(n, hw), facts)


def of(fs: list[Finding], rule: str) -> list[tuple[str, str | None, int | None]]:
    return [(f.severity, f.host, f.device) for f in fs if f.rule == rule]


def the_one(fs: list[Finding], rule: str) -> Finding:
    got = [f for f in fs if f.rule == rule]
    assert len(got) == 1, f"expected one {rule} finding, got {fs}"
    return got[0]


# --------------------------------------------------------------------------- clean clusters

@pytest.mark.parametrize("hw,n", [("a2", 1), ("a2", 4), ("a3", 2)])
def test_a_healthy_cluster_has_no_findings(hw, n):
    assert findings(cluster(n, hw), inventory(n, hw)) == []


# --------------------------------------------------------------------------- host-reachable

@pytest.mark.parametrize("kind", ["unreachable", "auth", "host-key-unknown", "host-key-changed", "timeout", "ssh"])
def test_an_unusable_host_is_a_host_reachable_fail_with_its_error_and_hint(kind):
    facts = cluster(2)
    facts["node2"] = HostFacts(name="node2", address="10.200.0.12", error_kind=kind, error=f"boom ({kind})",
                               error_hint="do this")
    f = the_one(findings(facts), "host-reachable")
    assert (f.severity, f.host, f.device, f.message, f.hint) == ("FAIL", "node2", None, f"boom ({kind})", "do this")


def test_an_unreachable_host_does_not_hide_the_findings_of_the_others():
    facts = cluster(3)
    facts["node1"] = HostFacts(name="node1", address="10.200.0.11", error_kind="unreachable", error="no route")
    facts["node3"] = upd_dev(facts["node3"], 4, link_up=False)
    facts["node2"] = upd(facts["node2"], weights=WeightsDir(exists=False))
    fs = findings(facts)
    assert of(fs, "host-reachable") == [("FAIL", "node1", None)]
    assert of(fs, "link-up") == [("FAIL", "node3", 4)]
    assert of(fs, "weights") == [("FAIL", "node2", None)]
    # the unreachable host has no facts: it must not count as "different" anywhere
    assert of(fs, "versions-consistent") == [] and of(fs, "device-ip") == []
    assert "nothing on node1 (unreachable)" in not_checked(inventory(3), facts, 16)


def test_all_hosts_unreachable_is_only_host_reachable_findings():
    facts = {f"node{k}": HostFacts(name=f"node{k}", address=f"10.200.0.{10 + k}", error_kind="timeout", error="t")
             for k in (1, 2)}
    fs = findings(facts, inventory(2))
    assert [(f.rule, f.host) for f in fs] == [("host-reachable", "node1"), ("host-reachable", "node2")]


# --------------------------------------------------------------------------- driver-firmware

def test_firmware_outside_the_drivers_range_fails():
    facts = cluster(2)
    facts["node2"] = upd(facts["node2"], firmware=firmware("7.8.0.5.216", package="25.5.0"))
    f = [x for x in findings(facts) if x.rule == "driver-firmware"]
    assert [(x.severity, x.host, x.device) for x in f] == [("FAIL", "node2", None)]
    assert "7.8.0.5.216" in f[0].message and "[7.0.0,7.7.99]" in f[0].message


def test_driver_missing_from_the_firmwares_list_only_warns():
    facts = cluster(1)
    facts["node1"] = upd(facts["node1"], firmware=firmware(drv=(("23.0.rc3", "23.0.rc3."),)))
    assert of(findings(facts), "driver-firmware") == [("WARN", "node1", None)]


def test_versions_that_cannot_be_compared_warn_instead_of_crashing():
    facts = cluster(1)
    facts["node1"] = upd(facts["node1"], driver=driver(fw_range=()))
    f = the_one(findings(facts), "driver-firmware")
    assert (f.severity, f.host) == ("WARN", "node1") and "cannot compare" in f.message


# --------------------------------------------------------------------------- versions-consistent

def test_versions_the_majority_decides_who_differs():
    facts = cluster(3)
    # the odd node is the FIRST one: the majority, not the order, decides
    facts["node1"] = upd(facts["node1"], driver=driver("24.1.rc3", (("7.0.0", "7.5.99"),)),
                         firmware=firmware("7.5.0.1.129", package="24.1.rc3"))
    f = the_one(findings(facts), "versions-consistent")
    assert (f.severity, f.host, f.device) == ("FAIL", "node1", None)
    assert "24.1.rc3" in f.message and "25.0.rc1.1" in f.message


def test_versions_every_minority_node_is_named():
    facts = cluster(5)
    for name in ("node2", "node4"):
        facts[name] = upd(facts[name], firmware=firmware("7.7.0.2.100"))
    assert of(findings(facts), "versions-consistent") == [("FAIL", "node2", None), ("FAIL", "node4", None)]


def test_versions_a_tie_blames_the_incompatible_side():
    facts = cluster(2)
    facts["node1"] = upd(facts["node1"], firmware=firmware("7.8.0.5.216", package="25.5.0"))
    fs = findings(facts)
    assert of(fs, "driver-firmware") == [("FAIL", "node1", None)]
    # 1:1, but only node2's pair is compatible: node2 is the reference, node1 is to fix
    assert of(fs, "versions-consistent") == [("FAIL", "node1", None)]


def test_versions_a_tie_of_compatible_pairs_names_both_sides():
    facts = cluster(2)
    facts["node1"] = upd(facts["node1"], firmware=firmware("7.6.0.1.100"))
    fs = findings(facts)
    assert of(fs, "driver-firmware") == []
    assert {h for _, h, _ in of(fs, "versions-consistent")} == {"node1", "node2"}
    assert "no majority" in the_one([f for f in fs if f.host == "node2"], "versions-consistent").message


def test_hosts_without_version_facts_are_left_out_of_the_comparison():
    facts = cluster(2)
    facts["node2"] = upd(facts["node2"], driver=None, probe_errors={"ver.driver": "exit 1: No such file"})
    fs = findings(facts)
    assert of(fs, "versions-consistent") == []
    assert of(fs, "probe") == [("WARN", "node2", None)]


# --------------------------------------------------------------------------- npu-count / npu-health / hbm / busy

def test_a_missing_device_is_an_npu_count_fail_naming_it():
    facts = cluster(2)
    h = facts["node2"]
    facts["node2"] = upd(h, npu=h.npu.model_copy(update={"chips": h.npu.chips[:7]}))
    f = the_one(findings(facts), "npu-count")
    assert (f.severity, f.host) == ("FAIL", "node2") and "7 of 8" in f.message and "missing 7" in f.message


def test_an_a3_server_in_an_a2_inventory_is_an_npu_count_fail():
    facts = cluster(1)
    a3 = healthy("node1", 1, "a3")
    facts["node1"] = upd(facts["node1"], npu=a3.npu)
    fs = check_facts(inventory(1, "a2"), facts)
    assert ("FAIL", "node1", None) in of(fs, "npu-count")
    assert any("A3 server" in f.message for f in fs if f.rule == "npu-count")


@pytest.mark.parametrize("health,severity", [("Warning", "WARN"), ("Alarm", "FAIL"), ("Critical", "FAIL"),
                                             ("UNKNOWN", "FAIL")])
def test_npu_health(health, severity):
    facts = cluster(2)
    h = facts["node2"]
    chips = list(h.npu.chips)
    chips[3] = chips[3].model_copy(update={"health": health})
    facts["node2"] = upd(h, npu=h.npu.model_copy(update={"chips": tuple(chips)}))
    f = the_one(findings(facts), "npu-health")
    assert (f.severity, f.host, f.device) == (severity, "node2", 3) and health in f.message


def test_npu_health_on_a3_names_the_physical_id():
    facts = cluster(1, "a3")
    h = facts["node1"]
    chips = list(h.npu.chips)
    chips[11] = chips[11].model_copy(update={"health": "Critical"})   # NPU 5 chip 1
    facts["node1"] = upd(h, npu=h.npu.model_copy(update={"chips": tuple(chips)}))
    f = the_one(check_facts(inventory(1, "a3"), facts), "npu-health")
    assert (f.host, f.device) == ("node1", 11) and "-i 5" in f.hint


def test_hbm_smaller_than_the_inventory_is_a_fail_per_device():
    facts = cluster(1)
    h = facts["node1"]
    facts["node1"] = upd(h, npu=h.npu.model_copy(update={"chips": tuple(chip(p, hbm=32768) for p in range(8))}))
    assert of(findings(facts), "hbm-size") == [("FAIL", "node1", p) for p in range(8)]
    assert of(check_facts(inventory(1, hbm_gb=32), facts), "hbm-size") == []


def test_a_foreign_process_is_npu_busy_on_its_device():
    facts = cluster(2)
    h = facts["node1"]
    procs = (NpuProcess(npu=2, chip=0, phy_id=2, pid=4242, name="python", memory_mb=30000),)
    facts["node1"] = upd(h, npu=h.npu.model_copy(update={"processes": procs}))
    f = the_one(findings(facts), "npu-busy")
    assert (f.severity, f.host, f.device) == ("FAIL", "node1", 2) and "4242" in f.message and "30000" in f.message


# --------------------------------------------------------------------------- link-up / net-health

def test_link_down_and_net_health():
    facts = cluster(2)
    facts["node2"] = upd_dev(facts["node2"], 3, link_up=False)
    facts["node1"] = upd_dev(facts["node1"], 6, net_health="Socket fail")
    fs = findings(facts)
    assert of(fs, "link-up") == [("FAIL", "node2", 3)]
    assert of(fs, "net-health") == [("FAIL", "node1", 6)]
    assert "Socket fail" in the_one(fs, "net-health").message


def test_unknown_link_and_health_are_not_findings():
    facts = cluster(1)
    facts["node1"] = upd_dev(facts["node1"], 3, link_up=None, net_health=None)
    fs = findings(facts)
    assert of(fs, "link-up") == [] and of(fs, "net-health") == []


# --------------------------------------------------------------------------- tls-consistent

def test_tls_all_on_is_one_cluster_wide_warning():
    facts = cluster(2)
    for name, h in list(facts.items()):
        for p in range(8):
            h = upd_dev(h, p, tls=tls(p, True))
        facts[name] = h
    f = the_one(findings(facts), "tls-consistent")
    assert (f.severity, f.host, f.device) == ("WARN", None, None)


def test_tls_mixed_fails_on_the_minority_that_is_on():
    facts = cluster(2)
    facts["node2"] = upd_dev(facts["node2"], 5, tls=tls(5, True))
    f = the_one(findings(facts), "tls-consistent")
    assert (f.severity, f.host, f.device) == ("FAIL", "node2", 5) and "TLS switch 1" in f.message


def test_tls_mixed_fails_on_the_minority_that_is_off():
    facts = cluster(2)
    for name, h in list(facts.items()):
        for p in range(8):
            h = upd_dev(h, p, tls=tls(p, not (name == "node1" and p in (0, 7))))
        facts[name] = h
    assert of(findings(facts), "tls-consistent") == [("FAIL", "node1", 0), ("FAIL", "node1", 7)]
    assert all("TLS switch 0" in f.message for f in findings(facts) if f.rule == "tls-consistent")


def test_tls_unknown_devices_do_not_count():
    facts = cluster(1)
    facts["node1"] = upd_dev(facts["node1"], 2, tls=None)
    assert of(findings(facts), "tls-consistent") == []


# --------------------------------------------------------------------------- device-ip

def test_device_without_ip_fails():
    facts = cluster(2)
    facts["node2"] = upd_dev(facts["node2"], 4, ip=None)
    f = the_one(findings(facts), "device-ip")
    assert (f.severity, f.host, f.device) == ("FAIL", "node2", 4) and "no IP" in f.message


def test_duplicate_device_ip_names_the_second_holder():
    facts = cluster(2)
    facts["node2"] = upd_dev(facts["node2"], 3, ip=IpConf(ip=dev_ip(1, 3), netmask="255.255.0.0"))
    facts["node2"] = upd(facts["node2"], hccn_conf=None)
    fs = findings(facts, inventory(2, ips={("node2", 3): None}))
    f = the_one(fs, "device-ip")
    assert (f.severity, f.host, f.device) == ("FAIL", "node2", 3)
    assert f.message == f"IP {dev_ip(1, 3)} is also on node1 device 3"


def test_device_ip_different_from_the_inventory_fails():
    facts = cluster(2)
    facts["node1"] = upd_dev(facts["node1"], 5, ip=IpConf(ip="172.16.1.205", netmask="255.255.0.0"))
    facts["node1"] = upd(facts["node1"], hccn_conf=HccnConf(entries={
        p: {"address": "172.16.1.205" if p == 5 else dev_ip(1, p)} for p in range(8)}))
    f = the_one(findings(facts), "device-ip")
    assert (f.severity, f.host, f.device) == ("FAIL", "node1", 5)
    assert f.message == f"inventory says {dev_ip(1, 5)}, the NIC has 172.16.1.205"


@pytest.mark.parametrize("ip", ["0.0.0.0", "127.0.0.1"])
def test_placeholder_device_ip_fails(ip):
    facts = cluster(2)
    facts["node1"] = upd(upd_dev(facts["node1"], 2, ip=IpConf(ip=ip, netmask="255.0.0.0")), hccn_conf=None)
    facts["node2"] = upd(upd_dev(facts["node2"], 2, ip=IpConf(ip=ip, netmask="255.0.0.0")), hccn_conf=None)
    fs = findings(facts)
    # one finding per device (not also "duplicate" / "inventory says")
    assert of(fs, "device-ip") == [("FAIL", "node1", 2), ("FAIL", "node2", 2)]
    assert all(f.message == f"placeholder IP {ip} on the NPU NIC" for f in fs)


def test_hccn_conf_disagreeing_with_the_nic_warns():
    facts = cluster(1)
    facts["node1"] = upd(facts["node1"], hccn_conf=HccnConf(entries={
        p: {"address": "29.0.0.9" if p == 2 else dev_ip(1, p)} for p in range(8)}))
    assert of(findings(facts), "device-ip") == [("WARN", "node1", 2)]


def test_an_unlisted_device_without_ip_and_unknown_link_is_not_a_finding():
    facts = cluster(1)
    facts["node1"] = upd_dev(facts["node1"], 7, ip=None, link_up=None)
    fs = check_facts(inventory(1, ips={("node1", 7): None}), facts)
    assert of(fs, "device-ip") == []


def test_a_device_the_probe_could_not_read_is_not_claimed_to_have_no_ip():
    facts = cluster(2)
    h = facts["node2"]
    h = upd(h, npu=h.npu.model_copy(update={"chips": h.npu.chips[:7]}),
            probe_errors={"hccn.ip.7": "hccn_tool -ip -g: expected `ipaddr:<ip>`, got 'Get invalid device id.'",
                          "hccn.link.7": "exit 4: Get invalid device id."})
    facts["node2"] = upd_dev(h, 7, ip=None, link_up=None, net_health=None, tls=None)
    fs = findings(facts)
    assert of(fs, "npu-count") == [("FAIL", "node2", None)]
    assert [f for f in fs if f.rule == "device-ip" and "no IP configured" in f.message] == []


# --------------------------------------------------------------------------- sdid

def test_duplicate_sdid_in_a_super_pod_fails():
    facts = cluster(2, "a3")
    facts["node2"] = upd_dev(facts["node2"], 3, sdid=sdid(1, 0))
    fs = check_facts(inventory(2, "a3", sdids={("node2", 3): sdid(1, 0)}), facts)
    f = the_one(fs, "sdid")
    assert (f.severity, f.host, f.device) == ("FAIL", "node2", 3)
    assert f"SDID {sdid(1, 0)} also on node1 device 0" in f.message


def test_the_same_sdid_in_two_super_pods_is_fine():
    facts = cluster(2, "a3")
    for dev in range(16):      # npu-smi puts node2 in super pod 1, as the inventory says
        facts["node2"] = upd_dev(facts["node2"], dev, super_pod_id=1)
    facts["node2"] = upd_dev(facts["node2"], 3, sdid=sdid(1, 0))
    inv = inventory(2, "a3", pods={"node2": "1"}, sdids={("node2", 3): sdid(1, 0)})
    assert of(check_facts(inv, facts), "sdid") == []


def test_super_pod_id_different_from_the_inventory_fails():
    facts = cluster(2, "a3")
    inv = inventory(2, "a3", pods={"node2": "1"})
    f = the_one(check_facts(inv, facts), "sdid")
    assert (f.severity, f.host, f.device) == ("FAIL", "node2", None)
    assert "npu-smi says super pod 0, the inventory says 1" in f.message


def test_sdid_different_from_the_inventory_fails():
    facts = cluster(2, "a3")
    facts["node1"] = upd_dev(facts["node1"], 9, sdid=12345)
    f = the_one(check_facts(inventory(2, "a3"), facts), "sdid")
    assert (f.severity, f.host, f.device) == ("FAIL", "node1", 9)
    assert f.message == f"inventory sdid {sdid(1, 9)}, npu-smi says 12345"


def test_sdids_are_not_judged_without_super_pod():
    facts = cluster(2, "a3")
    facts["node2"] = upd_dev(facts["node2"], 3, sdid=sdid(1, 0))
    assert of(check_facts(inventory(2, "a3", super_pod=False), facts), "sdid") == []


# --------------------------------------------------------------------------- peer-reachable

def test_a_failed_ping_names_the_pinging_host_and_device():
    facts = cluster(2)
    facts["node1"] = upd(facts["node1"], pings=[
        PingCheck(device=0, peer="node2", peer_device=0, peer_ip=dev_ip(2, 0), ok=False, detail="0/3 received")])
    facts["node2"] = upd(facts["node2"], pings=[
        PingCheck(device=1, peer="node1", peer_device=1, peer_ip=dev_ip(1, 1), ok=True, detail="3/3 received")])
    f = the_one(findings(facts), "peer-reachable")
    assert (f.severity, f.host, f.device) == ("FAIL", "node1", 0)
    assert "node2 device 0" in f.message and dev_ip(2, 0) in f.message and "0/3" in f.message


def test_sampled_pings_are_listed_as_not_checked():
    facts = cluster(4)
    notes = not_checked(inventory(4), facts, 2)
    assert "peer reachability sampled: each node pinged 2 of 3 peers" in notes
    assert not any("sampled" in n for n in not_checked(inventory(4), facts, 3))


# --------------------------------------------------------------------------- weights / image / ports / shm / clock

@pytest.mark.parametrize("weights,word", [(WeightsDir(exists=False), "missing"),
                                          (WeightsDir(exists=True, readable=False, config_json=True), "unreadable"),
                                          (WeightsDir(exists=True, readable=True, config_json=False),
                                           "has no config.json")])
def test_weights(weights, word):
    facts = cluster(2)
    facts["node2"] = upd(facts["node2"], weights=weights)
    f = the_one(findings(facts), "weights")
    assert (f.severity, f.host, f.device) == ("FAIL", "node2", None) and f.message.endswith(word)


def test_image_missing_and_no_runtime():
    facts = cluster(3)
    facts["node2"] = upd(facts["node2"], image_present=False)
    facts["node3"] = upd(facts["node3"], runtime_version=None, image_present=None)
    fs = findings(facts, inventory(3))
    assert of(fs, "image") == [("FAIL", "node2", None), ("FAIL", "node3", None)]
    assert any("is not present" in f.message for f in fs if f.host == "node2")
    assert any("no container runtime" in f.message for f in fs if f.host == "node3")


def test_a_failed_docker_probe_is_a_probe_warning_not_an_image_fail():
    facts = cluster(1)
    facts["node1"] = upd(facts["node1"], runtime_version=None, image_present=None,
                         probe_errors={"host.docker": "timed out"})
    fs = findings(facts)
    assert of(fs, "image") == [] and of(fs, "probe") == [("WARN", "node1", None)]


def test_engine_ports_in_use_fail_each():
    facts = cluster(2)
    facts["node1"] = upd(facts["node1"], ports=ListeningPorts(ports=frozenset({22, 1025, 7008, 9999})))
    fs = findings(facts)
    assert of(fs, "ports-free") == [("FAIL", "node1", None)] * 2
    assert [f.message for f in fs if f.rule == "ports-free"] == ["port 1025 is already in use",
                                                                 "port 7008 is already in use"]


def test_small_shm_warns():
    facts = cluster(1)
    facts["node1"] = upd(facts["node1"], shm=DiskFree(filesystem="tmpfs", mount_point="/dev/shm",
                                                       total_bytes=64 * 2**20, used_bytes=0,
                                                       avail_bytes=64 * 2**20))
    f = the_one(findings(facts), "shm")
    assert (f.severity, f.host) == ("WARN", "node1")


@pytest.mark.parametrize("offset,late,early", [(1.5, "node2", "node1"), (-30.0, "node1", "node2")])
def test_clock_spread_between_nodes_warns_once(offset, late, early):
    facts = cluster(3)
    facts["node2"] = upd(facts["node2"], clock_offset_s=offset)
    f = the_one(findings(facts, inventory(3)), "clock")
    assert (f.severity, f.host, f.device) == ("WARN", None, None)
    assert f"({late} ahead of {early})" in f.message


@pytest.mark.parametrize("offsets", [(0.02, 0.9), (5.0, 5.5), (-40.0, -40.0)])
def test_clocks_that_agree_with_each_other_are_fine(offsets):
    facts = cluster(2)
    for name, off in zip(("node1", "node2"), offsets):
        facts[name] = upd(facts[name], clock_offset_s=off)
    assert of(findings(facts), "clock") == []


def test_little_room_on_the_weights_disk_warns():
    facts = cluster(2)
    facts["node2"] = upd(facts["node2"], weights_disk=DiskFree(filesystem="/dev/sda1", mount_point="/data",
                                                                 total_bytes=800 * GIB, used_bytes=790 * GIB,
                                                                 avail_bytes=10 * GIB))
    f = the_one(findings(facts), "disk")
    assert (f.severity, f.host, f.device) == ("WARN", "node2", None) and "/data" in f.message


def test_weights_of_a_different_size_fail_on_the_odd_node():
    facts = cluster(3)
    facts["node1"] = upd(facts["node1"], weights=facts["node1"].weights.model_copy(update={"total_bytes": 5 * GIB}))
    f = the_one(findings(facts, inventory(3)), "weights")
    assert (f.severity, f.host, f.device) == ("FAIL", "node1", None)
    assert f"{5 * GIB:,}" in f.message and f"{700 * GIB:,}" in f.message


def test_weights_size_tie_names_both_nodes():
    facts = cluster(2)
    facts["node1"] = upd(facts["node1"], weights=facts["node1"].weights.model_copy(update={"total_bytes": 5 * GIB}))
    assert {h for _, h, _ in of(findings(facts), "weights")} == {"node1", "node2"}


# --------------------------------------------------------------------------- probe / hosts-uniform

def test_only_key_probe_failures_warn_the_rest_are_not_checked():
    facts = cluster(1)
    facts["node1"] = upd(facts["node1"], npu=None, probe_errors={"npu.info": "timed out",
                                                                 "hccn.link.3": "exit 4: bad"})
    fs = findings(facts)
    assert of(fs, "probe") == [("WARN", "node1", None)] and "npu.info" in the_one(fs, "probe").message
    notes = not_checked(inventory(1), facts, 16)
    assert "hccn.link on node1 (probe gave no facts)" in notes and "npu.info on node1 (probe gave no facts)" in notes


def test_hosts_uniform_names_the_odd_architecture():
    facts = cluster(3)
    facts["node3"] = upd(facts["node3"], os=OsInfo(id="ubuntu", arch="x86_64"))
    f = the_one(findings(facts, inventory(3)), "hosts-uniform")
    assert (f.severity, f.host) == ("WARN", "node3") and "x86_64" in f.message


# --------------------------------------------------------------------------- order

def test_fail_first_then_inventory_order():
    facts = cluster(3)
    facts["node3"] = upd_dev(facts["node3"], 2, link_up=False)
    facts["node1"] = upd(facts["node1"], shm=DiskFree(filesystem="tmpfs", mount_point="/dev/shm",
                                                       total_bytes=GIB, used_bytes=0, avail_bytes=GIB))
    facts["node2"] = upd_dev(facts["node2"], 6, link_up=False)
    fs = findings(facts, inventory(3))
    assert [(f.severity, f.host) for f in fs] == [("FAIL", "node2"), ("FAIL", "node3"), ("WARN", "node1")]


def test_host_findings_come_before_device_findings_of_the_same_host():
    facts = cluster(1)
    facts["node1"] = upd(facts["node1"], weights=WeightsDir(exists=False))   # host-level, rule "weights"
    facts["node1"] = upd_dev(facts["node1"], 0, link_up=False)              # device 0, rule "link-up"
    facts["node1"] = upd_dev(facts["node1"], 1, link_up=False)
    # "then by host and device": the host-level finding first, then devices 0, 1
    assert [(f.rule, f.device) for f in findings(facts)] == [("weights", None), ("link-up", 0), ("link-up", 1)]


def test_findings_are_json_ready():
    facts = cluster(1)
    facts["node1"] = upd_dev(facts["node1"], 3, link_up=False)
    f = findings(facts)[0]
    assert f.model_dump() == {"rule": "link-up", "severity": "FAIL", "host": "node1", "device": 3,
                              "message": "NPU NIC link DOWN", "hint": f.hint}


def test_each_node_is_checked_for_the_ports_its_own_processes_bind():
    """MindIE's distributed decode binds engine.ports.dist_base + 4k per DP rank on decode nodes only, the
    MindIE-MS node its controller/coordinator ports: preflight checks those where they will be bound."""
    from conftest import EXAMPLES
    from deployctl.io.inventory_file import load_inventory
    from deployctl.app.inventory import validate_inventory
    from deployctl.features.preflight.rules import _ports_per_node

    inv = validate_inventory(load_inventory(EXAMPLES / "a3-pd-2p2d.yaml"))
    ports = _ports_per_node(inv)
    p = inv.engine.ports
    roles = {n: ("decode" if n in inv.layout.decode.nodes else "prefill") for n in ports}
    for node, bound in ports.items():
        assert (p.dist_base in bound) == (roles[node] == "decode"), node
        assert p.http in bound                      # every node's engine ports stay checked
    ms = [n for n in ports if p.coordinator in ports[n]]
    assert len(ms) == 1
