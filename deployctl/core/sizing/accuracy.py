"""How far off the estimate can be, said beside it: the measured error of the performance model on published points
it was not fitted on (deployctl/core/sizing/accuracy.yaml, the check set of the accuracy tables), for the deratings
the estimate runs with and the deployment's layout kind, and whether a calibration from the user's own bench
runs replaces them."""

from __future__ import annotations

from functools import cache
from typing import Any

from deployctl.core.packaged import packaged_yaml

METRICS = (("throughput", "throughput"), ("tpot", "TPOT"), ("ttft", "TTFT"))
# the estimate's value each metric's error applies to, and the key of a stored calibration's rows
BAND_KEYS = (("throughput", "output_tokens_per_s", "tokens_per_s"), ("tpot", "tpot_ms", "tpot_ms"),
             ("ttft", "ttft_ms", "ttft_ms"))


def user_mape(rows: list) -> dict[str, float]:
    """The mean absolute error, per metric, of a stored calibration (deployctl calibrate) on the user's own bench
    points it was fitted on: `user_mape_<metric>` keys for the estimate's calibration record."""
    out = {}
    for metric, _, key in BAND_KEYS:
        errs = [abs(r[key]["error"]) for r in rows if isinstance(r, dict) and isinstance(r.get(key), dict)
                and r[key].get("error") is not None and r[key].get("fitted", True)]
        if errs:
            out[f"user_mape_{metric}"] = round(sum(errs) / len(errs), 4)
    return out


def band(record: dict[str, Any], values: dict[str, float], calibration: dict) -> dict[str, Any]:
    """The error band of each headline value: value x (1 ± MAPE), the MAPE of the user's own calibration when one
    is in use (its fit error on their bench runs), else the check set's for this engine and layout kind. A
    typical error, not a bound: half the points missed by less, some by more."""
    out: dict[str, Any] = {}
    for metric, value_key, _ in BAND_KEYS:
        mine = calibration.get(f"user_mape_{metric}")
        checked = record.get(metric)
        mape, source = ((mine, "your bench runs (deployctl calibrate)") if mine is not None else
                        (checked["mape"], f"{checked['points']} published check point(s)") if checked else
                        (None, "no published point it was not fitted on measures it"))
        v = values[value_key]
        out[value_key] = ({"low": round(max(0.0, v * (1 - mape)), 3), "high": round(v * (1 + mape), 3),
                           "mape": mape, "from": source} if mape is not None else {"mape": None, "from": source})
    return out


@cache
def _figures() -> dict[str, Any]:
    return dict(packaged_yaml(__package__, "accuracy.yaml"))


def accuracy(engine: str | None, pd_split: bool, calibration_source: str | None) -> dict[str, Any]:
    """The estimate's `accuracy` record: which deratings and kind, the check set's MAPE per metric (None where
    no such point publishes the metric), and the user's calibration when one applies. `engine` is the kind of an
    engine that runs with its own deratings (its check set's figures), None for the CloudMatrix fit."""
    figures = _figures()
    own = engine is not None and engine in figures["engines"]
    deratings = "engine" if own else "cloudmatrix"
    kind = "pd-split" if pd_split else "mixed"
    entry = figures["engines"][engine][kind] if own else figures["cloudmatrix"][kind]
    return {"deratings": deratings, "engine": engine if own else None, "kind": kind, "points": entry["points"],
            **{key: entry[key] for key, _ in METRICS}, "measured_on": figures["measured_on"],
            "calibrated": calibration_source,
            "replaced_by": "your own calibration once `deployctl bench` then `deployctl calibrate` ran on this "
                           "cluster: the band then comes from its fit error on your runs"}


def describe(record: dict[str, Any]) -> list[str]:
    """`plan`'s lines: how far off, on what, and the calibration."""
    which = ("these deratings (the engine's own fit)" if record["deratings"] == "engine" else
             "these deratings (the CloudMatrix384 fit)")
    misses = [f"{name} by {m['mape']:.0%} ({m['points']} point{'s' if m['points'] != 1 else ''})"
              for key, name in METRICS if (m := record[key])]
    if not record["points"]:
        out = [f"how far off: unknown: no published {record['kind']} deployment it was not fitted on scores "
               f"{which}; measured on {record['measured_on']}"]
    else:
        out = [f"how far off: on {record['points']} published {record['kind']} deployments it was not fitted on, "
               f"{which} missed " + (", ".join(misses) if misses else "nothing that was published") +
               f" on average; measured on {record['measured_on']}"]
    bands = [f"{name} {b['low']:,.1f}–{b['high']:,.1f}" for key, name in
             (("tpot_ms", "TPOT ms"), ("ttft_ms", "TTFT ms"), ("output_tokens_per_s", "tokens/s"))
             if (b := (record.get("band") or {}).get(key)) and b.get("mape") is not None]
    if bands:
        out.append("error band (estimate ± that typical miss): " + ", ".join(bands))
    out.append(f"calibration: {record['calibrated']}" if record["calibrated"] else
               "calibration: none from this cluster (`deployctl bench`, then `deployctl calibrate`, fits the model "
               "to your own runs)")
    return out
