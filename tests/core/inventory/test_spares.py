"""deploy.scaling.spares and explicit instance names in validation (core/sizing/instances.py spare_problems,
_name_problems): each spare a node of the inventory, named once, in no instance of the layout, every problem with
its file, line and key path (exit 2 from `deployctl validate`); spares are in no role and in no replica; an
explicit `name` names its instance, two alike are refused."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import EXAMPLES, run_cli

from deployctl.app.inventory import validate_inventory
from deployctl.core.errors import InventoryError
from deployctl.core.input.raw import parse_yaml
from deployctl.core.sizing.planner import plan_layout

FLEET = (EXAMPLES / "a2-fleet-4x2x8-dp-ep.yaml").read_text()        # 8 servers a2-node1..8, replicas: 4
PD = EXAMPLES / "vllm-a3-1p1d-qwen3.yaml"                            # p1 prefill, d1 decode


def fleet(spares: list[str] | None, replicas: int = 3) -> str:
    """The fleet example with ``replicas`` and a deploy block listing ``spares`` one a line, at its end."""
    text = FLEET.replace("replicas: 4 ", f"replicas: {replicas} ")
    assert text != FLEET
    if spares is not None:
        text += "deploy:\n  scaling:\n    spares:\n" + "".join(f"    - {s}\n" for s in spares)
    return text


def spare_line(text: str, index: int) -> int:
    """The line of deploy.scaling.spares[index] in ``text`` (written by ``fleet``/``pd``: one entry a line)."""
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if line.strip() == "spares:")
    return start + 2 + index


def pd(spares: list[str] | None, decode_nodes: tuple[str, ...] = ("d1",)) -> str:
    """The 1P1D example with a third server d2 and ``spares``."""
    doc = yaml.safe_load(PD.read_text())
    doc["layout"]["decode"]["nodes"] = list(decode_nodes)
    doc["nodes"].append({"name": "d2", "address": "10.202.0.4", "interface": "enp189s0f0"})
    text = yaml.safe_dump(doc, sort_keys=False)
    if spares is not None:
        text += "deploy:\n  scaling:\n    spares:\n" + "".join(f"    - {s}\n" for s in spares)
    return text


def problems(text: str) -> list:
    with pytest.raises(InventoryError) as exc:
        validate_inventory(parse_yaml(text, "inv.yaml", EXAMPLES))
    return exc.value.problems


def valid(text: str):
    return validate_inventory(parse_yaml(text, "inv.yaml", EXAMPLES))


# ------------------------------------------------------------------ each spare problem, file:line:key

SPARE_CASES = {
    "unknown": (fleet(["a2-node7", "a2-nodeX", "a2-node8"]), 1, "node 'a2-nodeX' is not in nodes"),
    "twice": (fleet(["a2-node7", "a2-node8", "a2-node7"]), 2, "spare 'a2-node7' is listed twice"),
    "in the layout": (pd(["d1"]), 0, "spare 'd1' is in an instance of the layout"),
}


@pytest.mark.parametrize("case", SPARE_CASES)
def test_a_spare_problem_names_file_line_and_key(case):
    text, index, message = SPARE_CASES[case]
    [p] = [p for p in problems(text) if p.path.startswith("deploy.scaling.spares")]
    assert (p.file, p.line, p.path, p.message) == ("inv.yaml", spare_line(text, index),
                                                   f"deploy.scaling.spares[{index}]", message)
    assert p.hint


def test_a_spare_in_an_explicit_mixed_instance_is_refused():
    names = [f"a2-node{i}" for i in range(1, 9)]
    doc = yaml.safe_load(FLEET)
    doc["layout"] = {"preset": "dp-ep", "instances": [{"nodes": names[:4]}, {"nodes": names[4:]}]}
    text = yaml.safe_dump(doc, sort_keys=False) + "deploy:\n  scaling:\n    spares:\n    - a2-node8\n"
    [p] = [p for p in problems(text) if p.path.startswith("deploy.scaling.spares")]
    assert (p.line, p.path, p.message) == (spare_line(text, 0), "deploy.scaling.spares[0]",
                                           "spare 'a2-node8' is in an instance of the layout")


@pytest.mark.parametrize("case", SPARE_CASES)
def test_validate_cli_gives_file_line_key_and_exit_2_for_a_spare_problem(case, tmp_path):
    text, index, message = SPARE_CASES[case]
    inv = tmp_path / "inv.yaml"
    inv.write_text(text)
    res = run_cli("validate", "-i", str(inv), "--run-dir", str(tmp_path / "runs"))
    out = res.stdout + res.stderr
    assert res.returncode == 2, out
    assert f"{inv}:{spare_line(text, index)} deploy.scaling.spares[{index}]: {message}" in out, out


# ------------------------------------------------------------------ spares are in no role and no replica

def test_a_spare_of_a_pd_split_inventory_is_no_node_in_no_role():
    without = problems(pd(None))
    assert any(p.path == "nodes" and p.message == "nodes in no role: d2" for p in without), without
    inv = valid(pd(["d2"]))
    plan = plan_layout(inv)
    assert [(i.name, i.nodes) for i in plan.instances] == [("prefill", ["p1"]), ("decode", ["d1"])]
    assert "d2" not in [n.name for n in plan.nodes]


def test_the_validate_cli_accepts_a_pd_split_spare(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text(pd(["d2"]))
    res = run_cli("validate", "-i", str(inv), "--run-dir", str(tmp_path / "runs"))
    assert res.returncode == 0, res.stdout + res.stderr


def test_mixed_replicas_split_only_the_servers_that_are_no_spares():
    # 8 servers do not split into 3 replicas; the 6 that are not spares do
    assert any(p.path == "layout.replicas" and "8 nodes do not split into 3" in p.message
               for p in problems(fleet(None)))
    plan = plan_layout(valid(fleet(["a2-node7", "a2-node8"])))
    assert [(i.name, i.nodes) for i in plan.instances] == [
        ("mixed-0", ["a2-node1", "a2-node2"]), ("mixed-1", ["a2-node3", "a2-node4"]),
        ("mixed-2", ["a2-node5", "a2-node6"])]
    # the spares are taken out wherever they are in nodes, the rest split in inventory order
    plan = plan_layout(valid(fleet(["a2-node1", "a2-node4"])))
    assert [i.nodes for i in plan.instances] == [["a2-node2", "a2-node3"], ["a2-node5", "a2-node6"],
                                                 ["a2-node7", "a2-node8"]]


# ------------------------------------------------------------------ explicit names

def named(*groups: dict) -> str:
    doc = yaml.safe_load(FLEET)
    doc["layout"] = {"preset": "dp-ep", "instances": list(groups)}
    return yaml.safe_dump(doc, sort_keys=False)


N = [f"a2-node{i}" for i in range(1, 9)]


@pytest.mark.parametrize("groups, name", [
    (({"name": "x", "nodes": N[:4]}, {"name": "x", "nodes": N[4:]}), "x"),
    (({"nodes": N[:4]}, {"name": "mixed-0", "nodes": N[4:]}), "mixed-0"),      # the default name of the first
])
def test_two_instances_with_one_name_are_refused(groups, name):
    text = named(*groups)
    found = [p for p in problems(text) if f"two instances are named '{name}'" in p.message]
    assert len(found) == 1 and found[0].path == "layout.instances[1]", found
    lines = text.splitlines()
    start = lines.index("  instances:")
    items = [k for k, line in enumerate(lines, start=1) if k > start and line.startswith("  - ")]
    assert found[0].line == items[1], (found, lines[start:items[1]])      # the second group's first line


def test_validate_cli_refuses_two_instances_of_one_name_with_exit_2(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text(named({"name": "x", "nodes": N[:4]}, {"name": "x", "nodes": N[4:]}))
    res = run_cli("validate", "-i", str(inv), "--run-dir", str(tmp_path / "runs"))
    out = res.stdout + res.stderr
    assert res.returncode == 2 and f"{inv}:" in out and "layout.instances[1]: two instances are named 'x'" in out, out


def test_an_explicit_name_names_the_instance_in_plan_json(tmp_path):
    doc = yaml.safe_load((EXAMPLES / "a2-2x8-tp-pp.yaml").read_text())
    doc["layout"]["instances"] = [{"name": "x", "nodes": ["node1", "node2"]}]
    for n in doc["nodes"]:           # the example's hccn.conf copies, relative to the example
        if "hccn_conf" in n:
            n["hccn_conf"] = str(EXAMPLES / n["hccn_conf"])
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = run_cli("plan", "-i", str(inv), "--output", "json", "--run-dir", str(tmp_path / "runs"))
    assert res.returncode == 0, res.stdout + res.stderr
    plan = json.loads(res.stdout)
    assert [(i["name"], i["nodes"]) for i in plan["instances"]] == [("x", ["node1", "node2"])]
    assert {n["name"]: n["instance"] for n in plan["nodes"]} == {"node1": "x", "node2": "x"}
