"""What `deployctl bench` measures: points of (input tokens, output tokens, concurrency).

Built-in suites (the run_suite.sh benchmark of a published two-server A2 guide for DeepSeek-V3.2 W8A8 on MindIE,
https://ai6s.net/6953e139836da3214488e6da.html):

* `long-context`: concurrency 1, inputs 1024 / 4096 / 8000 tokens, 128 output tokens (prefill and memory);
* `concurrency`: 10 and 50 concurrent requests at 1024 / 128 (throughput and queueing);
* `default`: both.

Custom suites: `--input`, `--output-len`, `--concurrency` (each a number or a comma list; the points are every
combination), or a YAML file. The load of every point is a closed loop (each of `concurrency` clients sends its
next request when its answer is complete) over prompts that share nothing, unless:

* `--request-rate R` / `request_rate:` an open loop: R requests per second arrive whether or not the earlier ones
  were answered (AIPerf --request-rate), `concurrency` then only a ceiling on the requests in flight;
* `--arrival poisson|fixed` / `arrival:` with a rate: exponential gaps (a Poisson process, the default) or equal
  ones (AIPerf --arrival-pattern poisson|constant);
* `--shared-prefix T` / `shared_prefix:` every prompt of the point starts with the same T tokens (a system
  prompt), the rest differs: an engine's prefix cache computes the shared part once.

The flags set the load of every point (as --requests does); in a file each point sets its own:

    name: my-suite            # optional, shown in the report
    requests: 20              # optional: requests measured per point (default max(5, 4 x concurrency))
    warmup: 2                 # optional: warm-up requests per point, not measured
    duration_limit: 120       # optional: seconds of measurement per point at most
    points:
      - {input: 1024, output: 128, concurrency: 1}
      - {input: 2048, output: 256, concurrency: [1, 8, 32], requests: 64, name: mid}   # lists: every combination
      - {input: 2048, output: 256, concurrency: 64, request_rate: [1, 2, 4], arrival: poisson}
      - {input: 2048, output: 256, concurrency: 8, shared_prefix: 1536}
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from deployctl.core.docs_url import doc
from deployctl.core.errors import Problem, UsageError
from deployctl.core.models.rundata import MAX_CONCURRENCY, MAX_REQUESTS, MAX_TOKENS  # also the summary reader's

BUILTIN = ("default", "long-context", "concurrency")
ARRIVALS = ("poisson", "fixed")
MAX_RATE = 1_000_000.0         # requests per second (the estimate's Workload bound)


@dataclass(frozen=True)
class Point:
    name: str
    series: str                  # long-context | concurrency | custom (groups the plots' lines and the report)
    input_len: int
    output_len: int
    concurrency: int
    requests: int
    request_rate: float | None = None    # requests/s arriving (an open loop, concurrency a ceiling); None: closed
    arrival: str | None = None           # with a rate: poisson | fixed
    shared_prefix: int = 0               # tokens every prompt of the point starts with (0: none)

    def to_dict(self) -> dict:
        return asdict(self)

    def load_text(self) -> str:
        """'closed loop', '2 req/s poisson', plus ', 768-token shared prefix'."""
        text = f"{self.request_rate:g} req/s {self.arrival}" if self.request_rate else "closed loop"
        return text + (f", {self.shared_prefix}-token shared prefix" if self.shared_prefix else "")


@dataclass
class Suite:
    name: str
    points: list[Point]
    warmup: int | None = None            # from a file; the flag wins
    duration_limit: float | None = None  # from a file; the flag wins
    source: str = "built-in"
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"name": self.name, "source": self.source, "warmup": self.warmup,
                "duration_limit": self.duration_limit, "points": [p.to_dict() for p in self.points]}


POINT_KEYS = ("input", "output", "concurrency", "requests", "name", "request_rate", "arrival", "shared_prefix")


def default_requests(concurrency: int) -> int:
    """Requests measured at one point: four rounds of the concurrency, at least five."""
    return max(5, 4 * concurrency)


def _load_suffix(rate: float | None, shared: int) -> str:
    return (f"-r{rate:g}" if rate else "") + (f"-p{shared}" if shared else "")


def _point(series: str, inp: int, out: int, conc: int, requests: int | None = None, name: str | None = None,
           rate: float | None = None, arrival: str | None = None, shared: int = 0) -> Point:
    return Point(name or f"{series}-in{inp}-out{out}-c{conc}" + _load_suffix(rate, shared), series, inp, out, conc,
                 requests if requests is not None else default_requests(conc), rate,
                 (arrival or "poisson") if rate else None, shared or 0)


def with_load(suite: Suite, request_rate: float | None = None, arrival: str | None = None,
              shared_prefix: int | None = None) -> Suite:
    """The suite with the load flags applied to every point (a point's name gains -r<rate> / -p<prefix> unless
    the file named it); exit 2 when a flag is out of range or the shared prefix is not shorter than a prompt."""
    if request_rate is None and arrival is None and shared_prefix is None:
        return suite
    if arrival is not None and arrival not in ARRIVALS:
        raise UsageError(f"--arrival {arrival!r}: expected one of {', '.join(ARRIVALS)}")
    if arrival is not None and request_rate is None:
        raise UsageError("--arrival applies to an open loop only", hint="add --request-rate REQ/S (requests per "
                                                                      "second), or drop --arrival")
    if request_rate is not None and not 0 < request_rate <= MAX_RATE:
        raise UsageError(f"--request-rate {request_rate:g}: must be more than 0 and at most {MAX_RATE:g} requests/s")
    if shared_prefix is not None and shared_prefix < 1:
        raise UsageError(f"--shared-prefix {shared_prefix}: must be 1 token or more")
    too_short = sorted({p.input_len for p in suite.points if shared_prefix and shared_prefix >= p.input_len})
    if too_short:
        raise UsageError(f"--shared-prefix {shared_prefix}: not shorter than the prompts of "
                         f"{', '.join(map(str, too_short))} input tokens",
                         hint="the shared prefix is the start of each prompt: give fewer tokens than --input")
    pts = []
    for p in suite.points:
        rate = request_rate if request_rate is not None else p.request_rate
        shared = shared_prefix if shared_prefix is not None else p.shared_prefix
        arr = (arrival or p.arrival or "poisson") if rate else None
        default_name = f"{p.series}-in{p.input_len}-out{p.output_len}-c{p.concurrency}" + _load_suffix(
            p.request_rate, p.shared_prefix)
        name = p.name if p.name != default_name else \
            f"{p.series}-in{p.input_len}-out{p.output_len}-c{p.concurrency}" + _load_suffix(rate, shared)
        pts.append(replace(p, name=name, request_rate=rate, arrival=arr, shared_prefix=shared))
    return replace(suite, points=pts)


def long_context(requests: int | None = None) -> list[Point]:
    return [_point("long-context", i, 128, 1, requests) for i in (1024, 4096, 8000)]


def concurrency_suite(requests: int | None = None) -> list[Point]:
    return [_point("concurrency", 1024, 128, c, requests) for c in (10, 50)]


def builtin(name: str, requests: int | None = None) -> Suite:
    if name == "long-context":
        return Suite(name, long_context(requests))
    if name == "concurrency":
        return Suite(name, concurrency_suite(requests))
    return Suite("default", long_context(requests) + concurrency_suite(requests))


def from_flags(inputs: list[int] | None, outputs: list[int] | None, concurrencies: list[int] | None,
               requests: int | None = None) -> Suite:
    """Every combination of the given values (missing ones: 1024 input, 128 output, concurrency 1)."""
    pts = [_point("custom", i, o, c, requests)
           for i, o, c in itertools.product(inputs or [1024], outputs or [128], concurrencies or [1])]
    return Suite("custom", _dedupe(pts), source="flags")


def _dedupe(points: list[Point]) -> list[Point]:
    seen, out = set(), []
    for p in points:
        key = (p.input_len, p.output_len, p.concurrency, p.request_rate, p.arrival, p.shared_prefix)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def parse_int_list(text: str | None, what: str, flag: str, lo: int, hi: int) -> list[int] | None:
    """'1024,4096' or '1024' -> [1024, 4096]; None -> None; anything else -> UsageError (exit 2)."""
    if text is None:
        return None
    values = []
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        try:
            v = int(part)
        except ValueError:
            raise UsageError(f"{flag} {text!r}: {part!r} is not a whole number of {what}",
                             hint=f"give one number or a comma list, e.g. {flag} 1024,4096") from None
        if not lo <= v <= hi:
            raise UsageError(f"{flag} {text!r}: {v} is out of range {lo}..{hi}", hint=f"{what} between {lo} and {hi}")
        values.append(v)
    if not values:
        raise UsageError(f"{flag} {text!r}: no value", hint=f"e.g. {flag} 1024,4096")
    return list(dict.fromkeys(values))


def load_file(path: Path, requests: int | None = None) -> Suite:
    """A suite from a YAML file; every problem named with its key path (exit 2)."""
    import yaml

    try:
        text = Path(path).read_text()
    except OSError as e:
        raise UsageError(f"--suite {path}: cannot read it: {e.strerror or e}",
                         hint=f"--suite takes one of {', '.join(BUILTIN)} or a YAML file") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise UsageError(f"{path}: not valid YAML", problems=[Problem(
            str(getattr(e, "problem", None) or e), file=str(path), line=mark.line + 1 if mark else None)]) from None
    problems: list[Problem] = []

    def bad(key: str, msg: str, hint: str = "") -> None:
        problems.append(Problem(msg, path=key, file=str(path), hint=hint))

    if not isinstance(doc, dict):
        raise UsageError(f"{path}: a suite file is a mapping with a `points:` list",
                         hint=f"see `deployctl bench --help` or {doc('benchmarking.md')}")
    known = {"name", "requests", "warmup", "duration_limit", "points"}
    for k in doc:
        if k not in known:
            bad(str(k), f"unknown key {k!r}", f"known keys: {', '.join(sorted(known))}")

    def number(v, key: str, lo: float, hi: float, whole: bool = True):
        ok = isinstance(v, int) and not isinstance(v, bool) if whole else \
            isinstance(v, (int, float)) and not isinstance(v, bool)
        if not ok or not lo <= v <= hi:
            bad(key, f"{v!r} is not a {'whole ' if whole else ''}number in {lo}..{hi}")
            return None
        return v

    file_requests = number(doc["requests"], "requests", 1, MAX_REQUESTS) if "requests" in doc else None
    warmup = number(doc["warmup"], "warmup", 0, 10_000) if "warmup" in doc else None
    limit = number(doc["duration_limit"], "duration_limit", 1, 7 * 86400, whole=False) if "duration_limit" in doc \
        else None
    name = doc.get("name", Path(path).stem)
    if not isinstance(name, str) or not name.strip():
        bad("name", f"{name!r} is not a name")
        name = Path(path).stem
    raw_points = doc.get("points")
    if not isinstance(raw_points, list) or not raw_points:
        bad("points", "`points` must be a non-empty list of {input, output, concurrency}",
            "e.g. points: [{input: 1024, output: 128, concurrency: 1}]")
        raw_points = []
    points: list[Point] = []
    for i, entry in enumerate(raw_points):
        where = f"points[{i}]"
        if not isinstance(entry, dict):
            bad(where, "a point is a mapping {input, output, concurrency}")
            continue
        for k in entry:
            if k not in POINT_KEYS:
                bad(f"{where}.{k}", f"unknown key {k!r}", f"keys: {', '.join(POINT_KEYS)}")
        lists = {}
        for key, lo, hi in (("input", 1, MAX_TOKENS), ("output", 1, MAX_TOKENS), ("concurrency", 1, MAX_CONCURRENCY)):
            if key not in entry:
                bad(f"{where}.{key}", f"missing `{key}`")
                continue
            vals = entry[key] if isinstance(entry[key], list) else [entry[key]]
            lists[key] = [number(v, f"{where}.{key}", lo, hi) for v in vals] or [None]
        rates: list = [None]
        if "request_rate" in entry:
            vals = entry["request_rate"] if isinstance(entry["request_rate"], list) else [entry["request_rate"]]
            rates = [number(v, f"{where}.request_rate", 0.0001, MAX_RATE, whole=False) for v in vals] or [None]
            if any(r is None for r in rates):
                rates = []
        arrival = entry.get("arrival")
        if arrival is not None and arrival not in ARRIVALS:
            bad(f"{where}.arrival", f"{arrival!r} is not an arrival pattern", f"one of {', '.join(ARRIVALS)}")
            arrival = None
        elif arrival is not None and "request_rate" not in entry:
            bad(f"{where}.arrival", "`arrival` applies to an open loop only", "add request_rate (requests/s)")
        shareds: list = [0]
        if "shared_prefix" in entry:
            vals = entry["shared_prefix"] if isinstance(entry["shared_prefix"], list) else [entry["shared_prefix"]]
            shareds = [number(v, f"{where}.shared_prefix", 1, MAX_TOKENS) for v in vals] or [None]
            if any(v is None for v in shareds):
                shareds = []
            elif lists.get("input") and all(v is not None for v in lists["input"]) and \
                    max(shareds) >= min(lists["input"]):
                bad(f"{where}.shared_prefix", f"{max(shareds)} tokens is not shorter than the prompt "
                    f"({min(lists['input'])} input tokens)", "the shared prefix is the start of each prompt")
                shareds = []
        req = number(entry["requests"], f"{where}.requests", 1, MAX_REQUESTS) if "requests" in entry else None
        pname = entry.get("name")
        if pname is not None and (not isinstance(pname, str) or not pname.strip()):
            bad(f"{where}.name", f"{pname!r} is not a name")
            pname = None
        if len(lists) < 3 or any(v is None for vs in lists.values() for v in vs) or not rates or not shareds:
            continue
        combos = list(itertools.product(lists["input"], lists["output"], lists["concurrency"], rates, shareds))
        for inp, out, conc, rate, shared in combos:
            label = None
            if pname:
                label = pname if len(combos) == 1 else f"{pname}-in{inp}-out{out}-c{conc}" + _load_suffix(rate, shared)
            n = req if req is not None else requests if requests is not None else file_requests
            points.append(_point("custom", inp, out, conc, n, label, rate, arrival, shared))
    if problems:
        raise UsageError(f"{path}: {len(problems)} problem{'s' if len(problems) > 1 else ''} in the suite file",
                         problems=problems)
    if requests is not None:
        points = [replace(p, requests=requests) for p in points]
    names = [p.name for p in points]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UsageError(f"{path}: point names used twice: {', '.join(dup)}", hint="give each point its own name")
    return Suite(name.strip(), points, warmup=warmup, duration_limit=limit, source=str(path))


def resolve(suite: str | None, inputs: str | None, output_len: str | None, concurrency: str | None,
            requests: int | None = None, request_rate: float | None = None, arrival: str | None = None,
            shared_prefix: int | None = None) -> Suite:
    """The suite the flags ask for: --input/--output-len/--concurrency make a custom one (not with --suite);
    --request-rate/--arrival/--shared-prefix set the load of every point (`with_load`)."""
    return with_load(_resolve(suite, inputs, output_len, concurrency, requests), request_rate, arrival,
                     shared_prefix)


def _resolve(suite: str | None, inputs: str | None, output_len: str | None, concurrency: str | None,
             requests: int | None = None) -> Suite:
    custom = any(v is not None for v in (inputs, output_len, concurrency))
    if custom and suite is not None:
        raise UsageError(f"--suite {suite} and --input/--output-len/--concurrency both choose the points",
                         hint="use one: a suite (default, long-context, concurrency, a YAML file) or the flags")
    if custom:
        return from_flags(parse_int_list(inputs, "input tokens", "--input", 1, MAX_TOKENS),
                          parse_int_list(output_len, "output tokens", "--output-len", 1, MAX_TOKENS),
                          parse_int_list(concurrency, "concurrent requests", "--concurrency", 1, MAX_CONCURRENCY),
                          requests)
    if suite is None or suite in BUILTIN:
        return builtin(suite or "default", requests)
    p = Path(suite)
    if not p.exists():
        raise UsageError(f"--suite {suite!r}: neither a built-in suite nor a file",
                         hint=f"built-in: {', '.join(BUILTIN)}; or a YAML file with a `points:` list")
    return load_file(p, requests)
