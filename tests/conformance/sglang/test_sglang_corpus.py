"""SGLang conformance corpus: published SGLang-on-Ascend deployments (the launch scripts of SGLang's own Ascend guides),
each rendered by deployctl from a test inventory and compared flag for flag and variable for variable with what the
guide's script runs.

THE EXPECTED SIDE is a model of the guide's script, written here from the guide (configs/*.yaml `upstream_facts`, every
line cited), never from deployctl's output. The guides' multi-node scripts are one script run on every node
(e.g. SG@40946a20 docs/docs/hardware-platforms/ascend-npus/model-deployment/best-practices/deepseek_r1.mdx L366-501):

  * it exports the shared variables (`export K=V`; `unset K` removes K), then finds its own address in the arrays
    `P_IP=(...)` / `D_IP=(...)` (`hostname -I` against each entry, L396-406) and runs the branch of the array it is
    in, with `$i` = its index there: that branch's exports, then `python3 -m sglang.launch_server <argv>`;
  * the model here: `script.arrays` maps each array to inventory node names in the array's order (entry k of P_IP is
    the address of the k-th node listed), so node P_IP[i] runs branch `prefill` with i; a single-node script
    (no arrays) runs its one branch on the one node with i = 0;
  * placeholders are expanded per node: `${ARR[$i]}` / `${ARR[N]}` -> that node's address, `$((A + $i))` -> A + i,
    `$i` -> i, `$MODEL_PATH` / `${MODEL_PATH}` -> model.weights_path of the inventory, `<network-interface>` -> the
    node's nodes[].interface, `script.vars` -> other script variables (e.g. IP_MASTER), and the literal
    placeholders of `script.placeholders` (e.g. `<your prefill ip1>` -> `${P_IP[0]}`: the guide's own comment says
    what each one is, cited in the config) -> their expansion;
  * the router block (`upstream_facts.router`) is a separate command the guide gives with no node; the corpus runs
    it on `router.node` (the node deployctl picks: the first prefill server's first node), with the variables it
    exports before it (its own env, compared with the router container's).

THE RENDERED SIDE: `deployctl render` of the config's inventory: <node>/server.args (one argument per line, the argv
after `python3 -m sglang.launch_server`), <node>/env (the container's --env-file), <router node>/router.args and
router.env (the router container's --env-file).

NORMALISATION (both sides by the same code):
  * a launch_server argv is PARSED with an argparse parser rebuilt from the release's table
    (deployctl/core/engines/sglang/flags/sglang-0.5.16.json, the dump of sglang 0.5.16's own parser): allow_abbrev
    on, as SGLang's parser (`--tp` is --tp-size, `--moe-dense-tp` is --moe-dense-tp-size), aliases share their
    option's dest (`--tensor-parallel-size`), store_true flags, nargs +/* lists, each option's type (int, float,
    json.loads, human_readable_int), deprecated aliases storing into the new option's dest (`--cuda-graph-bs` ->
    --cuda-graph-bs-decode), the deprecated no-op DeprecatedAction (`--prefill-round-robin-balance`: a warning,
    nothing stored: SGLang's argparse_actions DeprecatedAction.__call__). An argv the parser rejects fails the test
    (every upstream argv must be one SGLang 0.5.16 accepts).
  * RULE (defaults): the comparison is of the parsed namespaces, so an option given at its parser default equals
    its absence (e.g. deployctl's `--max-prefill-tokens 16384` on a decode server where the guide passes none:
    16384 is the 0.5.16 default). That is exactly "SGLang parses the same values": ServerArgs is built from the
    namespace, which cannot tell the two apart.
  * each option is reported under its canonical spelling (the table's, non-deprecated first); values as parsed.
  * env: per node, key by key, as exported (`unset` = absent); deployctl's DEPLOYCTL_* bookkeeping is not compared.
    Both sides source the same CANN set_env.sh files (deployctl's LAUNCHER, the guide's `source` lines): not compared.
  * the router argv is parsed with the sglang-router 0.3.2 table the same way; `--prefill URL PORT` is a list of
    [url, port] lists (action append, nargs +); plus the router's node and env.
Every difference (kind, field, expected, rendered, where) must be listed in the config with a reason; unlisted ones
fail, and listed ones that no longer occur fail too. A reason starting "BUG:" marks a deployctl defect to fix (then
remove the entry).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE.parents[1]))

from conftest import run_cli  # noqa: E402

CONFIGS = sorted((HERE / "configs").glob("*.yaml"))
FLAGS = ROOT / "deployctl" / "core" / "engines" / "sglang" / "flags"
ABSENT = "<absent>"


def load(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506


# ------------------------------------------------------------------------------ parsers rebuilt from the tables

class Rejected(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise Rejected(message)


class _NoOp(argparse.Action):
    """SGLang's DeprecatedAction: prints a warning, stores nothing."""

    def __call__(self, parser, namespace, values, option_string=None):
        pass


def _human_int(v: str) -> int:
    m = re.fullmatch(r"(-?[0-9]+)([kKmMgG]?)", v.strip())
    if not m:
        raise ValueError(v)
    return int(m.group(1)) * {"": 1, "k": 1000, "m": 1000 ** 2, "g": 1000 ** 3}[m.group(2).lower()]


TYPES = {"int": int, "float": float, "str": str, "json.loads": json.loads,
         "sglang.srt.utils.common.json_list_type": json.loads,
         "sglang.srt.utils.common.human_readable_int": _human_int}


@cache
def table(name: str) -> dict:
    return json.loads((FLAGS / f"{name}.json").read_text())


@cache
def parser(name: str) -> tuple[argparse.ArgumentParser, dict]:
    """(argparse parser, dest -> canonical option) from a flag table."""
    tab = table(name)
    p = _Parser(prog=name, allow_abbrev=True, add_help=False)
    canon: dict[str, str] = {}
    for opt, o in tab["options"].items():
        if o["action"] == "help":
            continue
        names = [opt] + [a for a in o["aliases"] if a != opt]
        kw: dict = {"dest": o["dest"], "default": o["default"]}
        action = o["action"]
        if action in ("store_true", "DeprecatedStoreTrueAction"):
            kw.update(action="store_true")
        elif action == "store_false":
            kw.update(action="store_false")
        elif action in ("store_const", "DeprecatedStoreConstAction"):
            kw.update(action="store_const", const=o["const"])
        elif action == "boolean_optional":
            kw.update(action=argparse.BooleanOptionalAction)
        elif action == "DeprecatedAction":
            kw = {"dest": o["dest"], "nargs": 0, "action": _NoOp, "default": o["default"]}
        else:   # store, append, DeprecatedAliasStoreAction, LoRAPathAction
            kw["action"] = "append" if action == "append" else "store"
            nargs = o.get("nargs")
            if nargs not in (None, "None"):
                kw["nargs"] = int(nargs) if nargs.isdigit() else nargs
            if o["type"]:
                kw["type"] = TYPES.get(o["type"], str)
            if o["choices"] and not o["type"] in ("json.loads",):
                kw["choices"] = o["choices"]
        if kw.get("default") == "==SUPPRESS==":
            kw["default"] = argparse.SUPPRESS
        if action == "boolean_optional":
            names = [opt]
        p.add_argument(*names, **kw)
        if not o.get("deprecated") or o["dest"] not in canon:
            canon[o["dest"]] = opt
    return p, canon


def parse(name: str, argv: list[str]) -> dict:
    """{canonical option: parsed value} for every dest of the parser (defaults included)."""
    p, canon = parser(name)
    ns = vars(p.parse_args(list(argv)))
    return {canon.get(dest, dest): value for dest, value in ns.items()}


# ------------------------------------------------------------------------------------ the guide's script, modelled

def _statements(lines: list[str]) -> list[tuple[str, str, str | None]]:
    out = []
    for s in lines or []:
        m = re.fullmatch(r"export\s+(\w+)=(.*)", s.strip())
        if m:
            v = m.group(2).strip()
            if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
                v = v[1:-1]
            out.append(("export", m.group(1), v))
            continue
        m = re.fullmatch(r"unset\s+(\w+)", s.strip())
        assert m, f"not an export/unset statement: {s!r}"
        out.append(("unset", m.group(1), None))
    return out


class Script:
    """Expansion of one node's placeholders (module docstring)."""

    def __init__(self, doc: dict):
        inv = doc["inventory"]
        self.nodes = {n["name"]: n for n in inv["nodes"]}
        self.script = doc.get("script") or {}
        self.arrays = {k: [self.nodes[n]["address"] for n in v] for k, v in (self.script.get("arrays") or {}).items()}
        self.model_path = inv["model"]["weights_path"]

    def expand(self, text: str, node: str, i: int) -> str:
        s = str(text)
        for literal, repl in (self.script.get("placeholders") or {}).items():
            s = s.replace(literal, repl)
        s = s.replace("<network-interface>", self.nodes[node].get("interface", "<no interface>"))
        s = re.sub(r"\$\(\(\s*([0-9]+)\s*\+\s*\$i\s*\)\)", lambda m: str(int(m.group(1)) + i), s)
        s = re.sub(r"\$\{(\w+)\[(\$i|[0-9]+)\]\}",
                   lambda m: self.arrays[m.group(1)][i if m.group(2) == "$i" else int(m.group(2))], s)
        scalars = {"MODEL_PATH": self.model_path, "i": str(i),
                   **{k: str(v) for k, v in (self.script.get("vars") or {}).items()}}

        def scalar(m):
            key = m.group(1) or m.group(2)
            assert key in scalars, f"{text!r}: unknown script variable ${key}"
            return self.expand(scalars[key], node, i) if key in (self.script.get("vars") or {}) else scalars[key]
        s = re.sub(r"\$\{(\w+)\}|\$(\w+)", scalar, s)
        assert "$" not in s and "<your" not in s, f"unexpanded placeholder in {text!r} -> {s!r}"
        return s

    def env(self, blocks: list[list[str]], node: str, i: int) -> dict:
        env: dict = {}
        for block in blocks:
            for verb, key, value in _statements(block):
                if verb == "export":
                    env[key] = self.expand(value, node, i)
                else:
                    env[key] = ABSENT
        return {k: v for k, v in env.items() if v != ABSENT}


def expected(doc: dict) -> dict:
    """{'servers': {node: argv}, 'env': {node: env}, 'router': (node, argv, env) or None}."""
    facts, sc = doc["upstream_facts"], Script(doc)
    arrays = (doc.get("script") or {}).get("arrays") or {}
    servers, envs = {}, {}
    for role, branch in facts["branches"].items():
        members = arrays[branch["array"]] if branch.get("array") else [branch["node"]]
        for i, node in enumerate(members):
            assert node not in servers, f"{node} is in two arrays"
            envs[node] = sc.env([facts.get("shared_env"), branch.get("env")], node, i)
            servers[node] = [sc.expand(a, node, i) for a in branch["argv"]]
    router = None
    if facts.get("router"):
        r = facts["router"]
        router = (r["node"], [sc.expand(a, r["node"], 0) for a in r["argv"]], sc.env([r.get("env")], r["node"], 0))
    return {"servers": servers, "env": envs, "router": router}


# ----------------------------------------------------------------------------------------- what deployctl renders

def _inventory(doc: dict) -> dict:
    inv = copy.deepcopy(doc["inventory"])
    cp = inv["model"].get("config_path")
    if cp and not Path(cp).is_absolute():
        inv["model"]["config_path"] = str(ROOT / cp)
    return inv


def _args(path: Path) -> list[str]:
    text = path.read_text()
    assert text.endswith("\n"), path
    return text[:-1].split("\n") if text != "\n" else []


def _env(path: Path) -> dict:
    env = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            k, _, v = line.partition("=")
            if not k.startswith("DEPLOYCTL_"):
                env[k] = v
    return env


def rendered(doc: dict, tmp: Path) -> dict:
    inv = _inventory(doc)
    src = tmp / "inventory.yaml"
    src.write_text(yaml.safe_dump(inv, sort_keys=False))
    r = run_cli("render", "-i", str(src), "-o", str(tmp / "out"))
    assert r.returncode == 0, f"{doc['id']}: deployctl refused the corpus inventory:\n{r.stdout}{r.stderr}"
    servers, envs, router = {}, {}, None
    for n in inv["nodes"]:
        d = tmp / "out" / n["name"]
        envs[n["name"]] = _env(d / "env")
        if (d / "server.args").exists():
            servers[n["name"]] = _args(d / "server.args")
        if (d / "router.args").exists():
            assert router is None, "two routers"
            router = (n["name"], _args(d / "router.args"), _env(d / "router.env"))   # start-router.sh's --env-file
    return {"servers": servers, "env": envs, "router": router}


# ------------------------------------------------------------------------------------------------ normalisation

def _plain(v):
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def normalise(side: dict, release: str) -> dict:
    """{(kind, where, field): value}."""
    facts: dict = {}
    for node, argv in side["servers"].items():
        try:
            parsed = parse(f"sglang-{release}", argv)
        except Rejected as err:
            raise AssertionError(f"{node}: sglang {release} rejects the argv: {err}\n{argv}") from err
        facts[("server", node, "launch_server")] = "runs"
        for opt, value in parsed.items():
            facts[("server", node, opt)] = _plain(value)
    for node, env in side["env"].items():
        for k, v in env.items():
            facts[("env", node, k)] = v
    if side["router"] is not None:
        node, argv, env = side["router"]
        try:
            parsed = parse("sglang-router-0.3.2", argv)
        except Rejected as err:
            raise AssertionError(f"router: sglang-router 0.3.2 rejects the argv: {err}\n{argv}") from err
        facts[("router", "router", "node")] = node
        for opt, value in parsed.items():
            facts[("router", "router", opt)] = _plain(value)
        for k, v in env.items():
            facts[("router env", "router", k)] = v
    return facts


def differences(exp: dict, got: dict) -> list[dict]:
    agg: dict = defaultdict(list)
    for key in set(exp) | set(got):
        kind, where, field = key
        e, g = exp.get(key, ABSENT), got.get(key, ABSENT)
        if e != g:
            agg[(kind, field, json.dumps(e), json.dumps(g))].append(where)
    out = [{"kind": k, "field": f, "expected": json.loads(e), "rendered": json.loads(g), "where": sorted(w)}
           for (k, f, e, g), w in agg.items()]
    return sorted(out, key=lambda d: (d["kind"], d["field"], json.dumps(d["expected"]), json.dumps(d["rendered"])))


def _key(d: dict) -> tuple:
    return (d["kind"], d["field"], json.dumps(d["expected"], sort_keys=True),
            json.dumps(d["rendered"], sort_keys=True), tuple(d["where"]))


def release_of(doc: dict) -> str:
    return str(doc["inventory"]["engine"]["version"])


# -------------------------------------------------------------------------------------------------------- tests

@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_renders_as_published_except_listed_differences(path, tmp_path):
    doc = load(path)
    release = release_of(doc)
    exp, got = normalise(expected(doc), release), normalise(rendered(doc, tmp_path), release)
    found = differences(exp, got)
    listed = doc.get("differences") or []
    for d in listed:
        assert d.get("reason"), f"{path.name}: difference {d['field']} has no reason"
    unexplained = [d for d in found if _key(d) not in {_key(x) for x in listed}]
    stale = [x for x in listed if _key(x) not in {_key(d) for d in found}]
    msg = []
    if unexplained:
        msg.append("differences not listed in the data file (add them with a reason, or fix the cause):\n" +
                   yaml.safe_dump(unexplained, sort_keys=False, width=200))
    if stale:
        msg.append("listed differences that no longer occur (remove them):\n" +
                   yaml.safe_dump([{k: v for k, v in x.items() if k != "reason"} for x in stale],
                                  sort_keys=False, width=200))
    assert not msg, f"{path.name}:\n" + "\n".join(msg)


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_published_flag_and_variable_is_compared(path):
    """The comparison is not vacuous: every option the guide passes and every variable it exports is a fact of the
    expected side (so it is either equal in deployctl's output or a listed difference)."""
    doc = load(path)
    release = release_of(doc)
    side = expected(doc)
    facts = normalise(side, release)
    p, _ = parser(f"sglang-{release}")
    for node, argv in side["servers"].items():
        for a in argv:
            if a.startswith("--"):
                flag = a.split("=")[0]
                hits = [o for o in p._option_string_actions if o.startswith(flag)]
                assert flag in p._option_string_actions or len(hits) == 1, (node, flag)
        for k in side["env"][node]:
            assert ("env", node, k) in facts
    assert any(k[0] == "server" for k in facts)


def test_parser_model_matches_the_tables_self_checks():
    """The rebuilt parsers give the parsed values each table's extractor recorded from SGLang's real parser."""
    for name in ("sglang-0.5.16", "sglang-0.5.23"):
        chk = table(name)["self_check"]
        got = parse(name, chk["ascend_pd_argv"])
        _, canon = parser(name)
        for dest, value in chk["parsed"].items():
            assert got[canon[dest]] == value, (name, dest)
    chk = table("sglang-router-0.3.2")["self_check"]
    got = parse("sglang-router-0.3.2", chk["pd_argv"])
    assert got["--pd-disaggregation"] is True
    assert got["--prefill"] == [[u, str(p)] for u, p in chk["prefill_urls"]]
    assert got["--decode"] == [[u] for u in chk["decode_urls"]]
    # abbreviations and aliases resolve as argparse resolves them in SGLang's parser
    a = parse("sglang-0.5.16", ["--model-path", "/m", "--tp", "16", "--moe-dense-tp", "1", "--cuda-graph-bs", "2", "4"])
    b = parse("sglang-0.5.16", ["--model-path", "/m", "--tensor-parallel-size", "16", "--moe-dense-tp-size", "1",
                                "--cuda-graph-bs-decode", "2", "4"])
    assert a == b and a["--tp-size"] == 16 and a["--cuda-graph-bs-decode"] == [2, 4]
    with pytest.raises(Rejected):
        parse("sglang-0.5.16", ["--model-path", "/m", "--no-such-flag"])


def test_corpus_coverage():
    docs = [load(p) for p in CONFIGS]
    assert len(docs) >= 4
    assert {d["hardware"] for d in docs} == {"a2", "a3"}
    assert any(d["upstream_facts"].get("router") for d in docs)
    for d in docs:
        up = d["upstream"]
        assert up["repo"] == "sgl-project/sglang" and re.fullmatch(r"[0-9a-f]{8,40}", up["commit"]), d["id"]
        assert d["inventory"]["engine"]["kind"] == "sglang"
        # rule 1: 0.5.16, unless the guide passes a flag 0.5.16's parser refuses (next test)
        assert release_of(d) == "0.5.16" or up.get("release_flag"), d["id"]


def _releases() -> list[str]:
    names = [p.stem.removeprefix("sglang-") for p in FLAGS.glob("sglang-0.*.json")]
    return sorted(names, key=lambda v: tuple(int(x) for x in v.split(".")))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_a_release_other_than_0516_is_the_first_that_parses_it(path):
    """README rule 1: a config leaves 0.5.16 only for a guide whose script 0.5.16's parser refuses, naming the flag
    (upstream.release_flag); it then takes the first release whose parser takes every argv of the script."""
    doc = load(path)
    release = release_of(doc)
    if release == "0.5.16":
        return
    flag = doc["upstream"]["release_flag"]
    servers = expected(doc)["servers"]
    assert any(flag in argv for argv in servers.values()), f"{flag} is not in the guide's argv"
    assert flag not in parser("sglang-0.5.16")[0]._option_string_actions
    earlier = _releases()[:_releases().index(release)]
    assert earlier and earlier[0] == "0.5.16"
    for older in earlier:
        refused = False
        for argv in servers.values():
            try:
                parse(f"sglang-{older}", argv)
            except Rejected:
                refused = True
        assert refused, f"sglang {older} parses the guide's script: use it (rule 1)"
    for argv in servers.values():
        parse(f"sglang-{release}", argv)


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_the_chart_runs_on_each_node_what_bare_metal_runs(path, tmp_path):
    """The published deployment in the chart (`render --target helm`): each node's pod carries the server.args and
    env of that node's bare-metal render, byte for byte and key for key (the bare-metal render is what the test
    above holds against the guide), and the router the same arguments and env on the same node."""
    doc = load(path)
    inv = _inventory(doc)
    src = tmp_path / "inventory.yaml"
    src.write_text(yaml.safe_dump(inv, sort_keys=False))
    bare = rendered(doc, tmp_path)
    r = run_cli("render", "--target", "helm", "-i", str(src), "-o", str(tmp_path / "helm"))
    assert r.returncode == 0, r.stdout + r.stderr
    values = yaml.safe_load((tmp_path / "helm" / "values.yaml").read_text())
    pods = {p["node"]: p for i in values["instances"] for p in i["pods"]}
    assert set(pods) == set(bare["servers"])
    for node, argv in bare["servers"].items():
        assert _args_text(pods[node]["files"]["server.args"]) == argv, node
        env = {k: v for k, v in pods[node]["env"].items() if not k.startswith("DEPLOYCTL_")}
        assert env == bare["env"][node], node
    if bare["router"] is not None:
        node, argv, env = bare["router"]
        router = values["sglang"]["router"]
        assert router["node"] == node
        assert _args_text(router["files"]["router.args"]) == argv
        assert {k: str(v) for k, v in router.get("env", {}).items()} == env


def _args_text(text: str) -> list[str]:
    assert text.endswith("\n")
    return text[:-1].split("\n") if text != "\n" else []
