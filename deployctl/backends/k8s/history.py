"""`history | rollback --target k8s`: the release's helm revisions as deployctl history rows.

helm keeps the history (`helm history`, by default the last 10 revisions of an upgrade); deployctl adds
who made each revision and how the run ended:

* `helm upgrade --description "deployctl run <run id> by user@host"`: the run and the user of an up;
* the ConfigMap ``deployctl-<release>-runs`` (not part of the release): per revision the run, user,
  operation and result of the deployctl run that made it. `helm rollback` takes no description, and a
  revision whose pods never became ready stays "superseded" in helm after deployctl rolled it back:
  these notes say it failed, so `rollback` without --to never picks it. `down` deletes them.

Example (`deployctl history --target k8s`)::

    rev       time                       user         operation  result      changed
    1         2025-01-01T10:00:00+00:00  ops@bastion  up         superseded
    2         2025-01-01T11:00:00+00:00  ops@bastion  up         failed      instances[decode].files
    3         2025-01-01T11:05:00+00:00  ops@bastion  undo       superseded  instances[decode].files
    4   live  2025-01-02T09:00:00+00:00  ops@bastion  up         deployed    image.tag
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from deployctl.backends.common.historyrow import HistoryRow
from deployctl.core.errors import UsageError
from deployctl.backends.k8s.lease import MANAGED_BY, _iso, _parse_time

DESCRIPTION = re.compile(r"^deployctl run (?P<run>\S+) by (?P<user>\S+)$")
ROLLBACK = re.compile(r"^Rollback to (?P<rev>\d+)$")
HELM_OPERATIONS = {"Install complete": "install", "Upgrade complete": "upgrade",
                   "Uninstallation complete": "uninstall", "Deletion in progress (or silently failed)": "uninstall"}
CHANGED_REVISIONS = 20          # `changed` is computed for the newest revisions only (one `helm get values` each)
GOOD = ("deployed", "superseded")


def description(run_id: str, user: str) -> str:
    """What deployctl passes to `helm upgrade --description` (user is user@host)."""
    return f"deployctl run {run_id} by {user}"


def parse_description(text: str) -> tuple[str, str] | None:
    """(run id, user@host) of a deployctl description, else None."""
    m = DESCRIPTION.match((text or "").strip())
    return (m["run"], m["user"]) if m else None


# ------------------------------------------------------------------------------------------ run notes

def notes_name(release: str) -> str:
    return f"deployctl-{release}-runs"[:253]


def read_notes(api, release: str) -> dict[int, dict]:
    """{revision: {run_id, user, operation, result}} from the notes ConfigMap ({} when there is none)."""
    cm = api.get_config_map(notes_name(release))
    out: dict[int, dict] = {}
    for key, value in ((cm or {}).get("data") or {}).items():
        try:
            out[int(key)] = json.loads(value)
        except (ValueError, TypeError):
            continue
    return out


def write_notes(api, namespace: str, release: str, notes: dict[int, dict], reset: bool = False) -> None:
    """Add (or replace) these revisions' notes; reset: drop every older note first (a fresh install)."""
    name = notes_name(release)
    for _ in range(5):
        cm = api.get_config_map(name)
        data = {} if reset or cm is None else dict(cm.get("data") or {})
        data.update({str(rev): json.dumps(note, sort_keys=True) for rev, note in notes.items()})
        meta = {"name": name, "namespace": namespace,
                "labels": {**MANAGED_BY, "deployctl.io/release": release[:63]}}
        if cm is None:
            if api.create_config_map({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}):
                return
        else:
            meta["resourceVersion"] = cm["metadata"].get("resourceVersion")
            if api.replace_config_map(name, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                                             "data": data}):
                return
    from deployctl.core.errors import ExecutionError

    raise ExecutionError(f"could not write ConfigMap {name}: it kept changing", hint="run history again")


def delete_notes(api, release: str) -> None:
    api.delete_config_map(notes_name(release))


# ------------------------------------------------------------------------------------------ rows

def values_changed(old: dict | None, new: dict | None, limit: int = 6) -> str:
    """What differs between two revisions' values, by key: `image.tag, instances[decode].files`."""
    if old is None or new is None:
        return ""
    out: list[str] = []

    def walk(a, b, path: str, depth: int) -> None:
        if a == b:
            return
        if depth < 2 and isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str):
                walk(a.get(key), b.get(key), f"{path}.{key}" if path else str(key), depth + 1)
            return
        if depth < 2 and isinstance(a, list) and isinstance(b, list) and all(
                isinstance(x, dict) and "name" in x for x in a + b):
            before, after = {x["name"]: x for x in a}, {x["name"]: x for x in b}
            for name in list(dict.fromkeys([*before, *after])):
                if name not in before or name not in after:
                    out.append(f"{path}[{name}] {'added' if name not in before else 'removed'}")
                else:
                    walk(before[name], after[name], f"{path}[{name}]", depth)
            return
        out.append(path or ".")

    walk(old, new, "", 0)
    return ", ".join(out[:limit]) + (f" (+{len(out) - limit})" if len(out) > limit else "")


def history_rows(entries: list[dict], notes: dict[int, dict] | None = None,
                 values: dict[int, dict] | None = None) -> list[HistoryRow]:
    """helm history entries (+ deployctl's notes, + the values of some revisions) -> rows, oldest first."""
    notes, values = notes or {}, values or {}
    rows = []
    previous: int | None = None
    for e in sorted(entries, key=lambda r: r["revision"]):
        rev, desc, status = int(e["revision"]), (e.get("description") or "").strip(), e.get("status", "")
        parsed = parse_description(desc)
        note = notes.get(rev) or {}
        if note and parsed and note.get("run_id") != parsed[0]:
            note = {}                   # an older release's note (reinstalled since): not this revision's
        run_id = (parsed or ("", ""))[0] or note.get("run_id", "")
        user = (parsed or ("", ""))[1] or note.get("user", "")
        if note.get("operation"):
            operation = note["operation"]
        elif ROLLBACK.match(desc):
            operation = "rollback"
        elif parsed:
            operation = "up"
        else:
            operation = HELM_OPERATIONS.get(desc, "upgrade" if previous is not None else "install")
        result = status
        if note.get("result") in ("failed", "canceled") and status in GOOD:
            result = note["result"]     # helm says superseded: deployctl rolled it back, it never served
        summary = e.get("chart", "")
        if e.get("app_version"):
            summary += f" (app {e['app_version']})"
        if desc and not parsed:
            summary += f": {desc}"
        changed = values_changed(values.get(previous), values.get(rev)) if previous is not None else ""
        time = _iso(_parse_time(e.get("updated"))) or str(e.get("updated") or "")
        rows.append(HistoryRow(revision=rev, run_id=run_id, time=time, user=user, operation=operation,
                               result=result, live=status == "deployed", summary=summary, changed=changed))
        previous = rev
    return rows


def live_revision(rows: list[HistoryRow]) -> int | None:
    """The revision that runs now: the `deployed` one, else the newest (e.g. a failed upgrade)."""
    live = [r.revision for r in rows if r.live]
    return live[-1] if live else (rows[-1].revision if rows else None)


def choose_target(rows: list[HistoryRow], to: int | None, release: str) -> int:
    """The revision `rollback` goes to: --to N (it must still be in helm's history), else the newest revision
    before the live one that deployctl made and that served (deployed/superseded, not marked failed)."""
    if not rows:
        from deployctl.core.errors import ExecutionError

        raise ExecutionError(f"release {release} is not installed: there is nothing to roll back",
                             hint="deployctl up --target k8s installs it")
    live = live_revision(rows)
    if to is not None:
        if to not in {r.revision for r in rows}:
            raise UsageError(f"release {release} has no revision {to} in helm's history "
                             f"(it keeps {', '.join(str(r.revision) for r in rows)})",
                             hint="see `deployctl history --target k8s`; helm keeps the last 10 revisions")
        return to
    good = [r.revision for r in rows if r.revision < (live or 0) and r.result in GOOD and r.run_id]
    if not good:
        raise UsageError(f"release {release}: no earlier revision made by deployctl that served before the live "
                         f"one ({live})", hint="name one with --to N (see `deployctl history --target k8s`)")
    return max(good)


# ------------------------------------------------------------------------------------------ effects

def k8s_history(inv, inventory_dir: Path, *, api=None, helm=None,
                changed_revisions: int = CHANGED_REVISIONS) -> list[HistoryRow]:
    """The release's revisions (oldest first), live = the `deployed` one; `changed` for the newest
    ``changed_revisions`` revisions (one `helm get values` each, run 4 at a time), "" for older ones."""
    from deployctl.io.kube import KubeApi, kube_target
    from deployctl.io.helm import HelmClient

    target = kube_target(inv, inventory_dir)
    helm = helm or HelmClient(target)
    entries = helm.history()
    if not entries:
        return []
    api = api or KubeApi(target)
    notes = read_notes(api, target.release)
    revs = [int(e["revision"]) for e in entries][-(changed_revisions + 1):] if changed_revisions > 0 else []

    def values_of(rev: int) -> dict | None:
        try:
            return helm.values(rev)
        except Exception:  # noqa: BLE001 - `changed` is a courtesy: a revision helm just pruned shows ""
            return None

    with ThreadPoolExecutor(max_workers=4) as pool:
        values = {rev: v for rev, v in zip(revs, pool.map(values_of, revs)) if v is not None}
    return history_rows(entries, notes, values)
