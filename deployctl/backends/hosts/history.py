"""Deployment history on the hosts: one entry per up/rollback/down (and per restart by `watch`: restarts.py),
kept on every host of the deployment.

``<deploy_dir>/<cluster>/history/<run id>.json``: revision number, run id, time, user, deployctl version,
inventory digest, plan summary, operation, result, and per node the revision and its file digests.
Every host keeps the whole entry, so any reachable host tells the story. Pure functions here decide
what is live, what changed between entries, which entry a rollback goes to, what to prune and the next
revision number; the hosts backend reads and writes the files.

Numbering (issue 34): the next number follows the history the hosts agree on (agreed_revision: the last entry a
majority of the hosts keeping a history hold, the same copy); a copy numbered more than AHEAD past it is an
outlier, named with its host and used for nothing, so one host cannot push the next number out of the range the
parser reads (MAX_REVISION). Past that range nothing is written (next_revision refuses, write_argv checks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import ValidationError

from deployctl.backends.common.historyrow import HistoryRow
from deployctl.core.errors import ExecutionError, UsageError
from deployctl.core.models.hostdata import MAX_HISTORY, MAX_REVISION, HistoryEntry, why_invalid
from deployctl.core.models.deploy import DeployedState

SAFE = re.compile(r"^[A-Za-z0-9._-]+$")
# $1 cluster dir, $2 run id, $3 entry JSON: written whole, then renamed into place
WRITE = ('set -e; d="$1/history"; mkdir -p "$d"; t="$d/.$2.tmp"; printf "%s\\n" "$3" > "$t"; '
         'mv -f "$t" "$d/$2.json"')


def write_argv(cdir: str, entry: dict) -> list[str]:
    """The fixed script writing ``entry`` on a host (the entry a value, never spliced into the script). An entry
    deployctl's own parser would not read back (a revision number out of its range) is never written."""
    import json

    try:
        HistoryEntry.model_validate(entry)
    except ValidationError as exc:
        raise ExecutionError(f"history entry {str(entry.get('run_id'))[:80]} was not written: it would not be read "
                             f"back ({why_invalid(exc)})",
                             hint="`deployctl history -i INV` lists what the hosts hold") from None
    return ["sh", "-c", WRITE, "deployctl-history", cdir, entry["run_id"], json.dumps(entry, sort_keys=True)]


# $1 cluster dir, then paths relative to it (checked against SAFE parts before)
REMOVE = 'd="$1"; shift; for x in "$@"; do rm -rf -- "$d/$x"; done'
DEPLOYS = ("up", "rollback")
# entries that say what runs (their nodes' revisions), the rollback targets and the instances `scale` added or removed
LIVE = DEPLOYS + ("scale-up", "scale-down")
AHEAD = MAX_HISTORY    # numbers a host's entries may run ahead of the agreed history (a host reads this many)


@dataclass(frozen=True)
class Merged:
    entries: list[dict]      # one per run id, taken only where every host holding it holds the same copy
    findings: list[str]      # per host: copies that disagree, entries some readable hosts lack, numbers out of line
    top: int                 # the highest revision number a host's copy names, outliers left out
    agreed: int = 0          # the highest revision of an entry a majority of the hosts keeping a history hold
    top_at: str = ""         # where ``top`` comes from: "node1 (history/<run id>.json)"


def agreed_revision(states: dict[str, DeployedState]) -> int:
    """The highest revision number whose entry a strict majority of the readable hosts that keep a history hold,
    the same copy (0 when no entry is held so widely). Every entry is written on every host of the deployment,
    so honest hosts agree on their recent entries; one host cannot outvote the others."""
    voters = [s for s in states.values() if not s.error and s.history]
    held: dict[tuple[str, str | None], list[int]] = {}
    for s in voters:
        for e in s.history:
            held.setdefault((e.run_id, e.digest), []).append(e.revision)
    return max((revs[0] for revs in held.values() if 2 * len(revs) > len(voters)), default=0)


def merge(states: dict[str, DeployedState]) -> Merged:
    """Every host's copy, one entry per run id (a host that missed an entry does not hide it). An entry whose
    copies differ between hosts (their content digests) is used from no host: which one lies is unknown. A copy
    numbered more than AHEAD past the agreed revision is no entry either (its host is named): one host's numbers
    never decide the next one."""
    agreed = agreed_revision(states)
    copies: dict[str, dict[str, HistoryEntry]] = {}
    findings: list[str] = []
    for node, s in states.items():
        if s.error:
            continue
        for e in s.history:
            if e.revision > agreed + AHEAD:
                findings.append(f"{node}: history entry {e.run_id} is numbered {e.revision}, more than {AHEAD} "
                                f"after revision {agreed}, the last one the hosts agree on - not used (if deployctl "
                                f"did not write it, remove history/{e.run_id}.json on {node})")
                continue
            copies.setdefault(e.run_id, {})[node] = e
    entries, top, top_at = [], 0, ""
    readable = [n for n, s in states.items() if not s.error]
    for run, held in copies.items():
        for node, e in sorted(held.items()):
            if e.revision > top:
                top, top_at = e.revision, f"{node} (history/{run}.json)"
        digests = {e.digest for e in held.values()}
        if len(digests) > 1:
            for node, e in held.items():
                others = sorted(n for n, o in held.items() if o.digest != e.digest)
                findings.append(f"{node}: its copy of history entry {run} (revision {e.revision}) differs from "
                                f"the copy on {', '.join(others)} - no copy of it is used")
            continue
        e = next(iter(held.values()))
        lacking = [n for n in readable if n not in held and n in e.nodes]
        if lacking:
            findings.append(f"{', '.join(sorted(held))}: history entry {run} (revision {e.revision}) is not on "
                            f"{', '.join(lacking)}")
        entries.append(e.as_dict())
    entries.sort(key=lambda e: (e["revision"], e["time"], e["run_id"]))
    return Merged(entries, findings, top, agreed, top_at)


def merged(states: dict[str, DeployedState]) -> list[dict]:
    return merge(states).entries


def findings(states: dict[str, DeployedState]) -> list[str]:
    """Everything the hosts said that was not used: their own findings, then the history merge's."""
    return [f for s in states.values() for f in s.findings] + merge(states).findings


def next_revision(m: Merged) -> int:
    """After every number a host's copy names (outliers aside): never one twice, and never one past MAX_REVISION
    (the parser's bound): UsageError naming where the last number is, instead."""
    if m.top >= MAX_REVISION:
        raise UsageError(f"the hosts' history is numbered up to {m.top} on {m.top_at}, the last number a history "
                         "entry can have: no entry can follow it",
                         hint="if deployctl did not write that entry, remove it on that host; `deployctl history "
                              "-i INV` lists the entries")
    return m.top + 1


def live_entry(entries: list[dict], states: dict[str, DeployedState]) -> dict | None:
    """The last successful up/rollback, if nothing took it down since and the hosts' current links agree."""
    for e in reversed(entries):
        if e.get("result") != "successful":
            continue
        if e.get("operation") == "down":
            return None
        if e.get("operation") in LIVE:
            nodes = e.get("nodes", {})
            if all(states[n].current_rev == r for n, r in nodes.items() if n in states and not states[n].error):
                return e
            return None
    return None


def _changed(prev: dict | None, e: dict) -> str:
    if e.get("operation") == "down":
        return "containers stopped"
    if e.get("operation") == "restart":
        return "engine containers restarted, no file changed"
    if e.get("operation") == "scale-down":
        gone = sorted(set((prev or {}).get("nodes", {})) - set(e.get("nodes", {})))
        return f"instance removed from {', '.join(gone)}" if gone else "instance removed"
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
        if e.get("operation") in LIVE and e.get("result") == "successful":
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
    untrusted = [f"{n} ({why})" for n, why in ((n, _not_intact(e, states[n], n)) for n in e.get("nodes", {})
                                               if n in states and not states[n].error) if why]
    if untrusted:
        raise UsageError(f"revision {e['revision']} is not held intact by the hosts it would run on: "
                         f"{'; '.join(untrusted)}", hint="a host's files or history differ from the entry: "
                         "`deployctl history -i INV` lists what the hosts disagree on; redeploy with `up`")
    if set(e.get("nodes", {})) != set(states):
        raise UsageError(f"revision {e['revision']} ran on {', '.join(sorted(e.get('nodes', {})))}, the inventory "
                         f"names {', '.join(sorted(states))}",
                         hint="roll back with the inventory of that revision")
    return e


def _not_intact(e: dict, s: DeployedState, node: str) -> str:
    """Why ``node`` cannot be trusted to go back to entry ``e`` by itself ("" when it can): it must hold the
    entry in its own history (the same copy) and the revision's manifest with the entry's file digests."""
    own = next((x for x in s.history if x.run_id == e["run_id"]), None)
    if own is None or own.digest != e.get("digest"):
        return "its own history does not hold this entry"
    man = s.revisions.get(e["nodes"][node])
    if man is None or man.files != e.get("files", {}).get(node, man.files):
        return "its revision's manifest does not match the entry's file digests"
    return ""


@dataclass(frozen=True)
class Prune:
    history: dict[str, list[str]]       # node -> run ids whose entries go there
    revisions: dict[str, list[str]]     # node -> revision directories that go


def prune_plan(entry: dict, states: dict[str, DeployedState], keep: int) -> Prune:
    """Per host, from that host's own entries (plus ``entry``, the one just written) and links only: keep its
    last ``keep`` deployments (and every revision `current`/`previous` name); drop the rest. What another host
    says never deletes anything here; an outlier entry (merge) is neither kept in a deployment's place nor
    deleted: its host is named, the operator decides."""
    hist: dict[str, list[str]] = {}
    revs: dict[str, list[str]] = {}
    ceiling = agreed_revision(states) + AHEAD       # an outlier (merge) is no deployment to keep
    for node, s in states.items():
        if s.error:
            continue
        own = [x.as_dict() for x in s.history if x.run_id != entry["run_id"] and x.revision <= ceiling] + [entry]
        own.sort(key=lambda x: (x["revision"], x["run_id"]))
        deploys = [x for x in own if x.get("operation") in DEPLOYS]
        kept = deploys[-keep:] if keep > 0 else []
        oldest = kept[0]["revision"] if kept else None
        drop = [x["run_id"] for x in own if oldest is not None and x["revision"] < oldest and SAFE.match(x["run_id"])]
        if drop:
            hist[node] = drop
        wanted = {x.get("nodes", {}).get(node) for x in kept} | {s.current_rev, s.previous_rev}
        gone = sorted(r for r in s.revisions if r not in wanted and SAFE.match(r))
        if gone:
            revs[node] = gone
    return Prune(hist, revs)
