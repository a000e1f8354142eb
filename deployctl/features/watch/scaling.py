"""`deployctl watch --scale`: the watch also carries out deploy.scaling, as `deployctl scale --apply` does.

The scaling rounds run in their own thread (deploy.scaling.interval_s apart, reading the engines' load). Before a
change the watch of the old deployment is stopped (so its recovery never restarts an instance being removed, nor
reports a starting one as failed); after it, the caller starts a watch of the deployment as scaled. The watch and
the scaler never act on the deployment at the same time.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from deployctl.features.scale.run import run_rounds
from deployctl.features.scale.shadow import Shadow

FOREVER = 1 << 40        # rounds: until the watch ends


class _Pausing:
    """The applier, with the watch stopped around each change."""

    def __init__(self, applier: Any, driver: "ScaleDriver") -> None:
        self.applier, self.driver = applier, driver

    def _around(self, act: Callable[[], Any]) -> Any:
        self.driver.pause()
        try:
            return act()
        finally:
            self.driver.resume()

    def add(self, ctx, role: str, why: str, live=frozenset()):
        self.driver.check()
        return self._around(lambda: self.applier.add(ctx, role, why, live=live))

    def remove(self, ctx, role: str, why: str, drain_timeout: float):
        self.driver.check()
        return self._around(lambda: self.applier.remove(ctx, role, why, drain_timeout))

    def rejoin(self, ctx) -> list[str]:
        self.driver.check()
        return self.applier.rejoin(ctx)


class ScaleDriver:
    """Runs the scaling rounds beside a watch. ``stop_watch``: stops the running watch and returns once it has
    ended; the caller's loop waits on ``wait_resumed`` and then watches the deployment as scaled."""

    def __init__(self, shadow: Shadow, applier: Any, reopen: Callable[[], Any], reader: Callable[[Any], Any],
                 emit: Callable[[dict], None], stop_watch: Callable[[], None], drain_timeout: float = 600) -> None:
        self.shadow, self.reopen, self.reader, self.emit = shadow, reopen, reader, emit
        self.stop_watch, self.drain_timeout = stop_watch, drain_timeout
        self.applier = _Pausing(applier, self)
        self.paused = threading.Event()
        self.resumed = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="deployctl-scale")

    def pause(self) -> None:
        self.resumed.clear()
        self.paused.set()
        self.stop_watch()

    def resume(self) -> None:
        self.paused.clear()
        self.resumed.set()

    def check(self) -> None:
        """The watch ended: no new step starts (one under way ends first)."""
        if self.done.is_set():
            raise _Stop

    def _sleep(self, seconds: float) -> None:
        if self.done.wait(seconds):
            raise _Stop

    def _run(self) -> None:
        try:
            run_rounds(self.shadow, FOREVER, self.shadow.policy.interval_s, self.emit, applier=self.applier,
                       reopen=self.reopen, reader=self.reader, drain_timeout=self.drain_timeout, sleep=self._sleep)
        except _Stop:
            pass
        except Exception as exc:  # noqa: BLE001 - said as an event; the watch goes on without scaling
            self.emit({"event": "scale-stopped", "cause": f"{type(exc).__name__}: {str(exc)[:300]}"})
        finally:
            self.resume()

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.done.set()


class _Stop(Exception):
    """The watch ended: the scaling rounds end with it."""
