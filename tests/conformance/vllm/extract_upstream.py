"""Authoring aid (not run by the tests): print the upstream facts of one vLLM-Ascend multi-node CI config as the
`upstream_facts` block of a corpus data file, each value with the line it comes from.

    python extract_upstream.py <mirror git dir> <commit> <path in repo>

It reads the YAML as the CI scripts do (tests/e2e/nightly/multi_node/internal_dp/scripts/multi_node_config.py
MultiNodeConfigLoader; external_dp/scripts/external_dp_config.py) and keeps the raw per-node values: env as
str() of the YAML value (DistEnvBuilder.build L104; runtime.py L395), the internal server_cmd split by shlex
after `vllm serve <model>` (tests/e2e/conftest.py RemoteOpenAIServer), the external server_cmd_template as is.
Placeholders ($SERVER_PORT, ${DP_RANK}, ...) are left for the test's model of the CI scripts to expand.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import yaml


def _q(v) -> str:
    if isinstance(v, bool) or isinstance(v, int):
        return json.dumps(v)
    return json.dumps(str(v), ensure_ascii=False)


def _mapping(node) -> list[tuple[str, yaml.Node, int]]:
    """(key, value node, 1-based line) of a mapping node, merge keys (<<) expanded, later keys win."""
    out: dict[str, tuple] = {}
    for k, v in node.value:
        if k.value == "<<":
            for sub in (v.value if isinstance(v, yaml.SequenceNode) else [v]):
                for kk, vv, ln in _mapping(sub):
                    out.setdefault(kk, (kk, vv, ln))
    for k, v in node.value:
        if k.value != "<<":
            out[k.value] = (k.value, v, k.start_mark.line + 1)
    return list(out.values())


def _get(node, key):
    for k, v, ln in _mapping(node):
        if k == key:
            return v, ln
    return None, None


def _value(node):
    return yaml.safe_load(yaml.serialize(node))


def main(gitdir: str, commit: str, path: str) -> None:
    text = subprocess.run(["git", "--git-dir", gitdir, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout
    lines = text.splitlines()
    root = yaml.compose(text)
    doc = yaml.safe_load(text)
    external = "templates" in doc
    p = print
    p("upstream_facts:")
    mnode, mln = _get(root, "model")
    p(f"  model: {_q(doc['model'])}   # L{mln}")
    p(f"  num_nodes: {doc['num_nodes']}")
    if external:
        rnode, rln = _get(root, "routing")
        g = doc["routing"]["groups"]
        p(f"  routing: {{prefiller: {g['prefiller']}, decoder: {g['decoder']}}}   # L{rln}-")
    elif doc.get("disaggregated_prefill"):
        dnode, dln = _get(root, "disaggregated_prefill")
        d = doc["disaggregated_prefill"]
        p(f"  routing: {{prefiller: {d['prefiller_host_index']}, decoder: {d['decoder_host_index']}}}   # L{dln}-")
    p("  nodes:")
    if external:
        cfg_nodes = _get(root, "config")[0].value
        tpl_nodes = _get(root, "templates")[0].value
    else:
        tpl_nodes = _get(root, "deployment")[0].value
        cfg_nodes = [None] * len(tpl_nodes)
    for i, (cn, tn) in enumerate(zip(cfg_nodes, tpl_nodes)):
        p(f"  - index: {i}")
        if cn is not None:
            topo = {k: _value(v) for k, v, _ in _mapping(cn) if k != "node_index"}
            p(f"    topology: {json.dumps(topo)}   # L{cn.start_mark.line + 1}-{cn.end_mark.line}")
        env_node, eln = _get(tn, "envs")
        p(f"    env:   # envs L{eln}")
        for k, v, ln in _mapping(env_node):
            p(f"      {k}: {_q(str(_value(v)))}   # L{ln}")
        if external:
            seq, sln = _get(tn, "server_cmd_template")
            p(f"    argv_template:   # server_cmd_template L{sln}, after `vllm serve <model>` (runtime.py L343)")
            for item in seq.value:
                p(f"    - {_q(_value(item))}   # L{item.start_mark.line + 1}")
        else:
            cmd_node, cln = _get(tn, "server_cmd")
            cmd = _value(cmd_node)
            toks = shlex.split(cmd)
            assert toks[:2] == ["vllm", "serve"], toks[:3]
            argv = toks[3:]
            first = cmd_node.start_mark.line + 1
            last = cmd_node.end_mark.line
            p(f"    argv:   # server_cmd L{cln}-{last}, after `vllm serve {toks[2]}`")
            at = first
            for tok in argv:
                ln = None
                if tok.startswith("--"):
                    for j in range(at, last + 1):
                        if tok in lines[j - 1]:
                            ln = at = j
                            break
                p(f"    - {_q(tok)}" + (f"   # L{ln}" if ln else ""))


if __name__ == "__main__":
    main(*sys.argv[1:])
