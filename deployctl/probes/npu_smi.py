"""The npu-smi facts (every `npu-smi` command deployctl sends a host, with its parser) and the parser of the
`npu-smi info` table; the `-l`, `-m`, `-t board`, `-t health` and `-t spod-info` parsers are in
npu_smi_queries.py, the text helpers both use in npu_smi_text.py.

Each parser turns the stdout of one command into a model of ``deployctl.core.models.facts`` and raises
ValueError, naming what it expected, on anything else: a wrong fact is worse than a probe error.
Formats: the real `npu-smi info` outputs in github.com/vllm-project/vllm-ascend issues #198 (A2, 8 x 910B3), #2498
(one NPU in a container) and #6085 (A3, 16 chips); hicann/driver@ef377e95 docs/en/Ascend_950_npu-smi/
querying-basic-information.md. Tables are split on `|`, never by column offsets, because the widths change
between npu-smi releases (26.0 prints 118-column borders: vllm-ascend issue #12980).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from deployctl.core.models.facts import (
    BoardInfo,
    ChipMap,
    Health,
    NpuChip,
    NpuHealth,
    NpuList,
    NpuProcess,
    NpuSmiInfo,
    NpuSubChip,
    SpodInfo,
)
from deployctl.probes.fact import Fact
from deployctl.probes.npu_smi_queries import (
    parse_board_info,
    parse_chip_map,
    parse_npu_health,
    parse_npu_list,
    parse_spod_info,
)
from deployctl.probes.npu_smi_text import HEADER as _HEADER
from deployctl.probes.npu_smi_text import cells as _cells
from deployctl.probes.npu_smi_text import health as _health
from deployctl.probes.npu_smi_text import opt_float as _opt_float
from deployctl.probes.npu_smi_text import opt_int as _opt_int
from deployctl.probes.npu_smi_text import snippet as _snippet
from deployctl.probes.npu_smi_text import to_int as _int

# masked ids (`xxxx:xx:xx.x`, `0000:xx:00.0`) are still Bus-Ids
_BUS_ID = re.compile(r"^[0-9A-Fa-fxX]{4}:[0-9A-Fa-fxX]{2}:[0-9A-Fa-fxX]{2}\.[0-9A-Fa-fxX]$")
_PAIR = r"(\d+)\s*/\s*(\d+)"                          # `3338 / 65536` and `26690/ 65536`
_CARD_METRICS = re.compile(rf"^(\S+)\s+(\S+)\s+{_PAIR}$")   # Power(W) Temp(C) Hugepages used/total
_CHIP_METRICS = re.compile(rf"^(\S+)\s+{_PAIR}\s+{_PAIR}$")  # AICore(%) Memory used/total HBM used/total
_NO_PROCESS = re.compile(r"^No running processes found in NPU \d+$")


# --------------------------------------------------------------------------- npu-smi info


class _Card(NamedTuple):
    """The first line of a chip block, waiting for its Bus-Id line."""

    npu: int
    name: str
    health: Health
    power_w: float | None
    temp_c: int | None
    hugepages_used: int
    hugepages_total: int


def parse_npu_smi_info(text: str) -> NpuSmiInfo:
    """Parse `npu-smi info` (A2 and A3 layouts).

    A chip is a two-line block: ``NPU Name | Health | Power Temp Hugepages`` then ``Chip [Phy-ID] |
    Bus-Id | AICore Memory HBM``. A3 prints one block per die (``Chip  Phy-ID`` header), A2 one per
    card (phy id = NPU id). Rows whose first cell is ``int int`` with no Bus-Id (newer drivers, under a
    card) are sub-chip status rows, kept in ``sub_chips``. The process table must be present; its
    ``No running processes found in NPU N`` lines are skipped.

    Raises:
        ValueError: no header, an unknown layout, a row that fits neither form, a card row without its
            chip row, a health word outside OK/Warning/Alarm/Critical/UNKNOWN, duplicate phy ids.
    """
    header = _HEADER.search(text)
    if header is None:
        raise ValueError(f"npu-smi info: expected a `npu-smi <tool> Version: <driver>` header, got {_snippet(text)}")
    rows = [_cells(ln) for ln in text.splitlines() if ln.strip().startswith("|") and not _HEADER.search(ln)]
    dev_at = next((i for i, c in enumerate(rows) if c[0].split()[:2] == ["NPU", "Name"]), None)
    if dev_at is None or dev_at + 1 >= len(rows):
        raise ValueError("npu-smi info: expected the `NPU Name | Health | Power(W) ...` table header")
    layout = _layout(rows[dev_at + 1])
    proc_at = next((i for i, c in enumerate(rows) if i > dev_at and len(c) > 1 and c[1].startswith("Process id")),
                   None)
    if proc_at is None:
        raise ValueError("npu-smi info: expected the process table (`NPU Chip | Process id | ...`) after the devices")
    chips, subs = _device_rows(rows[dev_at + 2:proc_at], layout)
    return NpuSmiInfo(tool_version=header.group(1), driver_version=header.group(2), layout=layout,
                      chips=tuple(chips), sub_chips=tuple(subs),
                      processes=tuple(_process_rows(rows[proc_at + 1:], chips)))


def _layout(cells: list[str]) -> str:
    head = cells[0].split()
    if head == ["Chip"]:
        return "a2"
    if head == ["Chip", "Phy-ID"]:
        return "a3"
    raise ValueError(f"npu-smi info: unsupported layout, second header line starts {cells[0]!r} "
                     "(expected `Chip` (A2) or `Chip  Phy-ID` (A3))")


def _device_rows(rows: list[list[str]], layout: str) -> tuple[list[NpuChip], list[NpuSubChip]]:
    chips: list[NpuChip] = []
    subs: list[NpuSubChip] = []
    card: _Card | None = None
    for cells in rows:
        shown = " | ".join(cells)
        if len(cells) != 3:
            raise ValueError(f"npu-smi info: expected 3 `|` cells in a device row, got {len(cells)}: {shown!r}")
        first = cells[0].split()
        if _BUS_ID.match(cells[1]):
            if card is None:
                raise ValueError(f"npu-smi info: chip row {shown!r} has no NPU row above it")
            chips.append(_chip(card, first, cells[1], cells[2], layout, shown))
            card = None
        elif len(first) == 2 and all(t.isdigit() for t in first):
            subs.append(_sub_chip(first, cells[1], chips, card, shown))
        elif len(first) >= 2 and first[0].isdigit():
            if card is not None:
                raise ValueError(f"npu-smi info: NPU {card.npu} row has no chip (Bus-Id) row below it")
            card = _card(first, cells[1], cells[2], shown)
        else:
            raise ValueError(f"npu-smi info: unexpected device row {shown!r}")
    if card is not None:
        raise ValueError(f"npu-smi info: NPU {card.npu} row has no chip (Bus-Id) row below it")
    if not chips:
        raise ValueError("npu-smi info: the device table has no NPU rows")
    seen: set[int] = set()
    for c in chips:
        if c.phy_id in seen:
            raise ValueError(f"npu-smi info: phy id {c.phy_id} appears twice")
        seen.add(c.phy_id)
    return chips, subs


def _card(first: list[str], health: str, metrics: str, shown: str) -> _Card:
    m = _CARD_METRICS.match(metrics)
    if m is None:
        raise ValueError(f"npu-smi info: expected `Power Temp used / total` in NPU row {shown!r}")
    return _Card(npu=_int(first[0], "npu-smi info NPU id"), name=" ".join(first[1:]),
                 health=_health(health, f"npu-smi info NPU {first[0]} Health"),
                 power_w=_opt_float(m.group(1), "npu-smi info Power(W)"),
                 temp_c=_opt_int(m.group(2), "npu-smi info Temp(C)"),
                 hugepages_used=int(m.group(3)), hugepages_total=int(m.group(4)))


def _chip(card: _Card, first: list[str], bus_id: str, metrics: str, layout: str, shown: str) -> NpuChip:
    want = 1 if layout == "a2" else 2
    if len(first) != want or not all(t.isdigit() for t in first):
        form = "`<chip>`" if layout == "a2" else "`<chip> <phy-id>`"
        raise ValueError(f"npu-smi info: expected {form} in the first cell of chip row {shown!r}")
    m = _CHIP_METRICS.match(metrics)
    if m is None:
        raise ValueError(f"npu-smi info: expected `AICore used / total used / total` in chip row {shown!r}")
    return NpuChip(npu=card.npu, chip=int(first[0]), phy_id=card.npu if layout == "a2" else int(first[1]),
                   name=card.name, health=card.health, power_w=card.power_w, temp_c=card.temp_c,
                   aicore_pct=_opt_int(m.group(1), "npu-smi info AICore(%)"),
                   hugepages_used=card.hugepages_used, hugepages_total=card.hugepages_total,
                   memory_used_mb=int(m.group(2)), memory_total_mb=int(m.group(3)),
                   hbm_used_mb=int(m.group(4)), hbm_total_mb=int(m.group(5)), bus_id=bus_id)


def _sub_chip(first: list[str], health: str, chips: list[NpuChip], card: _Card | None, shown: str) -> NpuSubChip:
    npu = int(first[0])
    # newer drivers print these under a complete card block; anywhere else the table is not understood
    if card is not None or not chips or chips[-1].npu != npu:
        raise ValueError(f"npu-smi info: row {shown!r} has no Bus-Id and does not follow a chip of NPU {npu}")
    return NpuSubChip(npu=npu, chip=int(first[1]), health=_health(health, f"npu-smi info NPU {npu} sub-chip Health"))


def _process_rows(rows: list[list[str]], chips: list[NpuChip]) -> list[NpuProcess]:
    phy = {(c.npu, c.chip): c.phy_id for c in chips}
    out = []
    for cells in rows:
        shown = " | ".join(cells)
        if len(cells) == 1 and (_NO_PROCESS.match(cells[0]) or not cells[0]):
            continue
        first = cells[0].split()
        if len(cells) != 4 or len(first) != 2 or not all(t.isdigit() for t in first):
            raise ValueError(f"npu-smi info: expected `NPU Chip | pid | name | MB` process row, got {shown!r}")
        npu, chip = int(first[0]), int(first[1])
        out.append(NpuProcess(npu=npu, chip=chip, phy_id=phy.get((npu, chip)),
                              pid=_int(cells[1], "npu-smi info Process id"), name=cells[2],
                              memory_mb=_int(cells[3], "npu-smi info Process memory(MB)")))
    return out


# --------------------------------------------------------------------------- the facts

# `npu-smi info`: every chip's health, power, memory and the processes on it (preflight's npu.info, watch's NPU
# health)
NPU_INFO: Fact[NpuSmiInfo] = Fact("npu-smi-info", lambda: ["npu-smi", "info"], parse_npu_smi_info)
# `npu-smi info -l`: the NPUs and their chip counts
NPU_LIST: Fact[NpuList] = Fact("npu-smi-info-l", lambda: ["npu-smi", "info", "-l"], parse_npu_list)
# `npu-smi info -m`: NPU/chip ids to logic (and, on A3, phy) ids
CHIP_MAP: Fact[ChipMap] = Fact("npu-smi-info-m", lambda: ["npu-smi", "info", "-m"], parse_chip_map)
# `npu-smi info -t board -i N`: one NPU's driver and firmware versions, as the board reports them
BOARD: Fact[BoardInfo] = Fact("npu-smi-board", lambda npu: ["npu-smi", "info", "-t", "board", "-i", str(npu)],
                              parse_board_info)
# `npu-smi info -t health -i N -c C`: one chip's health with its error codes
NPU_HEALTH: Fact[NpuHealth] = Fact(
    "npu-smi-health", lambda npu, chip: ["npu-smi", "info", "-t", "health", "-i", str(npu), "-c", str(chip)],
    parse_npu_health)
# `npu-smi info -t spod-info -i N -c C` (A3): the chip's SDID and super pod
SPOD_INFO: Fact[SpodInfo] = Fact(
    "npu-smi-spod-info", lambda npu, chip: ["npu-smi", "info", "-t", "spod-info", "-i", str(npu), "-c", str(chip)],
    parse_spod_info)
