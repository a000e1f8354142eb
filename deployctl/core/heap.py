"""Building large values without the cyclic garbage collector in the way (pure: Python's own memory manager).

A region's inventory and plan are millions of small objects that live as long as the command. With the collector
on, each of its full passes walks all of them again while they are being built: a quarter of `plan`'s time at
8,192 servers (docs/dev/benchmarks.md). Inside ``bulk()`` it is off; at the end what was built is moved out of the
collector's view (``gc.freeze``: kept for the rest of the process, as these values are), and it is on again for
what comes next (a `watch` runs for days: it keeps collecting its own short-lived garbage).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def bulk() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


def keep_until_exit(*values: object) -> None:
    """Leave ``values`` to the end of the process: a short-lived command's plan and files are not taken apart
    object by object when it returns (0.3 s for 8,192 servers' millions of objects and 0.5 GB of files); the
    operating system takes the process's memory back at once. They are held by a reference cycle that is then
    frozen (``gc.freeze``): only the collector could free it, and it never looks at frozen objects again, not even
    at interpreter exit. Only for values that live as long as the command anyway."""
    holder: list[object] = [values]
    holder.append(holder)
    gc.freeze()
