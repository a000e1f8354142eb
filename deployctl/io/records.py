"""Run records: every effectful command writes runs/<id>/ (plan, rendered tree, changes, ansible
events, per-host logs, status, rc), ansible-runner style.

A record is its operator's alone: the record directory is 0700 and every file deployctl writes in it
0600 (secret env values are masked in it anyway: deployctl.core.input.secrets)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path


@dataclass
class RunRecord:
    path: Path
    run_id: str

    @classmethod
    def create(cls, root: Path, kind: str) -> "RunRecord":
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        run_id = f"{stamp}-{kind}"
        path = Path(root).resolve() / "runs" / run_id   # absolute: ansible runs from another directory
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=False)
        os.chmod(path, 0o700)                           # whatever the umask
        rec = cls(path, run_id)
        rec.status("starting")
        return rec

    def write(self, name: str, content: str | bytes) -> Path:
        p = self.path / name
        p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(content.encode() if isinstance(content, str) else content)
        tmp.replace(p)
        return p

    def append_jsonl(self, name: str, docs: list) -> None:
        """Append one JSON line per document to ``name`` (0600), e.g. a run's events.jsonl."""
        fd = os.open(self.path / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.writelines(json.dumps(d, default=str) + "\n" for d in docs)

    def write_json(self, name: str, doc) -> Path:
        return self.write(name, json.dumps(doc, indent=2, default=str) + "\n")

    def status(self, value: str) -> None:
        """starting -> running -> successful | failed | canceled (ansible-runner's lifecycle)."""
        self.write("status", value + "\n")

    def finish(self, status: str, rc: int) -> None:
        self.status(status)
        self.write("rc", f"{rc}\n")

    def host_log(self, node: str, name: str, text: str) -> Path:
        return self.write(f"hosts/{node}/{name}", text)
