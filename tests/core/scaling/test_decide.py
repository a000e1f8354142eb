"""The scaling decision (deployctl.core.scaling.decide): one step at a time, on load that lasts, with hysteresis,
cool-downs and bounds; a missing metric decides nothing."""

from __future__ import annotations

import pytest

from deployctl.core.models.scaling import RoleBounds, Scaling
from deployctl.core.scaling.decide import Reading, decide

POLICY = Scaling(roles={"decode": RoleBounds(min=1, max=3)})       # up: 30 s, down: 300 s, interval 10 s


def readings(start: float, end: float, step: float = 10.0, **load) -> list[Reading]:
    n = int((end - start) / step) + 1
    return [Reading(at=start + i * step, **{"instances": 2, **load}) for i in range(n)]


def test_overload_that_lasts_adds_one_instance_with_its_reason():
    d = decide(POLICY, "decode", 2, readings(0, 40, waiting=12.0), now=40)
    assert (d.action, d.desired) == ("up", 3)
    assert "12 waiting per instance > 5" in d.reason and "for 30 s" in d.reason
    assert d.inputs["latest"]["waiting"] == 12.0 and d.inputs["policy"]["bounds"] == {"min": 1, "max": 3}


def test_a_burst_shorter_than_scale_up_for_s_is_absorbed():
    burst = readings(0, 20, waiting=0.0) + readings(30, 50, waiting=20.0)    # overloaded for 20 s only
    assert decide(POLICY, "decode", 2, burst, now=50).action == "hold"
    young = readings(35, 50, waiting=20.0)                                   # readings do not cover 30 s yet
    assert decide(POLICY, "decode", 2, young, now=50).action == "hold"


@pytest.mark.parametrize("load, why", [
    ({"kv_usage": 0.95}, "KV cache 95% > 90%"),
    ({"tokens_per_s": 950.0}, "95% of an instance's capacity > 90%"),
])
def test_each_signal_alone_counts(load, why):
    d = decide(POLICY, "decode", 2, readings(0, 30, **load), now=30, capacity=1000.0)
    assert d.action == "up" and why in d.reason


def test_utilisation_needs_a_capacity():
    assert decide(POLICY, "decode", 2, readings(0, 30, tokens_per_s=950.0), now=30).action == "hold"


def test_underload_that_lasts_removes_one_unless_one_fewer_would_be_overloaded():
    idle = readings(0, 300, waiting=0.0, kv_usage=0.2, tokens_per_s=100.0)
    d = decide(POLICY, "decode", 2, idle, now=300, capacity=1000.0)
    assert (d.action, d.desired) == ("down", 1) and "nothing waiting" in d.reason
    # 35 % of capacity on each of 2 instances: below scale_down (40 %) but 70 % on one: kept (hysteresis) only
    # when that would pass scale_up; 0.35 x 2 = 0.7 < 0.9, so removed; 0.48 KV x 2 > 0.9: kept
    kv = readings(0, 300, waiting=0.0, kv_usage=0.48)
    assert decide(POLICY, "decode", 2, kv, now=300).action == "hold"
    queued = readings(0, 300, waiting=1.0, kv_usage=0.1)
    assert decide(POLICY, "decode", 2, queued, now=300).action == "hold"


def test_cool_downs_hold_changes_after_the_last_one():
    hot = readings(0, 40, waiting=12.0)
    d = decide(POLICY, "decode", 2, hot, now=40, last_change_at=10)
    assert d.action == "hold" and "cooling down" in d.reason and "30 s left" in d.reason
    assert decide(POLICY, "decode", 2, hot, now=40, last_change_at=-30).action == "up"
    cold = readings(0, 300, waiting=0.0, kv_usage=0.1)
    assert decide(POLICY, "decode", 2, cold, now=300, last_change_at=100).action == "hold"


def test_bounds_cap_both_ways_and_restore_a_role_outside_them():
    assert "at deploy.scaling.roles.decode.max 3" in decide(POLICY, "decode", 3, readings(0, 40, waiting=9.0),
                                                             now=40).reason
    assert decide(POLICY, "decode", 1, readings(0, 300, instances=1, waiting=0.0, kv_usage=0.1),
                  now=300).action == "hold"
    assert decide(POLICY, "decode", 0, [], now=0).desired == 1
    assert decide(POLICY, "decode", 5, [], now=0).desired == 3


def test_nothing_is_decided_without_a_signal_or_without_bounds():
    assert "no load reading" in decide(POLICY, "decode", 2, readings(0, 40), now=40).reason
    assert "names no bounds" in decide(POLICY, "prefill", 1, readings(0, 40, waiting=50.0), now=40).reason


def test_a_role_may_be_emptied_only_when_idle_and_allowed():
    p = Scaling(roles={"decode": RoleBounds(min=0, max=2)})
    idle = readings(0, 300, instances=1, waiting=0.0, running=0.0, tokens_per_s=0.0)
    assert decide(p, "decode", 1, idle, now=300).desired == 0
    busy = readings(0, 300, instances=1, waiting=0.0, running=1.0, tokens_per_s=5.0)
    assert decide(p, "decode", 1, busy, now=300).action == "hold"


def test_bad_bounds_are_refused():
    with pytest.raises(ValueError):
        RoleBounds(min=3, max=2)
