"""Parsers for npu-smi's queries: `npu-smi info -l` and `-m`, `-t board`, `-t health` and `-t spod-info`
(their facts, with the commands, are in npu_smi.py).

As npu_smi.py's parser of the `npu-smi info` table (both use the text helpers of npu_smi_text.py): each turns
one command's stdout into a model of ``deployctl.core.models.facts`` or raises ValueError naming what it
expected.

Formats:
* `-l` and `-m` on A2: a public transcript of an Atlas 800 A2 with 910B4 (its repository is not recorded:
  unverified); `-m` on A3: vllm-project/vllm-ascend@182b75ea tests/ut/device_allocator/test_cpu_binding.py;
* `-t board` and `-t health`: Ascend/mind-cluster@22bb3d98 component/ascend-faultdiag/test/st_module_testcase/
  kg_parse/npu_info_before.txt and npu_info_after.txt; hicann/driver@ef377e95 docs/en/Ascend_950_npu-smi/;
* `-t spod-info`: hicann/hccl@09300b70 docs/zh/user_guide/cluster_info_config/rank_table_config_a3.md and
  vllm-project/vllm-ascend@848419d1 examples/disaggregated_prefill_v1/gen_ranktable.py.
"""

from __future__ import annotations

import re

from deployctl.core.models.facts import BoardInfo, ChipMap, ChipMapRow, Health, NpuHealth, NpuList, SpodInfo
from deployctl.probes.npu_smi_text import HEADER as _HEADER
from deployctl.probes.npu_smi_text import MISSING as _MISSING
from deployctl.probes.npu_smi_text import colon_pairs as _colon_pairs
from deployctl.probes.npu_smi_text import health as _health
from deployctl.probes.npu_smi_text import opt_int as _opt_int
from deployctl.probes.npu_smi_text import opt_str as _opt_str
from deployctl.probes.npu_smi_text import snippet as _snippet
from deployctl.probes.npu_smi_text import to_int as _int


# --------------------------------------------------------------------------- -l, -m


def parse_npu_list(text: str) -> NpuList:
    """Parse `npu-smi info -l`: ``Total Count : 8`` then ``NPU ID : n`` / ``Chip Count : c`` per NPU.

    Other keys (``Product Name``, ``Serial Number`` on some products) are ignored. ``total`` is kept as
    printed; compare it with ``len(chips_per_npu)`` if it matters.
    """
    total: int | None = None
    chips: dict[int, int] = {}
    current: int | None = None
    for key, value in _colon_pairs(text, "npu-smi info -l"):
        if key == "Total Count":
            total = _int(value, "npu-smi info -l Total Count")
        elif key == "NPU ID":
            current = _int(value, "npu-smi info -l NPU ID")
            if current in chips:
                raise ValueError(f"npu-smi info -l: NPU ID {current} appears twice")
            chips[current] = -1
        elif key == "Chip Count":
            if current is None:
                raise ValueError("npu-smi info -l: `Chip Count` before any `NPU ID`")
            chips[current] = _int(value, f"npu-smi info -l NPU {current} Chip Count")
    if total is None:
        raise ValueError(f"npu-smi info -l: expected `Total Count : N`, got {_snippet(text)}")
    missing = [n for n, c in chips.items() if c < 0]
    if missing:
        raise ValueError(f"npu-smi info -l: NPU {missing[0]} has no `Chip Count`")
    return NpuList(total=total, chips_per_npu=chips)


_MAP_LABELS = ("NPU ID", "Chip Logic ID", "Chip Phy-ID", "Chip ID", "Chip Name")
_MAP_LABEL_RE = re.compile("|".join(re.escape(label) for label in _MAP_LABELS))


def parse_chip_map(text: str) -> ChipMap:
    """Parse `npu-smi info -m`.

    The header names the columns (``NPU ID  Chip ID  Chip Logic ID  [Chip Phy-ID]  Chip Name``); a row
    is whitespace-separated ids, ``-`` for none, then the name, which may contain a space
    (``Ascend 910B4``). Works for any column width and tab indents.
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines or "NPU ID" not in lines[0]:
        raise ValueError("npu-smi info -m: expected the `NPU ID  Chip ID  Chip Logic ID ...` header, "
                         f"got {_snippet(text)}")
    cols = _map_columns(lines[0])
    rows = []
    for line in lines[1:]:
        tokens = line.split()
        n = len(cols) - 1
        if len(tokens) <= n:
            raise ValueError(f"npu-smi info -m: expected {n} ids and a name, got {line.strip()!r}")
        ids = dict(zip(cols, tokens[:n]))
        where = f"npu-smi info -m row {line.strip()!r}"
        rows.append(ChipMapRow(npu=_int(ids["NPU ID"], where), chip=_int(ids["Chip ID"], where),
                               logic_id=_opt_int(ids["Chip Logic ID"], where),
                               phy_id=_opt_int(ids["Chip Phy-ID"], where) if "Chip Phy-ID" in ids else None,
                               name=" ".join(tokens[n:])))
    return ChipMap(rows=tuple(rows))


def _map_columns(header: str) -> list[str]:
    cols = _MAP_LABEL_RE.findall(header)
    leftover = _MAP_LABEL_RE.sub("", header).strip()
    if leftover or cols[:2] != ["NPU ID", "Chip ID"] or cols[-1:] != ["Chip Name"] or "Chip Logic ID" not in cols:
        raise ValueError(f"npu-smi info -m: unsupported header {header.strip()!r} "
                         "(expected `NPU ID  Chip ID  Chip Logic ID  [Chip Phy-ID]  Chip Name`)")
    return cols


# --------------------------------------------------------------------------- -t board, health, spod-info

_BOARD_FIELDS = {
    "Software Version": "software_version", "Firmware Version": "firmware_version",
    "Compatibility": "compatibility", "Board ID": "board_id", "PCI Vendor ID": "pci_vendor_id",
    "PCI Device ID": "pci_device_id", "PCIe Bus Info": "pcie_bus_info", "Chip Name": "chip_name",
    "Product Name": "product_name", "Serial Number": "serial_number",
}


def parse_board_info(text: str) -> BoardInfo:
    """Parse `npu-smi info -t board -i N` (card) or `-i N -c C` (chip): ``Key : value`` lines.

    ``Software Version`` is the driver, ``Firmware Version`` the firmware. `NA` becomes None; keys
    without a field (PCB ID, Slot ID, VDie ID, Chip Fault, ...) go to ``extra`` as printed.

    Raises:
        ValueError: no ``NPU ID`` (e.g. ``Invalid card id.``), a non ``key : value`` line, a repeated key.
    """
    fields: dict[str, object] = {}
    extra: dict[str, str] = {}
    seen: set[str] = set()
    for key, value in _colon_pairs(text, "npu-smi info -t board"):
        if key in seen:
            raise ValueError(f"npu-smi info -t board: key {key!r} appears twice")
        seen.add(key)
        if key == "NPU ID":
            fields["npu_id"] = _int(value, "npu-smi info -t board NPU ID")
        elif key == "Chip ID":
            fields["chip_id"] = _int(value, "npu-smi info -t board Chip ID")
        elif key == "Chip Count":
            fields["chip_count"] = _opt_int(value, "npu-smi info -t board Chip Count")
        elif key in _BOARD_FIELDS:
            fields[_BOARD_FIELDS[key]] = _opt_str(value)
        else:
            extra[key] = value
    if "npu_id" not in fields:
        raise ValueError(f"npu-smi info -t board: expected `NPU ID : N`, got {_snippet(text)}")
    return BoardInfo(**fields, extra=extra)


def parse_npu_health(text: str) -> NpuHealth:
    """Parse `npu-smi info -t health -i N -c C`.

    Reads ``Health Status`` (``Health`` on newer tools), ``Error Code`` (space-separated, `NA` = none),
    ``Error Information``, and the unlabelled `` : node type=...`` lines that follow an alarm.
    Other keys are ignored.
    """
    status: Health | None = None
    codes: tuple[str, ...] = ()
    info: str | None = None
    details: list[str] = []
    for key, value in _colon_pairs(text, "npu-smi info -t health"):
        if key in ("Health Status", "Health"):
            status = _health(value, "npu-smi info -t health")
        elif key == "Error Code":
            codes = () if value in _MISSING else tuple(value.split())
        elif key == "Error Information":
            info = _opt_str(value)
        elif key == "":
            details.append(value)
    if status is None:
        raise ValueError(f"npu-smi info -t health: expected `Health Status : <value>`, got {_snippet(text)}")
    return NpuHealth(status=status, error_codes=codes, error_info=info, details=tuple(details))


_SPOD_FIELDS = {"SDID": "sdid", "Super Pod ID": "super_pod_id", "Super Pod Size": "super_pod_size",
                "Server Index": "server_index", "Pod ID": "pod_id"}


def parse_spod_info(text: str) -> SpodInfo:
    """Parse `npu-smi info -t spod-info -i N -c C` (A3).

    Accepts both forms seen: plain ``SDID : 16777216`` lines, and the table form
    ``| Super Pod ID : 3 | Pod ID : 1 |`` under an npu-smi header. Unknown keys go to ``extra``.

    Raises:
        ValueError: neither ``SDID`` nor ``Super Pod ID`` present, or a segment that is not ``key : value``.
    """
    fields: dict[str, int | None] = {}
    extra: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip().startswith("+") or _HEADER.search(line):
            continue
        for segment in line.split("|"):
            s = segment.strip()
            if not s:
                continue
            if ":" not in s:
                raise ValueError(f"npu-smi info -t spod-info: expected `key : value`, got {s[:80]!r}")
            key, _, value = (p.strip() for p in s.partition(":"))
            if key in _SPOD_FIELDS:
                fields[_SPOD_FIELDS[key]] = _opt_int(value, f"npu-smi info -t spod-info {key}")
            else:
                extra[key] = value
    if fields.get("sdid") is None and fields.get("super_pod_id") is None:
        raise ValueError(f"npu-smi info -t spod-info: expected `SDID : N` or `Super Pod ID : N`, got {_snippet(text)}")
    return SpodInfo(**fields, extra=extra)
