"""Files deployctl reads back from the controller's disk, parsed at one boundary (issue 34, observation 9).

A run record (``<run-dir>/runs/<id>/``: a bench summary, a preflight run's run.json and facts.json), the
calibration store (``<run-dir>/calibration/<cluster>.json``) and a render's marker are deployctl's own files, but
anyone who can write the run directory decides what they hold: a link to /dev/zero, a FIFO, a gigabyte, a key left
out, a length of 10^9, NaN. Each is read here:

* a regular file only: ``lstat`` before ``open`` (opening a device can have effects), ``O_NOFOLLOW`` (deployctl
  makes no symbolic link in its directories; a file the user names on the command line may be one), ``O_NONBLOCK``
  (a FIFO swapped in between does not block), and ``fstat`` on what was opened decides;
* at most ``limit`` bytes, whatever the size says (a growing file, a device);
* JSON without NaN or Infinity, then a typed model (deployctl/core/models/rundata.py, or the facts file's) whose
  numbers are finite and bounded, so nothing downstream loops 10^9 times.

What does not pass is a UsageError (exit 2) naming the file and the key, with a hint; never a traceback.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from deployctl.core.errors import Problem, UsageError

M = TypeVar("M", bound=BaseModel)
MAX_PROBLEMS = 5           # validation problems shown per file


def file_kind(mode: int) -> str:
    """'' for a regular file, else what it is ("a directory", "a FIFO (named pipe)", ...): the one wording of every
    reader that takes regular files only (the inventory, hccn.conf copies, run-dir files)."""
    if stat.S_ISREG(mode):
        return ""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def _kind(mode: int) -> str:
    kind = file_kind(mode)
    return f"{kind} (deployctl makes none there)" if stat.S_ISLNK(mode) else kind


def refused(path: Path | str, what: str, message: str, hint: str, key: str = "") -> UsageError:
    return UsageError(f"cannot read {what} {path}", problems=[Problem(message=message, path=key, file=str(path))],
                      hint=hint)


def exists_regular(path: Path | str, *, what: str, hint: str) -> bool:
    """False when nothing is at ``path``; True for a regular file; a UsageError for anything else (a link too)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise refused(path, what, f"cannot be read: {exc.strerror or exc}", hint) from None
    if _kind(st.st_mode):
        raise refused(path, what, f"is {_kind(st.st_mode)}, not a regular file", hint)
    return True


class NotRegular(Exception):
    """What is at the path is not a regular file (``kind``: file_kind's wording)."""

    def __init__(self, mode: int):
        super().__init__(file_kind(mode))
        self.mode = mode
        self.kind = file_kind(mode)


class TooLarge(Exception):
    """The file is larger than the limit: ``size`` bytes said by fstat, or None when it grew while being read."""

    def __init__(self, size: int | None):
        super().__init__(size)
        self.size = size


def read_regular(path: Path | str, limit: int, *, follow: bool) -> bytes:
    """The one bounded reader of a file on the controller's disk: the bytes of the regular file ``path``, at most
    ``limit`` of them. ``lstat`` (``stat`` when ``follow``: a link the user named is followed) before ``open``;
    ``O_NONBLOCK`` so a FIFO swapped in between does not block, ``O_NOFOLLOW`` unless ``follow``, and ``fstat`` on
    what was opened decides. Raises NotRegular, TooLarge, or the OSError (FileNotFoundError included): each
    caller words them for its own file."""
    st = os.stat(path) if follow else os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegular(st.st_mode)
    flags = (os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
             | (0 if follow else getattr(os, "O_NOFOLLOW", 0)))
    fd = os.open(path, flags)                 # ELOOP: swapped for a link after the lstat
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(st.st_mode)
        if st.st_size > limit:
            raise TooLarge(st.st_size)
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise TooLarge(None)
    return b"".join(chunks)


def read_bytes(path: Path | str, limit: int, *, what: str, hint: str, follow: bool = False) -> bytes:
    """read_regular for deployctl's own files (run records, the calibration store): FileNotFoundError passes
    through (the callers decide what a missing file means); anything else is a UsageError naming the file."""
    try:
        return read_regular(path, limit, follow=follow)
    except FileNotFoundError:
        raise
    except NotRegular as exc:
        raise refused(path, what, f"is {_kind(exc.mode)}, not a regular file", hint) from None
    except TooLarge as exc:
        message = (f"is {exc.size:,} bytes, more than the {limit:,} such a file can be" if exc.size is not None
                   else f"is more than the {limit:,} bytes such a file can be")    # it grew while being read
        raise refused(path, what, message, hint) from None
    except OSError as exc:
        raise refused(path, what, f"cannot be read: {exc.strerror or exc}", hint) from None


def key_path(loc: tuple) -> str:
    """('points', 3, 'input_len') -> 'points[3].input_len'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _shown(value) -> str:
    if isinstance(value, (bool, int, float)) or value is None:
        return f" (got {value!r})"
    if isinstance(value, str):
        return f" (got {value[:40]!r}{'…' if len(value) > 40 else ''})"
    return ""


def problems_of(exc: ValidationError, path: Path | str) -> list[Problem]:
    errs = exc.errors()
    out = [Problem(message=f"{e['msg']}{_shown(e.get('input')) if e['type'] != 'missing' else ''}"[:300],
                   path=key_path(e["loc"]), file=str(path)) for e in errs[:MAX_PROBLEMS]]
    if len(errs) > MAX_PROBLEMS:
        out.append(Problem(message=f"and {len(errs) - MAX_PROBLEMS} more problem(s)", file=str(path)))
    return out


def load_model(path: Path | str, model: type[M], limit: int, *, what: str, hint: str, follow: bool = False) -> M:
    """``path`` read by read_bytes, parsed as JSON without NaN/Infinity, validated by ``model`` (JSON mode)."""
    from pydantic_core import from_json

    raw = read_bytes(path, limit, what=what, hint=hint, follow=follow)
    try:
        from_json(raw, allow_inf_nan=False)      # NaN, Infinity and broken JSON stop here, whatever the model
    except ValueError as exc:
        try:
            from_json(raw)
            why = f"it holds NaN or Infinity, which are no numbers ({str(exc)[:120]})"
        except ValueError:
            why = f"it is not JSON: {str(exc)[:200]}"
        raise UsageError(f"{path} is not a deployctl {what}", problems=[Problem(message=why, file=str(path))],
                         hint=hint) from None
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise UsageError(f"{path} is not a deployctl {what}", problems=problems_of(exc, path), hint=hint) from None
