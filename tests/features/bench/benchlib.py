"""Helpers of the bench tests: run `deployctl bench` through the real CLI entry point, read a run record, check
PNG files."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]

# `deployctl bench` as users run it: the installed entry point (deployctl.cli.main: errors, exit codes).
def deployctl_bench(*args: str, cwd: Path | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "deployctl"), "bench", *args], capture_output=True,
                          text=True,
                          cwd=cwd or ROOT, timeout=timeout,
                          env={"COLUMNS": "200", "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
                               "NO_COLOR": "1", "HOME": str(Path.home())})


def bench_runs(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "runs").glob("*-bench"))


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG file; AssertionError when it is not one (signature, IHDR first, IEND last)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG signature"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13, f"{path}: no IHDR chunk first"
    assert data[-12:-4] == b"\x00\x00\x00\x00IEND", f"{path}: does not end with IEND"
    return struct.unpack(">II", data[16:24])


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
