"""Processes a test starts itself (stand-in engines, proxies): stopped, whatever happens."""

from __future__ import annotations

import subprocess
import time
import urllib.request


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


def wait_http(p: subprocess.Popen, url: str, timeout: float = 60) -> bytes:
    """The body of ``url`` once the server ``p`` started answers it. Fails at once, with ``p``'s output, if ``p``
    exits first; else after ``timeout`` s. The bound is generous on purpose: a start on a loaded 2-core CI machine
    has taken more than 15 s, and a start that works returns as soon as it answers."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.read()
        except OSError as e:
            if p.poll() is not None:
                raise AssertionError(f"{p.args[:3]} exited ({p.returncode}) before {url} answered:\n"
                                     f"{(p.communicate()[0] or '')[-3000:]}") from e
            if time.monotonic() > deadline:
                raise AssertionError(f"{url}: no answer within {timeout} s ({e})") from e
            time.sleep(0.2)
