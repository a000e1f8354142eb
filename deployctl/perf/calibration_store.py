"""Where a cluster's own calibration (`deployctl calibrate`) is kept: ``<run-dir>/calibration/<cluster>.json``,
read by the commands that estimate (plan, recommend, bench: the performance model itself reads no file) and written by
deployctl.perf.calibrate_user."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

from deployctl.perf.core import Consts

DEFAULT_RUN_DIR = Path(".deployctl")


def rms(xs: list[float]) -> float:
    return (sum(x * x for x in xs) / len(xs)) ** 0.5 if xs else 0.0


def path_for(cluster: str, run_dir: Path = DEFAULT_RUN_DIR) -> Path:
    return Path(run_dir) / "calibration" / f"{cluster}.json"


def load(cluster: str, run_dir: Path = DEFAULT_RUN_DIR) -> dict | None:
    """The stored calibration of `cluster`, or None (none stored, or unreadable: then the fitted defaults)."""
    p = path_for(cluster, run_dir)
    try:
        doc = json.loads(p.read_text())
        Consts(**doc["consts"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    doc["file"] = str(p)
    return doc


def label(doc: dict) -> str:
    return f"calibrated from {doc['runs']} bench run{'s' if doc['runs'] != 1 else ''} on {doc['date']}"


def save(cluster: str, consts: Consts, runs: list[str], rows: list[dict], run_dir: Path = DEFAULT_RUN_DIR) -> Path:
    p = path_for(cluster, run_dir)
    p.parent.mkdir(parents=True, exist_ok=True)
    errs = [r[k]["error"] for r in rows for k in ("ttft_ms", "tpot_ms", "tokens_per_s")
            if r[k]["error"] is not None and r[k]["fitted"]]
    doc = {"cluster": cluster, "consts": {"k_hbm": consts.k_hbm, "k_compute": consts.k_compute,
                                          "k_prefill": consts.k_prefill, "k_fixed": consts.k_fixed},
           "runs": len(runs), "run_ids": runs, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
           "rms_error": round(rms(errs), 4), "points": rows}
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, p)
    return p


def remove(cluster: str, run_dir: Path = DEFAULT_RUN_DIR) -> bool:
    p = path_for(cluster, run_dir)
    if p.exists():
        p.unlink()
        return True
    return False
