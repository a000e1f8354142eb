"""Deployment history on the hosts: one entry per up/rollback/down, kept on every host of the deployment.

``<deploy_dir>/<cluster>/history/<run id>.json``: revision number, run id, time, user, deployctl version,
inventory digest, plan summary, operation, result, and per node the revision and its file digests.
Every host keeps the whole entry, so any reachable host tells the story. Pure functions here decide
what is live, what changed between entries, which entry a rollback goes to and what to prune; the
hosts backend reads and writes the files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from deployctl.deploy.historyrow import HistoryRow
from deployctl.errors import UsageError
from deployctl.models.deploy import DeployedState

SAFE = re.compile(r"^[A-Za-z0-9._-]+$")
# $1 cluster dir, $2 run id, $3 entry JSON: written whole, then renamed into place
WRITE = ('set -e; d="$1/history"; mkdir -p "$d"; t="$d/.$2.tmp"; printf "%s\\n" "$3" > "$t"; '
         'mv -f "$t" "$d/$2.json"')
# $1 cluster dir, then paths relative to it (checked against SAFE parts before)
REMOVE = 'd="$1"; shift; for x in "$@"; do rm -rf -- "$d/$x"; done'
DEPLOYS = ("up", "rollback")


def merged(states: dict[str, DeployedState]) -> list[dict]:
    """Every host's copy, one entry per run id (a host that missed an entry does not hide it)."""
    by_run: dict[str, dict] = {}
    for s in states.values():
        for e in s.history:
            if isinstance(e.get("run_id"), str) and isinstance(e.get("revision"), int):
                by_run.setdefault(e["run_id"], e)
    return sorted(by_run.values(), key=lambda e: (e["revision"], e["time"]))


def next_revision(entries: list[dict]) -> int:
    return max((e["revision"] for e in entries), default=0) + 1


def live_entry(entries: list[dict], states: dict[str, DeployedState]) -> dict | None:
    """The last successful up/rollback, if nothing took it down since and the hosts' current links agree."""
    for e in reversed(entries):
        if e.get("result") != "successful":
            continue
        if e.get("operation") == "down":
            return None
        if e.get("operation") in DEPLOYS:
            nodes = e.get("nodes", {})
            if all(states[n].current_rev == r for n, r in nodes.items() if n in states and not states[n].error):
                return e
            return None
    return None


def _changed(prev: dict | None, e: dict) -> str:
    if e.get("operation") == "down":
        return "containers stopped"
    if prev is None:
        return "first deployment"
    files: dict[str, list[str]] = {}
    a, b = prev.get("files", {}), e.get("files", {})
    for node in sorted(set(a) | set(b)):
        fa, fb = a.get(node, {}), b.get(node, {})
        for name in sorted(set(fa) | set(fb)):
            if fa.get(name) != fb.get(name):
                files.setdefault(name, []).append(node)
    if not files:
        return "no file changed"
    return "; ".join(f"{name} on {', '.join(nodes)}" for name, nodes in files.items())


def rows(entries: list[dict], states: dict[str, DeployedState]) -> list[HistoryRow]:
    live = live_entry(entries, states)
    out, prev = [], None
    for e in entries:
        nodes = e.get("nodes", {})
        available = bool(nodes) and all(r in states[n].revisions for n, r in nodes.items()
                                        if n in states and not states[n].error)
        result = e.get("result", "?")
        if e.get("operation") == "rollback" and e.get("to"):
            result += f" (to {e['to']})"
        out.append(HistoryRow(revision=e["revision"], run_id=e["run_id"], time=e.get("time", ""),
                              user=e.get("user", ""), operation=e.get("operation", "?"), result=result,
                              live=live is e, summary=e.get("summary", ""), changed=_changed(prev, e),
                              available=available))
        if e.get("operation") in DEPLOYS and e.get("result") == "successful":
            prev = e
    return out


def rollback_target(entries: list[dict], states: dict[str, DeployedState], to: int | None) -> dict:
    """The entry `rollback` re-activates: --to N, or the last successful deployment before the live one."""
    known = ", ".join(str(e["revision"]) for e in entries if e.get("operation") in DEPLOYS) or "none"
    if to is not None:
        match = [e for e in entries if e["revision"] == to]
        if not match:
            raise UsageError(f"there is no revision {to} in this deployment's history (revisions: {known})",
                             hint="`deployctl history -i INV` lists them")
        e = match[0]
        if e.get("operation") not in DEPLOYS or e.get("result") != "successful":
            raise UsageError(f"revision {to} is a {e.get('result')} {e.get('operation')}: only a successful "
                             "deployment can be rolled back to", hint="pick a successful revision from "
                             "`deployctl history -i INV`")
    else:
        live = live_entry(entries, states)
        current = {n: s.current_rev for n, s in states.items()}
        older = [e for e in entries if e.get("operation") in DEPLOYS and e.get("result") == "successful"
                 and e.get("nodes") != current and (live is None or e["revision"] < live["revision"])]
        if not older:
            raise UsageError("no earlier successful deployment to roll back to (revisions: " + known + ")",
                             hint="`deployctl history -i INV` shows what the hosts keep")
        e = older[-1]
    missing = [f"{n} ({r})" for n, r in e.get("nodes", {}).items()
               if n in states and not states[n].error and r not in states[n].revisions]
    if missing:
        raise UsageError(f"revision {e['revision']} is no longer on every host: missing on {', '.join(missing)}",
                         hint="hosts keep the last deploy.keep_revisions revisions; redeploy it with `up` "
                              "from its inventory instead")
    if set(e.get("nodes", {})) != set(states):
        raise UsageError(f"revision {e['revision']} ran on {', '.join(sorted(e.get('nodes', {})))}, the inventory "
                         f"names {', '.join(sorted(states))}",
                         hint="roll back with the inventory of that revision")
    return e


@dataclass(frozen=True)
class Prune:
    history: list[str]                  # run ids whose entries go
    revisions: dict[str, list[str]]     # node -> revision directories that go


def prune_plan(entries: list[dict], states: dict[str, DeployedState], keep: int) -> Prune:
    """Keep the last ``keep`` deployments (and every revision `current`/`previous` name); drop the rest."""
    deploys = [e for e in entries if e.get("operation") in DEPLOYS]
    kept = deploys[-keep:] if keep > 0 else []
    oldest = kept[0]["revision"] if kept else None
    drop_hist = [e["run_id"] for e in entries if oldest is not None and e["revision"] < oldest]
    revs: dict[str, list[str]] = {}
    for node, s in states.items():
        if s.error:
            continue
        wanted = {e.get("nodes", {}).get(node) for e in kept} | {s.current_rev, s.previous_rev}
        gone = sorted(r for r in s.revisions if r not in wanted and SAFE.match(r))
        if gone:
            revs[node] = gone
    return Prune([r for r in drop_hist if SAFE.match(r)], revs)
