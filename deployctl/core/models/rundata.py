"""What deployctl reads back from its run directory, as typed models (read by deployctl/io/localfile.py).

* ``runs/<id>-bench/summary.json`` (deployctl.features.bench.run writes it; `deployctl calibrate` reads its points);
* ``calibration/<cluster>.json`` (deployctl.io.calibration_store: `calibrate` writes it, `plan`, `recommend`
  and `bench` read it);
* ``runs/<id>-preflight/run.json`` (deployctl.io.facts_store: which facts `up`, `diff` and `render` use).

Only the keys deployctl uses are declared; others are ignored (a newer deployctl may add some). Numbers are
finite and bounded by what the writer can produce: token lengths and concurrencies by what `deployctl bench`
accepts, counts by what a run holds, deratings by the range `deployctl calibrate` fits in.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

MAX_TOKENS = 1_000_000          # input or output tokens of one bench point (deployctl.features.bench.suites)
MAX_CONCURRENCY = 10_000
MAX_REQUESTS = 1_000_000
MAX_POINTS = 10_000             # points of one bench run
MAX_FIT_POINTS = 500            # measured points one `deployctl calibrate` fits (each costs the fit ~1 s)
MAX_RUNS = 10_000               # bench runs one calibration names
K_RANGE = (0.25, 8.0)           # a derating `deployctl calibrate` fits (deployctl.features.bench.calibrate.BOUNDS)
MAX_NODES = 8192

MAX_SUMMARY_BYTES = 64 << 20    # a summary of 10,000 points is ~40 MB
MAX_CALIBRATION_BYTES = 16 << 20
MAX_RUN_JSON_BYTES = 4 << 20    # run.json of 8,192 servers is ~0.5 MB

TEXT = r"^[^\x00-\x1f\x7f-\x9f]*$"         # one printable line


def Text(n: int) -> StringConstraints:   # noqa: N802 - a type's constraint: Annotated[str, Text(63)]
    """One printable line of at most n characters."""
    return StringConstraints(pattern=TEXT, max_length=n)


Number = Annotated[float, Field(allow_inf_nan=False, ge=-1e12, le=1e12)]      # finite
Measure = Annotated[float, Field(allow_inf_nan=False, ge=0, le=1e12)]         # ms, tokens/s: finite, not negative
Derating = Annotated[float, Field(allow_inf_nan=False, ge=K_RANGE[0], le=K_RANGE[1])]
Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]
Concurrency = Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]
RunName = Annotated[str, Text(120)]
Label = Annotated[str, StringConstraints(max_length=1000)]      # a point's or model's name: the user's words


class _RunDoc(BaseModel):
    # strict: "7" is not 7, true is not 1; unknown keys ignored
    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)


# --------------------------------------------------------------------------- bench summary (calibrate reads it)

class Distribution(_RunDoc):
    p50: Measure | None = None


class BenchPoint(_RunDoc):
    point: Label
    input_len: Tokens
    output_len: Tokens
    concurrency: Concurrency
    ok: int = Field(ge=0, le=MAX_REQUESTS)                  # requests answered
    failure: Annotated[str, StringConstraints(max_length=4000)] | None = None
    ttft_ms: Distribution
    tpot_ms: Distribution
    output_tokens_per_s: Measure | None
    # the point's load (`bench --request-rate / --shared-prefix`): absent in runs before it, a closed loop
    request_rate: Measure | None = None
    shared_prefix: int = Field(0, ge=0, le=MAX_TOKENS)


class BenchTarget(_RunDoc):
    model: Label | None = None
    dies: int = Field(0, ge=0, le=1 << 20)


class BenchSummary(_RunDoc):
    run_id: RunName
    target: BenchTarget
    points: list[BenchPoint] = Field(max_length=MAX_POINTS)


# --------------------------------------------------------------------------- stored calibration

class Deratings(_RunDoc):
    k_hbm: Derating
    k_compute: Derating
    k_prefill: Derating
    k_fixed: Derating = 1.0


class Compared(_RunDoc):
    measured: Measure | None
    estimated: Measure | None
    error: Number | None
    fitted: bool


class CalibrationPoint(_RunDoc):
    run: RunName
    point: Label
    concurrency: Concurrency
    input_len: Tokens
    output_len: Tokens
    ttft_ms: Compared
    tpot_ms: Compared
    tokens_per_s: Compared


class StoredCalibration(_RunDoc):
    cluster: Annotated[str, Text(63)]
    consts: Deratings
    runs: int = Field(ge=1, le=MAX_RUNS)
    run_ids: list[RunName] = Field(max_length=MAX_RUNS)
    date: Annotated[str, StringConstraints(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")]
    rms_error: Measure
    points: list[CalibrationPoint] = Field(default_factory=list, max_length=MAX_FIT_POINTS)


# --------------------------------------------------------------------------- preflight run.json

class PreflightRunDoc(_RunDoc):
    cluster: Annotated[str, Text(63)] | None = None
    nodes: dict[Annotated[str, Text(63)], Annotated[str, Text(255)]] = Field(default_factory=dict, max_length=MAX_NODES)
    ok: bool = False
    finished_at: Annotated[str, Text(64)] | None = None
