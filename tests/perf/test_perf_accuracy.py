"""The accuracy report (issue 27 item 4): the check set is data, the docs' tables are recomputed from it."""

from __future__ import annotations

import re

from accuracy_report import plan_of
from perflib import ROOT

import accuracy

DOC = ROOT / "docs" / "performance-model.md"


def test_check_points_are_complete_and_apart_from_the_fit_set():
    from deployctl.perf.calibration import POINTS

    check = accuracy.points()["check"]
    ids = [p["id"] for p in check]
    assert len(ids) == len(set(ids))
    fitted = {p.key for p in POINTS}
    for p in check:
        assert p["id"] not in fitted
        assert re.search(r"@[0-9a-f]{8}|https?://", p["source"]), p["id"]     # repo@commit:path or a URL
        assert p["measured"] and set(p["measured"]) <= {"ttft_ms", "tpot_ms", "throughput"}
        assert {"input", "output", "concurrency"} <= set(p["client"])
        assert p["hardware"] in ("a2", "a3") and p["servers"] >= 1
    for u in accuracy.points()["unexpressed"]:
        assert u["source"] and u["why"]


def test_every_point_is_estimated_or_refused_with_a_reason():
    rows, mape = accuracy.report(plan_of)
    for r in rows:
        assert r.refused or {"ttft_ms", "tpot_ms", "throughput"} <= set(r.estimated), r.id
        assert not r.refused or len(r.refused) > 10
    assert set(mape) >= {"tpot_ms", "ttft_ms", "throughput"}


def test_the_docs_carry_the_recomputed_tables():
    text = DOC.read_text()
    m = re.search(r"<!-- accuracy:begin -->\n(.*?)\n<!-- accuracy:end -->", text, re.S)
    assert m, "docs/performance-model.md lacks the accuracy markers"
    assert m.group(1).strip() == accuracy.markdown(plan_of).strip(), \
        "the check-set tables drifted: paste `python tests/perf/accuracy_report.py` between the markers"
