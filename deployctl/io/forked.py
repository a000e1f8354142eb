"""A pure check run on the machine's other core while this process goes on: ``fn`` in a forked child, its answer
(a value or an exception, pickled back) read when it is needed.

Used where a command can speculate: `render` (and `plan`) go on with a plan while a child checks what the engine
would refuse in its files, and put the files in place (print the plan) only on the child's verdict (the child runs
exactly what the command would have run first, so the outcome is the serial one); and where work splits in two:
a large rendered tree is written, and the previous one removed, half by a child (io/rendered_tree.py). Where a
fork is not safe (another thread is running: a fork copies only the calling one) or not possible, or the child
dies without an answer, ``fn`` runs here when its answer is asked for.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class Forked(Generic[T]):
    """``fn()`` in a forked child (``fork=False``: here, when its answer is asked for)."""

    def __init__(self, fn: Callable[[], T], fork: bool = True):
        self._fn = fn
        self._pid: int | None = None
        self._read = -1
        self._outcome: tuple[bool, Any] | None = None    # the answer, once asked for: (ok, value or exception)
        if not fork or not hasattr(os, "fork") or threading.active_count() > 1:
            return
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:                                # the child: answer, never return into the caller
            try:
                os.close(read_end)
                try:
                    payload = pickle.dumps((True, fn()))
                except BaseException as exc:        # noqa: BLE001 - the answer is the exception
                    payload = pickle.dumps((False, exc))
                view = memoryview(payload)
                while view:
                    view = view[os.write(write_end, view):]
            finally:
                os._exit(0)
        os.close(write_end)
        self._pid, self._read = pid, read_end

    def result(self) -> T:
        """The child's value, or its exception raised here; ``fn()`` run here if the child gave no answer. Asked
        again, the same answer."""
        if self._outcome is None:
            self._outcome = self._answer()
        ok, value = self._outcome
        if not ok:
            raise value
        return value

    def _answer(self) -> tuple[bool, Any]:
        if self._pid is not None:
            chunks = []
            with os.fdopen(self._read, "rb") as answer:
                self._read = -1
                while chunk := answer.read(1 << 16):
                    chunks.append(chunk)
            os.waitpid(self._pid, 0)
            self._pid = None
            try:
                return pickle.loads(b"".join(chunks))     # our own child's bytes, through our own pipe
            except Exception:                      # noqa: BLE001 - no answer (killed, out of memory): ask here
                pass
        try:
            return True, self._fn()
        except Exception as exc:                   # noqa: BLE001 - the answer is the exception
            return False, exc

    def cancel(self) -> None:
        """Stop the child if it is still running (the caller gave up waiting for it)."""
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self._pid, 0)
            self._pid = None
        if self._read >= 0:
            os.close(self._read)
            self._read = -1

    @contextmanager
    def first(self) -> Iterator[Forked[T]]:
        """A block the caller runs while the child checks what would have run before it: an error in the block
        gives way to the child's (asked for then), so the outcome is the serial one; an interrupt stops the child."""
        try:
            yield self
        except Exception:
            self.result()
            raise
        except BaseException:
            self.cancel()
            raise

    def __enter__(self) -> Forked[T]:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cancel()
