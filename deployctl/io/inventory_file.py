"""Read an inventory file: a regular file of at most MAX_BYTES, decoded and parsed by the core
(deployctl/core/input/raw.py), which remembers the line of every key."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from deployctl.io.localfile import file_kind
from deployctl.core.errors import InventoryError
from deployctl.core.input.raw import MAX_BYTES, RawInventory, decode_inventory, parse_yaml


def read_inventory_bytes(path: str | Path) -> bytes:
    """The bytes of a regular file of at most MAX_BYTES (FIFOs, devices and directories are refused)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InventoryError(f"inventory file {path} does not exist",
                             hint="pass -i with the path to your inventory YAML "
                                  "(see inventories/sample.yaml)") from None
    except OSError as exc:
        raise InventoryError(f"cannot read inventory {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = file_kind(st.st_mode)
            raise InventoryError(f"cannot read inventory {path}: it is {kind}",
                                 hint="pass -i with the path of the inventory YAML file itself")
        if st.st_size > MAX_BYTES:
            raise InventoryError(f"inventory {path} is too large: {st.st_size} bytes "
                                 f"({st.st_size / 2**20:.1f} MiB; the limit is {MAX_BYTES // 2**20} MiB)",
                                 hint="an inventory is a few KB: is this the right file?")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, min(1 << 20, MAX_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_BYTES:      # it grew while being read
            raise InventoryError(f"inventory {path} is too large: more than {MAX_BYTES // 2**20} MiB",
                                 hint="an inventory is a few KB: is this the right file?")
        return b"".join(chunks)
    except OSError as exc:
        raise InventoryError(f"cannot read inventory {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def load_inventory(path: str | Path) -> RawInventory:
    """Read an inventory file from disk (no network, no other side effects)."""
    p = Path(path)
    text = decode_inventory(read_inventory_bytes(p), str(path))
    return parse_yaml(text, str(path), p.parent)
