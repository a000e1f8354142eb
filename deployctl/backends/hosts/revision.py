"""Revisions: the files one node runs with, identified by a digest of their content and modes.

On each host (``engine.deploy_dir``)::

    /var/lib/deployctl/<cluster>/revisions/<rev>/   config.json env start.sh ranktable.json .deployctl.json
    /var/lib/deployctl/<cluster>/current  -> revisions/<rev>    (what the running container uses)
    /var/lib/deployctl/<cluster>/previous -> revisions/<rev>    (what `up` restores on failure)
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from deployctl.core.models.artifact import Artifact
from deployctl.core.models.plan import Plan

MANIFEST = ".deployctl.json"


@dataclass(frozen=True)
class NodeBundle:
    """The files of one node and the revision id they make."""

    node: str
    files: dict[str, Artifact] = field(default_factory=dict)    # name inside the node folder -> artifact

    @property
    def digests(self) -> dict[str, str]:
        return {name: hashlib.sha256(a.content).hexdigest() for name, a in sorted(self.files.items())}

    @property
    def rev(self) -> str:
        h = hashlib.sha256()
        for name, a in sorted(self.files.items()):
            h.update(f"{name}\0{a.mode:o}\0".encode())
            h.update(hashlib.sha256(a.content).digest())
        return h.hexdigest()[:16]

    def env_check(self) -> tuple[str, list[str]]:
        """Digest and keys of the env file as docker reads it: verify compares the container's env."""
        from deployctl.backends.hosts.remote import env_digest, env_pairs

        env = self.files.get("env")
        pairs = env_pairs(env.content.decode()) if env else {}
        return env_digest(pairs), sorted(pairs)

    def manifest(self, cluster: str, run_id: str) -> bytes:
        digest, keys = self.env_check()
        doc = {"generator": "deployctl", "cluster": cluster, "node": self.node, "revision": self.rev,
               "run": run_id, "files": self.digests, "env_digest": digest, "env_keys": keys}
        return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


def node_bundles(plan: Plan, artifacts: list[Artifact]) -> dict[str, NodeBundle]:
    """Group the rendered tree by node folder (plan.json is local only), master first."""
    bundles = {n.name: NodeBundle(n.name) for n in plan.nodes}
    for art in artifacts:
        folder, _, name = art.path.partition("/")
        if name == MANIFEST:
            continue          # the manifest names the run; the revision is the files it describes
        if name and folder in bundles:
            bundles[folder].files[name] = art
    return bundles


def cluster_dir(plan: Plan) -> str:
    inv = plan.inventory
    return f"{inv.engine.deploy_dir.rstrip('/')}/{inv.cluster.name}"


def with_manifests(plan: Plan, artifacts: list[Artifact], run_id: str) -> list[Artifact]:
    """Each node folder gets .deployctl.json: revision id, run id, file digests and the env digest."""
    out = list(artifacts)
    for node, bundle in node_bundles(plan, artifacts).items():
        out.append(Artifact(kind="manifest", path=f"{node}/{MANIFEST}",
                            content=bundle.manifest(plan.inventory.cluster.name, run_id), mode=0o640))
    return out
