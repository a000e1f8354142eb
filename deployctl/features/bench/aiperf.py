"""One point = one `aiperf profile` run (AIPerf, ai-dynamo/aiperf on PyPI), as a child process with an argument
list (never a shell), its artifacts in the run record; then its per-request records, normalised.

AIPerf is told: the OpenAI chat endpoint of the deployment, streaming (TTFT and inter-token latency need it),
the prompts of this point as a single_turn JSONL dataset (prompts.py), the server's own token counts
(--use-server-token-count: `stream_options.include_usage`), `max_tokens` (MindIE reads that, not
max_completion_tokens), `ignore_eos` so every answer is as long as asked, the concurrency, a request count, a
warm-up, and a bound on the measurement time (--benchmark-duration + a grace period for requests in flight).
A point with a request rate runs an open loop: --request-rate and --arrival-pattern poisson|constant, the
concurrency then AIPerf's ceiling on the requests in flight. A shared prefix is in the dataset itself (prompts.py).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from deployctl.core.models.rundata import MAX_REQUESTS

GRACE_S = 60.0                 # after the duration limit: how long requests in flight may still finish
STARTUP_SLACK_S = 180.0        # AIPerf's own start and stop (services, dataset) on top of the measurement
MAX_SUMMARY = 64 << 20         # bytes of AIPerf's summary read back
MAX_LINE = 1 << 20             # bytes of one per-request record


@dataclass
class PointRun:
    rc: int | None
    artifacts: Path
    log: Path
    records: list[dict] = field(default_factory=list)     # normalised, warm-up included (phase "warmup")
    summary: dict = field(default_factory=dict)           # AIPerf's profile_export_aiperf.json ({} when absent)
    elapsed_s: float = 0.0
    failure: str | None = None                             # the run itself failed (no result), else None
    timed_out: bool = False                                # the duration limit stopped it before all requests


def version() -> str | None:
    try:
        from importlib.metadata import version as v

        return v("aiperf")
    except Exception:  # noqa: BLE001 - not installed: the caller says how to install it
        return None


def argv(point, url: str, model: str, dataset: Path, tokenizer: Path, artifacts: Path, warmup: int,
         duration_limit: float, ignore_eos: bool) -> list[str]:
    """The `aiperf profile` command line of one point (every value a separate argument)."""
    args = [sys.executable, "-m", "aiperf", "profile",
            "--model", model, "--url", url, "--endpoint-type", "chat", "--streaming",
            "--tokenizer", str(tokenizer),
            "--input-file", str(dataset), "--custom-dataset-type", "single_turn",
            "--dataset-sampling-strategy", "sequential",
            "--use-server-token-count", "--use-legacy-max-tokens",
            "--concurrency", str(point.concurrency), "--request-count", str(point.requests),
            *rate_args(point),
            "--request-timeout-seconds", f"{duration_limit + GRACE_S:g}",    # no request outlives the bound
            "--artifact-dir", str(artifacts), "--ui-type", "none",
            "--no-server-metrics", "--no-gpu-telemetry"]
    if warmup > 0:
        args += ["--warmup-request-count", str(warmup), "--warmup-duration", f"{duration_limit:g}",
                 "--warmup-grace-period", f"{GRACE_S:g}"]
    args += ["--benchmark-duration", f"{duration_limit:g}", "--benchmark-grace-period", f"{GRACE_S:g}"]
    if ignore_eos:
        args += ["--extra-inputs", "ignore_eos:true"]
    return args


ARRIVAL_PATTERN = {"poisson": "poisson", "fixed": "constant"}     # ours -> AIPerf's --arrival-pattern


def rate_args(point) -> list[str]:
    """An open loop's AIPerf flags (none for a closed loop)."""
    rate = getattr(point, "request_rate", None)
    if not rate:
        return []
    return ["--request-rate", f"{rate:g}", "--arrival-pattern", ARRIVAL_PATTERN[point.arrival or "poisson"]]


def child_env() -> dict[str, str]:
    """AIPerf's environment: ours, without hub telemetry; the tokenizer is a local directory (no download)."""
    env = dict(os.environ)
    env.update({"HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false",
                "PYTHONUNBUFFERED": "1"})
    env.pop("HF_HUB_OFFLINE", None)           # offline mode makes AIPerf look a local path up in the hub cache
    env.pop("TRANSFORMERS_OFFLINE", None)
    return env


def run(point, url: str, model: str, dataset: Path, tokenizer: Path, workdir: Path, warmup: int,
        duration_limit: float, ignore_eos: bool) -> PointRun:
    artifacts = workdir / "aiperf"
    log = workdir / "aiperf.log"
    args = argv(point, url, model, dataset, tokenizer, artifacts, warmup, duration_limit, ignore_eos)
    (workdir / "aiperf.argv.json").write_text(json.dumps(args, indent=1) + "\n")
    # the warm-up and the measurement are each bounded by the limit plus the grace period; AIPerf starts and stops
    budget = STARTUP_SLACK_S + (2 if warmup else 1) * (duration_limit + GRACE_S)
    t0 = time.monotonic()
    rc: int | None
    failure = None
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=child_env(), cwd=str(workdir), start_new_session=True)
        try:
            rc = proc.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            _stop(proc)
            rc = None
            failure = f"AIPerf did not finish within {budget:.0f} s (stopped)"
        except BaseException:               # Ctrl-C: stop the whole AIPerf process group, then go on unwinding
            _stop(proc)
            raise
    res = PointRun(rc, artifacts, log, elapsed_s=time.monotonic() - t0, failure=failure)
    res.records = read_records(artifacts / "profile_export.jsonl", 2 * (point.requests + warmup) + 100)
    res.summary = read_summary(artifacts / "profile_export_aiperf.json")
    measured = [r for r in res.records if r["phase"] == "profiling"]
    res.timed_out = len(measured) < point.requests
    if res.failure is None and not measured:
        res.failure = f"AIPerf exited {rc} without measuring a request: {last_error(log)}"
    return res


def _stop(proc: subprocess.Popen) -> None:
    import signal

    for sig, wait in ((signal.SIGINT, 15), (signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def last_error(log: Path) -> str:
    """The most telling line of a failed AIPerf run (its error panel's reason, else an ERROR line)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "no log"
    for key in ("Reason:", "ERROR", "Error:", "error:"):
        hits = [ln.strip(" │") .strip() for ln in lines if key in ln]
        if hits:
            return hits[0][:300]
    tail = [ln.strip() for ln in lines if ln.strip()]
    return tail[-1][:300] if tail else "no output"


def _finite(v):
    """A number AIPerf measured, else None (NaN, Infinity, a string, a bool: no measurement)."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    return v if ok else None


def _value(metrics: dict, key: str):
    m = metrics.get(key)
    return _finite(m.get("value")) if isinstance(m, dict) else None


def _series(metrics: dict, key: str) -> list:
    m = metrics.get(key)
    v = m.get("value") if isinstance(m, dict) else None
    return [x for x in map(_finite, v[:MAX_LINE]) if x is not None] if isinstance(v, list) else []


def read_summary(path: Path) -> dict:
    """AIPerf's profile_export_aiperf.json ({} when absent or not one: a regular file of at most MAX_SUMMARY
    bytes, JSON without NaN)."""
    from pydantic_core import from_json

    from deployctl.core.errors import UsageError
    from deployctl.io.localfile import read_bytes

    try:
        doc = from_json(read_bytes(path, MAX_SUMMARY, what="AIPerf summary", hint=""), allow_inf_nan=False)
    except (FileNotFoundError, UsageError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _lines(path: Path):
    """The lines of a regular file (no link, FIFO or device), each cut at MAX_LINE bytes."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        os.set_blocking(fd, True)
        while line := f.readline(MAX_LINE):
            if not line.endswith(b"\n") and len(line) == MAX_LINE:
                while (rest := f.readline(MAX_LINE)) and not rest.endswith(b"\n"):
                    pass                      # a line longer than any record: skipped whole
                continue
            yield line.decode(errors="replace")


def read_records(path: Path, limit: int = 2 * MAX_REQUESTS) -> list[dict]:
    """AIPerf's per-request records (profile_export.jsonl) as flat rows: phase, ok/error, ms and token counts
    (numbers only when finite), at most ``limit`` of them."""
    rows: list[dict] = []
    for line in _lines(path):
        if len(rows) >= limit:
            break
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(doc, dict):
            continue
        md, m = (x if isinstance(x, dict) else {} for x in (doc.get("metadata"), doc.get("metrics")))
        err = doc.get("error")
        tpot = _value(m, "inter_token_latency")
        if tpot is None:                       # no server token count: one streamed chunk is one token
            chunks = _series(m, "inter_chunk_latency")
            if chunks:
                tpot = sum(chunks) / len(chunks)
        start, end = _finite(md.get("request_start_ns")), _finite(md.get("request_end_ns"))
        rows.append({
            "phase": "warmup" if md.get("benchmark_phase") == "warmup" else "profiling",
            "ok": not err and not md.get("was_cancelled"),
            "cancelled": bool(md.get("was_cancelled")),
            "error": (f"{err.get('code')} {err.get('type')}: {err.get('message')}".strip()
                      if isinstance(err, dict) else str(err)) if err else None,
            "ttft_ms": _value(m, "time_to_first_token"),
            "tpot_ms": tpot,
            "e2e_ms": _value(m, "request_latency"),
            "input_tokens": _value(m, "input_sequence_length") or _value(m, "usage_prompt_tokens"),
            "output_tokens": _value(m, "output_sequence_length") or _value(m, "usage_completion_tokens"),
            "start_ns": start, "end_ns": end, "request_id": md.get("x_request_id"),
        })
    return rows
