"""``deployctl observe render``: prometheus.yml and grafana-dashboard.json for a plan, written into a directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

PROMETHEUS_FILE = "prometheus.yml"
DASHBOARD_FILE = "grafana-dashboard.json"


def render_files(plan, npu_exporter_port: int | None = None, npu_scheme: str = "http",
                 interval_s: int = 15) -> tuple[dict[str, str], list]:
    """({file name: text}, the targets)."""
    from deployctl.features.observe.dashboard import dashboard
    from deployctl.features.observe.scrape import scrape_config, scrape_yaml, targets


    engine_spec = plan.engine_spec
    found = targets(plan, npu_exporter_port, npu_scheme)
    board = dashboard(plan.inventory.cluster.name, engine_spec.display, engine_spec.metric_names)
    files = {PROMETHEUS_FILE: scrape_yaml(scrape_config(found, interval_s)),
             DASHBOARD_FILE: json.dumps(board, indent=2) + "\n"}
    return files, found


def write_files(out: Path, files: dict[str, str]) -> list[Path]:
    """Each file replaced whole (a reader sees the old one or the new one); other files in ``out`` stay."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = out / name
        tmp = out / f".{name}.tmp-{os.getpid()}"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        written.append(path)
    return written
