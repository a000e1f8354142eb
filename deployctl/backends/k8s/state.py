"""What the k8s backend (backend.py) works with: its options, the state it reads, what it wants and what
changes, and the manifests as documents. Plain data and pure helpers: no API call, no helm."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from deployctl.backends.common.pipeline import Verification
from deployctl.backends.k8s.diff import InstanceAction, ObjectChange
from deployctl.backends.k8s.lease import RENEW_S
from deployctl.backends.k8s.render import Release

OPERATIONS = ("up", "rollback", "down")


@dataclass
class K8sOptions:
    dry_run: bool = False
    yes: bool = False
    skip_preflight: bool = False
    ready_timeout: float = 1800
    poll: float = 2.0
    unschedulable_grace: float = 120
    run_root: Path = Path(".deployctl")
    inventory_dir: Path = Path(".")
    break_lock: bool = False
    verify_settle: float = 30.0      # verify re-reads this long while controllers catch up (0: read once)
    gone_timeout: float = 300.0      # down: how long terminating pods may take to go
    lease_renew: float = RENEW_S
    strategy: str = "rolling"        # several instances of a role: restart them one at a time (recreate: all)


# ------------------------------------------------------------------------------------------ pure helpers

def release_docs(release: Release) -> list[dict]:
    """The rendered objects helm installs with the release (test hooks aside)."""
    return manifest_docs(release.manifests or "")


def manifest_docs(text: str) -> list[dict]:
    """Objects of a multi-document manifest (`helm template`, `helm get manifest`), hooks left out."""
    import yaml

    docs = [d for d in yaml.safe_load_all(text) if d]
    return [d for d in docs if "helm.sh/hook" not in (d.get("metadata", {}).get("annotations") or {})]


@dataclass
class K8sState:
    """What runs now: the release's live objects and helm's view of it."""

    objects: list[dict]
    status: dict | None                  # `helm status -o json` (None: not installed)
    history: list[dict]                  # `helm history -o json`, oldest first

    @property
    def live_revision(self) -> int | None:
        return (self.status or {}).get("version")

    @property
    def helm_status(self) -> str | None:
        return ((self.status or {}).get("info") or {}).get("status")

    @property
    def deployed_revision(self) -> int | None:
        """The newest revision that was deployed (what an undo goes back to), None when there is none."""
        good = [int(r["revision"]) for r in self.history if r.get("status") in ("deployed", "superseded")]
        return max(good) if good else None


@dataclass
class K8sDesired:
    docs: list[dict]
    values_file: Path | None = None       # up: the rendered values, in the run record
    revision: int | None = None           # rollback: the revision it goes back to


@dataclass(frozen=True)
class K8sChanges:
    """What the run changes. Compared with == under the lock (another operator in between: refused)."""

    operation: str
    release: str
    objects: tuple[ObjectChange, ...] = ()
    instances: tuple[InstanceAction, ...] = ()
    live_revision: int | None = None
    target_revision: int | None = None    # rollback

    @property
    def nothing_to_do(self) -> bool:
        if self.operation == "down":
            return self.live_revision is None
        return all(c.change == "unchanged" for c in self.objects)

    def to_dict(self) -> dict:
        return {"operation": self.operation, "release": self.release, "live_revision": self.live_revision,
                "target_revision": self.target_revision, "objects": [asdict(c) for c in self.objects],
                "instances": [asdict(a) for a in self.instances]}


def _settling(result: Verification) -> bool:
    """Some mismatch may be a controller catching up (a pod still being replaced, a Deployment's old pods,
    helm still pending): worth reading again. A pod that is not ready was already waited for (follow)."""
    return any(u.observed in ("missing", "terminating") or "old template" in u.cause or "missing" in u.cause
               or "pending" in u.cause for u in result.failures)
