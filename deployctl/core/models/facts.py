"""Facts that `deployctl preflight` reads from a host, as immutable pydantic models.

This module owns the shape of what a probe learns: npu-smi tables, hccn_tool answers, the driver,
firmware and CANN version files, and a few host basics. The pure parsers that build these models live
in ``deployctl/probes/``, each module naming the public sources of its formats.

Ids follow the rank-table vocabulary: ``phy_id`` is the physical device id (``/dev/davinciN``,
rank-table ``device_id``, the ``N`` of ``hccn_tool -i N`` and of ``address_N`` in hccn.conf);
``npu`` and ``chip`` are npu-smi's card and chip numbers; ``logic_id`` is what MindIE
``npuDeviceIds`` and ``ASCEND_RT_VISIBLE_DEVICES`` use.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from deployctl.core.models.base import Frozen
from deployctl.core.models.patterns import (ARCH_PATTERN, BUS_ID_PATTERN, CHIP_NAME_PATTERN, INTERFACE_PATTERN,
                                       KEY_PATTERN, OS_ID_PATTERN, VERSION_PATTERN, check_ip, check_text)

# npu-smi health values, most severe alarm wins (hicann/driver@ef377e95
# docs/en/Ascend_950_npu-smi/Ascend_950_npu-smi/querying-the-device-health-status.md L109-110)
Health = Literal["OK", "Warning", "Alarm", "Critical", "UNKNOWN"]
HEALTH_VALUES: tuple[str, ...] = ("OK", "Warning", "Alarm", "Critical", "UNKNOWN")

# What a host says is untrusted (issue 21): every value a fact carries is typed, matched against the pattern of
# the equivalent inventory key and bounded, so a fact that reaches a plan, a rendered file or the terminal is
# one deployctl could have been given by hand. A parser whose output fails these raises ValueError
# (pydantic's ValidationError is one): a per-host probe error, never a fact.
Id = Annotated[int, Field(ge=0, le=65535)]                  # npu, chip, phy and logic ids (npu-smi -i 2944 exists)
BigId = Annotated[int, Field(ge=0, le=2**32)]               # sdid, super pod id, pod id, server index
Count = Annotated[int, Field(ge=0, le=2**53)]               # sizes, counters, MB, bytes
Pid = Annotated[int, Field(ge=0, le=2**31)]
Number = Annotated[float, Field(allow_inf_nan=False, ge=-1e12, le=1e12)]
Text = Annotated[str, AfterValidator(check_text)]           # one printable line, bounded
Key = Annotated[str, Field(pattern=KEY_PATTERN)]
Version = Annotated[str, Field(pattern=VERSION_PATTERN)]
ChipName = Annotated[str, Field(pattern=CHIP_NAME_PATTERN)]
Interface = Annotated[str, Field(pattern=INTERFACE_PATTERN)]
Ip = Annotated[str, AfterValidator(check_ip)]
MAX_CHIPS = 256              # dies of one server (16 on A3), with room
MAX_ROWS = 4096              # processes, addresses, list entries

# `[lo,hi]` entries of the version.info compatibility lists, kept as printed
VersionRange = tuple[Version, Version]




# --------------------------------------------------------------------------- npu-smi


class NpuChip(Frozen):
    """One compute die of `npu-smi info` (its two-line block).

    On A2 ``phy_id`` is the NPU id (one chip per card); on A3 it is the Phy-ID column. Inside a
    container npu-smi numbers the visible devices from 0, so there the ids are the container's view.
    """

    npu: Id
    chip: Id                      # chip index inside the NPU: 0 on A2, 0/1 on A3
    phy_id: Id
    name: ChipName                # e.g. 910B3, Ascend910 (do not infer A2/A3 from it)
    health: Health
    power_w: Number | None        # None when npu-smi prints `-`/`NA` (the second die of an A3 NPU)
    temp_c: Annotated[int, Field(ge=-1000, le=1000)] | None
    aicore_pct: Count | None
    hugepages_used: Count
    hugepages_total: Count
    memory_used_mb: Count         # DDR (Memory-Usage column)
    memory_total_mb: Count
    hbm_used_mb: Count
    hbm_total_mb: Count
    bus_id: Annotated[str, Field(pattern=BUS_ID_PATTERN)]   # as printed; shared logs mask it (`xxxx:xx:xx.x`)

    @property
    def bus_id_masked(self) -> bool:
        return "x" in self.bus_id.lower()


class NpuSubChip(Frozen):
    """A per-chip status row some newer drivers print under a card (`| 0  1 | OK | ... |`, no Bus-Id)."""

    npu: Id
    chip: Id
    health: Health


class NpuProcess(Frozen):
    """One row of the process table of `npu-smi info`."""

    npu: Id
    chip: Id
    phy_id: Id | None             # the chip's phy_id, None if that chip is not in the device table
    pid: Pid
    name: Text                    # may be empty (seen on A3)
    memory_mb: Count


class NpuSmiInfo(Frozen):
    """`npu-smi info`: versions, every die, and the processes holding them."""

    tool_version: Version
    driver_version: Version       # the `Version:` of the header is the driver version
    layout: Literal["a2", "a3"]   # a3 = the `Chip  Phy-ID` header (two dies per NPU)
    chips: tuple[NpuChip, ...] = Field(max_length=MAX_CHIPS)
    sub_chips: tuple[NpuSubChip, ...] = Field((), max_length=MAX_CHIPS)
    processes: tuple[NpuProcess, ...] = Field((), max_length=MAX_ROWS)

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

    total: Count                  # `Total Count`, as printed
    chips_per_npu: dict[Id, Count] = Field(max_length=MAX_CHIPS)


class ChipMapRow(Frozen):
    """One row of `npu-smi info -m`. Mcu rows have no logic id (and no phy id on A3)."""

    npu: Id
    chip: Id
    logic_id: Id | None
    phy_id: Id | None             # only A3 prints a `Chip Phy-ID` column
    name: ChipName                # e.g. `Ascend 910B4`, `Ascend910`, `Mcu`


class ChipMap(Frozen):
    """`npu-smi info -m`: NPU/chip to logic id (and phy id on A3)."""

    rows: tuple[ChipMapRow, ...] = Field(max_length=MAX_CHIPS)

    @property
    def compute_rows(self) -> list[ChipMapRow]:
        """The rows that are devices (the ones with a logic id), not Mcu rows."""
        return [r for r in self.rows if r.logic_id is not None]


class BoardInfo(Frozen):
    """`npu-smi info -t board -i N [-c C]`. Every key npu-smi prints that is not a field is in ``extra``."""

    npu_id: Id
    chip_id: Id | None = None             # only with `-c`
    software_version: Text | None = None  # the driver version
    firmware_version: Text | None = None
    compatibility: Text | None = None     # npu-smi's own driver/firmware verdict, e.g. OK
    board_id: Text | None = None
    chip_count: Count | None = None
    pci_vendor_id: Text | None = None
    pci_device_id: Text | None = None
    pcie_bus_info: Text | None = None
    chip_name: Text | None = None         # only with `-c`
    product_name: Text | None = None
    serial_number: Text | None = None
    extra: dict[Key, Text] = Field(default_factory=dict, max_length=64)


class NpuHealth(Frozen):
    """`npu-smi info -t health -i N -c C`."""

    status: Health
    error_codes: tuple[Text, ...] = Field((), max_length=64)
    error_info: Text | None = None
    details: tuple[Text, ...] = Field((), max_length=64)   # the unlabelled ` : node type=...` lines after the error


class SpodInfo(Frozen):
    """`npu-smi info -t spod-info -i N -c C` (A3 super pods). ``sdid`` is rank-table ``super_device_id``."""

    sdid: BigId | None = None
    super_pod_id: BigId | None = None
    super_pod_size: BigId | None = None
    server_index: BigId | None = None
    pod_id: BigId | None = None
    extra: dict[Key, Text] = Field(default_factory=dict, max_length=64)


# --------------------------------------------------------------------------- versions


class VersionInfo(Frozen):
    """A `key=value` version file: driver or firmware `version.info`, CANN `*_install.info`.

    Ranges are kept as printed, one ``(lo, hi)`` per ``[lo,hi]``; a single ``[x]`` becomes ``(x, x)``.
    """

    version: Version                                    # `Version=` (`version=` in CANN files)
    package_version: Version | None = None              # absent from some 24.1.rc1 driver files
    innerversion: Version | None = None                 # e.g. V100R001C21SPC002B220
    # inner codes, e.g. (V100R001C21, V100R001C21)
    compatible_version: tuple[VersionRange, ...] = Field((), max_length=MAX_ROWS)
    # driver: accepted firmware, e.g. (7.0.0, 7.7.99)
    compatible_version_fw: tuple[VersionRange, ...] = Field((), max_length=MAX_ROWS)
    # firmware: accepted drivers, e.g. (24.1, 24.1.)
    compatible_version_drv: tuple[VersionRange, ...] = Field((), max_length=MAX_ROWS)
    raw: dict[Key, Text] = Field(default_factory=dict, max_length=256)

    @property
    def package(self) -> str:
        """The HDK package version: ``package_version``, else ``version``."""
        return self.package_version or self.version


class ImageVersions(Frozen):
    """What the engine image ships (deployctl.probes.image_versions): its CANN toolkit install file and the versions
    of the packages its engine spec names (image_packages).
    ``present``: False when the image is not on the host (nothing else is known then)."""

    present: bool
    cann: VersionInfo | None = None
    cann_file: Text | None = None
    packages: dict[Key, Version] = Field(default_factory=dict, max_length=16)


# --------------------------------------------------------------------------- hccn_tool


class IpConf(Frozen):
    """`hccn_tool -i N -ip -g`: the NPU NIC (RoCE) address."""

    ip: Ip
    netmask: Ip


class VnicInfo(Frozen):
    """`hccn_tool -i N -vnic -g` (A3): the HCCS vNIC."""

    link_up: bool
    ip: Ip
    netmask: Ip


class LinkStatus(Frozen):
    """`hccn_tool -i N -link -g`."""

    up: bool


class NetHealth(Frozen):
    """`hccn_tool -i N -net_health -g`; ``status`` as printed (`Success`, `Socket fail`, ...)."""

    status: Annotated[Text, Field(max_length=128)]

    @property
    def healthy(self) -> bool:
        return self.status == "Success"


class NetDetect(Frozen):
    """`hccn_tool -i N -netdetect -g`: the address the NIC probes for its health."""

    address: Ip


class Gateway(Frozen):
    """`hccn_tool -i N -gateway -g`."""

    address: Ip
    iface: Interface


class TlsCert(Frozen):
    """One certificate block of `hccn_tool -i N -tls -g`."""

    kind: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,32}$")]   # pub, ca1, ca2, ..., crl
    subject: Text | None = None           # newer drivers only
    issuer: Text
    start: datetime                       # UTC
    end: datetime                         # UTC
    expiration_status: Annotated[int, Field(ge=0, le=9)] | None = None  # 0 normal, 1 near expiration, 2 expired (newer drivers only)


class TlsInfo(Frozen):
    """`hccn_tool -i N -tls -g`. ``dev_id`` is the phy id npu-smi printed."""

    dev_id: Id
    enabled: bool
    preconfigured: bool | None            # None: older drivers do not print it
    alarm_days: Count
    certs: tuple[TlsCert, ...] = Field((), max_length=64)


class PingResult(Frozen):
    """`hccn_tool -i N -ping -g address X` summary."""

    device: Id | None                     # the `device N PING X` line, when printed
    target: Annotated[Text, Field(max_length=256)] | None
    sent: Count
    received: Count
    loss_pct: Annotated[float, Field(allow_inf_nan=False, ge=0, le=100)]


class HccnConf(Frozen):
    """/etc/hccn.conf: ``key_<phy_id>=value`` lines grouped by phy id (``entries[0]["address"]``)."""

    entries: dict[Id, Annotated[dict[Key, Text], Field(max_length=64)]] = Field(max_length=MAX_CHIPS)

    @property
    def addresses(self) -> dict[int, str]:
        return {d: kv["address"] for d, kv in sorted(self.entries.items()) if "address" in kv}

    @property
    def netmasks(self) -> dict[int, str]:
        return {d: kv["netmask"] for d, kv in sorted(self.entries.items()) if "netmask" in kv}


# --------------------------------------------------------------------------- host


class OsInfo(Frozen):
    """/etc/os-release (plus `uname -m` for ``arch``)."""

    id: Annotated[str, Field(pattern=OS_ID_PATTERN)]   # e.g. openEuler, ubuntu, kylin
    version_id: Annotated[Text, Field(max_length=64)] | None = None
    pretty_name: Annotated[Text, Field(max_length=256)] | None = None
    id_like: tuple[Annotated[str, Field(pattern=OS_ID_PATTERN)], ...] = Field((), max_length=16)
    arch: Annotated[str, Field(pattern=ARCH_PATTERN)] | None = None   # aarch64, x86_64


class DiskFree(Frozen):
    """`df -P -B1 <path>`: the filesystem that holds the path."""

    filesystem: Text
    mount_point: Text
    total_bytes: Count
    used_bytes: Count
    avail_bytes: Count


class ListeningPorts(Frozen):
    """`ss -H -ltn`: TCP ports something listens on, on any address."""

    ports: frozenset[Annotated[int, Field(ge=0, le=65535)]]


class WeightsDir(Frozen):
    """The weights-directory summary (see ``deployctl.probes.host.WEIGHTS_SUMMARY_SCRIPT``).

    Everything but ``exists`` is None when the directory does not exist.
    """

    exists: bool
    readable: bool | None = None
    config_json: bool | None = None
    safetensors_files: Count | None = None
    total_bytes: Count | None = None        # `du -sb`; None when du printed nothing
