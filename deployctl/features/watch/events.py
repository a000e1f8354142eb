"""What leaves the watch as an event (runs/<id>-watch/events.jsonl, `--output json`, the webhook's body, the hook
command's stdin) is host data: a cause quotes what a host printed (a `docker restart` error, a router's answer).
Every event passes here once, in ``Watcher._emit``, before anything sees it:

* ``clean_event``: every string made one printable line (deployctl.core.textsafe: escape sequences, controls and
  bidirectional overrides removed, so an OSC title, a screen clear or a hyperlink never reaches a terminal, a
  pager or a chat client), each cut (``MAX_TEXT`` characters, ``MAX_ITEM`` for an item of a list, at most
  ``MAX_ITEMS`` items), numbers finite, the whole event at most ``MAX_EVENT`` bytes of JSON;
* ``Limiter``: at most ``LIMIT`` events per node, instance, event and kind (``npu``, ``link``, ...) in
  ``WINDOW_S`` seconds; the ones beyond are counted, and once the window is over one ``suppressed`` event says how
  many (a host whose devices flap every round is reported, not recorded 16 times a round).
"""

from __future__ import annotations

import json
import math
import time
from typing import Any, Callable

from deployctl.core.textsafe import clean

MAX_TEXT = 1000           # characters of one string of an event (a cause)
MAX_ITEM = 300            # characters of one item of a list (an instance-failed's causes)
MAX_ITEMS = 32            # items of a list, keys of an event
MAX_EVENT = 16 * 1024     # bytes of one event as JSON
LIMIT = 5                 # events per (node, instance, event, kind) ...
WINDOW_S = 60.0           # ... in this many seconds; the rest are counted in one `suppressed` event


def _text(value: Any, n: int) -> str:
    s = clean(value, multiline=False)
    return s if len(s) <= n else s[: n - 1] + "…"


def _value(v: Any, n: int = MAX_TEXT, depth: int = 0) -> Any:
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v if -(2 ** 63) <= v < 2 ** 63 else None
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (list, tuple, set, frozenset)) and depth < 2:
        return [_value(x, MAX_ITEM, depth + 1) for x in list(v)[:MAX_ITEMS]]
    if isinstance(v, dict) and depth < 2:
        return {_text(k, 64): _value(x, MAX_ITEM, depth + 1) for k, x in list(v.items())[:MAX_ITEMS]}
    return _text(v, n)


def clean_event(ev: dict) -> dict:
    """``ev`` with every string one printable, bounded line and every number finite (see the module doc)."""
    out = {_text(k, 64): _value(v) for k, v in list(ev.items())[:MAX_ITEMS]}
    size = len(json.dumps(out))
    if size > MAX_EVENT:          # lists first (the causes repeat the faults), then the longest strings
        for key in sorted(out, key=lambda k: -len(json.dumps(out[k]))):
            if size <= MAX_EVENT:
                break
            if key in ("ts", "event", "instance", "node"):
                continue
            v = out[key]
            out[key] = (v[:1] if isinstance(v, list) else _text(v, 200) if isinstance(v, str) else None)
            size = len(json.dumps(out))
        out["truncated"] = True
    return out


def _key(ev: dict) -> tuple[str, str, str, str]:
    return (str(ev.get("node") or ""), str(ev.get("instance") or ""), str(ev.get("event") or ""),
            str(ev.get("kind") or ""))


class Limiter:
    """At most ``limit`` events per key (node, instance, event, kind) in a window of ``window`` s that starts with
    the key's first event; beyond it events are counted, and the window's end gives one ``suppressed`` event."""

    def __init__(self, limit: int = LIMIT, window: float = WINDOW_S, clock: Callable[[], float] = time.monotonic):
        self.limit, self.window, self.clock = limit, window, clock
        self.windows: dict[tuple, list] = {}         # key -> [start, admitted, suppressed]

    def admit(self, ev: dict) -> list[dict]:
        """What to record and send now: ``ev`` (after the summary of its key's window that ended), or nothing."""
        now, key = self.clock(), _key(ev)
        out = []
        w = self.windows.get(key)
        if w is not None and now - w[0] >= self.window:
            out += self._summary(key, w)
            w = None
        if w is None:
            w = self.windows[key] = [now, 0, 0]
        if w[1] < self.limit:
            w[1] += 1
            out.append(ev)
        else:
            w[2] += 1
        return out

    def due(self, final: bool = False) -> list[dict]:
        """The summaries of the windows that ended, which are forgotten; ``final`` (the watch ends): also of the
        windows still open, which keep their budget (what comes after is still limited, and counted anew)."""
        now, out = self.clock(), []
        for key, w in list(self.windows.items()):
            if now - w[0] >= self.window:
                out += self._summary(key, w)
                del self.windows[key]
            elif final:
                out += self._summary(key, w)
                w[2] = 0
        return out

    def _summary(self, key: tuple, w: list) -> list[dict]:
        if not w[2]:
            return []
        node, instance, what, kind = key
        of = f"`{what}` events" + (f" ({kind})" if kind else "")
        cause = (f"{w[2]} more {of} of {node or instance or 'the watch'} in {self.window:g} s not recorded or sent "
                 f"(at most {self.limit} per node, instance, event and kind in {self.window:g} s)")
        return [{"ts": round(time.time(), 3), "event": "suppressed", "instance": instance, "node": node,
                 "cause": cause, "count": w[2], "of": what, **({"kind": kind} if kind else {})}]
