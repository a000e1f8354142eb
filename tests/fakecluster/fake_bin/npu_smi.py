#!/usr/bin/python3
"""Fake `npu-smi` for simulated Ascend hosts (installed as /usr/local/sbin/npu-smi).

Stdlib only; runs under the host's /usr/bin/python3. Reads the node state written by
tests/fakecluster/tools.py from $FAKECLUSTER_STATE or /etc/fakecluster/node.json.

Layouts follow the real outputs in shared/reference/ascend/npu-smi/ (98-column `npu-smi info` table,
A2 one chip per NPU, A3 `Chip  Phy-ID` with two chips per NPU) and the npu-smi sources
(`\t%-30s : %s` key/value lines for -l / -t ...). Supported: info, info -l, info -m,
info -t board|health|usages|spod-info -i N [-c C], info watch [-i N [-c C]] [-d S] [-s LETTERS], info -h, -v.
Anything else prints the real "Error parameter of ..." + usage text and exits non-zero.

`info watch` scrolls until it is killed (hiascend HDK docs npusmi_0013): a header `NpuID(Idx) ChipId(Idx)` and one
column per letter of -s (p t a i c m b; `u`, AI Cube usage, only from HDK 26.0.RC1: MindIE-Motor's virtual
inference needs it), then every -d seconds one row per chip, columns 12 characters wide (a public transcript of the
default letters). An older driver refuses `u` as npu-smi refuses any option value it does not know ("Error
parameter of -s" and the usage text; the real text is unverified). The node state has one busy figure per chip,
`aicore`: the stand-in prints it for both `a` and `u`. The state is read again every interval, so a test that sets
a chip busy sees it in the next row.
"""

import json
import os
import sys
import time

STATE_PATH = "/etc/fakecluster/node.json"

USAGE_HEAD = "Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]"
INFO_HELP = USAGE_HEAD + """

Commands:
       watch          Show all device's status in scrolling format
       proc           Show device's matrix process status in scrolling format
       -h, --help     Show this help text and exit
       -m             Show all device's mapping information
       -l             Show all device's topology information
       -t type        Show information for type
                      type: board, flash, memory, usages, sensors, temp, power, volt, mac-addr,
                            common, health, product, ecc, ip, sys-time, i2c_check, work-mode,
                            ecc-enable, p2p-enable, ssh-enable, license, customized-info,
                            device-share, nve-level, aicpu-config, pcie-err, mcu-monitor,
                            err-count, boot-area, vnpu-mode, info-vnpu, vnpu-svm, cpu-num-cfg,
                            first-power-on-date, proc-mem, phyid-remap, vnpu-cfg-recover, key-manage,
                            template-info, pkcs-enable, p2p-mem-cfg, pwm-mode, pwm-duty-ratio,
                            boot-select, topo{spod}.

Options:
       -i %d          Card ID
       -c %d          Chip ID
       -p %d          Chip Physical ID
"""
TOP_HELP = """Usage: npu-smi <Command|-h|-v> [Options...]

Commands:
       info           Show information
       set            Set configuration
       clear          Clear information
       upgrade        Upgrade firmware
       -h, --help     Show this help text and exit
       -v, --version  Show version information and exit
"""
KNOWN_TYPES = {"board", "flash", "memory", "usages", "sensors", "temp", "power", "volt", "mac-addr", "common",
               "health", "product", "ecc", "ip", "sys-time", "i2c_check", "work-mode", "ecc-enable", "p2p-enable",
               "ssh-enable", "license", "customized-info", "device-share", "nve-level", "aicpu-config",
               "pcie-err", "mcu-monitor", "err-count", "boot-area", "vnpu-mode", "info-vnpu", "vnpu-svm",
               "cpu-num-cfg", "first-power-on-date", "proc-mem", "phyid-remap", "vnpu-cfg-recover",
               "key-manage", "template-info", "pkcs-enable", "p2p-mem-cfg", "pwm-mode", "pwm-duty-ratio",
               "boot-select", "topo", "spod-info", "sio-info"}

# 98-column table pieces (real samples: 27 | 15 | 52 inner widths)
LINE_FULL = "+" + "-" * 96 + "+"
LINE_3DASH = "+" + "-" * 27 + "+" + "-" * 15 + "+" + "-" * 52 + "+"
LINE_3EQ = "+" + "=" * 27 + "+" + "=" * 15 + "+" + "=" * 52 + "+"
HEAD_1 = "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|"
HEAD_2_A2 = "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |"
HEAD_2_A3 = "| Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |"
PROC_HEAD = "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |"


def kv(key, value):
    return "\t%-30s : %s" % (key, value)


def load_state():
    with open(os.environ.get("FAKECLUSTER_STATE", STATE_PATH)) as f:
        return json.load(f)


def devices(st):
    return st["devices"]


def npus(st):
    """NPU ids that have at least one visible chip, in order."""
    seen = []
    for d in devices(st):
        if d["npu"] not in seen:
            seen.append(d["npu"])
    return seen


def table(st):
    ver = st["driver_version"]
    a3 = st["hardware"] == "a3"
    out = [LINE_FULL,
           ("| %-33sVersion: %s" % ("npu-smi " + ver, ver)).ljust(97) + "|",
           LINE_3DASH, HEAD_1, HEAD_2_A3 if a3 else HEAD_2_A2, LINE_3EQ]
    devs = devices(st)
    for i, d in enumerate(devs):
        hbm_total = st["hbm_total_mb"]
        out.append("| %-6s%-20s| %-14s| %-12s%-18s%-5s/ %-14s|" % (
            d["npu"], st["npu_name"], d["health"], d["power"], d["temp"], 0, 0))
        first = ("%-6s%-20s" % (d["chip"], d["phy"])) if a3 else ("%-26s" % d["chip"])
        out.append("| %s| %-14s| %-12s%-5s/ %-11s%-5s/ %-14s|" % (
            first, d["bus_id"], d["aicore"], 0, 0, d["hbm_used"], hbm_total))
        last_of_npu = i + 1 == len(devs) or devs[i + 1]["npu"] != d["npu"]
        out.append(LINE_3EQ if last_of_npu else LINE_FULL)
    out += [LINE_3DASH, PROC_HEAD, LINE_3EQ]
    for n in npus(st):
        rows = [(d["chip"], p) for d in devs if d["npu"] == n for p in d["procs"]]
        if not rows:
            out.append(("| No running processes found in NPU %d" % n).ljust(97) + "|")
        for chip, (pid, name, mb) in rows:
            out.append("| %-8s%-18s| %-14s| %-25s| %-24s|" % (n, chip, pid, name, mb))
        out.append(LINE_3EQ)
    return "\n".join(out) + "\n"


def list_l(st):
    out = [kv("Total Count", len(npus(st)))]
    for n in npus(st):
        out += ["", kv("NPU ID", n), kv("Chip Count", sum(1 for d in devices(st) if d["npu"] == n))]
    return "\n".join(out) + "\n"


def mapping_m(st):
    a3 = st["hardware"] == "a3"
    if a3:
        out = ["\t%-31s%-31s%-31s%-31s%-30s" % ("NPU ID", "Chip ID", "Chip Logic ID", "Chip Phy-ID", "Chip Name")]
    else:
        out = ["\t%-31s%-31s%-31s%-30s" % ("NPU ID", "Chip ID", "Chip Logic ID", "Chip Name")]
    name = st["npu_name"] if a3 else "Ascend " + st["npu_name"]
    for n in npus(st):
        chips = [d for d in devices(st) if d["npu"] == n]
        for d in chips:
            if a3:
                out.append("\t%-31s%-31s%-31s%-31s%s" % (n, d["chip"], d["logic"], d["phy"], name))
            else:
                out.append("\t%-31s%-31s%-31s%s" % (n, d["chip"], d["logic"], name))
        mcu = st["chips_per_npu"]
        if a3:
            out.append("\t%-31s%-31s%-31s%-31s%-30s" % (n, mcu, "-", "-", "Mcu"))
        else:
            out.append("\t%-31s%-31s%-31s%-30s" % (n, mcu, "-", "Mcu"))
    return "\n".join(out) + "\n"


def board(st, npu, chip):
    chips = [d for d in devices(st) if d["npu"] == npu]
    d = chips[0] if chip is None else next(c for c in chips if c["chip"] == chip)
    if chip is None:
        rows = [("NPU ID", npu), ("Software Version", st["driver_version"]),
                ("Firmware Version", st["firmware_version"]),
                ("Compatibility", "OK" if st["fw_compatible"] else "NOK"),
                ("Board ID", st["board_id"]), ("PCB ID", "A"), ("BOM ID", 1), ("PCIe Bus Info", d["bus_id"]),
                ("Slot ID", npu), ("Class ID", "NA"), ("PCI Vendor ID", "0x19E5"),
                ("PCI Device ID", st["pci_device_id"]), ("Subsystem Vendor ID", "0x0200"),
                ("Subsystem Device ID", "0x0100"), ("Chip Count", len(chips))]
        if st["hardware"] == "a3":
            rows.append(("Chip Fault", 0))
    else:
        rows = [("NPU ID", npu), ("Chip ID", chip), ("Chip Type", "Ascend"), ("Chip Name", st["chip_name"]),
                ("Chip Version", "V1"), ("Board ID", st["board_id"]), ("PCB ID", "A"), ("BOM ID", 1),
                ("VDie ID", d["vdie"]), ("NDie ID", d["ndie"]), ("Chip Position ID", d["phy"]),
                ("PCIe Bus Info", d["bus_id"]), ("Firmware Version", st["firmware_version"])]
    return "\n".join(kv(k, v) for k, v in rows) + "\n"


HEALTH_ERRORS = {
    "OK": ("NA", "NA"),
    "Warning": ("80E18005", "The temperature of the chip is too high (minor)"),
    "Alarm": ("A4025021 8C03A000 8C084E00", "ascend_monitor adda heart beat lost error"),
    "Critical": ("80CB8009", "HBM multi-bit ECC error"),
    "UNKNOWN": ("NA", "NA"),
}


def health(st, npu, chip):
    chips = [d for d in devices(st) if d["npu"] == npu]
    d = chips[0] if chip is None else next(c for c in chips if c["chip"] == chip)
    code, info = HEALTH_ERRORS.get(d["health"], ("NA", "NA"))
    return "\n".join([kv("Health Status", d["health"]), kv("Error Code", code), kv("Error Information", info)]) + "\n"


def usages(st, npu):
    chips = [d for d in devices(st) if d["npu"] == npu]
    out = [kv("NPU ID", npu), kv("Chip Count", len(chips))]
    for d in chips:
        rate = round(100 * d["hbm_used"] / st["hbm_total_mb"])
        out += ["", kv("DDR Capacity(MB)", 0), kv("DDR Usage Rate(%)", 0), kv("DDR Hugepages Total(page)", 0),
                kv("DDR Hugepages Usage Rate(%)", 0), kv("HBM Capacity(MB)", st["hbm_total_mb"]),
                kv("HBM Usage Rate(%)", rate), kv("Aicore Usage Rate(%)", d["aicore"]),
                kv("Aivector Usage Rate(%)", 0), kv("Aicpu Usage Rate(%)", 0), kv("Ctrlcpu Usage Rate(%)", 0),
                kv("DDR Bandwidth Usage Rate(%)", 0), kv("HBM Bandwidth Usage Rate(%)", 0), kv("Chip ID", d["chip"])]
    return "\n".join(out) + "\n"


def spod(st, npu, chip):
    d = next(c for c in devices(st) if c["npu"] == npu and c["chip"] == chip)
    return "\n".join([kv("SDID", d["sdid"]), kv("Super Pod Size", st["super_pod_size"]),
                      kv("Super Pod ID", st["super_pod_id"]), kv("Server Index", st["server_index"])]) + "\n"


# `info watch -s` letters and their columns (npusmi_0013: p t a i c m b; `u` from HDK 26.x, its label unverified)
WATCH_COLUMNS = {"p": "Pwr(W)", "t": "Temp(C)", "a": "AI Core(%)", "i": "AI Cpu(%)", "c": "Ctrl Cpu(%)",
                 "m": "Memory(%)", "b": "Memory BW(%)", "u": "AI Cube(%)"}
WATCH_FROM_26 = {"u"}


def hdk_26(st):
    """The driver (HDK) is 26.0.RC1 or later: major.minor of its version at least 26.0."""
    nums = [int(x) for x in st["driver_version"].split(".")[:2] if x.isdigit()]
    return len(nums) == 2 and tuple(nums) >= (26, 0)


def watch_value(st, d, letter):
    return {"p": d["power"], "t": d["temp"], "a": d["aicore"], "u": d["aicore"],
            "m": round(100 * d["hbm_used"] / st["hbm_total_mb"])}.get(letter, 0)


class Watch:
    """`npu-smi info watch`: rows until killed (written and flushed one line at a time, as under `stdbuf -oL`)."""

    def __init__(self, chips, letters, delay):
        self.chips, self.letters, self.delay = chips, letters, delay

    def stream(self, write, flush, st):
        write("".join("%-12s" % h for h in ["NpuID(Idx)", "ChipId(Idx)"] + [WATCH_COLUMNS[x] for x in self.letters])
              + "\n")
        flush()
        while True:
            by = {(d["npu"], d["chip"]): d for d in devices(st)}
            for key in self.chips:
                d = by[key]
                write("".join("%-12s" % v for v in [d["npu"], d["chip"]] + [watch_value(st, d, x)
                                                                              for x in self.letters]) + "\n")
                flush()
            time.sleep(self.delay)
            st = load_state()


def watch(st, opts):
    letters = opts.get("-s", "ptaicmb")
    known = set(WATCH_COLUMNS) - (set() if hdk_26(st) else WATCH_FROM_26)
    if not letters or any(x not in known for x in letters):
        raise param_error("-s", st)
    try:
        delay = float(opts.get("-d", "1"))
    except ValueError:
        raise param_error("-d", st)
    if not 0 < delay <= 3600:
        raise param_error("-d", st)
    chips = [(d["npu"], d["chip"]) for d in devices(st)]
    if "-i" in opts:
        npu = parse_int(opts["-i"], "-i", st)
        if npu not in npus(st):
            raise Fail("Invalid card id.\nError parameter of -i\n%s" % USAGE_HEAD)
        chips = [c for c in chips if c[0] == npu]
        if "-c" in opts:
            chip = parse_int(opts["-c"], "-c", st)
            if chip not in [c[1] for c in chips]:
                raise Fail("Invalid chip id.\nError parameter of -c\n%s" % USAGE_HEAD)
            chips = [c for c in chips if c[1] == chip]
    elif "-c" in opts:
        raise Fail("Invalid card id.\nError parameter of -i\n%s" % USAGE_HEAD)
    return Watch(chips, letters, delay)


class Fail(Exception):
    def __init__(self, text, rc=1):
        super().__init__(text)
        self.text, self.rc = text, rc


def param_error(opt, st):
    return Fail("Error parameter of %s\n%s" % (opt, info_help(st)))


def info_help(st):
    return INFO_HELP.replace("{spod}", ", spod-info, sio-info" if st.get("hardware") == "a3" else "")


def parse_int(value, opt, st):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise param_error(opt, st)


def run(argv, st):
    """argv without the program name -> (rc, stdout, stderr)."""
    if not argv or argv[0] in ("-h", "--help"):
        return 0, TOP_HELP, ""
    if argv[0] in ("-v", "--version"):
        return 0, "npu-smi version: %s\n" % st["driver_version"], ""
    if argv[0] != "info":
        return 1, "Invalid command: %s\n%s" % (argv[0], TOP_HELP), ""
    args = argv[1:]
    opts = {}
    cmd = None
    i = 0
    try:
        while i < len(args):
            a = args[i]
            if a in ("-h", "--help"):
                return 0, info_help(st), ""
            if a in ("-m", "-l", "watch", "proc"):
                cmd = a
                i += 1
                continue
            if a in ("-t", "-i", "-c", "-p") or (a in ("-d", "-s") and cmd == "watch"):
                if i + 1 >= len(args):
                    raise param_error(a, st)
                opts[a] = args[i + 1]
                i += 2
                continue
            raise param_error(a, st)
        if "-t" in opts:
            cmd = "-t"
        if cmd is None:
            if opts:
                raise param_error(next(iter(opts)), st)
            return 0, table(st), ""
        if cmd == "-l":
            return 0, list_l(st), ""
        if cmd == "-m":
            return 0, mapping_m(st), ""
        if cmd == "watch":
            return 0, watch(st, opts), ""
        if cmd == "proc":
            return 0, table(st), ""
        typ = opts["-t"]
        if typ not in KNOWN_TYPES:
            raise param_error("-t", st)
        if "-i" not in opts:
            raise Fail("Invalid card id.\nError parameter of -i\n%s" % USAGE_HEAD)
        npu = parse_int(opts["-i"], "-i", st)
        if npu not in npus(st):
            raise Fail("Invalid card id.\nError parameter of -i\n%s" % USAGE_HEAD)
        chip = None
        if "-c" in opts:
            chip = parse_int(opts["-c"], "-c", st)
            if chip not in [d["chip"] for d in devices(st) if d["npu"] == npu]:
                raise Fail("Invalid chip id.\nError parameter of -c\n%s" % USAGE_HEAD)
        if typ == "board":
            return 0, board(st, npu, chip), ""
        if typ == "health":
            return 0, health(st, npu, chip), ""
        if typ == "usages":
            return 0, usages(st, npu), ""
        if typ == "spod-info":
            if st["hardware"] != "a3":
                raise Fail("This device does not support querying spod-info")
            if chip is None:
                raise Fail("Invalid chip id.\nError parameter of -c\n%s" % USAGE_HEAD)
            return 0, spod(st, npu, chip), ""
        raise Fail("This device does not support querying %s" % typ)
    except Fail as e:
        return e.rc, e.text.rstrip("\n") + "\n", ""


def main():
    st = load_state()
    if st.get("slow"):
        time.sleep(float(st["slow"]))
    rc, out, err = run(sys.argv[1:], st)
    if isinstance(out, Watch):
        try:
            out.stream(sys.stdout.write, sys.stdout.flush, st)
        except (BrokenPipeError, KeyboardInterrupt):
            return 0
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc


if __name__ == "__main__":
    sys.exit(main())
