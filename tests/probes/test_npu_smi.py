"""npu-smi parsers on the real samples (tests/samples/ascend, copied from reference/ascend) and edge cases."""

from __future__ import annotations

from pathlib import Path

import pytest
from transcripts import section
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from deployctl.core.models.facts import HEALTH_VALUES, NpuChip, NpuProcess
from deployctl.probes.npu_smi import parse_npu_smi_info
from deployctl.probes.npu_smi_queries import (
    parse_board_info,
    parse_chip_map,
    parse_npu_health,
    parse_npu_list,
    parse_spod_info,
)

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "ascend"
A2_IDLE = SAMPLES / "npu-smi" / "npu-smi-info_910B3_8npu_23.0.7_idle.txt"
A2_CONTAINER = SAMPLES / "npu-smi" / "npu-smi-info_910B3_1npu-visible-in-container_24.1.rc2_with-process.txt"
A3 = SAMPLES / "npu-smi" / "npu-smi-info_A3_Ascend910_8npu-16chip_25.2.1_with-processes.txt"
FAULTDIAG_BEFORE = SAMPLES / "hccn" / "faultdiag_npu_info_before_910A_hccn-npu-smi.txt"
FAULTDIAG_AFTER = SAMPLES / "hccn" / "faultdiag_npu_info_after_910A_alarm_versions.txt"



# --------------------------------------------------------------------------- npu-smi info, real samples


def test_a2_idle_eight_910b3():
    info = parse_npu_smi_info(A2_IDLE.read_text())
    assert (info.tool_version, info.driver_version, info.layout) == ("23.0.7", "23.0.7", "a2")
    assert [c.npu for c in info.chips] == list(range(8))
    assert info.phy_ids == list(range(8))                  # A2: phy id = NPU id
    assert {c.chip for c in info.chips} == {0}
    assert {c.name for c in info.chips} == {"910B3"} and {c.health for c in info.chips} == {"OK"}
    first, last = info.chips[0], info.chips[7]
    assert (first.power_w, first.temp_c, first.bus_id) == (102.8, 55, "0000:C1:00.0")
    assert (first.hbm_used_mb, first.hbm_total_mb) == (3338, 65536)
    assert (first.memory_used_mb, first.memory_total_mb, first.hugepages_used, first.aicore_pct) == (0, 0, 0, 0)
    assert (last.power_w, last.temp_c, last.bus_id, last.hbm_used_mb) == (105.1, 59, "0000:42:00.0", 3338)
    assert info.chips[3].power_w == 108.7 and info.chips[2].hbm_used_mb == 3334
    assert info.processes == () and info.sub_chips == ()
    assert info.chips_per_npu == {n: 1 for n in range(8)}


def test_a2_container_one_visible_npu_with_process():
    info = parse_npu_smi_info(A2_CONTAINER.read_text())
    assert (info.tool_version, info.driver_version, info.layout) == ("24.1.rc2", "24.1.rc2", "a2")
    (chip,) = info.chips
    assert (chip.npu, chip.phy_id, chip.name, chip.bus_id) == (0, 0, "910B3", "0000:C1:00.0")
    assert (chip.power_w, chip.temp_c, chip.hbm_used_mb, chip.hbm_total_mb) == (99.1, 37, 59784, 65536)
    assert info.processes == (NpuProcess(npu=0, chip=0, phy_id=0, pid=6277, name="python", memory_mb=56485),)


def test_a3_sixteen_dies_with_phy_ids_and_processes():
    info = parse_npu_smi_info(A3.read_text())
    assert (info.tool_version, info.driver_version, info.layout) == ("25.2.1", "25.2.1", "a3")
    assert len(info.chips) == 16
    assert info.phy_ids == list(range(16))
    assert [(c.npu, c.chip) for c in info.chips] == [(n, k) for n in range(8) for k in (0, 1)]
    assert info.chips_per_npu == {n: 2 for n in range(8)}
    assert {c.name for c in info.chips} == {"Ascend910"}
    die0, die1 = info.chips[0], info.chips[1]
    assert (die0.power_w, die0.temp_c, die0.hbm_used_mb, die0.hbm_total_mb) == (164.4, 48, 26690, 65536)
    assert die0.bus_id == "0000:9D:00.0"
    assert (die1.power_w, die1.temp_c, die1.hbm_used_mb, die1.bus_id) == (None, 47, 26457, "0000:9F:00.0")
    assert all(c.power_w is None for c in info.chips if c.chip == 1)
    assert all(c.power_w is not None for c in info.chips if c.chip == 0)
    assert info.chips[15].bus_id == "0000:83:00.0" and info.chips[14].power_w == 162.2
    assert len(info.processes) == 16
    assert info.processes[0] == NpuProcess(npu=0, chip=0, phy_id=0, pid=3742689, name="", memory_mb=23631)
    assert info.processes[-1] == NpuProcess(npu=7, chip=1, phy_id=15, pid=3747148, name="", memory_mb=23631)
    assert [p.phy_id for p in info.processes] == list(range(16))


def test_empty_npu_smi_output_in_faultdiag_transcript_is_an_error():
    with pytest.raises(ValueError, match="npu-smi <tool> Version"):
        parse_npu_smi_info(section(FAULTDIAG_BEFORE, "/usr/local/bin/npu-smi info"))


# --------------------------------------------------------------------------- npu-smi info, edge cases


def widen(text: str, extra: int = 10) -> str:
    """Widen the first and last column of every table line by ``extra`` (98 -> 118 columns)."""
    out = []
    for line in text.splitlines():
        if line[:1] in "|+":
            sep, fill = line[0], ("=" if "=" in line else "-") if line[0] == "+" else " "
            parts = line[1:-1].split(sep)
            parts[0] += fill * extra
            parts[-1] += fill * extra
            line = sep + sep.join(parts) + line[-1]
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("sample", [A2_IDLE, A2_CONTAINER, A3])
def test_widened_118_column_table_parses_the_same(sample):
    wide = widen(sample.read_text())
    assert {len(ln) for ln in wide.splitlines() if ln[:1] in "|+"} == {118}
    assert parse_npu_smi_info(wide) == parse_npu_smi_info(sample.read_text())


def test_masked_bus_ids_are_kept_as_printed():
    text = A2_IDLE.read_text().replace("0000:C1:00.0", "xxxx:xx:xx.x").replace("0000:C2:00.0", "0000:xx:00.0")
    info = parse_npu_smi_info(text)
    assert (info.chips[0].bus_id, info.chips[1].bus_id) == ("xxxx:xx:xx.x", "0000:xx:00.0")
    assert info.chips[0].bus_id_masked and info.chips[1].bus_id_masked and not info.chips[2].bus_id_masked


@pytest.mark.parametrize("word, health", [("Warning", "Warning"), ("Alarm", "Alarm"), ("Critical", "Critical"),
                                          ("UNKNOWN", "UNKNOWN"), ("Unknown", "UNKNOWN"), ("ok", "OK")])
def test_non_ok_health_values(word, health):
    row = "| 3     910B3               | "
    text = A2_IDLE.read_text().replace(row + "OK     ", row + f"{word:<7}")
    info = parse_npu_smi_info(text)
    assert info.chips[3].health == health
    assert {c.health for c in info.chips if c.npu != 3} == {"OK"}


def test_unknown_health_word_is_an_error():
    text = A2_IDLE.read_text().replace("| 3     910B3               | OK     ", "| 3     910B3               | Broken ")
    with pytest.raises(ValueError, match="expected a health value.*'Broken'"):
        parse_npu_smi_info(text)


SUB_CHIPS = """\
+------------------------------------------------------------------------------------------------+
| npu-smi 25.5.2                   Version: 25.5.2                                               |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 94.2        41                0    / 0             |
| 0                         | 0000:66:00.0  | 0           0    / 0          3411 / 65536         |
| 0     0                   | OK            | 0                                0    / 0          |
| 0     1                   | Alarm         | 0                                0    / 0          |
+===========================+===============+====================================================+
| 1     910B3               | OK            | 96.4        44                0    / 0             |
| 0                         | 0000:19:00.0  | 0           0    / 0          3404 / 65536         |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| No running processes found in NPU 0                                                            |
+===========================+===============+====================================================+
| No running processes found in NPU 1                                                            |
+===========================+===============+====================================================+
"""


def test_sub_chip_rows_without_bus_id_are_not_devices():
    info = parse_npu_smi_info(SUB_CHIPS)
    assert [(c.npu, c.phy_id, c.bus_id, c.hbm_used_mb) for c in info.chips] == [
        (0, 0, "0000:66:00.0", 3411), (1, 1, "0000:19:00.0", 3404)]
    assert [(s.npu, s.chip, s.health) for s in info.sub_chips] == [(0, 0, "OK"), (0, 1, "Alarm")]


def test_process_rows_and_no_process_lines_mix():
    text = A2_IDLE.read_text().replace(
        "| No running processes found in NPU 1                                                            |",
        "| 1       0                 | 4242          | mindieservice_d          | 61000                   |\n"
        "| 1       0                 | 4243          |                          | 1200                    |")
    info = parse_npu_smi_info(text)
    assert [(p.npu, p.phy_id, p.pid, p.name, p.memory_mb) for p in info.processes] == [
        (1, 1, 4242, "mindieservice_d", 61000), (1, 1, 4243, "", 1200)]


@pytest.mark.parametrize("mutate, message", [
    (lambda t: t.replace("| npu-smi 23.0.7                   Version: 23.0.7", "| npu-smi"), "Version"),
    (lambda t: t.replace("| Chip                      | Bus-Id", "| Chip    Device            | Bus-Id"),
     "unsupported layout"),
    (lambda t: t.replace("| 0                         | 0000:C2:00.0  | 0           0    / 0          3337 / 65536"
                         "         |\n", ""), "NPU 1 row has no chip"),
    (lambda t: t.replace("3337 / 65536", "3337 of 65536"), "AICore used / total"),
    (lambda t: t.replace("| 97.6        54 ", "| 97.6W       54 "), "Power"),
    (lambda t: t.split("| NPU     Chip")[0], "process table"),
    (lambda t: t.replace("| No running processes found in NPU 2  ", "| something else here  "), "process row"),
    (lambda t: t.replace("| 0                         | 0000:C2:00.0", "| 0    5                    | 0000:C2:00.0"),
     "`<chip>`"),
], ids=["no-header", "310p-layout", "card-without-chip", "bad-hbm", "bad-power", "no-process-table",
        "bad-process-row", "a3-chip-cell-in-a2"])
def test_malformed_tables_raise_value_error(mutate, message):
    text = A2_IDLE.read_text()
    assert mutate(text) != text
    with pytest.raises(ValueError, match=message):
        parse_npu_smi_info(mutate(text))


def test_duplicate_phy_id_is_an_error():
    text = A3.read_text().replace("| 1     3                   |", "| 1     2                   |")
    with pytest.raises(ValueError, match="phy id 2 appears twice"):
        parse_npu_smi_info(text)


@pytest.mark.parametrize("text", ["", "dcmi module initialize failed. ret is -8005\n", "npu-smi: command not found"])
def test_not_a_table(text):
    with pytest.raises(ValueError, match="npu-smi info"):
        parse_npu_smi_info(text)


# --------------------------------------------------------------------------- round trip (hypothesis)


def render(chips: list[NpuChip], procs: list[NpuProcess], a3: bool, widths: tuple[int, int, int]) -> str:
    """Print chips and processes the way npu-smi does, with the given cell widths."""
    w0, w1, w2 = widths
    total = w0 + w1 + w2 + 2

    def row(*cells: str, ws=(w0, w1, w2)) -> str:
        return "|" + "|".join(" " + c.ljust(w - 1) for c, w in zip(cells, ws)) + "|"

    def border(ch: str) -> str:
        return "+" + "+".join(ch * w for w in (w0, w1, w2)) + "+"

    proc_ws = (w0, w1, w2 // 2, w2 - w2 // 2 - 1)
    out = ["+" + "-" * total + "+", "| " + "npu-smi 26.0.rc2   Version: 26.0.rc2".ljust(total - 1) + "|", border("-"),
           row("NPU   Name", "Health", "Power(W)    Temp(C)           Hugepages-Usage(page)"),
           row("Chip  Phy-ID" if a3 else "Chip", "Bus-Id", "AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)"), border("=")]
    for c in chips:
        power = "-" if c.power_w is None else f"{c.power_w:.1f}"
        out.append(row(f"{c.npu}     {c.name}", c.health,
                       f"{power}   {c.temp_c}   {c.hugepages_used} / {c.hugepages_total}"))
        out.append(row(f"{c.chip}     {c.phy_id}" if a3 else f"{c.chip}", c.bus_id,
                       f"{c.aicore_pct}   {c.memory_used_mb} / {c.memory_total_mb}   "
                       f"{c.hbm_used_mb}/ {c.hbm_total_mb}"))
        out.append(border("-" if a3 and c.chip == 0 else "="))
    out += [border("-"), row("NPU     Chip", "Process id", "Process name", "Process memory(MB)", ws=proc_ws),
            border("=")]
    for npu in sorted({c.npu for c in chips}):
        mine = [p for p in procs if p.npu == npu]
        out += [row(f"{p.npu}       {p.chip}", str(p.pid), p.name, str(p.memory_mb), ws=proc_ws) for p in mine]
        if not mine:
            out.append("| " + f"No running processes found in NPU {npu}".ljust(total - 1) + "|")
        out.append(border("="))
    return "\n".join(out) + "\n"


hex4 = st.text("0123456789ABCDEF", min_size=2, max_size=2)


@st.composite
def tables(draw):
    a3 = draw(st.booleans())
    npus = draw(st.integers(1, 8))
    chips, procs = [], []
    for npu in range(npus):
        for chip in ((0, 1) if a3 else (0,)):
            hbm_total = draw(st.sampled_from([32768, 65536]))
            chips.append(NpuChip(
                npu=npu, chip=chip, phy_id=2 * npu + chip if a3 else npu, name="Ascend910" if a3 else "910B3",
                health=draw(st.sampled_from(HEALTH_VALUES)),
                power_w=None if chip == 1 else draw(st.integers(0, 4000)) / 10,
                temp_c=draw(st.integers(20, 110)), aicore_pct=draw(st.integers(0, 100)),
                hugepages_used=0, hugepages_total=0, memory_used_mb=0, memory_total_mb=0,
                hbm_used_mb=draw(st.integers(0, hbm_total)), hbm_total_mb=hbm_total,
                bus_id=draw(st.one_of(st.just("xxxx:xx:xx.x"), st.builds(lambda b: f"0000:{b}:00.0", hex4)))))
            if draw(st.booleans()):
                procs.append(NpuProcess(npu=npu, chip=chip, phy_id=chips[-1].phy_id, pid=draw(st.integers(1, 4194304)),
                                        name=draw(st.sampled_from(["", "python", "mindieservice_d"])),
                                        memory_mb=draw(st.integers(0, hbm_total))))
    widths = (draw(st.integers(20, 40)), draw(st.integers(15, 25)), draw(st.integers(52, 80)))
    return chips, procs, a3, widths


@settings(max_examples=examples(60), deadline=None)
@given(tables())
def test_round_trip_any_width(table):
    chips, procs, a3, widths = table
    info = parse_npu_smi_info(render(chips, procs, a3, widths))
    assert info.layout == ("a3" if a3 else "a2")
    assert list(info.chips) == chips
    assert list(info.processes) == procs


# --------------------------------------------------------------------------- -l and -m


def test_npu_list_910b4():
    listing = parse_npu_list((SAMPLES / "npu-smi" / "npu-smi-info-l_910B4_8npu.txt").read_text())
    assert listing.total == 8
    assert listing.chips_per_npu == {n: 1 for n in range(8)}


def test_npu_list_a3_with_product_lines():
    text = ("\tTotal Count : 2\n\n\tNPU ID : 0\n\tProduct Name : IT21PD2G10\n\tChip Count : 2\n\n"
            "\tNPU ID : 1\n\tChip Count : 2\n")
    assert parse_npu_list(text).chips_per_npu == {0: 2, 1: 2}


@pytest.mark.parametrize("text, message", [("NPU ID : 0\nChip Count : 1\n", "Total Count"),
                                           ("Total Count : 1\nNPU ID : 0\n", "no `Chip Count`"),
                                           ("Error: permission denied\n", "Total Count"),
                                           ("permission denied\n", "key : value")])
def test_npu_list_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_npu_list(text)


def test_chip_map_910b4_with_mcu_rows():
    cmap = parse_chip_map((SAMPLES / "npu-smi" / "npu-smi-info-m_910B4_8npu.txt").read_text())
    assert len(cmap.rows) == 16
    assert [(r.npu, r.chip, r.logic_id, r.name) for r in cmap.compute_rows] == [
        (n, 0, n, "Ascend 910B4") for n in range(8)]
    mcu = [r for r in cmap.rows if r.logic_id is None]
    assert [(r.npu, r.chip, r.name) for r in mcu] == [(n, 1, "Mcu") for n in range(8)]
    assert all(r.phy_id is None for r in cmap.rows)          # A2 prints no Chip Phy-ID column


def test_chip_map_910a_tab_indented_from_faultdiag():
    cmap = parse_chip_map(section(FAULTDIAG_BEFORE, "/usr/local/bin/npu-smi info -m"))
    assert [(r.npu, r.chip, r.logic_id, r.name) for r in cmap.rows] == [(n, 0, n, "Ascend 910A") for n in range(8)]


def test_chip_map_a3_phy_id_column():
    text = ("        NPU ID                         Chip ID                        Chip Logic ID                  "
            "Chip Phy-ID                    Chip Name\n"
            "        0                              0                              0                              0"
            "                              Ascend910\n"
            "        0                              1                              1                              1"
            "                              Ascend910\n"
            "        0                              2                              -                              -"
            "                              Mcu\n")
    rows = parse_chip_map(text).rows
    assert [(r.npu, r.chip, r.logic_id, r.phy_id, r.name) for r in rows] == [
        (0, 0, 0, 0, "Ascend910"), (0, 1, 1, 1, "Ascend910"), (0, 2, None, None, "Mcu")]


@pytest.mark.parametrize("text, message", [("", "header"),
                                           ("NPU ID  Slot ID  Chip Name\n0 0 x\n", "unsupported header"),
                                           ("NPU ID  Chip ID  Chip Logic ID  Chip Name\n0 0 0\n", "ids and a name"),
                                           ("NPU ID  Chip ID  Chip Logic ID  Chip Name\n0 x 0 Mcu\n", "integer")])
def test_chip_map_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_chip_map(text)


# --------------------------------------------------------------------------- -t board, health, spod-info


def test_board_card_910a_from_faultdiag():
    board = parse_board_info(section(FAULTDIAG_BEFORE, "/usr/local/bin/npu-smi info -i 0 -t board"))
    assert (board.npu_id, board.chip_id) == (0, None)
    assert (board.software_version, board.firmware_version, board.compatibility) == ("23.0.5", "7.1.0.7.220", "OK")
    assert (board.board_id, board.pci_vendor_id, board.pci_device_id) == ("0x02", "0x19E5", "0xD801")
    assert (board.chip_count, board.pcie_bus_info) == (1, "0000:61:00.0")
    assert board.extra == {"PCB ID": "A", "BOM ID": "1", "Slot ID": "0", "Class ID": "NA",
                           "Subsystem Vendor ID": "0x0200", "Subsystem Device ID": "0x0100"}


def test_board_chip_910a_from_faultdiag():
    board = parse_board_info(section(FAULTDIAG_BEFORE, "/usr/local/bin/npu-smi info -i 0 -c 0 -t board"))
    assert (board.npu_id, board.chip_id, board.chip_name, board.software_version) == (0, 0, "910A", None)
    assert board.firmware_version == "7.1.0.7.220" and board.board_id == "0x02"
    assert board.extra["Chip Type"] == "Ascend" and board.extra["PCB ID"] == "NA"
    assert board.extra["VDie ID"] == "42C711D4 20B03704 4A10C8D4 14CC040A D2102003"


def test_board_invalid_card_id_from_faultdiag_is_an_error():
    with pytest.raises(ValueError, match="Invalid card id"):
        parse_board_info(section(FAULTDIAG_AFTER, "/usr/local/bin/npu-smi info -i 0 -t board"))


def test_board_a3_superpod_fixture_form():
    text = ("NPU ID : 2944\nProduct Name : IT21PD2G10\nSerial Number : 2106030737ZERC003572\n"
            "Software Version : 25.5.1\nFirmware Version : 7.8.0.6.201\nCompatibility : OK\nBoard ID : 0xb1\n"
            "PCI Device ID : 0xD803\nChip Count : 2\nChip Fault : 0\n")
    board = parse_board_info(text)
    assert (board.npu_id, board.board_id, board.chip_count, board.product_name) == (2944, "0xb1", 2, "IT21PD2G10")
    assert board.extra == {"Chip Fault": "0"}


def test_health_alarm_from_faultdiag():
    health = parse_npu_health(section(FAULTDIAG_AFTER, "/usr/local/bin/npu-smi info -i 0 -c 0 -t health"))
    assert health.status == "Alarm"
    assert health.error_codes == ("A4025021", "8C03A000", "8C084E00")
    assert health.error_info == "ascend_monitor adda heart beat lost error"
    assert len(health.details) == 2 and health.details[1].startswith("node type=adda")


def test_health_ok_from_faultdiag():
    health = parse_npu_health(section(FAULTDIAG_BEFORE, "/usr/local/bin/npu-smi info -i 0 -c 0 -t health"))
    assert (health.status, health.error_codes, health.error_info, health.details) == ("OK", (), None, ())


def test_health_newer_key_and_errors():
    assert parse_npu_health("Health : Warning\nError Code : 80E01801\n").status == "Warning"
    with pytest.raises(ValueError, match="Health Status"):
        parse_npu_health("Error Code : NA\n")
    with pytest.raises(ValueError, match="health value"):
        parse_npu_health("Health Status : Degraded\n")


def test_spod_info_plain_form():
    spod = parse_spod_info("\tSDID : 16777216\n\tSuper Pod Size : 384\n\tSuper Pod ID : 0\n\tServer Index : 4\n")
    assert (spod.sdid, spod.super_pod_size, spod.super_pod_id, spod.server_index, spod.pod_id) == (
        16777216, 384, 0, 4, None)


def test_spod_info_table_form():
    text = """
+-------------------------------------------------------------------------------------------+
| npu-smi 25.3.rc1                            Version: 25.3.rc1                           |
+-------------------------------+-----------------------------------------------------------+
| Super Pod ID                 : 3          | Pod ID : 1                                    |
+-------------------------------+-----------------------------------------------------------+
"""
    spod = parse_spod_info(text)
    assert (spod.super_pod_id, spod.pod_id, spod.sdid) == (3, 1, None)


@pytest.mark.parametrize("text", ["", "This device does not support querying spod-info.\n", "Pod ID : 1\n"])
def test_spod_info_errors(text):
    with pytest.raises(ValueError, match="spod-info"):
        parse_spod_info(text)
