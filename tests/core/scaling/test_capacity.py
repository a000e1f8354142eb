"""Per-instance capacity from the plan's estimate: the yardstick of the utilisation signal."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sizing"))
from perflib import plan  # noqa: E402


def test_a_decoding_instance_gets_its_share_of_the_deployments_output():
    from deployctl.core.scaling.capacity import per_instance
    from deployctl.core.sizing.estimate import estimate_plan
    from deployctl.core.sizing.estimate_types import Workload

    est = estimate_plan(plan("a3-pd-2p1d"), Workload(input_len=4096, output_len=512, concurrency=64))
    cap = per_instance(est)
    decoders = [i for i in est.instances if i.role == "decode"]
    assert cap["decode"] == pytest.approx(est.output_tokens_per_s / len(decoders))
    pre = [i for i in est.instances if i.role == "prefill"]
    assert cap["prefill"] == min(i.prefill_tokens_per_s for i in pre) and "mixed" not in cap
    mixed = estimate_plan(plan("a2-4x8-dp-ep"), Workload(input_len=2048, output_len=256, concurrency=16))
    assert set(per_instance(mixed)) == {"mixed"}
