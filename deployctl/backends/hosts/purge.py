"""`down --purge`: remove deployctl's own files from the cluster directory on every host, and nothing else.

What is deployctl's is decided on the host, from what deployctl itself wrote, never from the directory's name:

* ``revisions/<rev>/``: the files its ``.deployctl.json`` manifest lists (written by `up`, generator
  "deployctl"), then the manifest; ``revisions/.<rev>.tmp/`` (an interrupted upload) the same way;
* ``current``, ``previous`` (and their ``.tmp``): only symbolic links to ``revisions/<rev>``;
* ``history/<run id>.json`` holding a history entry of that run id, and ``history/.<run id>.tmp``;
* ``lock`` and ``.lock.<run id>`` only when they are this run's (down holds the lock while it purges);
* then the directories it made (revisions/<rev>, revisions, history, the cluster directory) when empty.

Anything else (a user's file, a directory deployctl does not know, a manifest that is not deployctl's, a link
pointing elsewhere) stays, and the host reports it with the reason; `down` prints that. Nothing is followed
through a symbolic link (the cluster directory itself being a link is left alone), and no path leaves the
cluster directory. The script runs with the host's python3 (which Ansible needs anyway), the cluster directory
and the run id as arguments.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from deployctl.backends.common.pipeline import Reporter
from deployctl.io.executor import Executor, HostError, HostTarget, fan_out_width

MAX_LEFT = 20        # entries of what stayed, per host, that the host reports by name

SCRIPT = r'''
import json, os, re, stat, sys
d, run = sys.argv[1], sys.argv[2]
REV = re.compile(r"^[0-9a-f]{16}$")
RUN = re.compile(r"^[0-9]{8}T[0-9]{6}\.[0-9]{6}Z-[a-z-]{1,20}$")
removed, left = [], []

def lexists(p):
    return os.path.lexists(p)

def unlink(p):
    try:
        os.unlink(p)
        removed.append(os.path.relpath(p, d))
    except OSError as e:
        left.append([os.path.relpath(p, d), "could not remove: %s" % e.strerror])

def rmdir(p):
    try:
        os.rmdir(p)
        removed.append(os.path.relpath(p, d) + "/")
        return True
    except OSError:
        return False

def is_dir(p):
    return os.path.isdir(p) and not os.path.islink(p)

def revision(path):
    man = os.path.join(path, ".deployctl.json")
    try:
        if os.path.islink(man) or not os.path.isfile(man):
            raise ValueError
        with open(man) as f:
            doc = json.loads(f.read(1 << 20))
        files = doc["files"] if doc.get("generator") == "deployctl" else None
        if not isinstance(files, dict):
            raise ValueError
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return
    for name in files:
        parts = str(name).split("/")
        if not name or any(x in ("", ".", "..") for x in parts):
            continue
        p = os.path.join(path, *parts)
        if lexists(p) and not is_dir(p) and os.path.realpath(os.path.dirname(p)).startswith(
                os.path.realpath(path)):
            unlink(p)
            for k in range(len(parts) - 1, 0, -1):
                if not rmdir(os.path.join(path, *parts[:k])):
                    break
    unlink(man)

if os.path.islink(d):
    left.append([".", "the cluster directory is a symbolic link: not followed"])
elif is_dir(d):
    revs = os.path.join(d, "revisions")
    if is_dir(revs):
        for name in sorted(os.listdir(revs)):
            bare = name[1:-4] if name.startswith(".") and name.endswith(".tmp") else name
            if REV.match(bare) and is_dir(os.path.join(revs, name)):
                revision(os.path.join(revs, name))
                rmdir(os.path.join(revs, name))
    for name in ("current", "previous", "current.tmp", "previous.tmp"):
        p = os.path.join(d, name)
        if os.path.islink(p):
            t = os.readlink(p)
            if t.startswith("revisions/") and REV.match(t[len("revisions/"):]):
                unlink(p)
    hist = os.path.join(d, "history")
    if is_dir(hist):
        for name in sorted(os.listdir(hist)):
            p = os.path.join(hist, name)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            if name.startswith(".") and name.endswith(".tmp") and RUN.match(name[1:-4]):
                unlink(p)
                continue
            if not (name.endswith(".json") and RUN.match(name[:-5])):
                continue
            try:
                with open(p) as f:
                    doc = json.loads(f.read(1 << 20))
            except (OSError, ValueError):
                continue
            if isinstance(doc, dict) and doc.get("run_id") == name[:-5]:
                unlink(p)
    for name in ("lock", ".lock." + run):
        p = os.path.join(d, name)
        try:
            mine = not os.path.islink(p) and os.path.isfile(p) and (
                '"run_id": "%s"' % run) in open(p).read(1 << 16)
        except OSError:
            mine = False
        if mine:
            unlink(p)
    for sub in ("revisions", "history"):
        if is_dir(os.path.join(d, sub)):
            rmdir(os.path.join(d, sub))
    if not rmdir(d):
        for root, dirs, files in os.walk(d):
            dirs.sort()
            links = [x for x in dirs if os.path.islink(os.path.join(root, x))]
            empty = [x + "/" for x in dirs if x not in links and not os.listdir(os.path.join(root, x))]
            for name in sorted(files + links) + empty:
                rel = os.path.relpath(os.path.join(root, name), d)
                top = rel.split("/")[0]
                if top == "revisions":
                    why = "not listed in a deployctl manifest"
                elif top == "history":
                    why = "not a deployctl history entry"
                elif top in ("current", "previous"):
                    why = "not a link to a deployctl revision"
                elif top == "lock":
                    why = "another run's lock"
                else:
                    why = "not deployctl's"
                if not any(x[0] == rel for x in left):
                    left.append([rel, why])
print(json.dumps({"removed": len(removed), "left": left[:MAX_LEFT], "more": max(0, len(left) - MAX_LEFT)}))
'''.replace("MAX_LEFT", str(MAX_LEFT))
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass
class PurgeResult:
    removed: int = 0
    left: list[tuple[str, str]] = field(default_factory=list)   # (path relative to the cluster dir, why)
    more: int = 0                  # further entries that stayed, not named
    error: str = ""                # the purge could not run on this host


def _plain(text, limit: int) -> str:
    """Host text for a terminal: control and escape characters shown as '?', bounded."""
    return CONTROL.sub("?", str(text))[:limit]


def parse(text: str) -> PurgeResult:
    """The script's one JSON line, checked (a host's answer is data, not trusted)."""
    try:
        doc = json.loads(text.strip().splitlines()[-1])
        left = [(_plain(p, 300), _plain(w, 100)) for p, w in doc["left"][:MAX_LEFT]]
        return PurgeResult(int(doc["removed"]), left, int(doc.get("more", 0)))
    except (ValueError, KeyError, TypeError, IndexError):
        return PurgeResult(error=f"unexpected answer: {_plain(text.strip(), 200)!r}")


def purge(executor: Executor, targets: list[HostTarget], cdir: str, run_id: str,
          timeout: float) -> dict[str, PurgeResult]:
    """Run the purge on every host in parallel: host -> what was removed and what stayed (and why)."""
    def one(t: HostTarget) -> tuple[str, PurgeResult]:
        try:
            res = executor.run(t, ["python3", "-c", SCRIPT, cdir, run_id], timeout)
        except HostError as exc:
            return t.name, PurgeResult(error=exc.message)
        if res.rc != 0:
            return t.name, PurgeResult(error=f"rc {res.rc}: {_plain((res.stderr or res.stdout).strip()[-200:], 200)}")
        return t.name, parse(res.stdout)

    if not targets:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(fan_out_width(), len(targets)))) as pool:
        return dict(pool.map(one, targets))


def report(results: dict[str, PurgeResult], cdir: str, reporter: Reporter) -> list[str]:
    """Tell what stayed on each host and why; returns the hosts where the purge failed."""
    failed = []
    for host, r in sorted(results.items()):
        if r.error:
            failed.append(f"{host} ({r.error})")
        elif r.left:
            more = f" and {r.more} more" if r.more else ""
            reporter.step(f"{host}: kept {cdir}: " + "; ".join(f"{p} ({w})" for p, w in r.left) + more
                          + " - only deployctl's own files are removed")
        else:
            reporter.step(f"{host}: removed {cdir} ({r.removed} deployctl entries)")
    return failed
