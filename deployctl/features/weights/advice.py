"""What `weights check` tells the user to do about what it found (``advise``, pure).

`weights sync --from NODE` repairs the nodes only from a node that holds the checkpoint right: every file of
the index, each as the reference (most nodes) has it. When there is such a node the advice names it; when there
is none, syncing cannot help and the advice says what to do instead:

* ``sync``: a node holds every file right: `weights sync --from` it;
* ``choose-source``: nodes hold every file but disagree, with no majority to say which copy is right;
* ``no-complete-copy``: no node holds every file of the checkpoint (the files each lacks are in the table);
* ``no-checkpoint``: no node that answered holds a readable index under model.weights_path (the directory is
  missing, or not the checkpoint);
* ``unreachable``: the nodes that were checked agree, but some could not be checked (or none could);
* ``none``: every node holds the same files.
"""

from __future__ import annotations

from dataclasses import dataclass

from deployctl.core.checkpoint.files import INDEX
from deployctl.features.weights.check import CheckResult

KINDS = ("none", "sync", "choose-source", "no-complete-copy", "no-checkpoint", "unreachable")

_ELSEWHERE = ("copy the checkpoint onto one node (from the model hub or shared storage) and run `deployctl weights "
              "sync --from THAT_NODE`, or sync from a copy on this machine: `deployctl weights sync --from "
              "/path/to/checkpoint`; if the checkpoint is in another directory on the nodes, set model.weights_path "
              "to it")


@dataclass(frozen=True)
class Advice:
    kind: str                         # one of KINDS
    text: str                         # one sentence for people (the CLI prints it after the table)
    sources: tuple[str, ...] = ()     # nodes holding every file right: `weights sync --from` any of them

    def as_dict(self) -> dict:
        return {"kind": self.kind, "sources": list(self.sources), "text": self.text}


def _names(nodes) -> str:
    nodes = sorted(nodes)
    return ", ".join(nodes) if len(nodes) <= 6 else f"{', '.join(nodes[:6])} and {len(nodes) - 6} more"


def advise(result: CheckResult) -> Advice:
    """The advice for ``result`` (see the module doc for its kinds)."""
    if result.ok:
        return Advice("none", f"every node holds the same {len(result.files)} files")
    diffs = result.differences
    hosts = {d.node for d in diffs if d.kind == "host"}
    unchecked = (f"; {_names(hosts)} could not be checked (SSH: `deployctl preflight` says why), check again "
                 "once they answer") if hosts else ""
    if not result.files:
        indexless = {d.node for d in diffs if d.kind == "index"}
        if not indexless:
            return Advice("unreachable", f"no node could be checked: {_names(hosts)} did not answer (SSH: "
                                         "`deployctl preflight` says why)")
        return Advice("no-checkpoint", f"no node holds the checkpoint in {result.directory} ({INDEX} is missing "
                                       f"or unusable on {_names(indexless)}), so there is nothing to sync from: "
                                       f"{_ELSEWHERE}{unchecked}")
    complete = [n for n, files in result.listings.items()
                if all(files[f].state == "ok" for f in result.files if f in files)]
    differ = {d.node for d in diffs}
    right = [n for n in complete if n not in differ]
    if right and not differ - hosts:
        return Advice("unreachable", f"the nodes that answered hold the same files, but {_names(hosts)} could not "
                                     "be checked (SSH: `deployctl preflight` says why): check again once they answer",
                      tuple(right))
    if right:
        bad = sorted(differ - hosts)
        return Advice("sync", f"`deployctl weights sync --from {right[0]}` copies the files to {_names(bad)} from "
                              f"{right[0]}, a node that has them right{unchecked}", tuple(right))
    if complete:
        return Advice("choose-source", f"{_names(complete)} hold every file but no majority says which copy is right: "
                                       "find the one that is (compare sha256 with the checkpoint's source: `--hash`) "
                                       f"and run `deployctl weights sync --from THAT_NODE`{unchecked}")
    return Advice("no-complete-copy", f"no node holds every file of the checkpoint (what each lacks is listed "
                                      f"above), so there is no node to sync from: {_ELSEWHERE}{unchecked}")
