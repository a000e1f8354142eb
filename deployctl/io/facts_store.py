"""Preflight run records, and which facts file `up`/`diff` use when none is passed.

Each `deployctl preflight` writes ``<run-root>/runs/<id>-preflight/``: ``facts.json`` (the FactsFile),
``run.json`` (what this module reads: cluster, node names and addresses, ok, when) and ``status``/``rc``
as every run record does. ``resolve_facts`` picks the facts of the latest successful run of the same
cluster and refuses them when they are stale or were collected from other hosts.
"""

from __future__ import annotations

from functools import cache
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

KIND = "preflight"
RUN_FILE = "run.json"
FACTS_FILE = "facts.json"
MAX_FACTS_BYTES = 256 << 20     # a facts file's cap: 1,024 servers at 256 KB each


# --------------------------------------------------------------------------- writing (preflight)

def run_summary(inv, inventory: Path, result, run_id: str, seconds: float) -> dict:
    """What run.json holds: enough to tell, without parsing the facts, whose facts these are and if usable."""
    fails = sum(1 for f in result.findings if f.severity == "FAIL")
    return {"kind": KIND, "id": run_id, "inventory": str(Path(inventory).resolve()), "cluster": inv.cluster.name,
            "nodes": {n.name: n.address for n in inv.nodes}, "ok": not fails, "fail": fails,
            "warn": sum(1 for f in result.findings if f.severity == "WARN"),
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "seconds": round(seconds, 2),
            "facts": FACTS_FILE, "needs_facts": list(getattr(result, "gaps", []))}


# --------------------------------------------------------------------------- reading (up, diff)

@dataclass
class PreflightRun:
    id: str
    path: Path
    cluster: str | None
    nodes: dict[str, str]
    ok: bool
    when: datetime | None

    @property
    def facts(self) -> Path:
        return self.path / FACTS_FILE


def _time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _stamp(run_id: str) -> datetime | None:
    """The time in a run id: 20250101T120000.123456Z-preflight (or the older ...T120000Z-preflight)."""
    stamp = run_id.rsplit("-", 1)[0]
    for fmt in ("%Y%m%dT%H%M%S.%fZ", "%Y%m%dT%H%M%SZ"):
        try:
            return datetime.strptime(stamp, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    return None


RUN_HINT = ("a preflight run record is written by `deployctl preflight`: move this one out of RUN_DIR/runs, run "
            "`deployctl preflight -i INV` again, or pass --facts FILE")


def read_run(path: Path) -> PreflightRun | None:
    """A preflight run record, or None when it is incomplete (a crashed or running run: no facts.json). Its
    run.json (else, in a record of an older deployctl, its facts.json) is read at the run directory's boundary
    (deployctl/io/localfile.py): one that is not deployctl's is a UsageError naming the file and the key."""
    from deployctl.core.models.host_facts import FactsFile
    from deployctl.io.localfile import exists_regular, load_model
    from deployctl.core.models.rundata import MAX_RUN_JSON_BYTES, PreflightRunDoc

    if not exists_regular(path / FACTS_FILE, what="facts file", hint=RUN_HINT):
        return None
    try:
        doc = load_model(path / RUN_FILE, PreflightRunDoc, MAX_RUN_JSON_BYTES, what="preflight run record",
                         hint=RUN_HINT)
        return PreflightRun(path.name, path, doc.cluster, dict(doc.nodes), doc.ok,
                            _time(doc.finished_at) or _stamp(path.name))
    except FileNotFoundError:
        pass                      # a record of an older deployctl: facts.json only
    try:
        facts = load_model(path / FACTS_FILE, FactsFile, MAX_FACTS_BYTES, what="facts file", hint=RUN_HINT)
    except FileNotFoundError:
        return None
    return PreflightRun(path.name, path, facts.cluster, {name: h.address for name, h in facts.hosts.items()},
                        not any(f.severity == "FAIL" for f in facts.findings),
                        _time(facts.collected_at) or _stamp(path.name))


def preflight_runs(run_root: Path) -> list[PreflightRun]:
    """Every readable preflight run under run_root/runs/, newest first."""
    runs_dir = Path(run_root).expanduser().resolve() / "runs"
    try:
        dirs = [p for p in runs_dir.iterdir() if p.name.endswith(f"-{KIND}") and p.is_dir()]
    except OSError:
        return []
    runs = [r for r in map(read_run, dirs) if r is not None]
    oldest = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(runs, key=lambda r: (r.when or oldest, r.id), reverse=True)


def age_text(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{int(seconds)} s"
    if seconds < 2 * 3600:
        return f"{round(seconds / 60)} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _host_differences(inventory_nodes: dict[str, str], run_nodes: dict[str, str]) -> list[str]:
    out = []
    for name, address in inventory_nodes.items():
        if name not in run_nodes:
            out.append(f"{name} ({address}) was not probed")
        elif run_nodes[name] != address:
            out.append(f"{name} was probed at {run_nodes[name]}, the inventory says {address}")
    out += [f"{name} ({address}) is no longer in the inventory" for name, address in run_nodes.items()
            if name not in inventory_nodes]
    return out


def inventory_identity(raw) -> tuple[str, dict[str, str], float] | None:
    """(cluster name, {node: address}, deploy.facts_max_age_hours) of a loaded inventory; None when its structure is broken (then
    load_and_validate reports every problem with file and line)."""
    from pydantic import ValidationError

    try:
        ident = _identity_model().model_validate(raw.data)
    except ValidationError:
        return None
    return ident.cluster.name, {n.name: n.address for n in ident.nodes}, ident.deploy.facts_max_age_hours


def _well_formed(raw) -> bool:
    """Whether the whole inventory has its structure (checked only before refusing a run: inventory_identity reads
    three fields, and a broken file gets validation's report rather than this one)."""
    from pydantic import ValidationError

    from deployctl.core.models.inventory import Inventory

    try:
        Inventory.model_validate(raw.data)
    except ValidationError:
        return False
    return True


@cache
def _identity_model() -> type:
    """The three things resolve_facts needs from an inventory, read with the inventory's own field types (not the
    whole model: validating 8,192 servers twice costs half a second)."""
    from pydantic import ConfigDict, create_model

    from deployctl.core.models.inventory import Cluster, Deploy, Node

    def part(name: str, model: type, *fields: str) -> type:
        return create_model(name, __config__=ConfigDict(extra="ignore"),
                            **{f: (model.model_fields[f].annotation, model.model_fields[f]) for f in fields})

    cluster, node, deploy = (part("ClusterName", Cluster, "name"), part("NodeAddress", Node, "name", "address"),
                             part("DeployAge", Deploy, "facts_max_age_hours"))
    return create_model("Identity", __config__=ConfigDict(extra="ignore"), cluster=(cluster, ...),
                        nodes=(list[node], ...), deploy=(deploy, deploy()))   # type: ignore[valid-type]


def resolve_facts(inventory: Path, run_root: Path, explicit: Path | None, *,
                  max_age_hours: float | None = None, raw=None) -> tuple[Path | None, str | None]:
    """Which facts file `up`/`diff` use, and a one-line note to print (None when nothing is used).

    explicit given -> (explicit, None) (no further checks here; load_and_validate validates it).
    Else the facts.json of the latest *successful* (no FAIL) preflight run under run_root/runs/ for the
    same inventory (same cluster name; its node set, names + addresses, must be the inventory's) ->
    (path, "using device IPs and SDIDs from preflight run <id> (<age> ago): <path>"). None found -> (None, None).
    The latest one is older than max_age_hours (default: the inventory's deploy.facts_max_age_hours), or its hosts differ from the inventory -> UsageError naming
    the run, its age / the differing hosts, with a hint.

    Raises:
        UsageError: stale or foreign facts (exit 2).
        InventoryError: the inventory cannot be read or parsed as YAML.
    """
    from deployctl.core.errors import UsageError

    if explicit is not None:
        return explicit, None
    if raw is None:         # the inventory as already read (the operation's context), else read here
        from deployctl.io.inventory_file import load_inventory

        raw = load_inventory(inventory)
    identity = inventory_identity(raw)
    if identity is None:
        return None, None
    cluster, nodes, limit = identity
    max_age_hours = limit if max_age_hours is None else max_age_hours
    run = next((r for r in preflight_runs(run_root) if r.cluster == cluster and r.ok), None)
    if run is None:
        return None, None
    age_s = (datetime.now(timezone.utc) - run.when).total_seconds() if run.when else None
    age = age_text(age_s) if age_s is not None else "unknown age"
    problems = []
    if age_s is None or age_s > max_age_hours * 3600:
        problems.append(f"it is {age} old (the limit is {max_age_hours:g} h): device IPs and SDIDs may have "
                        "changed since")
    differ = _host_differences(nodes, run.nodes)
    if differ:
        problems.append("it probed other hosts than the inventory lists: " + "; ".join(differ))
    if problems and not _well_formed(raw):
        return None, None           # a broken inventory: validation's report (file, line, key) says what to fix
    if problems:
        raise UsageError(f"the latest successful preflight run of cluster '{cluster}', {run.id} ({age} ago), "
                         "cannot be used: " + "; ".join(problems) + f" ({run.facts})",
                         hint=f"run `deployctl preflight -i {inventory}` again, or pass --facts FILE")
    return run.facts, f"using device IPs and SDIDs from preflight run {run.id} ({age} ago): {run.facts}"
