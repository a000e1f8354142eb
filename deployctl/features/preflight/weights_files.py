"""Preflight's per-file `weights` rule (issue 26 item 6): the same check as `deployctl weights check`, sizes only.

config.json, the safetensors index and every shard the index names must exist with the same size on every node;
a finding names the node and the file. It runs after the probes, on the reachable nodes whose weights directory
exists (a missing or unreadable one is already a `weights` FAIL of check_host_basics).
"""

from __future__ import annotations

from deployctl.io.executor import Executor, HostTarget
from deployctl.core.docs_url import doc
from deployctl.core.models.host_facts import Finding, HostFacts

HINT = ("copy the file from a node that has it right: deployctl weights sync -i INV --from NODE "
        f"({doc('weights.md')})")


def weights_findings(weights_path: str, targets: list[HostTarget], executor: Executor,
                     facts: dict[str, HostFacts], timeout: float) -> tuple[list[Finding], list[str]]:
    """(findings, not-checked notes) of the per-file comparison over the nodes that have the directory."""
    from deployctl.features.weights.check import check_weights
    from deployctl.features.weights.listing import safe_dir

    up = [t for t in targets if _has_dir(facts.get(t.name))]
    if not up:
        return [], []
    try:
        safe_dir(weights_path)
    except ValueError as exc:
        return [], [f"the weights' files one by one ({exc})"]
    result = check_weights(executor, up, weights_path, timeout=timeout)
    if result.index_from is None:        # e.g. a single-file checkpoint: nothing names the files to compare
        why = result.differences[0].have if result.differences else "no node answered"
        return [], [f"the weights' files one by one (no node has a readable model.safetensors.index.json: "
                    f"{why[:160]})"]
    out = []
    for d in result.differences:
        if d.kind == "host":
            out.append(Finding(rule="weights", severity="WARN", host=d.node, message=f"could not list the "
                               f"checkpoint's files: {d.have}", hint="run `deployctl weights check` for details"))
        elif d.kind == "index":
            out.append(Finding(rule="weights", severity="WARN", host=d.node, message=f"{d.file or 'the index'}: "
                               f"{d.have}", hint=HINT))
        else:
            want = f", expected {d.want}" if d.want else ""
            out.append(Finding(rule="weights", severity="FAIL", host=d.node,
                               message=f"{weights_path}/{d.file}: {d.have}{want}", hint=HINT))
    return out, []


def _has_dir(h: HostFacts | None) -> bool:
    return bool(h and h.reachable and h.weights and h.weights.exists and h.weights.readable is not False)


def merge(findings: list[Finding], extra: list[Finding], weights_path: str) -> list[Finding]:
    """``findings`` with the per-file ones added; a node with a per-file FAIL loses check_weights_same's
    total-size finding (it says "<path> holds N bytes"), which the per-file ones say more precisely."""
    named = {f.host for f in extra if f.severity == "FAIL"}
    total = f"{weights_path} holds "
    return [f for f in findings if not (f.rule == "weights" and f.host in named
                                        and f.message.startswith(total))] + extra
