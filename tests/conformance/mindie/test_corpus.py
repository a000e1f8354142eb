"""MindIE conformance corpus (issue 22, deliverable 1): published, working MindIE deployments rendered by deployctl.

published.yaml lists each deployment's inventory and the values the published deployment sets, with
repo@commit:path:line. Every value is asserted EQUAL to what `deployctl render` writes, or carries a `differs:`
reason; a difference without a reason fails, and so does a reason for a value that no longer differs. Expected
values are never read from deployctl's renderer (the files rendered by the CLI are only read and compared).
"""

from __future__ import annotations

import json
import re
import shlex
from functools import cache
from pathlib import Path

import pytest
import yaml

from conftest import run_cli

HERE = Path(__file__).parent
TABLE = yaml.safe_load((HERE / "published.yaml").read_text())
DEPLOYMENTS = TABLE["deployments"]
MISSING = object()


@cache
def rendered(name: str) -> Path:
    import tempfile

    out = Path(tempfile.mkdtemp(prefix=f"corpus-{name}-")) / "out"
    target = ("--target", "helm") if DEPLOYMENTS[name].get("target") == "helm" else ()
    r = run_cli("render", *target, "-i", str(HERE / DEPLOYMENTS[name]["inventory"]), "-o", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _inventory(name: str) -> dict:
    return yaml.safe_load((HERE / DEPLOYMENTS[name]["inventory"]).read_text())


def _steps(key: str) -> list:
    return [int(s[1:-1]) if s.startswith("[") else s for s in re.findall(r"\[\d+\]|[^.\[\]]+", key)]


def _walk(doc, key: str):
    for step in _steps(key):
        if isinstance(step, int):
            if not isinstance(doc, list) or step >= len(doc):
                return MISSING
        elif not isinstance(doc, dict) or step not in doc:
            return MISSING
        doc = doc[step]
    return doc


def _env(text: str) -> dict:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


def _argv(script: str, env: dict) -> dict[str, list[str]]:
    """The processes a start script launches: the command after the set_env prelude of each `bash -c`, its
    $VARIABLES replaced by the container's -e values and the env file (what the shell would run)."""
    consts = dict(env, **dict(re.findall(r"-e (\w+)=(\S+) \\", script)))
    out = {}
    for payload in re.findall(r"bash -c '(.*)'$", script, re.M):
        tail = payload.split('export "$_kv"; done; ', 1)[-1]     # after the set_env prelude
        # a DP server may be prefixed by its CPU binding ("${bind[@]}": taskset -c, computed at start)
        cmd = re.search(r'(?:exec |do |; )(?:"\$\{bind\[@\]\}" )?("?\$DEPLOYCTL_DAEMON"?|mindie_motor_\w+)([^&;]*)',
                        tail)
        assert cmd, payload
        words = [re.sub(r"\$\{?(\w+)\}?", lambda m: consts.get(m.group(1), m.group(0)), w)
                 for w in shlex.split(cmd.group(1) + cmd.group(2))]
        kind = ("dp_daemon" if tail.lstrip().startswith("pids=") else "daemon") if "DAEMON" in cmd.group(1) \
            else cmd.group(1).rsplit("_", 1)[-1]
        out[kind] = words
    return out


@cache
def _objects(name: str) -> dict:
    """A Kubernetes render's objects by (kind, name without the release prefix)."""
    release = f"{_inventory(name)['cluster']['name']}-ascend-llm-"
    docs = [d for d in yaml.safe_load_all((rendered(name) / "manifests.yaml").read_text()) if d]
    return {(d["kind"], d["metadata"]["name"].removeprefix(release)): d for d in docs}


def _k8s_value(name: str, entry: dict):
    """file k8s:<instance>-files/<file> (a mounted file), k8s:<instance>-env (its env ConfigMap),
    k8s:replicas / k8s:npus (key: an instance or ms-controller/ms-coordinator: its pods, NPUs per pod)."""
    objs, what = _objects(name), entry["file"].split(":", 1)[1]
    if what in ("replicas", "npus"):
        sets = [o for (kind, n), o in objs.items() if kind in ("StatefulSet", "Deployment") and
                (n == entry["key"] or n.rsplit("-", 1)[0] == entry["key"])]
        if not sets:
            return MISSING
        if what == "replicas":
            return sum(o["spec"]["replicas"] for o in sets)
        counts = {o["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"].get(
            "huawei.com/Ascend910") for o in sets}
        return int(counts.pop()) if len(counts) == 1 else sorted(counts)
    cm, _, fname = what.partition("/")
    data = objs.get(("ConfigMap", cm), {}).get("data", {})
    if not fname:
        return data.get(entry["key"], MISSING)
    return _walk(json.loads(data[fname]), entry["key"]) if fname in data else MISSING


def _rendered_value(name: str, entry: dict):
    if entry["file"].startswith("k8s:"):
        return _k8s_value(name, entry)
    path = rendered(name) / entry["file"]
    text = path.read_text()
    if path.name == "env":
        return _env(text).get(entry["key"], MISSING)
    if path.name.startswith("start"):
        node_env = _env((path.parent / "env").read_text())
        return _argv(text, node_env).get(entry["key"].split(":", 1)[1], MISSING)
    return _walk(json.loads(text), entry["key"])


def _published_value(name: str, entry: dict):
    if entry.get("absent"):
        return MISSING
    if "value_file" in entry:
        file, key = entry["value_file"].split("#")
        return _walk(json.loads((HERE / file).read_text()), key)
    value = entry["value"]
    nodes = {n["name"]: n for n in _inventory(name)["nodes"]}

    def sub(v):
        if isinstance(v, str):
            return re.sub(r"\{ip:([\w-]+)\}", lambda m: nodes[m.group(1)].get("container_ip") or
                          nodes[m.group(1)]["address"], v)
        if isinstance(v, list):
            return [sub(x) for x in v]
        if isinstance(v, dict):
            return {k: sub(x) for k, x in v.items()}
        return v

    return sub(value)


def _same(entry: dict, published, got) -> bool:
    if got is MISSING or published is MISSING:
        return got is published
    if entry.get("as_json"):
        return isinstance(got, str) and json.loads(got) == json.loads(published)
    if entry["file"].endswith(("/env", "-env")):
        return str(got) == (str(published).lower() if isinstance(published, bool) else str(published))
    return got == published and type(got) is type(published)


def _label(name: str, entry: dict) -> str:
    return f"{name} {entry['file']} {entry['key']}"


CASES = [(name, i) for name, d in DEPLOYMENTS.items() for i in range(len(d["values"]))]


@pytest.mark.parametrize("name", list(DEPLOYMENTS))
def test_every_published_value_has_a_source(name):
    prefixes = set(TABLE["sources"])
    for entry in DEPLOYMENTS[name]["values"]:
        src = entry.get("src", "")
        assert src.split(":", 1)[0] in prefixes and re.search(r":L\d+", src), _label(name, entry)
        assert ("value" in entry) + bool(entry.get("absent")) + ("value_file" in entry) == 1, _label(name, entry)


@pytest.mark.parametrize("name", list(DEPLOYMENTS))
def test_deployment_renders_as_published(name, capsys):
    """Every published value equals the rendered one, or the table says why deployctl differs."""
    unexplained, stale, explained = [], [], []
    for entry in DEPLOYMENTS[name]["values"]:
        published, got = _published_value(name, entry), _rendered_value(name, entry)
        same = _same(entry, published, got)
        shown = "(absent)" if got is MISSING else json.dumps(got)
        if same and "differs" in entry:
            stale.append(f"{_label(name, entry)}: equal now ({shown}); drop its `differs`")
        elif not same and "differs" not in entry:
            unexplained.append(f"{_label(name, entry)}: published {published!r} ({entry['src']}), rendered {shown}")
        elif not same:
            was = "(absent)" if published is MISSING else repr(published)
            explained.append(f"{_label(name, entry)}: published {was}, rendered {shown} — {entry['differs']}")
    with capsys.disabled():
        for line in explained:
            print(f"\n  explained: {line}", end="")
    assert not unexplained and not stale, "\n".join(unexplained + stale)


def test_rendered_files_pass_mindies_encoded_acceptance_checks():
    """The corpus renders are what MindIE would load: the encoded acceptance checks of each version find none
    to refuse (acceptance.py runs in plan/validate; render would have failed otherwise, checked here again)."""
    for name in DEPLOYMENTS:
        r = run_cli("validate", "-i", str(HERE / DEPLOYMENTS[name]["inventory"]))
        assert r.returncode == 0, (name, r.stdout + r.stderr)
