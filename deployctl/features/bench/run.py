"""A whole `deployctl bench` run: a smoke request, then every point of the suite through AIPerf, recorded.

The run record `<run-dir>/runs/<id>-bench/` holds:

    suite.json, target.json        what was measured, where (URL, model, deployment)
    tokenizer/                     the word-level tokenizer AIPerf was given (prompts.py)
    points/NN-<point>/             per point: input.jsonl (the prompts), aiperf.argv.json, aiperf.log and
                                   aiperf/ (AIPerf's artifacts: profile_export.jsonl per request,
                                   profile_export_aiperf.json/.csv, inputs.json, logs/)
    requests.jsonl                 every request of every point, one row each (warm-up rows marked)
    summary.json                   per point p50/p90/p99 of TTFT, TPOT, E2E, throughput, errors, the estimate
                                   and the ratios
    plots/*.png, report.md         the plots and the Markdown report
    status, rc                     starting -> running -> successful | failed | canceled
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from deployctl.features.bench import aiperf, prompts
from deployctl.features.bench.estimate import Estimator, compare
from deployctl.features.bench.stats import summarize
from deployctl.features.bench.suites import Suite
from deployctl.io.records import RunRecord
from deployctl.core.errors import ExecutionError

SMOKE_TIMEOUT_S = 120.0


@dataclass
class BenchOptions:
    suite: Suite
    warmup: int = 2
    duration_limit: float = 300.0
    ignore_eos: bool = True
    run_root: Path = Path(".deployctl")


@dataclass
class Target:
    url: str
    model: str
    description: str = ""
    dies: int = 0
    plan: object = None


@dataclass
class BenchResult:
    record: RunRecord
    doc: dict
    plots: list[Path] = field(default_factory=list)
    report: Path | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.doc["status"] == "successful" else 1


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")[:80] or "point"


def smoke(url: str, model: str, timeout: float = SMOKE_TIMEOUT_S) -> str:
    """One short chat completion: the endpoint answers for this model before any load is sent."""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1,
                       "stream": False}).encode()
    req = urllib.request.Request(url.rstrip("/") + "/v1/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    hint = ("is it deployed and serving? `deployctl status -i INV`; the model name is the inventory's "
            "model.served_name")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            doc = json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        text = e.read()[:300].decode(errors="replace")
        raise ExecutionError(f"{url}/v1/chat/completions answered {e.code} to a one-token request for model "
                             f"{model!r}: {text.strip()}", hint=hint) from None
    except (OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        raise ExecutionError(f"{url}/v1/chat/completions does not answer: {reason}", hint=hint) from None
    try:
        return str(doc["choices"][0]["message"]["content"])
    except (KeyError, IndexError, TypeError):
        raise ExecutionError(f"{url}/v1/chat/completions answered without choices[0].message: {str(doc)[:300]}",
                             hint="the endpoint is not an OpenAI-compatible chat completion API") from None


def run_benchmark(target: Target, opts: BenchOptions, reporter) -> BenchResult:
    version = aiperf.version()
    if version is None:
        from deployctl.features.bench.extra import INSTALL

        raise ExecutionError("AIPerf is not installed in deployctl's Python environment",
                             hint=f"{INSTALL} (AIPerf comes with deployctl's bench extra)")
    from deployctl.io.calibration_store import load as load_calibration

    # the cluster's own calibration, read (and refused when it is not one: exit 2) before anything is recorded
    calibration = load_calibration(target.plan.inventory.cluster.name, opts.run_root) if target.plan else None
    rec = RunRecord.create(opts.run_root, "bench")
    started = _now()
    suite = opts.suite
    rec.write_json("suite.json", dict(suite.to_dict(), warmup=opts.warmup, duration_limit=opts.duration_limit,
                                      ignore_eos=opts.ignore_eos))
    rec.write_json("target.json", {"url": target.url, "model": target.model, "description": target.description,
                                   "dies": target.dies})
    rec.status("running")
    reporter.step(f"bench {suite.name}: {len(suite.points)} point(s) against {target.url} (model {target.model}); "
                  f"record: {rec.path}")
    try:
        answer = smoke(target.url, target.model)
    except ExecutionError:
        rec.finish("failed", 1)
        raise
    reporter.step(f"smoke: answered {answer[:60]!r}")
    tokenizer = prompts.write_tokenizer(rec.path / "tokenizer")
    estimator = Estimator(target.plan, calibration)
    rows: list[dict] = []
    status = "running"
    try:
        with (rec.path / "requests.jsonl").open("w") as raw:
            for i, point in enumerate(suite.points, 1):
                work = rec.path / "points" / f"{i:02d}-{safe_name(point.name)}"
                work.mkdir(parents=True, exist_ok=True)
                dataset = prompts.write_dataset(work / "input.jsonl", point.input_len, point.output_len,
                                                point.requests + opts.warmup, seed=i,
                                                shared_prefix=point.shared_prefix)
                load = "" if point.load_text() == "closed loop" else f" ({point.load_text()})"
                reporter.step(f"[{i}/{len(suite.points)}] {point.name}: {point.requests} request(s) at concurrency "
                              f"{point.concurrency}, {point.input_len} tokens in, {point.output_len} out{load}")
                res = aiperf.run(point, target.url, target.model, dataset, tokenizer, work, opts.warmup,
                                 opts.duration_limit, opts.ignore_eos)
                for r in res.records:
                    raw.write(json.dumps(dict(r, point=point.name)) + "\n")
                raw.flush()
                row = summarize(point, res.records, res.summary, target.dies)
                row.update(failure=res.failure, timed_out=res.timed_out, aiperf_rc=res.rc,
                           elapsed_s=round(res.elapsed_s, 2), artifacts=str(res.artifacts.relative_to(rec.path)))
                row["estimate"] = estimator.point(point.input_len, point.output_len, point.concurrency,
                                                  request_rate=point.request_rate, arrival=point.arrival,
                                                  shared_prefix=point.shared_prefix)
                row["comparison"] = compare(row, row["estimate"])
                rows.append(row)
                reporter.point(row)
        status = "successful" if rows and all(r["ok"] and not r["errors"] and not r["failure"] for r in rows) \
            else "failed"
    except KeyboardInterrupt:
        status = "canceled"
        raise
    finally:
        doc = _finish(rec, target, opts, version, started, rows, status, estimator)
    plots = [rec.path / p for p in doc["plots"]]
    return BenchResult(rec, doc, plots, rec.path / "report.md")


def _finish(rec: RunRecord, target: Target, opts: BenchOptions, version: str, started: str, rows: list[dict],
            status: str, estimator: Estimator) -> dict:
    """summary.json, plots, report.md and the record's status, also after a failure or Ctrl-C (what was measured
    stays)."""
    from deployctl.features.bench.plots import write_plots
    from deployctl.features.bench.report import write_report

    if status == "running":          # an exception other than Ctrl-C
        status = "failed"
    notes: list[str] = []
    plots: list[str] = []
    if rows:
        try:
            files, notes = write_plots(rows, rec.path / "plots", f"{target.model}")
            plots = [str(p.relative_to(rec.path)) for p in files]
        except Exception as e:  # noqa: BLE001 - a plot that cannot be drawn must not lose the numbers
            notes.append(f"plots not drawn: {type(e).__name__}: {e}")
    doc = {"run_id": rec.run_id, "run": str(rec.path), "status": status, "started": started, "finished": _now(),
           "target": {"url": target.url, "model": target.model, "description": target.description,
                      "dies": target.dies},
           "tool": {"name": "AIPerf", "package": "aiperf", "version": version},
           "suite": {"name": opts.suite.name, "source": opts.suite.source},
           "settings": {"warmup": opts.warmup, "duration_limit": opts.duration_limit, "ignore_eos": opts.ignore_eos},
           "points": rows, "plots": plots, "estimate_note": estimator.note, "notes": notes,
           "report": "report.md", "raw": "requests.jsonl"}
    rec.write_json("summary.json", doc)
    write_report(rec.path / "report.md", doc)
    rec.finish(status, {"successful": 0, "canceled": 130}.get(status, 1))
    return doc
