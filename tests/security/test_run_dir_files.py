"""Files deployctl reads back from its run directory are untrusted input too (issue 34, observation 9).

`calibrate` reads bench summaries (runs/<id>-bench/summary.json), `plan`, `recommend` and `bench` the stored
calibration (calibration/<cluster>.json), `up`/`diff` a preflight run's run.json and facts.json, `render` its
marker. Before the fix they were read whole and untyped: a link to /dev/zero was a MemoryError, a missing key an
"unexpected error", a length of 10^9 a hang, NaN a stored calibration of garbage. Now each is read at one boundary
(deployctl/io/localfile.py, deployctl/core/models/rundata.py): a regular file, bounded, JSON without NaN, typed and
ranged; what does not pass is exit 2 naming the file and the key, with a hint.

The commands run as the installed console script under an address-space limit and a timeout (as
test_bounded_reads.py does), so the code before the fix fails these tests with a MemoryError or a timeout instead
of taking the machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import DEPLOYCTL, EXAMPLES

INV = EXAMPLES / "a2-2x8-tp-pp.yaml"          # cluster ds32-2x8: 2 x A2, 16 dies, model ds-r1, max_seq_len 8192
CLUSTER, MODEL, DIES = "ds32-2x8", "ds-r1", 16
RUN = "20260101T000000.000000Z-bench"
AS_LIMIT = 1536 << 20                         # deployctl needs a few hundred MB; reading /dev/zero passes this
QUICK = 60                                    # seconds: every refusal here takes one or two


def bounded(*args: str, cwd: Path, timeout: float = QUICK) -> subprocess.CompletedProcess:
    """deployctl under RLIMIT_AS and a timeout; a timeout fails the test (the code before the fix hung)."""
    wrapper = ("import resource, subprocess, sys\n"
               f"resource.setrlimit(resource.RLIMIT_AS, ({AS_LIMIT}, {AS_LIMIT}))\n"
               "p = subprocess.run(sys.argv[1:], capture_output=True)\n"
               "sys.stdout.buffer.write(p.stdout)\nsys.stderr.buffer.write(p.stderr)\nsys.exit(p.returncode)\n")
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "wrap.py"
        script.write_text(wrapper)
        argv = [sys.executable, str(script), str(DEPLOYCTL), *args]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                                env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)           # the wrapper and deployctl under it
            proc.communicate()
            pytest.fail(f"deployctl {' '.join(args)} did not finish within {timeout} s")
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def refused(res, *words: str) -> None:
    """Exit 2, no traceback, and the words (the file, the key) in what the user reads."""
    text = res.stdout + res.stderr
    assert res.returncode == 2, text
    assert "Traceback" not in text and "deployctl bug" not in text and "unexpected error" not in text, text
    for w in words:
        assert w in text, (w, text)


def point(inp=1024, out=128, conc=1, **over) -> dict:
    dist = {"p50": 180.0 + 0.06 * inp, "p90": 1.0, "p99": 1.0}
    tpot = 12.0 + 2.0 * conc
    doc = {"point": f"in{inp}-out{out}-c{conc}", "series": "custom", "input_len": inp, "output_len": out,
           "concurrency": conc, "requests": 4 * conc, "measured": 4 * conc, "ok": 4 * conc, "errors": 0,
           "failure": None, "ttft_ms": dist, "tpot_ms": {"p50": tpot, "p90": tpot, "p99": tpot},
           "output_tokens_per_s": conc * out / ((dist["p50"] + (out - 1) * tpot) / 1e3), "dies": DIES}
    return {**doc, **over}


def summary(run_dir: Path, points: list[dict], run: str = RUN, text: str | None = None) -> Path:
    d = run_dir / "runs" / run
    d.mkdir(parents=True, exist_ok=True)
    doc = {"run_id": run, "status": "successful", "target": {"model": MODEL, "dies": DIES}, "points": points}
    (d / "summary.json").write_text(text if text is not None else json.dumps(doc))
    return d / "summary.json"


def calibrate(tmp_path: Path, *extra: str, timeout: float = QUICK):
    return bounded("calibrate", "-i", str(INV), "--run-dir", str(tmp_path / ".deployctl"), *extra, cwd=tmp_path,
                   timeout=timeout)


def stored(tmp_path: Path) -> Path:
    return tmp_path / ".deployctl" / "calibration" / f"{CLUSTER}.json"


def good_calibration() -> dict:
    return {"cluster": CLUSTER, "consts": {"k_hbm": 1.2, "k_compute": 1.1, "k_prefill": 1.3, "k_fixed": 1.0},
            "runs": 1, "run_ids": [RUN], "date": "2026-01-01", "rms_error": 0.05, "points": []}


def plan(tmp_path: Path, *extra: str):
    return bounded("plan", "-i", str(INV), *extra, cwd=tmp_path)


# ------------------------------------------------------------------ /dev/zero, a FIFO: never read unbounded

@pytest.mark.parametrize("where", ["summary", "named-run", "calibration", "facts", "preflight-run", "fifo"])
def test_a_link_to_dev_zero_or_a_fifo_is_refused_not_read(tmp_path, where):
    """Observation 9, /dev/zero: each file deployctl reads back, linked to /dev/zero (or a FIFO), is exit 2 naming
    it, in bounded memory and time (before: MemoryError, or a read that never returns)."""
    run_dir = tmp_path / ".deployctl"
    if where in ("summary", "named-run", "fifo"):
        path = summary(run_dir, [point()])
        path.unlink()
        os.mkfifo(path) if where == "fifo" else path.symlink_to("/dev/zero")
        res = calibrate(tmp_path, *([str(path.parent)] if where == "named-run" else []))
        refused(res, str(path), "a FIFO" if where == "fifo" else "a symbolic link")
    elif where == "calibration":
        stored(tmp_path).parent.mkdir(parents=True)
        stored(tmp_path).symlink_to("/dev/zero")
        refused(plan(tmp_path), str(Path(".deployctl/calibration") / f"{CLUSTER}.json"), "calibrate -i INV --remove")
    elif where == "facts":
        refused(plan(tmp_path, "--facts", "/dev/zero"), "/dev/zero", "a device")
    else:
        rec = run_dir / "runs" / "20260101T000000.000000Z-preflight"
        rec.mkdir(parents=True)
        (rec / "facts.json").write_text("{}")
        (rec / "run.json").symlink_to("/dev/zero")
        res = bounded("diff", "-i", str(INV), "--run-dir", str(run_dir), cwd=tmp_path)
        refused(res, str(rec / "run.json"), "a symbolic link", "--facts FILE")


def test_a_file_larger_than_its_cap_is_refused_by_its_size(tmp_path):
    """A sparse 300 MB facts.json in the latest preflight run: refused by its size, never parsed."""
    run_dir = tmp_path / ".deployctl"
    rec = run_dir / "runs" / "20260101T000000.000000Z-preflight"
    rec.mkdir(parents=True)
    with open(rec / "facts.json", "wb") as f:
        f.truncate(300 << 20)
    refused(bounded("diff", "-i", str(INV), "--run-dir", str(run_dir), cwd=tmp_path), str(rec / "facts.json"),
            "314,572,800 bytes, more than the")


# ------------------------------------------------------------------ a missing key: the file and the key

def test_a_summary_point_without_a_key_names_the_file_and_the_key(tmp_path):
    """Observation 9, missing key (before: "unexpected error: KeyError: 'input_len'")."""
    pts = [point(), {k: v for k, v in point(conc=4).items() if k != "input_len"}]
    path = summary(tmp_path / ".deployctl", pts)
    refused(calibrate(tmp_path), f"{path} points[1].input_len: Field required", "deployctl calibrate -i INV RUN")
    assert not stored(tmp_path).exists()


@pytest.mark.slow
def test_a_stored_calibration_without_a_key_is_refused_not_silently_replaced(tmp_path):
    """plan used the published fit in its place without a word; now: exit 2, the key, how to fix it."""
    doc = good_calibration()
    del doc["consts"]["k_prefill"]
    stored(tmp_path).parent.mkdir(parents=True)
    stored(tmp_path).write_text(json.dumps(doc))
    refused(plan(tmp_path), "consts.k_prefill: Field required", "calibrate -i INV --remove")
    stored(tmp_path).write_text(json.dumps(good_calibration()))
    res = plan(tmp_path)
    assert res.returncode == 0 and "calibrated from 1 bench run on 2026-01-01" in res.stdout, res.stderr
    assert "calibration: calibrated from 1 bench run on 2026-01-01" in res.stdout        # beside the error band


# ------------------------------------------------------------------ lengths: nothing loops 10^9 times

def test_a_length_of_1e9_is_refused_at_once(tmp_path):
    """Observation 9, huge length (before: the fit simulated 10^9 output tokens, for ever)."""
    path = summary(tmp_path / ".deployctl", [point(), point(out=10**9)])
    refused(calibrate(tmp_path), f"{path} points[1].output_len", "less than or equal to 1000000")


@pytest.mark.slow
def test_a_point_longer_than_the_deployment_serves_is_left_out(tmp_path):
    """Within what `deployctl bench` accepts (10^6 tokens) but past the model's max_seq_len (8192): left out and
    said, the other points fitted in seconds (before: each trial of the fit simulated a million tokens)."""
    summary(tmp_path / ".deployctl", [point(out=1024), point(out=1024, conc=4), point(out=1_000_000)])
    res = calibrate(tmp_path, "--output", "json", timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert len(doc["points"]) == 2
    assert any("1024 + 1000000 tokens, more than this deployment's model.max_seq_len 8192" in s for s in doc["skipped"])


# ------------------------------------------------------------------ NaN: never a stored calibration of garbage

@pytest.mark.parametrize("value", ["NaN", "Infinity", "-1"])
def test_nan_in_a_summary_is_refused_and_nothing_is_stored(tmp_path, value):
    """Observation 9, NaN (before: stored deratings of 0.25 fitted to NaN, and plan used them)."""
    text = json.dumps({"run_id": RUN, "target": {"model": MODEL, "dies": DIES},
                       "points": [point(), point(conc=4, tpot_ms={"p50": "X"})]}).replace('"X"', value)
    path = summary(tmp_path / ".deployctl", [], text=text)
    res = calibrate(tmp_path)
    refused(res, str(path))
    assert (value != "-1" and "it holds NaN or Infinity, which are no numbers" in res.stderr) or \
        "points[1].tpot_ms.p50: Input should be greater than or equal to 0 (got -1)" in res.stderr
    assert not stored(tmp_path).exists()


@pytest.mark.parametrize("k_hbm", ["NaN", "1e400", "0", "100"])
def test_a_stored_calibration_with_nan_or_an_out_of_range_derating_is_refused(tmp_path, k_hbm):
    stored(tmp_path).parent.mkdir(parents=True)
    stored(tmp_path).write_text(json.dumps(good_calibration()).replace('"k_hbm": 1.2', f'"k_hbm": {k_hbm}'))
    res = plan(tmp_path)
    refused(res, str(Path(".deployctl/calibration") / f"{CLUSTER}.json"))
    assert "consts.k_hbm: Input should be" in res.stderr or "it holds NaN or Infinity" in res.stderr


# ------------------------------------------------------------------ the rest of the run directory

def test_a_preflight_run_json_of_the_wrong_shape_names_its_key(tmp_path):
    """run.json decides which facts `up` uses: {"ok": "yes"} is no answer (before: the record was skipped)."""
    from deployctl.core.errors import UsageError
    from deployctl.io.facts_store import resolve_facts

    rec = tmp_path / "runs" / "20260101T000000.000000Z-preflight"
    rec.mkdir(parents=True)
    (rec / "facts.json").write_text("{}")
    (rec / "run.json").write_text(json.dumps({"cluster": CLUSTER, "nodes": {}, "ok": "yes"}))
    with pytest.raises(UsageError) as err:
        resolve_facts(INV, tmp_path, None)
    text = err.value.render()
    assert f"{rec / 'run.json'} ok: Input should be a valid boolean" in text and "--facts FILE" in text


def test_calibrate_remove_drops_a_link_not_its_target_and_refuses_a_directory(tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text("keep me")
    stored(tmp_path).parent.mkdir(parents=True)
    stored(tmp_path).symlink_to(target)
    res = calibrate(tmp_path, "--remove")
    assert res.returncode == 0 and not stored(tmp_path).is_symlink() and target.read_text() == "keep me"
    stored(tmp_path).mkdir()
    refused(calibrate(tmp_path, "--remove"), "is a directory")


def test_a_render_marker_linked_to_dev_zero_is_not_deployctl_s(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "x").write_text("x")
    (out / ".deployctl.json").symlink_to("/dev/zero")
    refused(bounded("render", "-i", str(INV), "-o", str(out), cwd=tmp_path), "was not written by deployctl")


def test_aiperf_records_keep_only_finite_numbers(tmp_path):
    """What AIPerf wrote feeds summary.json: NaN, a list where a number goes, a metadata that is no object and a
    line of 2 MB are no measurement (before: NaN reached the summary; a list metadata was an AttributeError)."""
    from deployctl.features.bench.aiperf import read_records

    rows = [{"metadata": {"benchmark_phase": "profiling", "request_start_ns": 1, "request_end_ns": 2},
             "metrics": {"time_to_first_token": {"value": "NaN"}, "inter_token_latency": {"value": [1, 2]},
                         "request_latency": {"value": 5.0}}},
            {"metadata": [], "metrics": {"inter_chunk_latency": {"value": [2.0, "x", 4.0]}}}]
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join(json.dumps(r).replace('"NaN"', "NaN") for r in rows) + "\n" + "x" * (2 << 20)
                    + "\n" + json.dumps(rows[0]) + "\n")
    got = read_records(path)
    assert [(r["ttft_ms"], r["tpot_ms"], r["e2e_ms"]) for r in got] == [(None, None, 5.0), (None, 3.0, None),
                                                                       (None, None, 5.0)]
    from deployctl.features.bench.aiperf import read_summary

    (tmp_path / "s.json").write_text('{"output_token_throughput": {"avg": NaN}}')
    assert read_summary(tmp_path / "s.json") == {}


def test_a_summary_bench_writes_is_one_calibrate_reads(tmp_path):
    """The writer and the reader agree: bench's summary of AIPerf records (one NaN among them, an estimate of
    Infinity) passes the boundary calibrate reads it through, with the finite numbers only."""
    from deployctl.features.bench.aiperf import read_records
    from deployctl.features.bench.estimate import Estimator, compare
    from deployctl.features.bench.run import BenchOptions, Target, _finish
    from deployctl.features.bench.stats import summarize
    from deployctl.features.bench.suites import from_flags
    from deployctl.io.localfile import load_model
    from deployctl.core.models.rundata import MAX_SUMMARY_BYTES, BenchSummary
    from deployctl.io.records import RunRecord

    suite = from_flags([1024], [16], [1], requests=2)
    lines = [{"metadata": {"benchmark_phase": "profiling", "request_start_ns": i * 10**9,
                           "request_end_ns": i * 10**9 + 5 * 10**8},
              "metrics": {"time_to_first_token": {"value": "T"}, "inter_token_latency": {"value": 20.0},
                          "request_latency": {"value": 500.0}, "output_sequence_length": {"value": 16}}}
             for i in range(2)]
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join(json.dumps(x).replace('"T"', v) for x, v in zip(lines, ("NaN", "180.0"))) + "\n")
    row = summarize(suite.points[0], read_records(path), {"output_token_throughput": {"avg": float("inf")}}, DIES)
    row.update(failure=None, timed_out=False)
    est = Estimator(plan=object())
    est._loaded = True
    est._fn = lambda *a: {"ttft_ms": float("inf"), "tpot_ms": float("nan"), "per_die_tokens_per_s": 2}
    row["estimate"] = est.point(1024, 16, 1)                       # a model answering Infinity and NaN
    row["comparison"] = compare(row, row["estimate"])
    rec = RunRecord.create(tmp_path / ".deployctl", "bench")
    _finish(rec, Target("http://x", MODEL, dies=DIES), BenchOptions(suite), "0", "t", [row], "successful", est)
    doc = load_model(rec.path / "summary.json", BenchSummary, MAX_SUMMARY_BYTES, what="bench summary", hint="")
    p = doc.points[0]
    assert (p.ttft_ms.p50, p.tpot_ms.p50, p.ok) == (180.0, 20.0, 2) and p.output_tokens_per_s is not None
    assert row["estimate"] == {"ttft_ms": None, "tpot_ms": None, "output_tokens_per_s": None,
                               "per_die_tokens_per_s": 2.0}


def test_a_preflight_record_s_facts_linked_elsewhere_is_refused(tmp_path):
    """up/diff pick facts.json from the latest preflight record: a link there (deployctl makes none) is refused, not
    followed to whatever it names (before: a link to /dev/zero made the record look crashed, one to a file was
    used)."""
    from deployctl.core.errors import UsageError
    from deployctl.io.facts_store import resolve_facts

    rec = tmp_path / "runs" / "20260101T000000.000000Z-preflight"
    rec.mkdir(parents=True)
    (tmp_path / "elsewhere.json").write_text("{}")
    (rec / "facts.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(UsageError) as err:
        resolve_facts(INV, tmp_path, None)
    assert f"{rec / 'facts.json'}: is a symbolic link" in err.value.render()
