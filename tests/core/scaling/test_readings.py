"""Per-role readings from the engines' samples: sums per instance, means over instances, rates from counters."""

from __future__ import annotations

import pytest

from deployctl.core.scaling.readings import Sample, role_readings


def s(target, instance, role, at, **kw):
    return Sample(target=target, instance=instance, role=role, at=at, **kw)


def test_gauges_sum_per_instance_and_average_over_instances():
    now = [s("a:1", "decode-0", "decode", 10, waiting=4, running=10, kv_usage=0.5),
           s("a:2", "decode-0", "decode", 10, waiting=2, running=6, kv_usage=0.7),      # a second API server
           s("b:1", "decode-1", "decode", 10, waiting=0, running=8, kv_usage=0.2),
           s("c:1", "prefill-0", "prefill", 10, waiting=9)]
    r = role_readings(now, {})
    assert r["decode"].instances == 2 and r["decode"].waiting == 3.0 and r["decode"].running == 12.0
    assert r["decode"].kv_usage == pytest.approx((0.6 + 0.2) / 2)
    assert r["prefill"].waiting == 9.0 and r["decode"].tokens_per_s is None


def test_rates_come_from_counters_and_a_reset_counter_gives_none():
    before = {"a:1": s("a:1", "d0", "decode", 0, generated=1000), "b:1": s("b:1", "p0", "prefill", 0, prompt=5000),
              "c:1": s("c:1", "d1", "decode", 0, generated=9000)}
    now = [s("a:1", "d0", "decode", 10, generated=3000), s("b:1", "p0", "prefill", 10, prompt=45000),
           s("c:1", "d1", "decode", 10, generated=100)]                                   # c restarted
    r = role_readings(now, before)
    assert r["decode"].tokens_per_s == 200.0 and r["prefill"].tokens_per_s == 4000.0


def test_an_instance_that_did_not_answer_is_not_counted():
    r = role_readings([s("a:1", "d0", "decode", 5, waiting=1), s("b:1", "d1", "decode", 5, error="URLError")], {})
    assert r["decode"].instances == 1
    assert role_readings([s("b:1", "d1", "decode", 5, error="URLError")], {}) == {}
