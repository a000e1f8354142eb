"""Processes a test starts itself (stand-in engines, proxies): stopped, whatever happens."""

from __future__ import annotations

import subprocess


def stop(p: subprocess.Popen, timeout: float = 10):
    """SIGTERM, its output within ``timeout`` s, else SIGKILL: ``p`` never outlives the call. Returns stdout."""
    if p.poll() is None:
        p.terminate()
    try:
        return p.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        p.kill()
        return p.communicate()[0]


def stop_all(procs, timeout: float = 10) -> list:
    """``stop`` each (all are signalled first, so they stop together); their outputs."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    return [stop(p, timeout) for p in procs]
