"""Hostile inventories (issue 11, found by fuzzing): every one is refused with exit 2, naming the file and
a line (or byte offset) and a hint, for `validate`, `plan` and `render`, in text and JSON: never a
traceback, never "deployctl bug", never megabytes of output, never a hang.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from conftest import EXAMPLES, run_cli

BASE = (EXAMPLES / "a2-1x8-single.yaml").read_text(encoding="utf-8")
MAX_OUTPUT = 20_000        # bytes of stderr/stdout for one refusal
MAX_SECONDS = 10           # generous: each of these takes well under a second


def _with_layout_extra(extra: str) -> str:
    return BASE.replace("layout:\n  preset: single\n", "layout:\n  preset: single\n" + extra)


LAUGHS = "  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n" for i in range(1, 9))
DEVICE_FLOOD = (BASE.split("nodes:\n")[0] + "nodes:\n  - {name: n0, address: 10.0.0.1, devices: [{id: 99, ip: &b bad}"
                + ", {id: 99, ip: *b}" * 7 + "]}\n"
                + "".join(f"  - {{name: n{i}, address: 10.0.1.{i}, devices: [" + ", ".join(["{id: 99, ip: *b}"] * 8)
                          + "]}\n" for i in range(1, 250)))

# name -> (file bytes, text the refusal must contain)
TEXT_CASES: dict[str, tuple[bytes, str]] = {
    "tag-int": (BASE.replace("max_seq_len: 8192", "max_seq_len: !!int x").encode(), "YAML tag '!!int'"),
    "tag-int-valid": (BASE.replace("max_seq_len: 8192", "max_seq_len: !!int 8192").encode(), "YAML tag '!!int'"),
    "tag-python": (BASE.replace("served_name: ds-r1", 'served_name: !!python/object/apply:os.system ["id"]')
                   .encode(), "!!python/object/apply:os.system"),
    "tag-binary": (BASE.replace("served_name: ds-r1", "served_name: !!binary aGVsbG8=").encode(), "!!binary"),
    "tag-custom": (BASE.replace("served_name: ds-r1", "served_name: !foo bar").encode(), "'!foo'"),
    "tag-on-mapping": (BASE.replace("layout:\n", "layout: !!set\n").encode(), "'!!set'"),
    "tag-omap": (BASE.replace("layout:\n  preset: single\n", "layout: !!omap\n  - preset: single\n").encode(),
                 "'!!omap'"),
    "nesting-600-flow": (_with_layout_extra("  x: " + "[" * 600 + "]" * 600 + "\n").encode(),
                         "nested more than 64 levels"),
    "nesting-600-mappings": (_with_layout_extra("".join(" " * (2 + i) + f"k{i}:\n" for i in range(600))
                                                + " " * 602 + "v\n").encode(), "nested more than 64 levels"),
    "nesting-through-aliases": (_with_layout_extra(
        "  a0: &a0 [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[x]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n"
        "  a1: &a1 [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[*a0]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n"
        "  a2: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[*a1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n").encode(),
                                "nested more than 64 levels"),
    "alias-bomb": (_with_layout_extra(LAUGHS).encode(), "YAML aliases expand to more than"),
    # the fuzzer's find: 1 626 values from 6 short lines made `plan --output json` print 50 kB
    "alias-bomb-small": (_with_layout_extra(
        "  a0: &a0 [x, x, x]\n" + "".join(f"  a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}]\n" for i in range(1, 6))
    ).encode(), "YAML aliases expand to more than 200 values"),
    "alias-bomb-key": (_with_layout_extra(LAUGHS + "  ? *l8\n  : x\n").encode(), "YAML aliases expand to more than"),
    "alias-problem-flood": (BASE.replace("layout:\n  preset: single\n", "layout:\n  preset: single\n"
                                         + "  x: 1\n" * 2000).encode(), "appears twice"),
    "alias-validation-flood": (DEVICE_FLOOD.encode(), "more problems"),
    "nul-byte": (BASE.replace("served_name: ds-r1", "served_name: ds\x00r1").encode(), "\\x00 (NUL) at byte"),
    "escape-char": (BASE.replace("address: 10.200.1.2", "address: \x1b[0m10.200.1.2").encode(),
                    "\\x1b (ESC) at byte"),
    "del-char": (BASE.replace("served_name: ds-r1", "served_name: ds\x7fr1").encode(), "\\x7f (DEL) at byte"),
    "c1-control": (BASE.replace("served_name: ds-r1", "served_name: ds\x9br1").encode(), "\\x9b at byte"),
    "latin1": (BASE.replace("served_name: ds-r1", "served_name: caf\u00e9").encode("latin-1"),
               "not UTF-8 at byte"),
    "truncated-utf8": (BASE.encode() + b"# caf\xc3", "not UTF-8 at byte"),
    "utf16-bom": (BASE.encode("utf-16"), "saved as UTF-16"),
    "utf16-be-bom": (b"\xfe\xff" + BASE.encode("utf-16-be"), "saved as UTF-16"),
    "utf32-bom": (BASE.encode("utf-32"), "saved as UTF-32"),
    "utf16-no-bom": (BASE.encode("utf-16-le"), "UTF-16"),
    "invalid-date": (BASE.replace("served_name: ds-r1", "served_name: 2025-02-30").encode(), "timestamp"),
    "invalid-int": (BASE.replace("served_name: ds-r1", "served_name: 0x_").encode(), "reads as a int"),
    "merge-key": (_with_layout_extra("  base: &b {a: 1}\n  m:\n    <<: *b\n").encode(), "merge keys"),
    "list-as-key": (_with_layout_extra("  ? [a, b]\n  : x\n").encode(), "mapping key is a list"),
    "recursive-alias": (_with_layout_extra("  x: &loop [*loop]\n").encode(), "refers to itself"),
    "syntax-error": (BASE.replace("  preset: single", "  preset: single\n   bad: [").encode(), "YAML syntax"),
    "undefined-alias": (_with_layout_extra("  x: *nowhere\n").encode(), "YAML syntax"),
}


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    inv = tmp_path / f"{name}.yaml"
    inv.write_bytes(data)
    return inv


def _check(result, started: float, inv: Path) -> None:
    elapsed = time.monotonic() - started
    out = result.stdout + result.stderr
    assert result.returncode == 2, (result.returncode, out[:3000])
    assert "Traceback" not in out, out[:3000]
    assert "deployctl bug" not in out, out[:3000]
    assert len(out.encode()) < MAX_OUTPUT, len(out)
    assert elapsed < MAX_SECONDS, elapsed
    assert str(inv) in out


@pytest.mark.parametrize("command", ["validate", "plan", "render"])
@pytest.mark.parametrize("name", sorted(TEXT_CASES))
def test_refused_with_line_and_hint(tmp_path, name: str, command: str):
    data, expected = TEXT_CASES[name]
    inv = _write(tmp_path, name, data)
    args = [command, "-i", str(inv)] + (["-o", str(tmp_path / "out")] if command == "render" else [])

    started = time.monotonic()
    result = run_cli(*args)

    _check(result, started, inv)
    assert expected in result.stderr, result.stderr[:3000]
    assert result.stderr.startswith("✗ ")
    # file:line of the first problem (or the byte offset of a bad byte)
    assert f"{inv}:" in result.stderr or "at byte" in result.stderr, result.stderr[:3000]
    assert "hint:" in result.stderr or "To fix:" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", sorted(TEXT_CASES))
def test_refused_as_json(tmp_path, name: str):
    data, expected = TEXT_CASES[name]
    inv = _write(tmp_path, name, data)

    started = time.monotonic()
    result = run_cli("validate", "-i", str(inv), "--output", "json")

    _check(result, started, inv)
    assert result.stderr == ""
    doc = json.loads(result.stdout)
    assert doc["error"] == "InventoryError" and doc["exit_code"] == 2
    assert doc["problems"], doc
    assert doc["problem_count"] == len(doc["problems"]) + doc["problems_omitted"]
    first = doc["problems"][0]
    assert first["file"] == str(inv)
    assert isinstance(first["line"], int) and first["line"] > 0, first
    assert first["hint"]
    if name != "alias-validation-flood":      # "… and N more problems" is text only: JSON counts them
        assert any(expected in p["message"] + p["hint"] for p in doc["problems"]) or expected in doc["message"], doc
    else:
        assert doc["problems_omitted"] > 1000, doc["problem_count"]


def test_many_problems_are_capped_and_counted(tmp_path):
    inv = _write(tmp_path, "flood", TEXT_CASES["alias-problem-flood"][0])

    text = run_cli("validate", "-i", str(inv))
    doc = json.loads(run_cli("validate", "-i", str(inv), "--output", "json").stdout)

    assert text.stderr.count("  • ") == 50
    assert "… and 1949 more problems (1999 in all" in text.stderr
    assert len(doc["problems"]) == 50
    assert doc["problem_count"] == 1999 and doc["problems_omitted"] == 1949


def test_byte_offset_line_and_column_point_at_the_bad_byte(tmp_path):
    data = TEXT_CASES["nul-byte"][0]
    inv = _write(tmp_path, "nul", data)

    result = run_cli("validate", "-i", str(inv))

    offset = data.index(b"\x00")
    line = data.count(b"\n", 0, offset) + 1
    column = offset - data.rfind(b"\n", 0, offset)
    assert f"at byte {offset} (line {line}, column {column})" in result.stderr
    assert f"{inv}:{line}:" in result.stderr


def test_not_utf8_names_byte_and_line(tmp_path):
    data = TEXT_CASES["latin1"][0]
    inv = _write(tmp_path, "latin1", data)

    result = run_cli("validate", "-i", str(inv))

    offset = data.index(b"\xe9")
    line = data.count(b"\n", 0, offset) + 1
    assert f"not UTF-8 at byte {offset} (line {line}, " in result.stderr
    assert "byte \\xe9" in result.stderr


def test_utf16_says_save_as_utf8(tmp_path):
    inv = _write(tmp_path, "u16", TEXT_CASES["utf16-bom"][0])
    assert "saved as UTF-16 (little-endian, byte-order mark ff fe at byte 0): save it as UTF-8" in \
        run_cli("validate", "-i", str(inv)).stderr


def _not_a_file_cases(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    huge = tmp_path / "huge.yaml"
    with open(huge, "wb") as f:           # sparse: 17 MiB without writing them
        f.write(BASE.encode())
        f.truncate(17 * 1024 * 1024)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    directory = tmp_path / "dir.yaml"
    directory.mkdir()
    return {
        "huge": (huge, "is too large: 17825792 bytes (17.0 MiB; the limit is 16 MiB)"),
        "fifo": (fifo, "it is a FIFO (named pipe)"),
        "directory": (directory, "is a directory"),       # refused by the -i option itself (click)
        "device": (Path("/dev/zero"), "it is a device"),
    }


@pytest.mark.parametrize("command", ["validate", "plan", "render"])
@pytest.mark.parametrize("name", ["huge", "fifo", "directory", "device"])
def test_only_regular_files_of_bounded_size_are_read(tmp_path, name: str, command: str):
    path, expected = _not_a_file_cases(tmp_path)[name]
    args = [command, "-i", str(path)] + (["-o", str(tmp_path / "out")] if command == "render" else [])

    started = time.monotonic()
    result = run_cli(*args)            # a FIFO without writer must not block

    _check(result, started, path)
    assert expected in result.stderr, result.stderr
    if name == "directory":           # a usage error of -i (exists, not a directory), printed by click
        return
    assert "hint" in result.stderr or "To fix:" in result.stderr
    doc = json.loads(run_cli("validate", "-i", str(path), "--output", "json").stdout)
    assert doc["exit_code"] == 2 and expected in doc["message"]


def test_loader_refuses_a_directory_itself(tmp_path):
    from deployctl.core.errors import InventoryError
    from deployctl.io.inventory_file import load_inventory

    with pytest.raises(InventoryError, match="it is a directory"):
        load_inventory(tmp_path)


def test_a_large_inventory_still_loads(tmp_path):
    """Many nodes (about 350 KB): the loader is linear; the time bound is deliberately loose."""
    from deployctl.io.inventory_file import load_inventory

    nodes = "".join(f"  - name: node{i}\n    address: 10.{i // 250}.{i % 250}.2\n    devices:\n"
                    + "".join(f"      - id: {d}\n        ip: 29.{i // 250}.{i % 250}.{d + 10}\n" for d in range(8))
                    for i in range(1000))
    inv = _write(tmp_path, "big", BASE.split("nodes:\n")[0].encode() + b"nodes:\n" + nodes.encode())

    started = time.monotonic()
    raw = load_inventory(inv)

    assert time.monotonic() - started < 30
    assert len(raw.data["nodes"]) == 1000
    assert raw.line_of(("nodes", 999, "devices", 7, "ip")) == inv.read_text().count("\n")


def test_an_honest_region_loads_without_a_value_limit(tmp_path):
    """8,192 A3 servers with their 16 device IPs each (4 MB, ~730,000 values: more than the 250,000 values the
    loader used to refuse at): they load, and every key keeps its line (a value on its parent's line finds it)."""
    from deployctl.io.inventory_file import load_inventory

    lines = []
    for i in range(8192):
        devices = ", ".join(f"{{id: {d}, ip: 29.{i // 250}.{i % 250}.{d + 10}}}" for d in range(16))
        lines += [f"  - name: n{i}", f"    address: 10.{i // 250}.{i % 250}.2", f"    devices: [{devices}]"]
    inv = _write(tmp_path, "region", BASE.split("nodes:\n")[0].encode() + b"nodes:\n" + "\n".join(lines).encode()
                 + b"\n")

    raw = load_inventory(inv)

    assert len(raw.data["nodes"]) == 8192 and raw.data["nodes"][-1]["devices"][15]["ip"] == "29.32.191.25"
    last = inv.read_text().count("\n")
    assert raw.line_of(("nodes", 8191, "devices", 15, "ip")) == last
    assert raw.line_of(("nodes", 8191, "address")) == last - 1
    assert ("nodes", 8191, "devices", 15, "ip") in raw.lines      # keys are always recorded


def test_keys_may_carry_anchors_and_aliases_of_scalars():
    """The event builder keeps YAML's meaning for keys: an alias of a scalar is that key, an anchored key can be
    named later; a list or mapping as a key is refused with its line."""
    from deployctl.core.errors import InventoryError
    from deployctl.core.input.raw import parse_yaml

    raw = parse_yaml("a: &k name\n*k : 3\n", "f.yaml", Path("."))
    assert raw.data == {"a": "name", "name": 3} and raw.line_of(("name",)) == 2
    with pytest.raises(InventoryError) as exc:
        parse_yaml("cluster: x\na: &l [1]\n*l : 3\n", "f.yaml", Path("."))
    assert [(p.message, p.line) for p in exc.value.problems] == [("mapping key is a list, not a string", 3)]
