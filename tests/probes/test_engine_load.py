"""The engine-load parser on hostile or odd metrics text (the fixtures hold the ordinary answers)."""

from __future__ import annotations

import pytest

from deployctl.probes.engine_load import MAX_BYTES, parse_engine_load

NAMES = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
         "vllm:generation_tokens_total")


def test_other_metrics_and_comments_are_ignored_and_a_missing_series_is_none():
    text = ("# HELP vllm:num_requests_running x\nvllm:num_requests_running_other 9\n"
            "vllm:num_requests_running 4\nvllm:num_requests_waiting{engine=\"0\"} 1 1700000000000\n")
    load = parse_engine_load(text, *NAMES)
    assert (load.running, load.waiting, load.kv_usage, load.generated) == (4.0, 1.0, None, None)


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-3", "1e999", "abc"])
def test_a_value_that_is_not_a_finite_count_is_refused(value):
    with pytest.raises(ValueError):
        parse_engine_load(f"vllm:num_requests_waiting {value}\n", *NAMES)


def test_a_percentage_is_read_as_a_share_and_anything_larger_refused():
    assert parse_engine_load("vllm:kv_cache_usage_perc 45\n", *NAMES).kv_usage == 0.45
    with pytest.raises(ValueError):
        parse_engine_load("vllm:kv_cache_usage_perc 450\n", *NAMES)


def test_only_the_first_max_bytes_are_read():
    line = "vllm:num_requests_running 1\n"
    text = line * (2 * MAX_BYTES // len(line))
    assert parse_engine_load(text, *NAMES).running == MAX_BYTES // len(line)
