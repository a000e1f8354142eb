"""`deployctl calibrate` through the installed CLI: fit the deratings to bench runs of the simulated cluster's
stand-in engine, then `plan` predicts a concurrency that was not measured within 10 %, names the calibration,
and `calibrate --remove` drops it.

The bench runs are recorded files, written as `deployctl bench` writes summary.json, with the values the
stand-in engine produces for its configured timing (tests/fakecluster/fake_bin/openai_fake.py Timing:
TTFT = a + b x prompt tokens, each next token c + d x requests in flight; tests/features/bench/test_bench_e2e.py measures
the stand-in against exactly these formulas). A real bench run on the fake cluster takes minutes; the records
stand for it.
"""

from __future__ import annotations

import json

import pytest

from conftest import EXAMPLES, run_cli

INVENTORY = EXAMPLES / "a2-2x8-tp-pp.yaml"          # 2 x A2, TP8 x PP2, MindIE (the bench e2e cluster's shape)
MODEL, DIES = "ds-r1", 16
# the stand-in's engine_timing (milliseconds): a slower engine than the published fit assumes
TIMING = {"ttft_ms": 180.0, "ttft_per_token_ms": 0.06, "tpot_ms": 12.0, "tpot_per_request_ms": 2.0}


def standin(input_len: int, output_len: int, concurrency: int) -> dict:
    """What a closed-loop bench point measures on the stand-in: p50 TTFT, p50 TPOT, output tokens/s."""
    t = TIMING
    ttft = t["ttft_ms"] + t["ttft_per_token_ms"] * input_len
    tpot = t["tpot_ms"] + t["tpot_per_request_ms"] * concurrency
    e2e = ttft + (output_len - 1) * tpot
    return {"ttft_ms": ttft, "tpot_ms": tpot, "output_tokens_per_s": concurrency * output_len / (e2e / 1e3)}


def write_run(run_dir, run_id: str, points: list[tuple[int, int, int]]) -> None:
    rows = []
    for inp, out, conc in points:
        m = standin(inp, out, conc)
        dist = lambda v: {"p50": v, "p90": v, "p99": v, "mean": v}  # noqa: E731
        rows.append({"point": f"in{inp}-c{conc}", "series": "", "input_len": inp, "output_len": out,
                     "concurrency": conc, "requests": 4 * conc, "measured": 4 * conc, "ok": 4 * conc, "errors": 0,
                     "failure": None, "ttft_ms": dist(m["ttft_ms"]), "tpot_ms": dist(m["tpot_ms"]),
                     "e2e_ms": dist(m["ttft_ms"] + (out - 1) * m["tpot_ms"]),
                     "output_tokens_per_s": m["output_tokens_per_s"],
                     "per_die_tokens_per_s": m["output_tokens_per_s"] / DIES, "dies": DIES})
    d = run_dir / "runs" / run_id
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({"run_id": run_id, "status": "successful",
                                                "target": {"model": MODEL, "dies": DIES}, "points": rows}))


@pytest.fixture
def runs(tmp_path):
    run_dir = tmp_path / ".deployctl"
    write_run(run_dir, "20260101T000000.000000Z-bench", [(256, 128, 1), (1536, 128, 1)])          # long-context
    write_run(run_dir, "20260101T001000.000000Z-bench", [(1024, 512, 1), (1024, 512, 4), (1024, 512, 16)])
    write_run(run_dir, "20260101T002000.000000Z-bench", [(1024, 128, 1)])
    (run_dir / "runs" / "20260101T002000.000000Z-bench" / "summary.json").write_text(
        json.dumps({"run_id": "other", "target": {"model": "another-model", "dies": DIES}, "points": []}))
    return tmp_path


def _plan(cwd, conc: int) -> dict:
    res = run_cli("plan", "-i", str(INVENTORY), "--output", "json", "--input-len", "1024", "--output-len", "512",
                  "--concurrency", str(conc), cwd=cwd)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["estimate"]


@pytest.mark.slow
def test_calibrate_fits_the_standin_and_predicts_another_concurrency(runs):
    res = run_cli("calibrate", "-i", str(INVENTORY), "--output", "json", cwd=runs)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["runs"] == 2 and any("another-model" in s for s in doc["skipped"])
    stored = runs / ".deployctl" / "calibration" / "ds32-2x8.json"
    assert stored.exists() and json.loads(stored.read_text())["consts"] == doc["consts"]
    fitted = [r[k]["error"] for r in doc["points"] for k in ("ttft_ms", "tpot_ms", "tokens_per_s") if r[k]["fitted"]]
    before = [r[k]["error"] for r in doc["before"] for k in ("ttft_ms", "tpot_ms", "tokens_per_s") if r[k]["fitted"]]
    assert max(map(abs, fitted)) < max(map(abs, before))

    for conc in (8, 12):                      # not measured (between the fitted 1, 4 and 16)
        est = _plan(runs, conc)
        truth = standin(1024, 512, conc)
        assert est["tpot_ms"] == pytest.approx(truth["tpot_ms"], rel=0.10), conc
        assert est["output_tokens_per_s"] == pytest.approx(truth["output_tokens_per_s"], rel=0.10), conc
        assert est["calibration"]["source"].startswith("calibrated from 2 bench runs on ")
    text = run_cli("plan", "-i", str(INVENTORY), cwd=runs)
    assert "deratings calibrated from 2 bench runs on" in text.stdout

    res = run_cli("calibrate", "-i", str(INVENTORY), "--remove", cwd=runs)
    assert res.returncode == 0 and "removed" in res.stdout and not stored.exists()
    assert _plan(runs, 8)["calibration"]["source"] == "deployctl/core/sizing/calibration.py"


def test_calibrate_without_runs_is_a_usage_error(tmp_path):
    res = run_cli("calibrate", "-i", str(INVENTORY), cwd=tmp_path)
    assert res.returncode == 2 and "no measured bench point" in res.stderr
