"""How busy one NPU chip is: its AI Cube usage, as `npu-smi info watch -s u` prints it (HDK 26.0.RC1 and later; older
npu-smi refuses the letter). `deployctl watch` reads it when a probe of an idle engine fails: a busy NPU explains a
slow answer, an idle one does not (docs/watch.md "An engine that answers its health check but cannot infer").

The format (hiascend HDK docs npusmi_0013; MindIE-Motor docs/zh/user_guide/features/sim_inference.md): a header line
that starts with `NpuID(Idx) ChipId(Idx)`, then one row per chip and interval (`-d` seconds) until the program is
killed, whitespace-separated numbers: NPU id, chip id, then one column per letter of `-s`. With `-s u` alone a row
is three numbers and the last is the AI Cube usage in percent (MindIE-Motor reads the last column too); the label of
that column is unverified, so it is not read. `watch` never ends by itself: the command runs under `timeout`, and
under `stdbuf -oL` so that the rows printed before the kill are not left in a pipe's buffer.

The answer is host text: cut to ``MAX_TEXT`` characters and ``MAX_ROWS`` rows, every value a bounded number of the
chip that was asked for, anything else refused (ValueError).
"""

from __future__ import annotations

import math
import re

from deployctl.core.models.base import Frozen
from deployctl.probes.fact import Fact

MAX_TEXT = 64 * 1024
MAX_ROWS = 64
_ID = re.compile(r"^\d{1,3}$")
_PCT = re.compile(r"^\d{1,3}(\.\d{1,3})?$")
# what npu-smi prints when it does not know an option or a letter (its usage error), or the device cannot say
_REFUSED = re.compile(r"(?i)error parameter|not support|invalid")


class NpuUsage(Frozen):
    """The AI Cube usage of one chip over the seconds `npu-smi info watch` ran: one sample per row."""

    npu: int
    chip: int
    samples: tuple[float, ...] = ()      # percent, 0-100, in the order printed
    refused: str = ""                    # npu-smi's own error line (an HDK without `-s u`), when it refused

    @property
    def peak(self) -> float | None:
        """The highest sample; None when npu-smi printed none (refused, or killed before its first row)."""
        return max(self.samples) if self.samples else None


def parse_npu_usage(text: str, npu: int, chip: int) -> NpuUsage:
    """The rows of chip ``chip`` of NPU ``npu`` (what was asked for) in `npu-smi info watch -i npu -c chip -s u`.

    Raises:
        ValueError: neither the `NpuID` header nor npu-smi's own error; a row that is not three numbers, of another
            chip, or a usage that is no percentage.
    """
    lines = [ln.strip() for ln in text[:MAX_TEXT].splitlines() if ln.strip()]
    head = next((i for i, ln in enumerate(lines) if ln.startswith("NpuID")), None)
    if head is None:
        refused = next((ln for ln in lines if _REFUSED.search(ln)), None)
        if refused is not None:
            return NpuUsage(npu=npu, chip=chip, refused=refused[:200])
        shown = repr(lines[0][:80]) if lines else "empty output"
        raise ValueError(f"npu-smi info watch: expected a `NpuID(Idx) ChipId(Idx) ...` header, got {shown}")
    samples: list[float] = []
    for line in lines[head + 1:]:
        if line.startswith("NpuID"):
            continue                                 # the header again
        if len(samples) >= MAX_ROWS:
            break
        cells = line.split()
        if len(cells) != 3 or not (_ID.match(cells[0]) and _ID.match(cells[1])):
            raise ValueError(f"npu-smi info watch -s u: expected `NPU chip usage` rows, got {line[:80]!r}")
        if (int(cells[0]), int(cells[1])) != (npu, chip):
            raise ValueError(f"npu-smi info watch: a row of NPU {cells[0]} chip {cells[1]}, asked for NPU {npu} "
                             f"chip {chip}")
        value = float(cells[2]) if _PCT.match(cells[2]) else math.nan
        if not 0 <= value <= 100:
            raise ValueError(f"npu-smi info watch -s u: {cells[2][:20]!r} is not a usage in percent")
        samples.append(value)
    return NpuUsage(npu=npu, chip=chip, samples=tuple(samples))


def npu_chip(hardware: str, phy: int) -> tuple[int, int]:
    """npu-smi's NPU and chip ids of the device with physical id ``phy``: A2 has one chip per NPU (the NPU id is
    the phy id), A3 two dies per NPU (npu_smi.py's table parser; the preflight's `-t spod-info -i N -c C`)."""
    return divmod(phy, 2) if hardware == "a3" else (phy, 0)


# `npu-smi info watch -i N -c C -d 1 -s u` for ``seconds`` (at least 1): a row a second, killed by `timeout`
NPU_USAGE: Fact[NpuUsage] = Fact(
    "npu-smi-watch-usage",
    lambda npu, chip, seconds: ["timeout", str(max(1, int(seconds))), "stdbuf", "-oL", "npu-smi", "info", "watch",
                                "-i", str(npu), "-c", str(chip), "-d", "1", "-s", "u"],
    parse_npu_usage)
