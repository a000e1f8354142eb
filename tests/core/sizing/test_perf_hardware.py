"""The hardware catalog: a source for every number, derived peaks that match their arithmetic, SKU selection."""

from __future__ import annotations

import re

import pytest

from deployctl.core.sizing import hardware


def test_every_number_names_its_source():
    values = list(hardware.sourced_values())
    assert len(values) > 50
    for path, value, source in values:
        assert isinstance(value, (int, float)) and value > 0, path
        assert len(source.strip()) >= 10, f"{path} = {value} has no source"
        # a source names a document/section, or says derived/assumed and why
        assert re.search(r"(INI|CM|DSV3|DSV32|WP|MSM|DEA|BLIS) |§|Table|derived|assumed|README|white paper|product page", source), path


def test_every_sku_has_every_field_with_a_source():
    for key, sku in hardware.skus().items():
        assert sku.hardware in ("a2", "a3")
        assert {f for f, _ in sku.sources} == {"hbm_gb", "hbm_gbps", "bf16_tflops", "int8_tops"}
        assert sku.int8_tops == pytest.approx(2 * sku.bf16_tflops, rel=0.01), key


def test_derived_peaks_match_their_arithmetic():
    checked = 0
    for key, sku in hardware.skus().items():
        src = dict(sku.sources)["bf16_tflops"]
        m = re.search(r"(\d+) AIC x 8,192(?: FLOP/cycle)? x ([\d.]+) GHz", src)
        if src.startswith("derived"):
            assert m, f"{key}: a derived peak shows its arithmetic"
        if m:
            assert sku.bf16_tflops == pytest.approx(int(m[1]) * 8192 * float(m[2]) / 1e3, abs=0.1), key
            checked += 1
    assert checked >= 8


@pytest.mark.parametrize("hardware_, name, key", [
    ("a2", None, "910B3"), ("a3", None, "800I-A3"), ("a2", "910B1", "910B1"), ("a2", "Ascend 910B4", "910B4"),
    ("a2", "910B4-1", "910B4"), ("a2", "ascend910b2c", "910B2"), ("a3", "Ascend910", "800I-A3"),
    ("a3", "Ascend910_9391", "910_9391"), ("a3", "910_9392", "910_9391"), ("a3", "CM384", "910C"),
])
def test_sku_for(hardware_, name, key):
    assert hardware.sku_for(hardware_, name).key == key


@pytest.mark.parametrize("hardware_, name", [("a3", "910B3"), ("a2", "910_9391"), ("a2", "H100"), ("a9", None)])
def test_sku_for_refuses_unknown_or_other_hardware(hardware_, name):
    with pytest.raises(ValueError):
        hardware.sku_for(hardware_, name)


def test_defaults_explain_themselves():
    for hw in ("a2", "a3"):
        assert hardware.default_sku(hw).hardware == hw
        assert len(hardware.default_reason(hw)) > 40


def test_links_and_curves():
    links = hardware.links()
    assert set(links) == {"hccs", "ub", "roce"}
    assert links["roce"].gbps < links["hccs"].gbps
    e = hardware.ep_comm()
    assert hardware.interp_log(e["ll_dispatch_us"], 8) == 116
    assert 116 < hardware.interp_log(e["ll_dispatch_us"], 32) < 152
    assert hardware.interp_log(e["ll_dispatch_us"], 1024) == 152
