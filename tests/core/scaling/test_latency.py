"""TTFT and TPOT as scaling signals: the mean latency of the requests answered between two readings (from the
engines' histogram sums and counts), compared with the latency targets of deploy.scaling.scale_up."""

from __future__ import annotations

import pytest

from deployctl.core.models.scaling import RoleBounds, ScaleUp, Scaling
from deployctl.core.scaling.decide import Reading, decide
from deployctl.core.scaling.readings import Sample, role_readings


def s(target, instance, at, ttft=(None, None), tpot=(None, None)):
    return Sample(target=target, instance=instance, role="decode", at=at, waiting=0.0, ttft=ttft, tpot=tpot)


def test_mean_latency_is_the_histograms_growth_over_every_process_of_the_role():
    before = {"a:1": s("a:1", "d0", 0, ttft=(10.0, 40), tpot=(50.0, 2000)),
              "a:2": s("a:2", "d0", 0, ttft=(2.0, 10), tpot=(5.0, 100)),
              "b:1": s("b:1", "d1", 0, ttft=(1.0, 5), tpot=(1.0, 10))}
    now = [s("a:1", "d0", 10, ttft=(16.0, 60), tpot=(80.0, 3000)),     # +6 s over 20 first tokens, +30 s / 1000
           s("a:2", "d0", 10, ttft=(3.0, 15), tpot=(6.0, 150)),        # +1 s over 5, +1 s / 50
           s("b:1", "d1", 10, ttft=(0.5, 2), tpot=(0.5, 5))]           # restarted: its counts went down, left out
    r = role_readings(now, before)["decode"]
    assert r.ttft_ms == pytest.approx(1000 * 7.0 / 25)                  # 280 ms
    assert r.tpot_ms == pytest.approx(1000 * 31.0 / 1050)


def test_no_request_answered_between_readings_gives_no_latency():
    before = {"a:1": s("a:1", "d0", 0, ttft=(10.0, 40))}
    r = role_readings([s("a:1", "d0", 10, ttft=(10.0, 40))], before)["decode"]
    assert r.ttft_ms is None and r.tpot_ms is None
    assert role_readings([s("a:1", "d0", 10, ttft=(10.0, 40))], {})["decode"].ttft_ms is None   # first reading


SLO = Scaling(roles={"decode": RoleBounds(min=1, max=3)}, scale_up=ScaleUp(ttft_ms=200, tpot_ms=50))


def over(start, end, **load):
    return [Reading(at=float(t), instances=2, waiting=0.0, kv_usage=0.1, **load) for t in range(start, end + 1, 10)]


def test_a_latency_above_its_target_that_lasts_adds_an_instance():
    d = decide(SLO, "decode", 2, over(0, 40, ttft_ms=280.0, tpot_ms=20.0), now=40)
    assert (d.action, d.desired) == ("up", 3) and "TTFT 280 ms > 200 ms" in d.reason and "TPOT" not in d.reason
    d = decide(SLO, "decode", 2, over(0, 40, ttft_ms=150.0, tpot_ms=60.0), now=40)
    assert d.action == "up" and "TPOT 60 ms > 50 ms" in d.reason


def test_without_a_target_latency_is_no_signal():
    plain = Scaling(roles={"decode": RoleBounds(min=1, max=3)})
    assert decide(plain, "decode", 2, over(0, 40, ttft_ms=5000.0), now=40).action == "hold"


def test_no_instance_is_removed_while_a_latency_target_was_missed_in_the_scale_down_window():
    def window(spike: float) -> list[Reading]:
        return [Reading(at=float(t), instances=2, waiting=0.0, kv_usage=0.05, ttft_ms=spike if t == 200 else 90.0)
                for t in range(0, 401, 10)]

    # one reading over the target: too short to add an instance (30 s), enough to keep the two
    d = decide(SLO, "decode", 2, window(250.0), now=400)
    assert d.action == "hold" and d.reason == "load within the thresholds"
    assert decide(SLO, "decode", 2, window(150.0), now=400).action == "down"
