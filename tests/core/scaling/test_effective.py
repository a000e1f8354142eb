"""The inventory as `deployctl scale --apply` left it (deployctl.core.scaling.effective): spares out of `nodes` with
the line of every later key kept, the added instances listed as explicit named groups after the role's own, the
same object back when there is nothing to do. Expectations come from the module's docstrings, the YAML written
here and the naming rule of core/sizing/instances.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from deployctl.core.input.raw import RawInventory, parse_yaml
from deployctl.core.models.scaling import AddedInstance
from deployctl.core.scaling.effective import effective_raw, next_name, spares_of

NODES = """\
nodes:
  - name: n1
    address: 10.0.0.1
  - name: n2
    address: 10.0.0.2
  - name: n3
    address: 10.0.0.3
  - name: n4
    address: 10.0.0.4
"""


def parse(text: str) -> RawInventory:
    return parse_yaml(text, "inv.yaml", Path("."))


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line of ``text`` holding ``needle``."""
    return next(k for k, line in enumerate(text.splitlines(), start=1) if needle in line)


def added(role: str, name: str, *nodes: str) -> AddedInstance:
    return AddedInstance(role=role, name=name, nodes=list(nodes))


# ------------------------------------------------------------------ spares_of, next_name

@pytest.mark.parametrize("data, expected", [
    ({"deploy": {"scaling": {"spares": ["n3", "n4"]}}}, ["n3", "n4"]),
    ({"deploy": {"scaling": {"spares": ["n3", 7, None, {"x": 1}, "n4"]}}}, ["n3", "n4"]),   # only strings
    ({"deploy": {"scaling": {"spares": "n3"}}}, []),                                        # not a list
    ({"deploy": {"scaling": {}}}, []),
    ({"deploy": {"scaling": None}}, []),
    ({"deploy": None}, []),
    ({}, []),
    (None, []),
    (["not", "a", "mapping"], []),
])
def test_spares_of_reads_only_the_strings_of_deploy_scaling_spares(data, expected):
    assert spares_of(data) == expected


@pytest.mark.parametrize("taken, expected", [
    ([], "decode-1"),
    (["decode"], "decode-1"),                       # a role of one instance keeps the role's name
    (["decode-0", "decode-1"], "decode-2"),
    (["decode-0", "decode-2"], "decode-1"),          # the lowest index nobody has
    (["decode-1", "mixed-2", "prefill-3"], "decode-2"),
    (["mixed-0", "mixed-1", "mixed-2", "mixed-3"], "mixed-4"),
])
def test_next_name_is_the_role_and_the_lowest_free_index(taken, expected):
    role = expected.rsplit("-", 1)[0]
    assert next_name(role, taken) == expected
    assert next_name(role, iter(taken)) == expected           # any iterable, read once


# ------------------------------------------------------------------ nothing to do

def test_no_spare_and_nothing_added_gives_the_same_object():
    raw = parse("cluster: {name: c}\nlayout: {replicas: 2}\n" + NODES)
    assert effective_raw(raw, [], {}) is raw
    empty = parse("cluster: {name: c}\ndeploy: {scaling: {spares: []}}\nlayout: {replicas: 2}\n" + NODES)
    assert effective_raw(empty, [], {"mixed": [("mixed-0", ("n1", "n2")), ("mixed-1", ("n3", "n4"))]}) is empty


# ------------------------------------------------------------------ spares out of nodes, lines re-indexed

def test_spares_leave_nodes_and_later_nodes_keep_their_own_lines():
    text = "cluster: {name: c}\ndeploy:\n  scaling:\n    spares: [n2]\nlayout: {preset: tp-pp}\n" + NODES
    raw = parse(text)
    before_data = repr(raw.data)
    out = effective_raw(raw, [], {"mixed": [("mixed", ("n1", "n3", "n4"))]})
    assert [n["name"] for n in out.data["nodes"]] == ["n1", "n3", "n4"]
    assert out.data["deploy"]["scaling"]["spares"] == []
    assert out.data["layout"] == {"preset": "tp-pp"}          # nothing added: the layout as written
    # n3 is nodes[1] now, n4 nodes[2]: each key points at its own line of the file as written
    assert out.line_of(("nodes", 0, "address")) == line_of(text, "10.0.0.1")
    assert out.line_of(("nodes", 1, "address")) == line_of(text, "10.0.0.3")
    assert out.line_of(("nodes", 2, "address")) == line_of(text, "10.0.0.4")
    assert out.line_of(("nodes", 2)) == line_of(text, "name: n4")
    problem = out.problem(("nodes", 2, "address"), "unreachable")
    assert (problem.file, problem.line, problem.path) == ("inv.yaml", line_of(text, "10.0.0.4"), "nodes[2].address")
    # no key of the left-out spare and no stale index remains
    assert ("nodes", 3) not in out.lines and ("nodes", 3, "address") not in out.lines
    assert line_of(text, "10.0.0.2") not in {line for path, line in out.lines.items() if path[:1] == ("nodes",)}
    # pure: the inventory as read is untouched
    assert repr(raw.data) == before_data and raw.line_of(("nodes", 3, "address")) == line_of(text, "10.0.0.4")
    assert (out.file, out.base_dir) == (raw.file, raw.base_dir)


def test_a_spare_an_added_instance_uses_stays_in_nodes_the_others_go():
    text = ("cluster: {name: c}\ndeploy: {scaling: {spares: [n3, n4]}}\nlayout: {preset: tp-pp}\n" + NODES
            + "  - name: n5\n    address: 10.0.0.5\n")
    raw = parse(text)
    out = effective_raw(raw, [added("mixed", "mixed-1", "n3")], {"mixed": [("mixed", ("n1", "n2"))]})
    assert [n["name"] for n in out.data["nodes"]] == ["n1", "n2", "n3", "n5"]
    assert out.line_of(("nodes", 3, "address")) == line_of(text, "10.0.0.5")
    assert out.line_of(("nodes", 2, "address")) == line_of(text, "10.0.0.3")


# ------------------------------------------------------------------ added instances in the layout

def test_mixed_replicas_become_explicit_named_groups_with_the_added_one_last():
    text = ("cluster: {name: c}\ndeploy: {scaling: {spares: [n3, n4]}}\nlayout: {preset: dp-ep, replicas: 1}\n"
            + NODES)
    raw = parse(text)
    base = {"mixed": [("mixed", ("n1", "n2"))]}     # one instance: the role's name
    out = effective_raw(raw, [added("mixed", "mixed-1", "n3", "n4")], base)
    assert out.data["layout"] == {"preset": "dp-ep", "instances": [
        {"name": "mixed", "nodes": ["n1", "n2"]}, {"name": "mixed-1", "nodes": ["n3", "n4"]}]}
    assert [n["name"] for n in out.data["nodes"]] == ["n1", "n2", "n3", "n4"]
    assert raw.data["layout"] == {"preset": "dp-ep", "replicas": 1}      # the file as read is untouched


def test_mixed_explicit_instances_keep_their_names_and_order():
    text = ("cluster: {name: c}\ndeploy: {scaling: {spares: [n4]}}\nlayout:\n  instances:\n"
            "    - {nodes: [n1]}\n    - {name: big, nodes: [n2, n3]}\n" + NODES)
    raw = parse(text)
    base = {"mixed": [("mixed-0", ("n1",)), ("big", ("n2", "n3"))]}
    out = effective_raw(raw, [added("mixed", "mixed-1", "n4")], base)
    assert out.data["layout"]["instances"] == [{"name": "mixed-0", "nodes": ["n1"]},
                                               {"name": "big", "nodes": ["n2", "n3"]},
                                               {"name": "mixed-1", "nodes": ["n4"]}]


def test_a_pd_role_with_nodes_and_a_count_gets_explicit_groups_other_role_and_keys_untouched():
    text = ("cluster: {name: c}\ndeploy: {scaling: {spares: [n4]}}\nlayout:\n  preset: pd-split\n"
            "  prefill: {nodes: [n1]}\n  decode:\n    nodes: [n2, n3]\n    instances: 2\n"
            "    env: {FOO: bar}\n" + NODES)
    raw = parse(text)
    base = {"prefill": [("prefill", ("n1",))], "decode": [("decode-0", ("n2",)), ("decode-1", ("n3",))]}
    out = effective_raw(raw, [added("decode", "decode-2", "n4")], base)
    decode = out.data["layout"]["decode"]
    assert "nodes" not in decode                        # named once: by the groups
    assert decode["instances"] == [{"name": "decode-0", "nodes": ["n2"]}, {"name": "decode-1", "nodes": ["n3"]},
                                   {"name": "decode-2", "nodes": ["n4"]}]
    assert decode["env"] == {"FOO": "bar"}
    assert out.data["layout"]["prefill"] == {"nodes": ["n1"]}
    assert out.data["layout"]["preset"] == "pd-split"


def test_several_added_instances_follow_in_the_order_added():
    text = ("cluster: {name: c}\ndeploy: {scaling: {spares: [n3, n4]}}\nlayout:\n  preset: pd-split\n"
            "  prefill: {nodes: [n1]}\n  decode: {nodes: [n2]}\n" + NODES)
    raw = parse(text)
    base = {"prefill": [("prefill", ("n1",))], "decode": [("decode", ("n2",))]}
    out = effective_raw(raw, [added("decode", "decode-2", "n4"), added("decode", "decode-1", "n3")], base)
    assert [g["name"] for g in out.data["layout"]["decode"]["instances"]] == ["decode", "decode-2", "decode-1"]
    assert out.data["layout"]["prefill"] == {"nodes": ["n1"]}


def test_the_planned_effective_inventory_keeps_every_instance_name():
    """End of the chain (validation and planner): the explicit groups plan to the names they were given."""
    import yaml
    from conftest import EXAMPLES

    from deployctl.app.inventory import validate_inventory
    from deployctl.app.scaled import base_groups
    from deployctl.core.sizing.planner import plan_layout

    doc = yaml.safe_load((EXAMPLES / "a2-fleet-4x2x8-dp-ep.yaml").read_text())
    doc["layout"]["replicas"] = 3
    doc["deploy"] = {"scaling": {"spares": ["a2-node7", "a2-node8"]}}
    raw = parse_yaml(yaml.safe_dump(doc, sort_keys=False), "inv.yaml", EXAMPLES)
    out = effective_raw(raw, [added("mixed", "mixed-3", "a2-node7", "a2-node8")], base_groups(raw))
    plan = plan_layout(validate_inventory(out))
    assert [(i.name, i.nodes) for i in plan.instances] == [
        ("mixed-0", ["a2-node1", "a2-node2"]), ("mixed-1", ["a2-node3", "a2-node4"]),
        ("mixed-2", ["a2-node5", "a2-node6"]), ("mixed-3", ["a2-node7", "a2-node8"])]
