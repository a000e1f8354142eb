"""Where a cluster's own calibration (`deployctl calibrate`) is kept: ``<run-dir>/calibration/<cluster>.json``,
read by the commands that estimate (plan, recommend, bench: the performance model itself reads no file) and written by
deployctl.features.bench.calibrate.

The file is read at the run directory's boundary (deployctl/io/localfile.py, the model StoredCalibration in
deployctl/core/models/rundata.py): a regular file of at most 16 MB, deratings finite and in the range the fit searches.
One that is not is refused (exit 2, the file and the key), never used as garbage nor silently replaced by the
published fit. What is written is validated by the same model first, so it is always read back."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from deployctl.core.errors import UsageError
from deployctl.io.localfile import load_model, problems_of, refused
from deployctl.core.models.rundata import MAX_CALIBRATION_BYTES, StoredCalibration
from deployctl.core.sizing.step import Consts

DEFAULT_RUN_DIR = Path(".deployctl")
WHAT = "calibration"
HINT = "`deployctl calibrate -i INV` fits it again from the bench runs; `deployctl calibrate -i INV --remove` drops it"


def rms(xs: list[float]) -> float:
    return (sum(x * x for x in xs) / len(xs)) ** 0.5 if xs else 0.0


def path_for(cluster: str, run_dir: Path = DEFAULT_RUN_DIR) -> Path:
    return Path(run_dir) / "calibration" / f"{cluster}.json"


def load(cluster: str, run_dir: Path = DEFAULT_RUN_DIR) -> dict | None:
    """The stored calibration of `cluster` (its ``file`` added), or None when none is stored (then the fitted
    defaults). A file that is not one: UsageError naming the file and the key."""
    p = path_for(cluster, run_dir)
    try:
        doc = load_model(p, StoredCalibration, MAX_CALIBRATION_BYTES, what=WHAT, hint=HINT)
    except FileNotFoundError:
        return None
    return dict(doc.model_dump(), file=str(p))


def save(cluster: str, consts: Consts, runs: list[str], rows: list[dict], run_dir: Path = DEFAULT_RUN_DIR) -> Path:
    p = path_for(cluster, run_dir)
    p.parent.mkdir(parents=True, exist_ok=True)
    errs = [r[k]["error"] for r in rows for k in ("ttft_ms", "tpot_ms", "tokens_per_s")
            if r[k]["error"] is not None and r[k]["fitted"]]
    doc = {"cluster": cluster, "consts": {"k_hbm": consts.k_hbm, "k_compute": consts.k_compute,
                                          "k_prefill": consts.k_prefill, "k_fixed": consts.k_fixed},
           "runs": len(runs), "run_ids": runs, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
           "rms_error": round(rms(errs), 4), "points": rows}
    try:
        StoredCalibration.model_validate_json(json.dumps(doc))       # what load would refuse is never written
    except (ValidationError, ValueError) as exc:
        raise UsageError(f"the calibration of {cluster} was not stored: it would not be read back",
                         problems=problems_of(exc, p) if isinstance(exc, ValidationError) else [],
                         hint="name the bench runs to fit: `deployctl calibrate -i INV RUN...`") from None
    tmp = p.with_name(p.name + ".tmp")
    try:
        try:
            tmp.unlink()              # a leftover (or something planted there): never written through
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(doc, indent=2, allow_nan=False) + "\n")
        os.replace(tmp, p)
    except OSError as exc:
        raise UsageError(f"cannot store the calibration in {p}: {exc.strerror or exc}",
                         hint="--run-dir names a directory you can write") from None
    return p


def remove(cluster: str, run_dir: Path = DEFAULT_RUN_DIR) -> bool:
    """Drop the stored file (a link is removed, not what it names); a directory there is refused."""
    p = path_for(cluster, run_dir)
    if p.is_dir() and not p.is_symlink():
        raise refused(p, WHAT, "is a directory, not a calibration file", "remove it yourself if it is not needed")
    try:
        p.unlink()
    except FileNotFoundError:
        return False
    return True
