"""How long a load "lasts" in the scaling decision (deployctl.core.scaling.decide._lasting, through decide): every
reading since the start of the last `for_s` seconds, the last one taken at or before that start included (readings
a little more than an interval apart still cover the span); without a reading that old, the oldest may be at most
half an interval after the start, else the span is not covered (a gap decides nothing)."""

from __future__ import annotations

import pytest

from deployctl.core.models.scaling import RoleBounds, ScaleDown, ScaleUp, Scaling
from deployctl.core.scaling.decide import Reading, decide

# readings every 2 s, overload must last 6 s, underload 6 s, no cool-down in the way
POLICY = Scaling(interval_s=2, scale_up=ScaleUp(for_s=6), scale_down=ScaleDown(for_s=6),
                 roles={"decode": RoleBounds(min=1, max=4)})
HOT = {"waiting": 12.0}                          # above scale_up.waiting_per_instance (5)
COLD = {"waiting": 0.0, "kv_usage": 0.1}         # below every scale-down threshold, also over one instance fewer


def at(*times: float, load: dict = HOT, instances: int = 2) -> list[Reading]:
    return [Reading(at=t, instances=instances, **load) for t in times]


def action(readings: list[Reading], now: float, current: int = 2) -> str:
    return decide(POLICY, "decode", current, readings, now=now).action


def test_readings_a_little_more_than_an_interval_apart_count_as_lasting():
    # every 2.3 s: the span [0.9, 6.9] holds 2.3, 4.6, 6.9; 2.3 is more than half an interval after 0.9, but the
    # reading at 0 (before the span's start) carries the overload back to it
    readings = at(0.0, 2.3, 4.6, 6.9)
    d = decide(POLICY, "decode", 2, readings, now=6.9)
    assert (d.action, d.desired) == ("up", 3), d.reason
    assert "for 6 s" in d.reason


def test_the_same_spacing_counts_for_underload_too():
    assert action(at(0.0, 2.3, 4.6, 6.9, load=COLD), now=6.9) == "down"


def test_without_the_reading_before_the_span_the_same_readings_are_a_gap():
    # the same readings with the one at 0 left out: nothing at or before 0.9, and 2.3 > 0.9 + 1
    assert action(at(2.3, 4.6, 6.9), now=6.9) == "hold"
    assert action(at(2.3, 4.6, 6.9, load=COLD), now=6.9) == "hold"


def test_a_reading_exactly_at_the_spans_start_counts_as_before_it():
    # now 8, for 6: the span starts at 2; the reading at 2 is "at or before" it
    assert action(at(2.0, 4.5, 7.0), now=8.0) == "up"


def test_the_reading_before_the_span_must_hold_the_condition_too():
    # overload seen from 2.3 only: the reading at 0 (the span's start is 0.9) was not overloaded: not 6 s yet
    readings = at(0.0, load={"waiting": 1.0}) + at(2.3, 4.6, 6.9)
    assert action(readings, now=6.9) == "hold"


def test_only_the_last_reading_at_or_before_the_start_is_looked_at():
    # a calm reading long before the span does not count; the one just before the start does
    readings = at(-2.3, load={"waiting": 1.0}) + at(0.0, 2.3, 4.6, 6.9)
    assert action(readings, now=6.9) == "up"


@pytest.mark.parametrize("oldest, expected", [
    (3.0, "up"),       # now 8, for 6, interval 2: the span starts at 2, half an interval later is 3: covered
    (3.25, "hold"),    # a quarter second later: a gap
])
def test_without_an_older_reading_the_oldest_may_be_half_an_interval_late(oldest, expected):
    readings = at(oldest, oldest + 2.25, oldest + 4.5)
    assert all(r.at > 2.0 for r in readings)           # none at or before the span's start
    assert action(readings, now=8.0) == expected


def test_a_gap_also_holds_underload():
    assert action(at(3.25, 5.5, 7.75, load=COLD), now=8.0) == "hold"
    assert action(at(3.0, 5.25, 7.5, load=COLD), now=8.0) == "down"


def test_readings_in_any_order_are_taken_by_their_time():
    assert action(list(reversed(at(0.0, 2.3, 4.6, 6.9))), now=6.9) == "up"


def test_for_s_zero_looks_at_the_newest_reading_only():
    policy = POLICY.model_copy(update={"scale_up": ScaleUp(for_s=0)})
    readings = at(0.0, load={"waiting": 1.0}) + at(1.0)
    assert decide(policy, "decode", 2, readings, now=1.0).action == "up"
    readings = at(0.0) + at(1.0, load={"waiting": 1.0})
    assert decide(policy, "decode", 2, readings, now=1.0).action == "hold"


@pytest.mark.parametrize("load", [HOT, COLD], ids=["overload", "underload"])
def test_one_old_reading_and_none_since_is_not_lasting(load):
    # one reading at 0, then nothing for 20 s (10 intervals): the span [14, 20] holds no reading at all
    assert action(at(0.0, load=load), now=20.0) == "hold"
