"""deployctl.features.bench without a cluster: suites (built-in, flags, files), prompts counted as the stand-ins count them,
percentiles, the estimate comparison (absent, present, failing), plots, the report, AIPerf's command line."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from benchlib import ROOT, deployctl_bench, png_size

from deployctl.features.bench import aiperf, prompts, suites
from deployctl.features.bench.estimate import Estimator, compare
from deployctl.features.bench.plots import write_plots
from deployctl.features.bench.report import write_report
from deployctl.features.bench.stats import distribution, percentile, summarize
from deployctl.core.errors import UsageError

OPENAI_FAKE = ROOT / "tests" / "fakecluster" / "fake_bin" / "openai_fake.py"


def test_default_suite_is_the_field_guides():
    s = suites.resolve(None, None, None, None)
    assert s.name == "default"
    assert [(p.series, p.input_len, p.output_len, p.concurrency) for p in s.points] == [
        ("long-context", 1024, 128, 1), ("long-context", 4096, 128, 1), ("long-context", 8000, 128, 1),
        ("concurrency", 1024, 128, 10), ("concurrency", 1024, 128, 50)]
    assert [p.requests for p in s.points] == [5, 5, 5, 40, 200]
    assert [p.concurrency for p in suites.resolve("concurrency", None, None, None).points] == [10, 50]
    assert {p.concurrency for p in suites.resolve("long-context", None, None, None, requests=3).points} == {1}


def test_flags_make_every_combination():
    s = suites.resolve(None, "1024,4096", "128", "1, 8,8", requests=7)
    assert s.source == "flags"
    assert [(p.input_len, p.output_len, p.concurrency, p.requests) for p in s.points] == [
        (1024, 128, 1, 7), (1024, 128, 8, 7), (4096, 128, 1, 7), (4096, 128, 8, 7)]
    assert [(p.input_len, p.output_len, p.concurrency) for p in suites.resolve(None, None, None, "4").points] == [
        (1024, 128, 4)]
    for args, needle in (((None, "0", None, None), "out of range 1..1000000"),
                         ((None, None, "1.5", None), "'1.5' is not a whole number"),
                         (("default", "1024", None, None), "both choose the points"),
                         (("nonesuch", None, None, None), "neither a built-in suite nor a file")):
        with pytest.raises(UsageError, match=needle):
            suites.resolve(*args)


def test_suite_file(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("name: mine\nwarmup: 0\nduration_limit: 30\nrequests: 6\npoints:\n"
                 "  - {input: 1024, output: 128, concurrency: 1, name: one}\n"
                 "  - {input: [512, 2048], output: 64, concurrency: [2, 4], requests: 9}\n")
    s = suites.resolve(str(f), None, None, None)
    assert (s.name, s.warmup, s.duration_limit) == ("mine", 0, 30)
    assert [(p.name, p.input_len, p.output_len, p.concurrency, p.requests) for p in s.points] == [
        ("one", 1024, 128, 1, 6), ("custom-in512-out64-c2", 512, 64, 2, 9), ("custom-in512-out64-c4", 512, 64, 4, 9),
        ("custom-in2048-out64-c2", 2048, 64, 2, 9), ("custom-in2048-out64-c4", 2048, 64, 4, 9)]
    f.write_text("nmae: x\npoints:\n  - {input: 1024, output: -1, concurrency: true}\n  - 3\n")
    with pytest.raises(UsageError) as e:
        suites.resolve(str(f), None, None, None)
    assert {p.path for p in e.value.problems} == {"nmae", "points[0].output", "points[0].concurrency", "points[1]"}
    assert all(p.file == str(f) for p in e.value.problems)
    f.write_text("points: [{input: 1, output: 1, concurrency: 1, name: a}, {input: 2, output: 1, concurrency: 1, "
                 "name: a}]\n")
    with pytest.raises(UsageError, match="point names used twice: a"):
        suites.load_file(f)
    f.write_text("points: [\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        suites.load_file(f)


def test_load_flags_apply_to_every_point():
    s = suites.resolve(None, "1024", "64", "1,8", request_rate=2.5, arrival="fixed", shared_prefix=768)
    assert [(p.name, p.concurrency, p.request_rate, p.arrival, p.shared_prefix) for p in s.points] == [
        ("custom-in1024-out64-c1-r2.5-p768", 1, 2.5, "fixed", 768),
        ("custom-in1024-out64-c8-r2.5-p768", 8, 2.5, "fixed", 768)]
    closed = suites.resolve(None, "1024", "64", "8")                    # the default: unchanged
    assert [(p.name, p.request_rate, p.arrival, p.shared_prefix) for p in closed.points] == [
        ("custom-in1024-out64-c8", None, None, 0)]
    assert suites.resolve(None, "1024", "64", "8", request_rate=1).points[0].arrival == "poisson"
    assert {p.request_rate for p in suites.resolve("concurrency", None, None, None, request_rate=3).points} == {3}
    with pytest.raises(UsageError, match="--arrival applies to an open loop only"):
        suites.resolve(None, "1024", "64", "8", arrival="fixed")
    with pytest.raises(UsageError, match="not shorter than the prompts of 512 input tokens"):
        suites.resolve(None, "512,2048", "64", "8", shared_prefix=512)


def test_suite_file_load_keys(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("points:\n"
                 "  - {input: 1024, output: 64, concurrency: 16, request_rate: [1, 2], arrival: fixed}\n"
                 "  - {input: 1024, output: 64, concurrency: 4, shared_prefix: 900, name: cached}\n"
                 "  - {input: 1024, output: 64, concurrency: 4}\n")
    s = suites.resolve(str(f), None, None, None)
    assert [(p.name, p.concurrency, p.request_rate, p.arrival, p.shared_prefix) for p in s.points] == [
        ("custom-in1024-out64-c16-r1", 16, 1, "fixed", 0), ("custom-in1024-out64-c16-r2", 16, 2, "fixed", 0),
        ("cached", 4, None, None, 900), ("custom-in1024-out64-c4", 4, None, None, 0)]
    f.write_text("points:\n"
                 "  - {input: 1024, output: 64, concurrency: 1, request_rate: 0, arrival: bursty}\n"
                 "  - {input: 1024, output: 64, concurrency: 1, shared_prefix: 1024}\n"
                 "  - {input: 1024, output: 64, concurrency: 1, arrival: poisson, shared_prefix: -3}\n")
    with pytest.raises(UsageError) as e:
        suites.resolve(str(f), None, None, None)
    assert {p.path for p in e.value.problems} == {"points[0].request_rate", "points[0].arrival",
                                                  "points[1].shared_prefix", "points[2].arrival",
                                                  "points[2].shared_prefix"}
    assert all(p.file == str(f) for p in e.value.problems)


def test_shared_prefix_dataset_starts_the_same(tmp_path):
    spec = importlib.util.spec_from_file_location("openai_fake_for_bench_prefix", OPENAI_FAKE)
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    rows = [json.loads(x)["text"].split() for x in
            prompts.write_dataset(tmp_path / "p.jsonl", 300, 8, 4, seed=3, shared_prefix=200).read_text().splitlines()]
    assert all(len(r) == 300 - prompts.CHAT_TEMPLATE_TOKENS for r in rows)
    assert all(r[:196] == rows[0][:196] for r in rows)                  # 200 tokens: the template's 4 + 196 words
    assert len({tuple(r[196:]) for r in rows}) == 4 and len({r[196] for r in rows}) > 1
    plain = [json.loads(x)["text"].split() for x in
             prompts.write_dataset(tmp_path / "q.jsonl", 300, 8, 4, seed=3).read_text().splitlines()]
    assert len({tuple(r[:16]) for r in plain}) == 4                     # without: no block in common
    cache = fake.PrefixCache()                   # the stand-in's cache finds the shared prefix's full blocks
    hits = []
    for r in rows:
        toks = fake.prompt_token_list({"messages": [{"role": "user", "content": " ".join(r)}]}, True)
        hits.append(cache.lookup(toks))
        cache.store(toks)
    assert hits == [0, 192, 192, 192]


def test_prompt_lengths_are_what_the_stand_ins_count():
    spec = importlib.util.spec_from_file_location("openai_fake_for_bench", OPENAI_FAKE)
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    for n in (5, 64, 1024, 8000):
        text = prompts.make_prompt(n, seed=n)
        req = {"messages": [{"role": "user", "content": text}]}
        assert fake.prompt_tokens(req, True) == n
    assert prompts.make_prompt(64, 1) != prompts.make_prompt(64, 2)
    assert prompts.make_prompt(64, 1) == prompts.make_prompt(64, 1)
    assert all(w.isalpha() and w.islower() for w in prompts.WORDS) and len(set(prompts.WORDS)) > 300


@pytest.mark.slow
def test_dataset_and_tokenizer(tmp_path):
    ds = prompts.write_dataset(tmp_path / "in.jsonl", 100, 16, 3, seed=1)
    rows = [json.loads(x) for x in ds.read_text().splitlines()]
    assert len(rows) == 3 and {r["output_length"] for r in rows} == {16}
    assert all(len(r["text"].split()) == 100 - prompts.CHAT_TEMPLATE_TOKENS for r in rows)
    tok_dir = prompts.write_tokenizer(tmp_path / "tok")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    ids = tok.encode(rows[0]["text"], add_special_tokens=False)
    assert len(ids) == 96 and tok.decode(ids) == rows[0]["text"]


def test_aiperf_command_line_is_an_argument_list(tmp_path):
    p = suites.Point("x", "custom", 1024, 128, 10, 40)
    args = aiperf.argv(p, "http://10.0.0.1:1025", "m; rm -rf /", tmp_path / "in.jsonl", tmp_path / "tok",
                       tmp_path / "art", warmup=2, duration_limit=120, ignore_eos=True)
    assert args[:4] == [sys.executable, "-m", "aiperf", "profile"]
    assert args[args.index("--model") + 1] == "m; rm -rf /"          # one argument, never a shell word
    for flag, value in (("--concurrency", "10"), ("--request-count", "40"), ("--warmup-request-count", "2"),
                        ("--benchmark-duration", "120"), ("--url", "http://10.0.0.1:1025"),
                        ("--custom-dataset-type", "single_turn"), ("--extra-inputs", "ignore_eos:true")):
        assert args[args.index(flag) + 1] == value
    assert "--streaming" in args and "--use-server-token-count" in args and "--use-legacy-max-tokens" in args
    assert "--warmup-request-count" not in aiperf.argv(p, "u", "m", tmp_path, tmp_path, tmp_path, 0, 60, False)
    assert "--request-rate" not in args and "--arrival-pattern" not in args          # a closed loop by default
    for arrival, pattern in (("poisson", "poisson"), ("fixed", "constant")):
        op = suites.Point("y", "custom", 1024, 128, 10, 40, request_rate=2.5, arrival=arrival)
        got = aiperf.argv(op, "u", "m", tmp_path, tmp_path, tmp_path, 0, 60, True)
        assert got[got.index("--request-rate") + 1] == "2.5" and got[got.index("--concurrency") + 1] == "10"
        assert got[got.index("--arrival-pattern") + 1] == pattern
    assert aiperf.version()


def test_records_are_read_from_aiperf_exports(tmp_path):
    f = tmp_path / "profile_export.jsonl"
    ok = {"metadata": {"benchmark_phase": "profiling", "request_start_ns": 1, "request_end_ns": 2_000_000_001},
          "metrics": {"time_to_first_token": {"value": 120.0}, "inter_token_latency": {"value": 21.0},
                      "request_latency": {"value": 500.0}, "input_sequence_length": {"value": 1024},
                      "output_sequence_length": {"value": 20}}}
    warm = dict(ok, metadata=dict(ok["metadata"], benchmark_phase="warmup"))
    chunks = {"metadata": {"benchmark_phase": "profiling"},
              "metrics": {"time_to_first_token": {"value": 100.0}, "inter_chunk_latency": {"value": [10.0, 30.0]}}}
    err = {"metadata": {"benchmark_phase": "profiling"}, "metrics": {},
           "error": {"code": 404, "type": "Not Found", "message": "no model"}}
    f.write_text("\n".join(json.dumps(x) for x in (ok, warm, chunks, err)) + "\nnot json\n")
    rows = aiperf.read_records(f)
    assert [(r["phase"], r["ok"]) for r in rows] == [("profiling", True), ("warmup", True), ("profiling", True),
                                                    ("profiling", False)]
    assert rows[0]["tpot_ms"] == 21.0 and rows[2]["tpot_ms"] == 20.0 and rows[3]["error"] == "404 Not Found: no model"
    s = summarize(suites.Point("p", "custom", 1024, 20, 1, 3), rows, {}, dies=8)
    assert (s["measured"], s["ok"], s["errors"]) == (3, 2, 1)
    assert s["error_kinds"] == [{"error": "404 Not Found: no model", "count": 1}]
    assert s["ttft_ms"]["p50"] == 110.0
    assert s["output_tokens_per_s"] == pytest.approx(10.0) and s["per_die_tokens_per_s"] == pytest.approx(1.25)
    assert summarize(suites.Point("p", "custom", 1, 1, 1, 1), rows, {"output_token_throughput": {"avg": 42.0}},
                     dies=2)["output_tokens_per_s"] == 42.0


def test_percentiles_match_numpy():
    xs = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.3, 5.8, 9.7]
    for q in (50, 90, 99):
        assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))
    assert percentile([], 50) is None and percentile([7], 99) == 7.0
    assert distribution([None, 2.0])["count"] == 1


@pytest.fixture
def perf_model(monkeypatch):
    """A stand-in deployctl.core.sizing.estimate (the real one is built elsewhere): records the calls."""
    calls = []
    pkg = types.ModuleType("deployctl.perf")
    mod = types.ModuleType("deployctl.core.sizing.estimate")

    def estimate_point(plan, input_len, output_len, concurrency):
        calls.append((plan, input_len, output_len, concurrency))
        if input_len > 100_000:
            raise ValueError("beyond max_seq_len")
        return {"ttft_ms": 100.0, "tpot_ms": 20.0, "output_tokens_per_s": 500.0, "per_die_tokens_per_s": 0}

    mod.estimate_point = estimate_point
    pkg.model = mod
    monkeypatch.setitem(sys.modules, "deployctl.perf", pkg)
    monkeypatch.setitem(sys.modules, "deployctl.core.sizing.estimate", mod)
    return calls


def test_estimate_comparison(perf_model):
    est = Estimator(plan="PLAN")
    got = est.point(1024, 128, 10)
    assert perf_model == [("PLAN", 1024, 128, 10)]
    assert got == {"ttft_ms": 100.0, "tpot_ms": 20.0, "output_tokens_per_s": 500.0, "per_die_tokens_per_s": None}
    summary = {"ttft_ms": {"p50": 150.0}, "tpot_ms": {"p50": 19.0}, "output_tokens_per_s": 400.0,
               "per_die_tokens_per_s": 25.0}
    c = compare(summary, got)
    assert c["ttft_ms"] == {"measured": 150.0, "estimated": 100.0, "ratio": 1.5}
    assert c["output_tokens_per_s"]["ratio"] == pytest.approx(0.8)
    assert c["per_die_tokens_per_s"] == {"measured": 25.0, "estimated": None, "ratio": None}
    assert est.point(200_000, 128, 1) is None and "ValueError: beyond max_seq_len" in est.note


def test_a_point_with_a_load_is_estimated_for_that_load(monkeypatch):
    """The open loop's rate and arrival and the shared prefix's hit rate reach the estimate's Workload."""
    import deployctl.core.sizing.estimate as model

    seen = []

    def estimate_plan(plan, w, ctx=None):
        seen.append((plan, w, ctx))
        return types.SimpleNamespace(ttft_ms=50.0, tpot_ms=10.0, output_tokens_per_s=100.0, per_die_tokens_per_s=6.0)

    monkeypatch.setattr(model, "estimate_plan", estimate_plan)
    monkeypatch.setattr(model, "context", lambda plan, calibration=None: ("CTX", plan, calibration))
    monkeypatch.setattr(model, "estimate_point", lambda *a, **k: pytest.fail("a load point took the closed path"))
    est = Estimator(plan="PLAN", calibration={"k": 1})
    got = est.point(1000, 64, 8, request_rate=2.0, arrival="fixed", shared_prefix=750)
    assert got == {"ttft_ms": 50.0, "tpot_ms": 10.0, "output_tokens_per_s": 100.0, "per_die_tokens_per_s": 6.0}
    est.point(1000, 64, 8, shared_prefix=250)
    (_, w1, ctx1), (_, w2, ctx2) = seen
    assert (w1.input_len, w1.output_len, w1.concurrency, w1.request_rate, w1.arrival, w1.prefix_hit) == (
        1000, 64, 8, 2.0, "fixed", 0.75)
    assert (w2.request_rate, w2.prefix_hit) == (None, 0.25)
    assert ctx1 == ctx2 == ("CTX", "PLAN", {"k": 1})


def test_no_performance_model_means_no_estimate(monkeypatch):
    monkeypatch.setitem(sys.modules, "deployctl.core.sizing.estimate", None)      # import fails as if it were absent
    est = Estimator(plan="PLAN")
    assert est.point(1024, 128, 1) is None and est.note.startswith("no estimate")
    assert all(v["ratio"] is None and v["estimated"] is None for v in compare({}, None).values())


def _row(name, inp, conc, ttft, tpot, tps, est=None):
    dist = lambda v: {"p50": v, "p90": v * 1.1, "p99": v * 1.2, "mean": v}          # noqa: E731
    row = {"point": name, "series": "custom", "input_len": inp, "output_len": 128, "concurrency": conc,
           "requests": 4, "measured": 4, "ok": 4, "errors": 0, "cancelled": 0, "error_kinds": [],
           "ttft_ms": dist(ttft), "tpot_ms": dist(tpot), "e2e_ms": dist(ttft + 127 * tpot),
           "input_tokens": dist(inp), "output_tokens": dist(128), "output_tokens_per_s": tps,
           "per_die_tokens_per_s": tps / 16, "failure": None, "timed_out": False}
    row["estimate"] = est
    row["comparison"] = compare(row, est)
    return row


@pytest.mark.slow
def test_plots_and_report(tmp_path):
    est = {"ttft_ms": 90.0, "tpot_ms": 25.0, "output_tokens_per_s": 40.0, "per_die_tokens_per_s": 2.5}
    rows = [_row("a", 1024, 1, 100.0, 20.0, 45.0, est), _row("b", 4096, 1, 400.0, 22.0, 40.0),
            _row("c", 1024, 10, 150.0, 30.0, 300.0), _row("d", 1024, 50, 300.0, 45.0, 900.0)]
    files, notes = write_plots(rows, tmp_path / "plots", "m")
    assert sorted(f.name for f in files) == sorted(["ttft_vs_input.png", "tpot_vs_input.png", "ttft_vs_concurrency.png",
                                                    "tpot_vs_concurrency.png", "throughput_vs_concurrency.png"])
    assert notes == [] and all(png_size(f)[0] > 200 for f in files)
    files, notes = write_plots(rows[:1], tmp_path / "one", "m")
    assert files == [] and notes == ["no plots: every series has a single input length and a single concurrency "
                                     "(a plot needs two or more values on its x axis)"]
    doc = {"run_id": "r", "started": "s", "finished": "f", "status": "successful",
           "target": {"url": "http://h:1", "model": "m", "description": "d"},
           "tool": {"name": "AIPerf", "version": "0.13.0"}, "suite": {"name": "x", "source": "flags"},
           "settings": {"warmup": 2, "duration_limit": 300.0, "ignore_eos": True}, "points": rows,
           "plots": ["plots/ttft_vs_input.png"], "estimate_note": "no estimate for some points", "notes": []}
    text = write_report(tmp_path / "report.md", doc).read_text()
    assert "| a | 100.0 | 90.0 | 1.11x | 20.0 | 25.0 | 0.80x |" in text
    assert "| b | 400.0 | - | - |" in text
    assert "![ttft_vs_input](plots/ttft_vs_input.png)" in text and "_no estimate for some points_" in text


def test_cli_help_lists_the_flags():
    res = deployctl_bench("--help")
    assert res.returncode == 0, res.stderr
    for flag in ("--suite", "--input", "--output-len", "--concurrency", "--requests", "--warmup",
                 "--duration-limit", "--url", "--run-dir", "--output", "--request-rate", "--arrival",
                 "--shared-prefix"):
        assert flag in res.stdout, flag


def test_cli_refuses_a_bad_url_before_anything(tmp_path):
    inv = ROOT / "inventories" / "examples" / "a2-1x8-single.yaml"
    res = deployctl_bench("-i", str(inv), "--url", "ftp://x/v1", "--run-dir", str(tmp_path))
    assert res.returncode == 2 and "expected http(s)://HOST:PORT" in res.stderr, res.stderr
    assert not (tmp_path / "runs").exists()
    res = deployctl_bench("-i", str(inv), "--url", "http://127.0.0.1:1", "--input", "8", "--run-dir",
                          str(tmp_path), "--output", "json")
    assert res.returncode == 1
    err = json.loads(res.stdout)
    assert err["error"] == "ExecutionError" and "does not answer" in err["message"] and "deployctl status" in err["hint"]


def test_typer_wrapper_matches_run_bench():
    """The command registered on deployctl's app passes every flag to run_bench by name."""
    import inspect

    from deployctl.cli.bench import run_bench

    params = set(inspect.signature(run_bench).parameters)
    assert params == {"inventory", "output", "suite", "inputs", "output_len", "concurrency", "requests", "warmup",
                      "duration_limit", "url", "ignore_eos", "run_root", "request_rate", "arrival", "shared_prefix"}
    from deployctl.cli import app

    (command,) = [c for c in app.registered_commands if c.callback.__name__ == "bench"]
    src = inspect.getsource(command.callback)
    for p in params - {"inventory", "output"}:
        assert f"{p}=" in src, p


@pytest.mark.slow
def test_a_matplotlibrc_in_the_working_directory_runs_no_program(tmp_path):
    # issue 34: matplotlib reads ./matplotlibrc at import; `text.usetex: True` there made drawing the plots
    # run `latex` from PATH on the controller (here a stand-in that leaves a marker)
    import subprocess
    import sys
    import textwrap

    marker, bin_dir = tmp_path / "ran", tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("latex", "dvipng"):
        (bin_dir / tool).write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
        (bin_dir / tool).chmod(0o755)
    (tmp_path / "matplotlibrc").write_text("text.usetex: True\n")
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})
        from pathlib import Path
        from test_bench_units import _row
        from deployctl.features.bench.plots import write_plots
        rows = [_row("a", 1024, 1, 100.0, 20.0, 45.0), _row("b", 4096, 1, 400.0, 22.0, 40.0)]
        files, notes = write_plots(rows, Path("plots"), "m")
        print(len(files))
    """)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "2" and not marker.exists()


def test_calibrate_leaves_out_points_with_a_load(tmp_path):
    """calibrate fits closed-loop points over unrelated prompts: an open loop or a shared prefix is left out,
    named; a summary from before the load keys reads as closed loops."""
    from deployctl.features.bench.calibrate import points

    def pt(name, **load):
        return dict({"point": name, "input_len": 1024, "output_len": 64, "concurrency": 4, "ok": 8,
                     "failure": None, "ttft_ms": {"p50": 500.0}, "tpot_ms": {"p50": 30.0},
                     "output_tokens_per_s": 100.0}, **load)

    f = tmp_path / "summary.json"
    f.write_text(json.dumps({"run_id": "r1", "target": {"model": "m", "dies": 8}, "points": [
        pt("old"), pt("closed", request_rate=None, shared_prefix=0), pt("open", request_rate=2, arrival="poisson"),
        pt("cached", shared_prefix=512)]}))
    got, skipped = points([f], model="m", dies=8)
    assert [m.point for m in got] == ["old", "closed"]
    assert len(skipped) == 2 and "r1 open: an open loop" in skipped[0] and "r1 cached: a shared prompt prefix" in \
        skipped[1]
