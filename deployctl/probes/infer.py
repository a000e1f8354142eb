"""One bounded inference request to an engine's own API, sent on the engine's host with the host's python3 (the
engine's port is the host's, not always reachable from the controller): `deployctl watch`'s probe of an engine that
answers its health check but may not infer (docs/watch.md). URL, body, request id and timeout are arguments, never
spliced into the script.

The script prints one line: ``status <code> <seconds>`` (the engine answered, with that HTTP status),
``timeout <seconds>`` (nothing came back in time) or ``error <exception type> <seconds>`` (the connection failed).
That line is host text, parsed here into an ``InferAnswer`` (every field bounded; anything else refused).
"""

from __future__ import annotations

import re
from typing import Literal

from deployctl.core.models.base import Frozen
from deployctl.probes.fact import Fact

MAX_BODY = 64 * 1024          # what the script reads of an answer (it only needs its status)
INFER_SCRIPT = (
    "import socket, sys, time, urllib.error, urllib.request\n"
    "url, body, rid, limit = sys.argv[1], sys.argv[2].encode(), sys.argv[3], float(sys.argv[4])\n"
    "req = urllib.request.Request(url, data=body, method='POST',\n"
    "                             headers={'Content-Type': 'application/json', 'X-Request-Id': rid})\n"
    "t = time.monotonic()\n"
    "def took():\n"
    "    return '%.3f' % (time.monotonic() - t)\n"
    "late = (socket.timeout, TimeoutError)\n"
    "try:\n"
    "    with urllib.request.urlopen(req, timeout=limit) as r:\n"
    f"        r.read({MAX_BODY})\n"
    "        print('status', r.status, took())\n"
    "except urllib.error.HTTPError as e:\n"
    "    print('status', e.code, took())\n"
    "except late:\n"
    "    print('timeout', took())\n"
    "except urllib.error.URLError as e:\n"
    "    print('timeout' if isinstance(e.reason, late) else 'error ' + type(e.reason).__name__, took())\n"
    "except Exception as e:\n"
    "    print('error', type(e).__name__, took())\n")
_STATUS = re.compile(r"^status ([1-5][0-9]{2}) ([0-9]{1,5}\.[0-9]{3})$")
_TIMEOUT = re.compile(r"^timeout ([0-9]{1,5}\.[0-9]{3})$")
_ERROR = re.compile(r"^error ([A-Za-z_][A-Za-z0-9_]{0,63}) ([0-9]{1,5}\.[0-9]{3})$")


class InferAnswer(Frozen):
    """What became of one probe request."""

    outcome: Literal["status", "timeout", "error"]
    seconds: float                 # from the request until the answer, the timeout or the error
    status: int | None = None      # the HTTP status (outcome "status")
    error: str = ""                # the exception's type (outcome "error"), e.g. ConnectionRefusedError

    @property
    def ok(self) -> bool:
        """The engine answered the request (2xx)."""
        return self.status is not None and 200 <= self.status < 300


def parse_infer_answer(text: str) -> InferAnswer:
    """The script's one line.

    Raises:
        ValueError: anything but one ``status``, ``timeout`` or ``error`` line of the script's form.
    """
    lines = [ln.strip() for ln in text[:4096].splitlines() if ln.strip()]
    line = lines[0] if len(lines) == 1 else ""
    if m := _STATUS.match(line):
        return InferAnswer(outcome="status", status=int(m.group(1)), seconds=float(m.group(2)))
    if m := _TIMEOUT.match(line):
        return InferAnswer(outcome="timeout", seconds=float(m.group(1)))
    if m := _ERROR.match(line):
        return InferAnswer(outcome="error", error=m.group(1), seconds=float(m.group(2)))
    shown = repr(text.strip()[:80]) if text.strip() else "nothing"
    raise ValueError(f"the inference probe printed {shown}, not `status|timeout|error ...`")


# POST ``url`` with the JSON ``body`` (header X-Request-Id: ``request_id``), at most ``timeout_s`` seconds a read
INFER: Fact[InferAnswer] = Fact(
    "infer-probe",
    lambda url, body, request_id, timeout_s: ["python3", "-c", INFER_SCRIPT, url, body, request_id, f"{timeout_s:g}"],
    parse_infer_answer)
