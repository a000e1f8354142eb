"""How many instances a role should have, from readings of its load (deploy.scaling, core/models/scaling.py).

One step at a time, as the serving stacks that scale by load do: a role is overloaded when any signal is above its
scale-up threshold on every reading for `scale_up.for_s` seconds, underloaded when every signal is below its
scale-down threshold for `scale_down.for_s` and the same load spread over one instance fewer would not be
overloaded (hysteresis: no instance is removed that the next reading would add back); after any change the
cool-downs hold further changes; the role's bounds cap both. A reading without any signal decides nothing (a
missing metric is not an idle engine). Pure: the caller reads the engines and the clock.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable, Literal, Sequence

from deployctl.core.models.scaling import Scaling


@dataclass(frozen=True)
class Reading:
    """One reading of a role's load, averaged over the instances that answered."""

    at: float                             # seconds, the caller's monotonic clock
    instances: int                        # instances of the role that answered
    waiting: float | None = None          # requests queued per instance
    running: float | None = None          # requests running per instance
    kv_usage: float | None = None         # KV cache use, 0..1
    tokens_per_s: float | None = None     # generated (decode, mixed) or prompt (prefill) tokens/s per instance
    ttft_ms: float | None = None          # mean time to first token of the requests answered since the last reading
    tpot_ms: float | None = None          # mean time per output token since the last reading

    def utilisation(self, capacity: float | None) -> float | None:
        return self.tokens_per_s / capacity if self.tokens_per_s is not None and capacity else None

    @property
    def has_signal(self) -> bool:
        return any(v is not None for v in (self.waiting, self.kv_usage, self.tokens_per_s, self.ttft_ms, self.tpot_ms))


@dataclass(frozen=True)
class Decision:
    role: str
    current: int
    desired: int
    action: Literal["up", "down", "hold"]
    reason: str
    inputs: dict = field(default_factory=dict)    # what the decision read, for the event record

    def as_dict(self) -> dict:
        return asdict(self)


def _overload(r: Reading, p: Scaling, capacity: float | None) -> list[str]:
    """The signals of `r` above their scale-up thresholds, described."""
    up, out = p.scale_up, []
    if r.waiting is not None and r.waiting > up.waiting_per_instance:
        out.append(f"{r.waiting:g} waiting per instance > {up.waiting_per_instance:g}")
    if r.kv_usage is not None and r.kv_usage > up.kv_usage:
        out.append(f"KV cache {r.kv_usage:.0%} > {up.kv_usage:.0%}")
    u = r.utilisation(capacity)
    if u is not None and u > up.utilisation:
        out.append(f"{u:.0%} of an instance's capacity > {up.utilisation:.0%}")
    for name, got, slo in (("TTFT", r.ttft_ms, up.ttft_ms), ("TPOT", r.tpot_ms, up.tpot_ms)):
        if got is not None and slo is not None and got > slo:
            out.append(f"{name} {got:.0f} ms > {slo:g} ms")
    return out


def _underload(r: Reading, p: Scaling, capacity: float | None) -> list[str] | None:
    """Why `r` could do with one instance fewer (every signal present below its threshold, and below scale-up
    with the load of one instance spread over the others), or None."""
    if not r.has_signal or r.instances < 1:
        return None
    if r.instances == 1:
        return _underload_last(r)
    down, up = p.scale_down, p.scale_up
    spread = r.instances / (r.instances - 1)
    out = []
    if r.waiting is not None:
        if r.waiting > 0:
            return None
        out.append("nothing waiting")
    if r.kv_usage is not None:
        if r.kv_usage >= down.kv_usage or r.kv_usage * spread > up.kv_usage:
            return None
        out.append(f"KV cache {r.kv_usage:.0%} < {down.kv_usage:.0%}")
    u = r.utilisation(capacity)
    if u is not None:
        if u >= down.utilisation or u * spread > up.utilisation:
            return None
        out.append(f"{u:.0%} of an instance's capacity < {down.utilisation:.0%}")
    for got, slo in ((r.ttft_ms, up.ttft_ms), (r.tpot_ms, up.tpot_ms)):
        if got is not None and slo is not None and got > slo:
            return None             # the latency target is missed already: one instance fewer would miss it more
    return out


def _underload_last(r: Reading) -> list[str] | None:
    """The role's last instance: removable (where min is 0) only when nothing waits, runs or is generated."""
    idle = all(v in (None, 0) for v in (r.waiting, r.running, r.tokens_per_s))
    return ["idle"] if idle else None


def _lasting(readings: Sequence[Reading], now: float, for_s: float, interval_s: float,
             test: Callable[[Reading], list[str] | None]) -> list[str] | None:
    """The findings of the newest reading when `test` holds on every reading since the start of the last `for_s`
    seconds: the readings inside that span and the last one taken at or before its start (so a condition seen
    at readings a little more than an interval apart counts from the first of them); without a reading that old,
    the oldest must be at most half an interval after the span's start. Else None."""
    ordered = sorted(readings, key=lambda r: r.at)
    if for_s == 0:
        chosen = ordered[-1:]
    else:
        start = now - for_s
        before = [r for r in ordered if r.at <= start]
        chosen = [r for r in ordered if r.at > start]
        if not chosen:
            return None         # nothing read since the window began (the role stopped answering): no signal now
        if before:
            chosen = [before[-1], *chosen]
        elif chosen[0].at > start + interval_s / 2:
            return None
    if not chosen:
        return None
    found = [test(r) for r in chosen]
    return found[-1] if all(f for f in found) else None


STALE_INTERVALS = 3      # a role whose last reading is older than this many intervals has no current signal


def decide(policy: Scaling, role: str, current: int, readings: Sequence[Reading], now: float,
           last_change_at: float | None = None, capacity: float | None = None) -> Decision:
    """The role's desired instance count now. `capacity`: tokens/s one instance sustains (the plan's estimate or
    the user's calibration; None: utilisation is not a signal)."""
    bounds = policy.roles.get(role)
    latest = max(readings, key=lambda r: r.at) if readings else None
    inputs = {"readings": len(readings), "latest": asdict(latest) if latest else None, "capacity": capacity,
              "policy": {"scale_up": policy.scale_up.model_dump(), "scale_down": policy.scale_down.model_dump(),
                         "bounds": bounds.model_dump() if bounds else None}}

    def out(desired: int, action: Literal["up", "down", "hold"], reason: str) -> Decision:
        return Decision(role=role, current=current, desired=desired, action=action, reason=reason, inputs=inputs)

    if bounds is None:
        return out(current, "hold", "not scaled: deploy.scaling.roles names no bounds for this role")
    if current < bounds.min:
        return out(bounds.min, "up", f"{current} instance(s), below deploy.scaling.roles.{role}.min {bounds.min}")
    if current > bounds.max:
        return out(bounds.max, "down", f"{current} instance(s), above deploy.scaling.roles.{role}.max {bounds.max}")
    if latest is None or not latest.has_signal:
        return out(current, "hold", "no load reading with a signal (waiting, KV cache, tokens/s): nothing decided")
    if now - latest.at > STALE_INTERVALS * policy.interval_s:
        return out(current, "hold", f"no reading for {now - latest.at:.0f} s (the role's instances do not answer): "
                                    "nothing decided")
    since = now - last_change_at if last_change_at is not None else None
    hot = _lasting(readings, now, policy.scale_up.for_s, policy.interval_s,
                   lambda r: _overload(r, policy, capacity) or None)
    if hot:
        why = "; ".join(hot) + f" for {policy.scale_up.for_s:g} s"
        if current >= bounds.max:
            return out(current, "hold", f"overloaded ({why}) but at deploy.scaling.roles.{role}.max {bounds.max}")
        if since is not None and since < policy.cooldown_up_s:
            return out(current, "hold", f"overloaded ({why}); cooling down after the last change "
                                        f"({policy.cooldown_up_s - since:.0f} s left)")
        return out(current + 1, "up", f"overloaded: {why}")
    cold = _lasting(readings, now, policy.scale_down.for_s, policy.interval_s,
                    lambda r: _underload(r, policy, capacity))
    if cold:
        why = "; ".join(cold) + f" for {policy.scale_down.for_s:g} s"
        if current <= bounds.min:
            return out(current, "hold", f"underloaded ({why}) but at deploy.scaling.roles.{role}.min {bounds.min}")
        if since is not None and since < policy.cooldown_down_s:
            return out(current, "hold", f"underloaded ({why}); cooling down after the last change "
                                        f"({policy.cooldown_down_s - since:.0f} s left)")
        return out(current - 1, "down", f"underloaded: {why}")
    return out(current, "hold", "load within the thresholds")
