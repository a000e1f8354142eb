"""Everything preflight learned about one host, and the facts file that plan/render can reuse."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from deployctl.core.models.base import Frozen

from deployctl.core.models.facts import (MAX_ROWS, BigId, BoardInfo, DiskFree, HccnConf, Id, ImageVersions,
                                         Interface, Ip, IpConf, ListeningPorts, NpuSmiInfo, OsInfo, Text, TlsInfo,
                                         Version, VersionInfo, VnicInfo, WeightsDir)


class DeviceFacts(Frozen):
    """One NPU device (die) as hccn_tool and npu-smi see it; None = not probed or probe failed."""

    phy_id: Id
    ip: IpConf | None = None
    vnic: VnicInfo | None = None          # A3 only
    link_up: bool | None = None
    net_health: Text | None = None
    tls: TlsInfo | None = None
    sdid: BigId | None = None             # A3: npu-smi info -t spod-info
    super_pod_id: BigId | None = None


class PingCheck(Frozen):
    """`hccn_tool -i <device> -ping -g address <peer device ip>` from this host."""

    device: Id
    peer: str
    peer_device: Id
    peer_ip: Ip
    ok: bool
    detail: Text = ""
    # False: the ping's answer never came back (the probe batch was cut short): not evidence either way
    measured: bool = True


class HostFacts(Frozen):
    name: str
    address: str
    error_kind: str | None = None         # unreachable, auth, host-key-unknown, host-key-changed, timeout, ssh
    error: str | None = None
    error_hint: str | None = None
    os: OsInfo | None = None
    npu: NpuSmiInfo | None = None
    boards: dict[Id, BoardInfo] = Field(default_factory=dict, max_length=64)
    driver: VersionInfo | None = None
    firmware: VersionInfo | None = None
    hccn_conf: HccnConf | None = None
    devices: dict[Id, DeviceFacts] = Field(default_factory=dict, max_length=256)
    shm: DiskFree | None = None
    weights: WeightsDir | None = None
    weights_disk: DiskFree | None = None
    runtime_version: Version | None = None     # docker server version; None = no container runtime
    image_present: bool | None = None
    image_versions: ImageVersions | None = None   # what the image ships (CANN, torch_npu, ...); None = not read
    ports: ListeningPorts | None = None
    # `ip -o addr`: IP -> interface carrying it (GLOO_SOCKET_IFNAME when the inventory names none: the pattern
    # of nodes[].interface)
    addresses: dict[Ip, Interface] = Field(default_factory=dict, max_length=MAX_ROWS)
    clock_offset_s: float | None = None
    pings: list[PingCheck] = Field(default_factory=list)
    probe_errors: dict[str, str] = Field(default_factory=dict)   # probe name -> why it gave no fact
    seconds: float = 0.0

    @property
    def reachable(self) -> bool:
        return self.error_kind is None


class Finding(Frozen):
    rule: str                              # e.g. "driver-firmware"
    severity: Literal["FAIL", "WARN"]
    host: str | None = None
    device: int | None = None
    message: str
    hint: str = ""


class FactsFile(Frozen):
    """What `deployctl preflight` saves; `plan/render --facts FILE` fill device IPs and SDIDs from it."""

    deployctl_version: str
    cluster: str
    collected_at: str
    hosts: dict[str, HostFacts]
    findings: list[Finding] = Field(default_factory=list)
    not_checked: list[str] = Field(default_factory=list)
