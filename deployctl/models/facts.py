"""Facts that `deployctl preflight` reads from a host, as immutable pydantic models.

This module owns the shape of what a probe learns: npu-smi tables, hccn_tool answers, the driver,
firmware and CANN version files, and a few host basics. The pure parsers that build these models live
in ``deployctl/probes/``; formats and sources are in ascend-facts §2-§4.

Ids follow the rank-table vocabulary: ``phy_id`` is the physical device id (``/dev/davinciN``,
rank-table ``device_id``, the ``N`` of ``hccn_tool -i N`` and of ``address_N`` in hccn.conf);
``npu`` and ``chip`` are npu-smi's card and chip numbers; ``logic_id`` is what MindIE
``npuDeviceIds`` and ``ASCEND_RT_VISIBLE_DEVICES`` use.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from deployctl.models.base import Frozen

# npu-smi health values, most severe alarm wins (ascend-facts §3.3)
Health = Literal["OK", "Warning", "Alarm", "Critical", "UNKNOWN"]
HEALTH_VALUES: tuple[str, ...] = ("OK", "Warning", "Alarm", "Critical", "UNKNOWN")

# `[lo,hi]` entries of the version.info compatibility lists, kept as printed
VersionRange = tuple[str, str]




# --------------------------------------------------------------------------- npu-smi


class NpuChip(Frozen):
    """One compute die of `npu-smi info` (its two-line block).

    On A2 ``phy_id`` is the NPU id (one chip per card); on A3 it is the Phy-ID column. Inside a
    container npu-smi numbers the visible devices from 0, so there the ids are the container's view.
    """

    npu: int
    chip: int                     # chip index inside the NPU: 0 on A2, 0/1 on A3
    phy_id: int
    name: str                     # e.g. 910B3, Ascend910 (do not infer A2/A3 from it)
    health: Health
    power_w: float | None         # None when npu-smi prints `-`/`NA` (the second die of an A3 NPU)
    temp_c: int | None
    aicore_pct: int | None
    hugepages_used: int
    hugepages_total: int
    memory_used_mb: int           # DDR (Memory-Usage column)
    memory_total_mb: int
    hbm_used_mb: int
    hbm_total_mb: int
    bus_id: str                   # as printed; shared logs mask it (`xxxx:xx:xx.x`)

    @property
    def bus_id_masked(self) -> bool:
        return "x" in self.bus_id.lower()


class NpuSubChip(Frozen):
    """A per-chip status row some newer drivers print under a card (`| 0  1 | OK | ... |`, no Bus-Id)."""

    npu: int
    chip: int
    health: Health


class NpuProcess(Frozen):
    """One row of the process table of `npu-smi info`."""

    npu: int
    chip: int
    phy_id: int | None            # the chip's phy_id, None if that chip is not in the device table
    pid: int
    name: str                     # may be empty (seen on A3)
    memory_mb: int


class NpuSmiInfo(Frozen):
    """`npu-smi info`: versions, every die, and the processes holding them."""

    tool_version: str
    driver_version: str           # the `Version:` of the header is the driver version
    layout: Literal["a2", "a3"]   # a3 = the `Chip  Phy-ID` header (two dies per NPU)
    chips: tuple[NpuChip, ...]
    sub_chips: tuple[NpuSubChip, ...] = ()
    processes: tuple[NpuProcess, ...] = ()

    @property
    def phy_ids(self) -> list[int]:
        return [c.phy_id for c in self.chips]

    @property
    def chips_per_npu(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for c in self.chips:
            out[c.npu] = out.get(c.npu, 0) + 1
        return out


class NpuList(Frozen):
    """`npu-smi info -l`: the NPU ids and how many chips each has (1 on A2, 2 on A3)."""

    total: int                    # `Total Count`, as printed
    chips_per_npu: dict[int, int]


class ChipMapRow(Frozen):
    """One row of `npu-smi info -m`. Mcu rows have no logic id (and no phy id on A3)."""

    npu: int
    chip: int
    logic_id: int | None
    phy_id: int | None            # only A3 prints a `Chip Phy-ID` column
    name: str                     # e.g. `Ascend 910B4`, `Ascend910`, `Mcu`


class ChipMap(Frozen):
    """`npu-smi info -m`: NPU/chip to logic id (and phy id on A3)."""

    rows: tuple[ChipMapRow, ...]

    @property
    def compute_rows(self) -> list[ChipMapRow]:
        """The rows that are devices (the ones with a logic id), not Mcu rows."""
        return [r for r in self.rows if r.logic_id is not None]


class BoardInfo(Frozen):
    """`npu-smi info -t board -i N [-c C]`. Every key npu-smi prints that is not a field is in ``extra``."""

    npu_id: int
    chip_id: int | None = None            # only with `-c`
    software_version: str | None = None   # the driver version
    firmware_version: str | None = None
    compatibility: str | None = None      # npu-smi's own driver/firmware verdict, e.g. OK
    board_id: str | None = None
    chip_count: int | None = None
    pci_vendor_id: str | None = None
    pci_device_id: str | None = None
    pcie_bus_info: str | None = None
    chip_name: str | None = None          # only with `-c`
    product_name: str | None = None
    serial_number: str | None = None
    extra: dict[str, str] = Field(default_factory=dict)


class NpuHealth(Frozen):
    """`npu-smi info -t health -i N -c C`."""

    status: Health
    error_codes: tuple[str, ...] = ()
    error_info: str | None = None
    details: tuple[str, ...] = ()         # the unlabelled ` : node type=...` lines after the error


class SpodInfo(Frozen):
    """`npu-smi info -t spod-info -i N -c C` (A3 super pods). ``sdid`` is rank-table ``super_device_id``."""

    sdid: int | None = None
    super_pod_id: int | None = None
    super_pod_size: int | None = None
    server_index: int | None = None
    pod_id: int | None = None
    extra: dict[str, str] = Field(default_factory=dict)


# --------------------------------------------------------------------------- versions


class VersionInfo(Frozen):
    """A `key=value` version file: driver or firmware `version.info`, CANN `*_install.info`.

    Ranges are kept as printed, one ``(lo, hi)`` per ``[lo,hi]``; a single ``[x]`` becomes ``(x, x)``.
    """

    version: str                                        # `Version=` (`version=` in CANN files)
    package_version: str | None = None                  # absent from some 24.1.rc1 driver files
    innerversion: str | None = None                     # e.g. V100R001C21SPC002B220
    compatible_version: tuple[VersionRange, ...] = ()   # inner codes, e.g. (V100R001C21, V100R001C21)
    compatible_version_fw: tuple[VersionRange, ...] = ()  # driver: accepted firmware, e.g. (7.0.0, 7.7.99)
    compatible_version_drv: tuple[VersionRange, ...] = ()  # firmware: accepted drivers, e.g. (24.1, 24.1.)
    raw: dict[str, str] = Field(default_factory=dict)

    @property
    def package(self) -> str:
        """The HDK package version: ``package_version``, else ``version``."""
        return self.package_version or self.version


# --------------------------------------------------------------------------- hccn_tool


class IpConf(Frozen):
    """`hccn_tool -i N -ip -g`: the NPU NIC (RoCE) address."""

    ip: str
    netmask: str


class VnicInfo(Frozen):
    """`hccn_tool -i N -vnic -g` (A3): the HCCS vNIC."""

    link_up: bool
    ip: str
    netmask: str


class LinkStatus(Frozen):
    """`hccn_tool -i N -link -g`."""

    up: bool


class NetHealth(Frozen):
    """`hccn_tool -i N -net_health -g`; ``status`` as printed (`Success`, `Socket fail`, ...)."""

    status: str

    @property
    def healthy(self) -> bool:
        return self.status == "Success"


class NetDetect(Frozen):
    """`hccn_tool -i N -netdetect -g`: the address the NIC probes for its health."""

    address: str


class Gateway(Frozen):
    """`hccn_tool -i N -gateway -g`."""

    address: str
    iface: str


class TlsCert(Frozen):
    """One certificate block of `hccn_tool -i N -tls -g`."""

    kind: str                             # pub, ca1, ca2, ..., crl
    subject: str | None = None            # newer drivers only
    issuer: str
    start: datetime                       # UTC
    end: datetime                         # UTC
    expiration_status: int | None = None  # 0 normal, 1 near expiration, 2 expired (newer drivers only)


class TlsInfo(Frozen):
    """`hccn_tool -i N -tls -g`. ``dev_id`` is the phy id npu-smi printed."""

    dev_id: int
    enabled: bool
    preconfigured: bool | None            # None: older drivers do not print it
    alarm_days: int
    certs: tuple[TlsCert, ...] = ()


class PingResult(Frozen):
    """`hccn_tool -i N -ping -g address X` summary."""

    device: int | None                    # the `device N PING X` line, when printed
    target: str | None
    sent: int
    received: int
    loss_pct: float


class HccnConf(Frozen):
    """/etc/hccn.conf: ``key_<phy_id>=value`` lines grouped by phy id (``entries[0]["address"]``)."""

    entries: dict[int, dict[str, str]]

    @property
    def addresses(self) -> dict[int, str]:
        return {d: kv["address"] for d, kv in sorted(self.entries.items()) if "address" in kv}

    @property
    def netmasks(self) -> dict[int, str]:
        return {d: kv["netmask"] for d, kv in sorted(self.entries.items()) if "netmask" in kv}


# --------------------------------------------------------------------------- host


class OsInfo(Frozen):
    """/etc/os-release (plus `uname -m` for ``arch``)."""

    id: str                               # e.g. openEuler, ubuntu, kylin
    version_id: str | None = None
    pretty_name: str | None = None
    id_like: tuple[str, ...] = ()
    arch: str | None = None               # aarch64, x86_64


class DiskFree(Frozen):
    """`df -P -B1 <path>`: the filesystem that holds the path."""

    filesystem: str
    mount_point: str
    total_bytes: int
    used_bytes: int
    avail_bytes: int


class ListeningPorts(Frozen):
    """`ss -H -ltn`: TCP ports something listens on, on any address."""

    ports: frozenset[int]


class WeightsDir(Frozen):
    """The weights-directory summary (see ``deployctl.probes.host.WEIGHTS_SUMMARY_SCRIPT``).

    Everything but ``exists`` is None when the directory does not exist.
    """

    exists: bool
    readable: bool | None = None
    config_json: bool | None = None
    safetensors_files: int | None = None
    total_bytes: int | None = None        # `du -sb`; None when du printed nothing
