"""MindIE's own acceptance checks (deployctl/core/engines/mindie/acceptance.yaml) as code.

(a) every refusal found in MindIE-LLM's config manager is encoded by a rule; (b) every MindIE example inventory,
rendered, passes the checks of its version; (c) an engine.config value MindIE refuses is refused by
`deployctl validate` with MindIE's message and source, and the boundary value is accepted; (d) the checks
never crash on junk.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import examples

from conftest import ROOT, run_cli
from deployctl.core.engines.mindie import acceptance

EXAMPLES = ROOT / "inventories" / "examples"

# (source set, file under src/config_manager/, line): one line of every check that can refuse a config, read
# from Ascend/MindIE-LLM at 40fb063 (LLM23, the 2.x line) and 8b4871ad (LLM30, 3.0.0) -- the line of the
# refusal's condition or message (param_checker.cpp: the checker a config file calls).
UPSTREAM = {
    "LLM23": {
        "server_config.cpp": [24, 328, 332, 343, 382, 384, 385, 388, 390, 392, 394, 396, 399, 407, 411, 459, 476,
                              78, 105, 651],
        "backend_config.cpp": [23, 167, 172, 178, 193, 197, 83, 99, 216, 219, 222, 225, 228, 232, 233, 243],
        "model_deploy_config.cpp": [35, 39, 44, 49, 117, 228, 61, 390, 439, 460, 464, 468, 472, 475, 482, 503],
        "schedule_config.cpp": [23, 77, 215, 220, 225, 234, 236, 238, 240, 242, 247, 250, 252, 254, 256, 257, 259,
                                261, 264, 266, 268, 272],
        "config_manager_impl.cpp": [140, 185, 278, 283, 292, 296, 300, 306, 210, 215, 228, 236, 241, 247, 252, 259],
        "ranktable_config.cpp": [37, 49, 73, 83, 87, 163, 164, 269, 276, 283, 291, 297, 213, 234, 247],
        "param_checker.cpp": [282, 291, 310, 249, 360, 369, 378, 381, 392, 401, 410],
    },
    "LLM30": {
        "server_config.cpp": [25, 311, 323, 329, 337, 348, 374, 376, 377, 380, 382, 384, 386, 388, 391, 399, 403,
                              444, 461, 75, 101, 618],
        "backend_config.cpp": [23, 152, 157, 163, 178, 182, 73, 89, 202, 205, 208, 211, 214, 218, 219, 223, 233],
        "model_deploy_config.cpp": [36, 41, 46, 50, 113, 220, 61, 377, 424, 445, 449, 453, 457, 460, 467, 488],
        "schedule_config.cpp": [24, 80, 239, 244, 249, 255, 257, 269, 271, 273, 275, 277, 283, 286, 288, 290, 292,
                                293, 295, 297, 300, 302, 304, 308],
        "config_manager_impl.cpp": [134, 184, 308, 313, 322, 326, 330, 336, 245, 250, 263, 271, 202, 208, 213, 225,
                                    230, 290],
        "ranktable_config.cpp": [38, 50, 73, 83, 87, 160, 161, 261, 268, 275, 283, 289, 208, 228, 240],
        "param_checker.cpp": [290, 299, 318, 259, 366, 374, 382, 385, 396, 405, 413],
    },
}


def _covered(src: str) -> dict[str, list[tuple[int, int]]]:
    """'a.cpp L1-3, L7; b.cpp L9' -> {a.cpp: [(1, 3), (7, 7)], b.cpp: [(9, 9)]}; 'L560-' is open-ended."""
    out: dict[str, list] = {}
    current = None
    for token in re.findall(r"[a-z_]+\.(?:cpp|h)|L\d+(?:-\d*)?", src):
        if not token.startswith("L"):
            current = out.setdefault(token, [])
        elif current is not None:
            lo, _, hi = token[1:].partition("-")
            current.append((int(lo), int(hi) if hi else (int(lo) if "-" not in token else 10**6)))
    return out


@pytest.mark.parametrize("sset", sorted(UPSTREAM))
def test_every_upstream_check_is_encoded(sset):
    rules = [c for c in acceptance.data()["checks"] if sset in c["src"]]
    spans = [(c["id"], _covered(c["src"][sset])) for c in rules]
    missing = [f"{f} L{line}" for f, lines in UPSTREAM[sset].items() for line in lines
               if not any(lo <= line <= hi for _, cov in spans for lo, hi in cov.get(f, ()))]
    assert not missing, f"{sset}: checks read from MindIE-LLM with no rule in acceptance.yaml: {missing}"


def test_versions_map_to_their_sources():
    assert acceptance.source_set("2.2") == "LLM23" and acceptance.source_set("3.0") == "LLM30"
    assert acceptance.source_set("3.1") == "LLM30"          # no public 3.1 source: 3.0's checks
    assert acceptance.checks(None) == () and acceptance.checks("9.9") == ()
    ids = {c["id"] for c in acceptance.checks("3.0")} - {c["id"] for c in acceptance.checks("2.3")}
    assert {"schedule.maxN", "server.maxJsonDepth", "server.npuUsageThreshold"} <= ids


# ------------------------------------------------------------------ (b) the examples pass
def _mindie_examples() -> list[Path]:
    return sorted(p for p in EXAMPLES.glob("*.yaml")
                  if (yaml.safe_load(p.read_text()).get("engine") or {}).get("kind", "mindie") == "mindie")


def _rendered_refusals(path: Path) -> list[str]:
    """Render the example and evaluate the files actually written (config*.json, ranktable.json, env)."""
    from deployctl.app import engines
    from deployctl.app.inventory import read_inventory as load_and_validate
    from deployctl.core.sizing.planner import plan_layout

    inv = load_and_validate(path)
    plan = plan_layout(inv, checked=False)
    files = {a.path: a.content for a in engines.resolve("mindie").render(plan)}
    out = []
    for p, content in files.items():
        node, name = p.split("/", 1)
        if not re.fullmatch(r"config\d*\.json", name):
            continue
        env = dict(line.split("=", 1) for line in files[f"{node}/env"].decode().splitlines()
                   if "=" in line and not line.startswith("#"))
        env = {k.removeprefix("export "): v.strip("'\"") for k, v in env.items()}
        rt = files.get(f"{node}/ranktable.json")
        for r in acceptance.evaluate(json.loads(content), plan.engine.version,
                                     ranktable=json.loads(rt) if rt else None, env=env):
            out.append(f"{p}: {r.key}: {r.message} [{r.source}]")
    return out


@pytest.mark.parametrize("example", [pytest.param(p, id=p.stem) for p in _mindie_examples()])
def test_every_mindie_example_passes_its_versions_checks(example):
    refusals = _rendered_refusals(example)
    assert not refusals, "\n".join(refusals)


def test_examples_cover_both_source_sets():
    versions = {("3.0" if 'version: "3.0"' in p.read_text() else "2.2") for p in _mindie_examples()}
    assert versions == {"2.2", "3.0"}


# ------------------------------------------------------------------ (c) refusals through the CLI
def _inventory(tmp_path: Path, example: str, config: dict) -> Path:
    doc = yaml.safe_load((EXAMPLES / example).read_text())
    doc["engine"]["config"] = config
    shutil.copytree(EXAMPLES / "hccn", tmp_path / "hccn", dirs_exist_ok=True)
    out = tmp_path / example
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


TRUNC = {"ModelDeployConfig": {"truncation": False}}     # what deployctl renders (a bool in 2.x)


@pytest.mark.parametrize("example, config, bad, good, message, where", [
    ("a3-pd-2p2d.yaml", {"BackendConfig": {"ScheduleConfig": {"maxPrefillBatchSize": 500, "maxBatchSize": 200}}},
     500, 200, "scheduleParam.maxPrefillBatchSize [500] is out of bound [200]", "schedule_config.cpp L80-82, L284-286"),
    ("a2-2x8-tp-pp.yaml", {"BackendConfig": {**TRUNC, "ScheduleConfig": {"maxBatchSize": 5001}}},
     5001, 5000, "scheduleParam.maxBatchSize [5001] is out of bound [5000]", "@40fb063 src/config_manager/"
     "schedule_config.cpp L239-240"),
    ("a2-2x8-v32-dp-ep.yaml", {"ServerConfig": {"tokenTimeout": 3601}},
     3601, 3600, "serverConfig.tokenTimeout [3601] is out of bound [3600]", "server_config.cpp L387-388"),
    ("a2-1x8-single.yaml", {"BackendConfig": {**TRUNC, "ScheduleConfig": {"cacheBlockSize": 0}}},
     0, 1, "scheduleParam.cacheBlockSize [0] is less than [1]", "schedule_config.cpp L233-234"),
])
def test_a_value_mindie_refuses_is_refused_and_the_boundary_accepted(tmp_path, example, config, bad, good, message,
                                                                      where):
    res = run_cli("validate", "-i", str(_inventory(tmp_path, example, config)))
    assert res.returncode == 2, res.stdout + res.stderr
    text = " ".join((res.stdout + res.stderr).split())
    assert message in text and where in text, text
    key = next(k for k, v in _flat(config) if v == bad and not isinstance(v, bool))
    assert f"engine.config.{key}" in text, text
    fixed = json.loads(json.dumps(config).replace(f": {bad}", f": {good}", 1))
    ok = run_cli("validate", "-i", str(_inventory(tmp_path, example, fixed)))
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_maxbatchsize_over_5000_is_a_2x_refusal_only(tmp_path):
    """3.0 raised maxBatchSize's bound to 819200 (schedule_config.cpp@8b4871ad L274-275)."""
    config = {"BackendConfig": {"ScheduleConfig": {"maxBatchSize": 5001}}}
    assert run_cli("validate", "-i", str(_inventory(tmp_path, "a2-2x8-v32-dp-ep.yaml", config))).returncode == 0


def test_plan_and_render_refuse_too(tmp_path):
    inv = _inventory(tmp_path, "a3-pd-2p2d.yaml", {"ServerConfig": {"e2eTimeout": 0}})
    for args in (("plan", "-i", str(inv)), ("render", "-i", str(inv), "-o", str(tmp_path / "out"))):
        res = run_cli(*args)
        assert res.returncode == 2 and "serverConfig.e2eTimeout [0] is less than [1]" in res.stdout + res.stderr
    assert not (tmp_path / "out").exists()


def test_a_refused_render_leaves_the_previous_tree(tmp_path):
    """`render` checks the engine's acceptance in a forked child while it writes (app/plan.py planned_apart): a
    refusal still exits 2 with MindIE's message, and the tree rendered before stays as it was, nothing beside."""
    good = _inventory(tmp_path, "a3-pd-2p2d.yaml", {})
    out = tmp_path / "out"
    assert run_cli("render", "-i", str(good), "-o", str(out)).returncode == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    bad = _inventory(tmp_path, "a3-pd-2p2d.yaml", {"ServerConfig": {"e2eTimeout": 0}})
    res = run_cli("render", "-i", str(bad), "-o", str(out), "--force")
    assert res.returncode == 2 and "serverConfig.e2eTimeout [0] is less than [1]" in res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def _flat(d: dict, prefix: str = ""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _flat(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


# ------------------------------------------------------------------ (d) junk never crashes the checks
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True)
                    | st.text(max_size=6), lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)


def _base() -> dict:
    from deployctl.app.inventory import read_inventory as load_and_validate
    from deployctl.core.engines.mindie.config import config_files
    from deployctl.core.sizing.planner import plan_layout

    plan = plan_layout(load_and_validate(EXAMPLES / "a2-2x8-tp-pp.yaml"), checked=False)
    return next(iter(config_files(plan, plan.nodes[0]).values()))


BASE = None


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), junk=JSON, rt=JSON, version=st.sampled_from(["2.2", "3.0", "3.1"]))
def test_checks_never_crash_on_junk(data, junk, rt, version):
    global BASE
    BASE = BASE or _base()
    doc = json.loads(json.dumps(BASE))
    paths = list(_paths(doc))
    for _ in range(data.draw(st.integers(1, 4))):
        path = data.draw(st.sampled_from(paths))
        if not path:
            doc = junk
            break
        node = doc
        for step in path[:-1]:      # an earlier mutation may have replaced part of the path
            ok = isinstance(node, dict) and step in node or isinstance(node, list) and isinstance(step, int) \
                and step < len(node)
            node = node[step] if ok else None
        if isinstance(node, dict) and data.draw(st.booleans()):
            node.pop(path[-1], None)
        elif isinstance(node, dict) or isinstance(node, list) and isinstance(path[-1], int) and path[-1] < len(node):
            node[path[-1]] = junk
    env = data.draw(st.dictionaries(st.sampled_from(["MIES_CONTAINER_IP", "HOST_IP"]), st.text(max_size=8)))
    refusals = acceptance.evaluate(doc, version, ranktable=rt, env=env)
    assert all(isinstance(r, acceptance.Refusal) and r.message and r.source for r in refusals)
    for r in acceptance.evaluate(junk, version, ranktable=junk, env={}):
        assert r.message


def test_the_check_groups_name_custom_checks_that_exist():
    """RANKTABLE_ONLY (evaluated once per rank table) and READS_ENV (evaluated per node) name real custom checks,
    and a check that reads the env is never kept as the rank table's own answer."""
    from deployctl.core.engines.mindie.acceptance_custom import CUSTOM, RANKTABLE_ONLY, READS_ENV

    assert RANKTABLE_ONLY <= CUSTOM.keys() and READS_ENV <= CUSTOM.keys()
    assert not RANKTABLE_ONLY & READS_ENV
