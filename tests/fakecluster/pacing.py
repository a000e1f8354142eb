"""How a measured first token compares with the stand-in engines' pacing (fake_bin/openai_fake.py Timing).

The stand-ins sleep the configured prefill time, so it is a floor; whatever else a request meets (hops through a
proxy, a loaded machine's scheduling: 40+ ms seen in CI) only adds to it, and does not grow with the prefill.
"""

from __future__ import annotations

# what a loaded machine may add on top of the pacing; the alternatives the timing tests tell apart (a second
# prefill, a missed or a false prefix-cache hit) move the first token by 200 ms or more
OVERHEAD_MS = 50.0


def paced(measured_ms: float, expected_ms: float, rel: float = 0.1) -> bool:
    """The first token came no earlier than the pacing allows and no later than ``rel`` + OVERHEAD_MS above it."""
    return 0.95 * expected_ms <= measured_ms <= (1 + rel) * expected_ms + OVERHEAD_MS
