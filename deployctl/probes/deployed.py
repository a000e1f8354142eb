"""The facts the hosts backend reads back about a deployment (deployctl.backends.hosts.remote): the
`current`/`previous` links, the revision manifests, the history and the lock under the cluster's directory.

A host is untrusted input: their parsers are deployctl.core.models.hostdata's, which take the node's name and
return what parsed with findings for the rest, never raising. Paths are arguments, never spliced into a script.
"""

from __future__ import annotations

from deployctl.core.models.hostdata import (HistoryEntry, LockDoc, Manifest, parse_history, parse_link, parse_lock,
                                            parse_manifests)
from deployctl.probes.fact import Fact

# every JSON file of a glob, separated (paths come in as arguments, never spliced into the script)
CAT_ALL = 'for f in "$1"/$2; do [ -f "$f" ] && { printf "@@file %s\\n" "$f"; cat "$f"; echo; }; done; true'

# parse(output or None, node, link name): the revision the link names
LINK: Fact[tuple[str | None, list[str]]] = Fact("deployed-link", lambda path: ["readlink", path], parse_link)
# parse(output, node): every revisions/<rev>/.deployctl.json under ``cdir``, by revision
MANIFESTS: Fact[tuple[dict[str, Manifest], list[str]]] = Fact(
    "deployed-manifests", lambda cdir: ["sh", "-c", CAT_ALL, "deployctl", f"{cdir}/revisions", "*/.deployctl.json"],
    parse_manifests)
# parse(output, node): the history entries under ``cdir``
HISTORY: Fact[tuple[list[HistoryEntry], list[str]]] = Fact(
    "deployed-history", lambda cdir: ["sh", "-c", CAT_ALL, "deployctl", f"{cdir}/history", "*.json"], parse_history)
# parse(output or None, node): the lock file under ``cdir``
LOCK: Fact[tuple[LockDoc | None, list[str]]] = Fact("deployed-lock", lambda cdir: ["cat", f"{cdir}/lock"], parse_lock)
