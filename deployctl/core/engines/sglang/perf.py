"""SGLang's own deratings of the step model (perf.yaml: fitted by tests/core/sizing/fit_engine.py --engine sglang on
SGLang's published `set: fit` points only), where they come from, and their largest error on those points."""

from __future__ import annotations

from functools import cache

from deployctl.core.engine_spec.protocol import read_data

SOURCE = "deployctl/core/engines/sglang/perf.yaml (tests/core/sizing/fit_engine.py --engine sglang)"


@cache
def _perf() -> dict:
    return dict(read_data(__package__, "perf.yaml"))


def perf_deratings() -> dict:
    """perf.yaml's consts (k_hbm, k_compute, k_prefill, k_fixed, host_ms, host_draft_ms)."""
    return dict(_perf()["consts"])


def perf_fit_record() -> dict:
    """perf.yaml's largest error on its fit points and the file itself."""
    return {"max_error_on_points": _perf()["max_error_on_fit_points"], "source": SOURCE}


def perf_deratings_source() -> str:
    """Where perf.yaml's deratings come from, as the estimate's assumptions say it."""
    return (f"deratings fitted on SGLang's own published points ({_perf()['fitted_on']}; docs/performance-model.md "
            "\"Per-engine deratings\", where the check-set errors are)")
