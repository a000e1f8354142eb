"""The benchmark client the serving-loop simulation is driven by (deployctl.core.sizing.simulate).

Two client models, as the benchmark tools send load:

* ``concurrency``: N clients start together and each sends its next request as soon as its previous one has
  finished (closed loop, back to back). This is vLLM's ``bench serve --max-concurrency`` (an asyncio semaphore
  around every request; with the default ``--request-rate inf`` every request is released at once and the
  semaphore admits N), AIPerf's ``--concurrency`` mode and AISBench's ``batch_size`` (the fixed number of
  concurrent requests). The first wave's N prompts arrive in the same instant, so prefill queues in a burst.
* ``rate``: an open loop at ``rate`` requests/s, Poisson arrivals (vLLM ``--request-rate`` with burstiness 1,
  AIPerf ``--request-rate`` with its Poisson arrival pattern) or evenly spaced ones (``arrival="fixed"``: AIPerf's
  constant rate, vLLM's burstiness -> infinity), optionally gated by a concurrency ceiling (AIPerf's
  sleep-then-gate when both are given).

``prefix_hit`` is the share of each prompt's tokens the engine finds in its prefix cache (a shared system prompt,
a multi-turn history): those tokens are not computed again, their KV is in the cache. It is the engine's own
"prefix cache hit rate" (vLLM's ``vllm:prefix_cache_hits`` / ``vllm:prefix_cache_queries``), or a dataset's shared
prefix over its prompt length (``from_shared_prefix``).

Lengths are fixed, or uniform within ``input_len x (1 ± spread)`` as vLLM's random dataset draws them
(``--random-range-ratio``). Everything is drawn from ``random.Random(seed)``: the same client gives the same
requests. Sources: docs/performance-model.md "Client models".
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Literal

REQUESTS_PER_CLIENT = 4          # deployctl bench measures max(5, 4 x concurrency) requests per point
RATE_REQUESTS = 200              # requests of a rate client when not told


@dataclass(frozen=True)
class Client:
    """The load of the whole deployment (concurrency and rate are the deployment's, not one instance's)."""

    input_len: int
    output_len: int
    mode: Literal["concurrency", "rate"] = "concurrency"
    concurrency: int = 1                  # concurrency mode: clients; rate mode: a ceiling (0: none)
    rate: float = 0.0                     # rate mode: requests per second
    spread: float = 0.0                   # lengths uniform in len x (1 ± spread); 0: fixed
    requests: int | None = None           # requests measured (default: as deployctl bench does)
    seed: int = 0
    arrival: Literal["poisson", "fixed"] = "poisson"   # rate mode: exponential or equal gaps
    prefix_hit: float = 0.0               # share of each prompt found in the prefix cache (not computed again)

    def __post_init__(self) -> None:
        if self.mode not in ("concurrency", "rate"):
            raise ValueError(f"client mode {self.mode!r}: expected concurrency or rate")
        if self.mode == "rate" and self.rate <= 0:
            raise ValueError("a rate client needs rate > 0 requests/s")
        if self.mode == "concurrency" and self.concurrency < 1:
            raise ValueError("a concurrency client needs concurrency >= 1")
        if not 0 <= self.spread < 1:
            raise ValueError("spread must be in [0, 1)")
        if self.arrival not in ("poisson", "fixed"):
            raise ValueError(f"arrival {self.arrival!r}: expected poisson or fixed")
        if not 0 <= self.prefix_hit < 1:
            raise ValueError("prefix_hit must be in [0, 1)")

    @property
    def total_requests(self) -> int:
        if self.requests:
            return self.requests
        if self.mode == "rate":
            return RATE_REQUESTS
        return max(5, REQUESTS_PER_CLIENT * self.concurrency)

    def describe(self) -> dict:
        """What `plan --output json` shows under estimate.client."""
        d = asdict(self)
        d["requests"] = self.total_requests
        d["semantics"] = ("closed loop: every client starts at once and sends its next request when the previous "
                          "one finishes (AIPerf --concurrency, AISBench batch_size, the engines' own serving benchmarks' "
                          "--max-concurrency)" if self.mode == "concurrency" else
                          ("open loop: Poisson arrivals (AIPerf --request-rate, the serving benchmarks' --request-rate)"
                           if self.arrival == "poisson" else
                           "open loop: evenly spaced arrivals (AIPerf --request-rate with a constant rate)")
                          + (f", at most {self.concurrency} in flight" if self.concurrency else ""))
        d["lengths"] = "fixed" if not self.spread else f"uniform within ±{self.spread:.0%}"
        if self.prefix_hit:
            d["prefix_cache"] = (f"{self.prefix_hit:.0%} of each prompt found in the prefix cache: not computed "
                                 "again (its KV still counted per request)")
        return d


def share(client: Client, groups: float) -> Client:
    """The load one of ``groups`` identical schedulers sees (the router spreads requests evenly): concurrency,
    rate and requests divided, at least one client and enough requests for three rounds of it."""
    conc = max(1, round(client.concurrency / groups)) if client.concurrency else 0
    rate = client.rate / groups
    req = max(3 * max(conc, 1), round(client.total_requests / groups), 5)
    return Client(input_len=client.input_len, output_len=client.output_len, mode=client.mode, concurrency=conc,
                  rate=rate, spread=client.spread, requests=req, seed=client.seed, arrival=client.arrival,
                  prefix_hit=client.prefix_hit)


def from_shared_prefix(shared: int, input_len: int) -> float:
    """The prefix hit rate of a dataset whose prompts of ``input_len`` tokens share their first ``shared`` tokens
    (AIPerf's prompt prefix, a common system prompt): every prompt after the first finds them cached."""
    return min(max(shared, 0), input_len - 1) / input_len if input_len > 1 else 0.0


def cached(client: Client, input_len: int) -> int:
    """Tokens of a prompt of ``input_len`` the prefix cache already holds (whole tokens; at least one computed)."""
    return min(int(input_len * client.prefix_hit), input_len - 1) if client.prefix_hit else 0


def lengths(client: Client, rng: random.Random) -> tuple[int, int]:
    """(input, output) tokens of the next request."""
    if not client.spread:
        return client.input_len, client.output_len

    def draw(n: int) -> int:
        return max(1, int(rng.uniform(n * (1 - client.spread), n * (1 + client.spread)) + 0.5))

    return draw(client.input_len), draw(client.output_len)


def arrivals(client: Client, n: int, rng: random.Random) -> list[float]:
    """Arrival times of an open-loop (rate) client from 0: exponential gaps (a Poisson process), or equal ones."""
    out, t = [], 0.0
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(client.rate) if client.arrival == "poisson" else 1.0 / client.rate
    return out
