"""How far off the estimate can be, said beside it: the measured error of the performance model on published points
it was not fitted on (deployctl/core/sizing/accuracy.yaml, the check set of the accuracy tables), for the deratings
the estimate runs with and the deployment's layout kind, and whether a calibration from the user's own bench
runs replaces them."""

from __future__ import annotations

from functools import cache
from typing import Any

from deployctl.core.packaged import packaged_yaml

METRICS = (("throughput", "throughput"), ("tpot", "TPOT"), ("ttft", "TTFT"))


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
            "calibrated": calibration_source}


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
    out.append(f"calibration: {record['calibrated']}" if record["calibrated"] else
               "calibration: none from this cluster (`deployctl bench`, then `deployctl calibrate`, fits the model "
               "to your own runs)")
    return out
