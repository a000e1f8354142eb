"""An engine's load as its own Prometheus metrics say it, read on the host (the engine's port is the host's, not
always reachable from the controller): the running, waiting and KV-cache gauges and the token counters its driver
names (EngineSpec.metric_names). Names are arguments; the host prints only the lines of those metrics, at most
MAX_BYTES of them, and the answer is parsed here into an EngineLoad (untrusted text: anything else is ignored,
a value that is not a finite number is refused).
"""

from __future__ import annotations

import math
import re
from deployctl.core.models.base import Frozen
from deployctl.probes.fact import Fact

MAX_BYTES = 256 * 1024
# GET the URL with the host's python3, keep only the lines of the named metrics (argv[2:]), bounded
METRICS_SCRIPT = ("import sys, urllib.request\n"
                  "names = tuple(n for n in sys.argv[2:] if n)\n"
                  "try:\n"
                  "    body = urllib.request.urlopen(sys.argv[1], timeout=3).read(4 * 1024 * 1024)\n"
                  "except Exception as e:\n"
                  "    print('# error', type(e).__name__); sys.exit(0)\n"
                  "out = [l for l in body.decode('utf-8', 'replace').splitlines() if l.startswith(names)]\n"
                  f"sys.stdout.write(chr(10).join(out)[:{MAX_BYTES}] + chr(10))\n")
_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]{0,4096}\})?\s+(\S+)(?:\s+\S+)?$")


class EngineLoad(Frozen):
    """One engine process's load: gauges summed over its series (DP engines), KV use averaged; counters
    summed (tokens so far). None where the engine exposes no such series."""

    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    generated: float | None = None
    prompt: float | None = None
    # the TTFT and TPOT histograms' running sums (seconds) and counts, summed over the series
    ttft_sum: float | None = None
    ttft_count: float | None = None
    tpot_sum: float | None = None
    tpot_count: float | None = None
    error: str = ""                       # why nothing was read (the URL did not answer)


def _histograms(ttft: str, tpot: str) -> list[tuple[str, str]]:
    """(field, series name) of the TTFT and TPOT histograms' _sum and _count (none for a name not given)."""
    return [(f"{what}_{part}", f"{name}_{part}") for what, name in (("ttft", ttft), ("tpot", tpot)) if name
            for part in ("sum", "count")]


def parse_engine_load(text: str, running: str, waiting: str, kv_usage: str, generated: str,
                      prompt: str = "", ttft: str = "", tpot: str = "") -> EngineLoad:
    if text.startswith("# error"):
        return EngineLoad(error=text[8:80].strip() or "no answer")
    wanted = {n: k for k, n in (("running", running), ("waiting", waiting), ("kv_usage", kv_usage),
                                ("generated", generated), ("prompt", prompt), *_histograms(ttft, tpot)) if n}
    seen: dict[str, list[float]] = {}
    for line in text[:MAX_BYTES].splitlines():
        m = _LINE.match(line.strip())
        if not m or m.group(1) not in wanted:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            raise ValueError(f"metric {m.group(1)}: {m.group(3)[:40]!r} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"metric {m.group(1)}: {value} is not a finite count or share")
        seen.setdefault(wanted[m.group(1)], []).append(value)
    out = {k: (sum(v) / len(v) if k == "kv_usage" else sum(v)) for k, v in seen.items()}
    if out.get("kv_usage", 0) > 1:                  # a percentage, not a share
        if out["kv_usage"] > 100:
            raise ValueError(f"metric {kv_usage}: {out['kv_usage']} is neither a share nor a percentage")
        out["kv_usage"] /= 100.0
    return EngineLoad(**out)


# argv: the metrics URL, then the names of running, waiting, KV use, generated and prompt counters, then the
# TTFT and TPOT histograms' _sum and _count series (when named)
ENGINE_LOAD: Fact[EngineLoad] = Fact(
    "engine-metrics",
    lambda url, running, waiting, kv_usage, generated, prompt="", ttft="", tpot="": [
        "python3", "-c", METRICS_SCRIPT, url, running, waiting, kv_usage, generated, prompt,
        *[series for _, series in _histograms(ttft, tpot)]],
    parse_engine_load)
