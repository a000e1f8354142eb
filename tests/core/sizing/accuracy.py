"""The accuracy report (issue 27 item 4): deployctl's estimate against published Ascend points it was not fitted on.

`tests/core/sizing/points.yaml` holds the points, each measured with one engine (`engine_kind`: vllm-ascend, the
default, or sglang) and in one set of that engine (`set: fit` - the engine's own deratings are fitted on them,
tests/core/sizing/fit_engine.py --engine <kind>; `set: check` - never fitted on), each with its source, layout,
client and measured values. Each point becomes a deployctl inventory of its engine (`inventory_of`), goes through
validation and the planner (the caller's `plan_of`: validation sits above this layer), the engine's own checks and
the simulated serving loop under the point's client, exactly as `plan` would estimate it; a point deployctl refuses
is listed with the reason. `report()` gives one engine's rows and the MAPE of TPOT, TTFT and throughput;
`python tests/core/sizing/accuracy_report.py` prints the markdown that docs/performance-model.md carries, per engine
(a test recomputes it, so the docs cannot drift). Nothing here fits anything: rows use their engine's deratings
(`calibration.fitted_for` of its spec), and the MAPE tables also give the CloudMatrix fit (`FITTED`) as "before".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

POINTS = Path(__file__).with_name("points.yaml")
MORE_POINTS = Path(__file__).with_name("points.d")     # later collections, one file each, same schema and rules
ROOT = Path(__file__).resolve().parents[3]       # a point's config_path is relative to the repository
IMAGES = {"vllm-ascend": {"a2": "quay.io/ascend/vllm-ascend:v0.13.0", "a3": "quay.io/ascend/vllm-ascend:v0.13.0-a3"},
          # SGLang's Ascend tutorials name these images ("validated and written based on SGLang v0.5.16":
          # sgl-project/sglang@0fc1a4fb docs/docs/hardware-platforms/ascend-npus/model-deployment/tutorials/
          # deepseek_r1.mdx)
          "sglang": {"a2": "quay.io/ascend/sglang:cann9.0.0-910b-v0.5.16",
                     "a3": "quay.io/ascend/sglang:cann9.0.0-a3-v0.5.16"}}
ENGINES = (("vllm-ascend", "vLLM-Ascend"), ("sglang", "SGLang"))
DIES = {"a2": 8, "a3": 16}
SPEC_NAMES = {"mtp": "MTP", "eagle": "EAGLE", "eagle3": "EAGLE3 x", "dflash": "DFlash x"}
METRICS = (("tpot_ms", "TPOT"), ("ttft_ms", "TTFT"), ("throughput", "throughput"))


@cache
def points() -> dict:
    """points.yaml and every points.d/*.yaml (in name order): their `points` and `unexpressed` lists joined."""
    out = yaml.safe_load(POINTS.read_text())
    for f in sorted(MORE_POINTS.glob("*.yaml")):
        more = yaml.safe_load(f.read_text()) or {}
        for key in ("points", "unexpressed"):
            out.setdefault(key, []).extend(more.get(key) or [])
    return out


def engine_of(p: dict) -> str:
    """The engine kind a point was measured with (`engine_kind`, vllm-ascend when absent)."""
    return p.get("engine_kind", "vllm-ascend")


def in_set(name: str, engine: str | None = "vllm-ascend") -> list[dict]:
    """The points of one set ("fit" or "check") of one engine (every engine's with engine=None)."""
    return [p for p in points()["points"] if p["set"] == name and engine in (None, engine_of(p))]


def engine_consts(cloudmatrix: bool = False, engine: str = "vllm-ascend"):
    """The deratings rows are estimated with: the engine's own, or (before) the CloudMatrix fit."""
    from deployctl.app.engines import resolve
    from deployctl.core.sizing.calibration import FITTED, fitted_for

    return FITTED if cloudmatrix else fitted_for(resolve(engine))


def inventory_of(p: dict) -> dict:
    """The point as a deployctl inventory (vLLM-Ascend 0.13 or SGLang 0.5.16, the point's servers, degrees and
    limits)."""
    hw, c, lim = p["hardware"], p["client"], p["limits"]
    names = [f"n{i + 1}" for i in range(p["servers"])]
    layout = dict(p["layout"])
    if layout.get("preset") == "pd-split":
        used = 0
        for role in ("prefill", "decode"):
            spec = dict(layout[role])
            n = spec.pop("servers")
            layout[role] = {"nodes": names[used:used + n], **spec}
            used += n
    model = {"name": p["model"], "quant": p["quant"], "weights_path": f"/data/models/{p['model']}",
             "served_name": "m", "max_seq_len": lim["max_seq_len"],
             "max_input_len": min(lim["max_seq_len"] - 1, max(c["input"], lim.get("max_input_len", 0))),
             "max_batch_size": lim["max_batch_size"]}
    if lim.get("max_prefill_tokens"):
        model["max_prefill_tokens"] = lim["max_prefill_tokens"]
    if p.get("config_path"):                     # sized from the checkpoint's real config.json
        model["config_path"] = str(ROOT / p["config_path"])
    if p.get("speculative"):
        spec = dict(p["speculative"])
        if spec["method"] != "mtp":              # a draft model: where its weights sit does not change the estimate
            spec.setdefault("draft_weights_path", f"/data/models/{p['model']}-{spec['method']}")
        model["speculative"] = spec

    return {"cluster": {"name": "check", "hardware": hw, **({"super_pod": True} if hw == "a3" else {})},
            "engine": {"kind": engine_of(p), "image": IMAGES[engine_of(p)][hw], **p.get("engine_settings", {})},
            "model": model, "layout": layout,
            "nodes": [{"name": n, "address": f"10.9.0.{i + 2}", "interface": "eth0",
                       **({"super_pod_id": 1} if hw == "a3" else {})} for i, n in enumerate(names)]}


def client_of(p: dict):
    """The point's client: closed loop, or its request rate (`arrival` poisson, the default, or fixed), with the
    prefix hit rate its workload has (`prefix_hit`, 0 when not given)."""
    from deployctl.core.sizing.clients import Client

    c = p["client"]
    rate = c.get("rate") or 0.0
    return Client(input_len=c["input"], output_len=c["output"], mode="rate" if rate else "concurrency",
                  concurrency=c["concurrency"], rate=rate, requests=c.get("requests"),
                  arrival=c.get("arrival", "poisson"), prefix_hit=c.get("prefix_hit", 0.0))


def statistic_of(p: dict) -> dict[str, str]:
    """Which simulated statistic each published latency is compared with: the source's own (`statistic: {ttft_ms:
    mean}`), the median when the point does not say."""
    names = {"median": "p50", "mean": "mean"}
    return {k: names[v] for k, v in (p.get("statistic") or {}).items()}


@dataclass
class Row:
    id: str
    measured: dict
    estimated: dict = field(default_factory=dict)
    refused: str = ""
    running: int = 0            # requests decoding at once in the measured run (concurrency, requests, batch slots)

    def error(self, key: str) -> float | None:
        m, e = self.measured.get(key), self.estimated.get(key)
        return None if m is None or e is None else (e - m) / m

    @property
    def implied_tpot_ms(self) -> float | None:
        """A diagnostic, not a published value: the time per output token per request the measured throughput
        implies at `running` requests in flight (running / throughput; an upper bound: it counts TTFT in)."""
        thr = self.measured.get("throughput")
        return self.running / thr * 1e3 if thr and self.running else None

    def implied_error(self) -> float | None:
        """Estimated TPOT against the implied one: whether the decode step or the queueing misses."""
        imp, e = self.implied_tpot_ms, self.estimated.get("tpot_ms")
        return None if imp is None or e is None else (e - imp) / imp


def check_plan(plan, engine: str = "vllm-ascend") -> str | None:
    """Why the engine refuses the plan (its own checks), or None."""
    from deployctl.app import engines

    spec = engines.resolve(engine)
    errors = [x for x in spec.check(plan) if x.level == "error"]
    return f"{spec.display} refuses: {errors[0].message[:140]}" if errors else None


def estimate(p: dict, plan_of, consts=None) -> Row:
    """The point's row; `plan_of(inventory_dict)` gives (plan, None) or (None, why deployctl refuses it) — the
    inventory is validated above this layer (tests/core/sizing/accuracy_report.py does it); `consts` default to
    the point's engine's deratings."""
    from deployctl.core.sizing.estimate import context
    from deployctl.core.sizing.serving import simulate_plan

    lay, c = p["layout"], p["client"]
    dec = lay["decode"] if lay.get("preset") == "pd-split" else lay
    per_rank = dec.get("model", {}).get("max_batch_size", p["limits"]["max_batch_size"])   # a role's own limit first
    slots = per_rank * dec.get("dp", 1) * dec.get("instances", 1)
    row = Row(id=p["id"], measured=dict(p["measured"]),
              running=min(c["concurrency"], c.get("requests") or c["concurrency"], slots))
    plan, why = plan_of(inventory_of(p))
    why = why or check_plan(plan, engine_of(p))
    if why:
        row.refused = why
        return row
    served = simulate_plan(context(plan, consts=consts or engine_consts(engine=engine_of(p))), client_of(p))
    which = statistic_of(p)
    row.estimated = {"ttft_ms": served.ttft[which.get("ttft_ms", "p50")] * 1e3,
                     "tpot_ms": served.tpot[which.get("tpot_ms", "p50")] * 1e3, "throughput": served.throughput}
    return row


@cache
def report(plan_of, which: str = "check", cloudmatrix: bool = False,
           engine: str | None = "vllm-ascend") -> tuple[list[Row], dict]:
    """Every point's row of one set of one engine (every engine's with engine=None) and, per metric, (MAPE, points
    that publish it and were expressed). Rows run with their own engine's deratings, or all with the CloudMatrix fit."""
    rows = [estimate(p, plan_of, engine_consts(cloudmatrix, engine_of(p))) for p in in_set(which, engine)]
    mape = {}
    for key, _ in METRICS:
        errs = [abs(r.error(key)) for r in rows if r.error(key) is not None]
        mape[key] = (sum(errs) / len(errs) if errs else None, len(errs))
    implied = [abs(r.implied_error()) for r in rows if r.implied_error() is not None]
    mape["implied_tpot"] = (sum(implied) / len(implied) if implied else None, len(implied))
    return rows, mape


def _fmt(v: float | None, pct: bool = False) -> str:
    if v is None:
        return "–"
    return f"{v:+.0%}" if pct else f"{v:,.1f}"


def _table(rows: list[Row]) -> list[str]:
    by_id = {p["id"]: p for p in points()["points"]}
    out = ["| point | hardware, servers | model, quant | layout | client (in/out, concurrency, rate) | "
           "TPOT ms meas. / est. / err | TTFT ms meas. / est. / err | tok/s meas. / est. / err | "
           "running, TPOT implied / err |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p = by_id[r.id]
        c = p["client"]
        lay = p["layout"]
        layout = (f"P {lay['prefill']['servers']}x DP{lay['prefill']['dp']} TP{lay['prefill']['tp']}, "
                  f"D {lay['decode']['servers']}x DP{lay['decode']['dp']} TP{lay['decode']['tp']}"
                  if lay.get("preset") == "pd-split" else f"DP{lay.get('dp', 1)} TP{lay['tp']}"
                  + (f" (experts TP{lay['moe_tp']})" if lay.get("moe_tp") else ""))
        if p.get("speculative"):
            sp = p["speculative"]
            layout += f", {SPEC_NAMES[sp['method']]}{sp['tokens']}"
        cl = f"{c['input']}/{c['output']}, {c['concurrency']}" + (f", {c['rate']}/s" if c.get("rate") else "")
        cells = []
        for key, _ in METRICS:
            if r.refused:
                cells.append(f"{_fmt(r.measured.get(key))} / refused")
            else:
                cells.append(f"{_fmt(r.measured.get(key))} / {_fmt(r.estimated.get(key))} / "
                             f"{_fmt(r.error(key), pct=True)}")
        imp = (f"{r.running}, {_fmt(r.implied_tpot_ms)} / {_fmt(r.implied_error(), pct=True)}"
               if r.implied_tpot_ms is not None and not r.refused else "–")
        out.append(f"| {r.id} | {p['hardware'].upper()}, {p['servers']} | {p['model']} {p['quant']} | {layout} | "
                   f"{cl} | " + " | ".join(cells) + f" | {imp} |")
    return out


def _pct(m) -> str:
    return "–" if m is None else f"{m:.0%}"


def markdown(plan_of) -> str:
    """Per engine, the fit-set and check-set tables of docs/performance-model.md (between the accuracy markers), with
    the engine's own deratings, and the MAPEs before (CloudMatrix fit) and after (the engine's own fit)."""
    out: list[str] = []
    for engine, name in ENGINES:
        fit_rows, check_rows = report(plan_of, "fit", engine=engine)[0], report(plan_of, "check", engine=engine)[0]
        scored = [r for r in check_rows if not r.refused]
        out += [f"**{name}, fit set** ({name}'s deratings are fitted on these):", ""]
        out += _table(fit_rows)
        out += ["", f"**{name}, check set** (never fitted on; {len(scored)} scored"
                + (": too few points for a firm figure, read each row" if len(scored) < 8 else "") + "):", ""]
        out += _table(check_rows)
        out += ["", f"**{name}, check set by source** (a CI threshold is a bound set for a run, not its measurement):",
                ""]
        out += by_source(plan_of, engine)
        out += ["", f"**{name}: which fit points pin which term** (each term +25 % alone):", ""]
        out += pins(plan_of, engine)
        out += ["", f"| set | metric | MAPE, CloudMatrix deratings (before) | MAPE, {name} deratings (after) | points "
                "| target |", "|---|---|---|---|---|---|"]
        for which in ("fit", "check"):
            before, after = report(plan_of, which, True, engine)[1], report(plan_of, which, engine=engine)[1]
            for (key, metric), target in zip(METRICS, ("≤ 20 %", "≤ 35 %", "≤ 20 %")):
                out.append(f"| {which} | {metric} | {_pct(before[key][0])} | {_pct(after[key][0])} | {after[key][1]} "
                           f"| {target if which == 'check' else '–'} |")
            out.append(f"| {which} | TPOT implied by the measured throughput (diagnostic) | "
                       f"{_pct(before['implied_tpot'][0])} | {_pct(after['implied_tpot'][0])} | "
                       f"{after['implied_tpot'][1]} | – |")
        out.append("")
    refused = [r for e, _ in ENGINES for w in ("fit", "check") for r in report(plan_of, w, engine=e)[0] if r.refused]
    unexpressed = points().get("unexpressed", [])
    if refused or unexpressed:
        out.append("Not scored:")
        out.append("")
        out += [f"* {r.id}: deployctl refuses it as expressed: {r.refused}" for r in refused]
        out += [f"* {u['id']} ({u['source']}): {u['why']}" for u in unexpressed]
    return "\n".join(out).rstrip()


def is_gate(p: dict) -> bool:
    """A CI threshold (vLLM-Ascend's tests/e2e/ baselines, SGLang's test/registered/ascend/performance/ gates): a bound
    an engineer set for a run to meet, not a measured run."""
    return ":tests/e2e/" in p["source"] or "test/registered/ascend/performance/" in p["source"]


def by_source(plan_of, engine: str) -> list[str]:
    """The check set's MAPE split by what was published: CI thresholds against measured runs (benchmark outputs in
    docs, tutorials and commit messages)."""
    rows = {r.id: r for r in report(plan_of, "check", engine=engine)[0] if not r.refused}
    kinds = {pid: is_gate(p) for p in in_set("check", engine) if (pid := p["id"]) in rows}
    out = ["| check points | metric | MAPE | points |", "|---|---|---|---|"]
    for gate, name in ((True, "CI thresholds (gates)"), (False, "measured runs")):
        for key, metric in METRICS:
            errs = [abs(e) for pid, r in rows.items() if kinds[pid] == gate and (e := r.error(key)) is not None]
            out.append(f"| {name} | {metric} | {_pct(sum(errs) / len(errs) if errs else None)} | {len(errs)} |")
    return out


TERMS = ("k_hbm", "k_compute", "k_prefill", "k_fixed", "host_ms", "host_draft_ms")


def pins(plan_of, engine: str) -> list[str]:
    """Which fit points pin which term of the engine's deratings: each term raised by 25 % alone, the fit points
    whose first published metric (TPOT, else throughput, else TTFT) moves most, and how many move by more than 5 %.
    A term no point moves is not determined by the fit set (its value is the search's bound or start)."""
    from dataclasses import replace

    base = engine_consts(engine=engine)
    pts = {p["id"]: p for p in in_set("fit", engine)}
    rows = {r.id: r for r in report(plan_of, "fit", engine=engine)[0] if not r.refused}
    plans = {pid: plan_of(inventory_of(pts[pid])) for pid in rows}
    out = [f"| term | value | fit points it moves most (change of the estimate at +25 %) | points moved > 5 % |",
           "|---|---|---|---|"]
    for term in TERMS:
        v = getattr(base, term)
        if not v:
            out.append(f"| `{term}` | 0 | – (not used) | 0 of {len(rows)} |")
            continue
        moved = []
        for pid, r in rows.items():
            key = next(k for k in ("tpot_ms", "throughput", "ttft_ms") if k in r.measured)
            other = estimate(pts[pid], lambda _inv, pid=pid: plans[pid], replace(base, **{term: v * 1.25}))
            d = (other.estimated[key] - r.estimated[key]) / r.estimated[key]
            moved.append((abs(d), pid, d, "TPOT" if key == "tpot_ms" else "tok/s" if key == "throughput" else "TTFT"))
        moved.sort(reverse=True)
        top = ", ".join(f"{pid} ({name} {d:+.0%})" for a, pid, d, name in moved[:3] if a >= 0.005) or "none"
        out.append(f"| `{term}` | {v:g} | {top} | {sum(a > 0.05 for a, *_ in moved)} of {len(rows)} |")
    return out


def kind_of(point_id: str) -> str:
    """'pd-split' or 'mixed': the layout kind of a point, as the plan's estimate names it."""
    p = next(p for p in points()["points"] if p["id"] == point_id)
    return "pd-split" if p["layout"].get("preset") == "pd-split" else "mixed"


def _summary(rows: list[Row]) -> dict:
    per: dict = {}
    for kind in ("mixed", "pd-split", "all"):
        chosen = [r for r in rows if kind == "all" or kind_of(r.id) == kind]
        entry: dict = {"points": len(chosen)}
        for key, short in (("tpot_ms", "tpot"), ("ttft_ms", "ttft"), ("throughput", "throughput")):
            errs = [abs(e) for r in chosen if (e := r.error(key)) is not None]
            entry[short] = {"mape": round(sum(errs) / len(errs), 3), "points": len(errs)} if errs else None
        per[kind] = entry
    return per


def error_summary(plan_of) -> dict:
    """The check set's mean absolute errors per engine (its own deratings) and, for the CloudMatrix fit (MindIE's and
    any engine's without its own), over every engine's check points, per layout kind: what
    deployctl/core/sizing/accuracy.yaml ships for `plan` to print (a test compares the two)."""
    engines = {e: _summary([r for r in report(plan_of, "check", engine=e)[0] if not r.refused]) for e, _ in ENGINES}
    cloudmatrix = _summary([r for r in report(plan_of, "check", True, None)[0] if not r.refused])
    return {"engines": engines, "cloudmatrix": cloudmatrix}
