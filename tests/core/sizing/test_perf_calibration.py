"""The fit: fit() reproduces the shipped constants, every calibration point stays within the documented error,
and docs/performance-model.md states both (computed here, never copied)."""

from __future__ import annotations

import re

import pytest
from perflib import ROOT

from deployctl.core.sizing import calibration
from deployctl.core.sizing.calibration import ERROR_BOUND, FITTED, POINTS, errors, fit

DOC = ROOT / "docs" / "performance-model.md"


def test_fit_reproduces_the_shipped_constants():
    got = fit()
    for name in ("k_hbm", "k_compute", "k_prefill"):
        assert getattr(got, name) == pytest.approx(getattr(FITTED, name), abs=0.02), name
        assert getattr(got, name) >= 1.0       # a derating never makes the roofline faster


def test_every_point_within_the_documented_error():
    rows = errors(FITTED)
    assert len(rows) == len(POINTS) >= 8
    worst = max(abs(err) for _, _, err in rows)
    assert worst <= ERROR_BOUND, [(p.key, round(err, 3)) for p, _, err in rows]


def test_points_cover_decode_and_prefill_with_sources():
    assert {p.phase for p in POINTS} == {"decode", "prefill"}
    for p in POINTS:
        assert p.source and p.measured > 0


def test_the_doc_states_the_fit_and_each_error():
    text = DOC.read_text(encoding="utf-8")
    for name in ("k_hbm", "k_compute", "k_prefill"):
        assert re.search(rf"`{name}`\s*\|\s*{getattr(FITTED, name)}\b", text), f"{name} = {getattr(FITTED, name)}"
    assert f"{ERROR_BOUND:.0%}" in text
    for p, _, err in errors(FITTED):
        row = next((ln for ln in text.splitlines() if ln.startswith(f"| {p.key} |")), None)
        assert row is not None, f"no table row for {p.key}"
        assert f"{err * 100:+.1f} %" in row, f"{p.key}: {err * 100:+.1f} % not in {row!r}"


def test_module_constants_are_plain():
    assert calibration.FITTED.k_hbm < calibration.FITTED.k_compute     # compute kernels derate more than HBM
