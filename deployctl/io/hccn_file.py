"""Read a copy of /etc/hccn.conf from the controller's disk (the core parses the text: core/inventory/hccn.py)."""

from __future__ import annotations

import stat

from deployctl.core.inventory.hccn import HccnReadError
from deployctl.io.localfile import NotRegular, TooLarge, file_kind, read_regular

MAX_HCCN_BYTES = 1 << 20   # a real hccn.conf is a few KiB (16 devices x a dozen keys)


def read_hccn_conf(path) -> str:
    """Read a copy of /etc/hccn.conf: a regular UTF-8 text file of at most MAX_HCCN_BYTES, nothing else.

    Never blocks or exhausts memory on what a path can name (/dev/zero, a FIFO, a directory).

    Raises:
        OSError: the file cannot be opened (missing, permissions).
        HccnReadError: it is not a regular text file; the message says what it is instead.
    """
    def kind(mode: int) -> str | None:
        found = file_kind(mode)
        if not found:
            return None
        if stat.S_ISDIR(mode):
            return f"is {found}"
        return "is not a regular file" if found == "not a regular file" else f"is {found}, not a regular file"

    try:
        data = read_regular(path, MAX_HCCN_BYTES, follow=True)
    except NotRegular as exc:
        raise HccnReadError(kind(exc.mode) or "is not a regular file") from None
    except TooLarge as exc:
        raise HccnReadError(f"is {exc.size} bytes: too large for an hccn.conf (limit {MAX_HCCN_BYTES})"
                            if exc.size is not None else
                            f"is larger than {MAX_HCCN_BYTES} bytes: too large for an hccn.conf") from None
    nul = data.find(b"\0")
    if nul >= 0:
        raise HccnReadError(f"contains a NUL byte (offset {nul}): it is a binary file, not an hccn.conf")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HccnReadError(f"is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
