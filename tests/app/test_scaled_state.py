"""The scale state under the run directory (deployctl.io.scale_store) and the inventory every deploying command
plans from it (deployctl.app.scaled): a state that no longer fits the inventory, a link in the state's place or
another cluster's state is refused, naming the file; the state is written 0600, removed when nothing is added."""

from __future__ import annotations

import os
import stat

import pytest
import yaml
from conftest import EXAMPLES

from deployctl.app.scaled import base_groups, scaled
from deployctl.core.errors import UsageError
from deployctl.core.input.raw import parse_yaml
from deployctl.core.models.scaling import AddedInstance, ScaleState
from deployctl.io.scale_store import read_state, state_path, write_state

CLUSTER = "r1-fleet"         # the fleet example's cluster.name


def fleet(spares=("a2-node7", "a2-node8"), replicas: int = 3):
    """The fleet example (8 servers, 2 per replica) with ``replicas`` replicas and ``spares``."""
    doc = yaml.safe_load((EXAMPLES / "a2-fleet-4x2x8-dp-ep.yaml").read_text())
    doc["layout"] = {"preset": "dp-ep", "replicas": replicas}
    if spares is not None:
        doc["deploy"] = {"scaling": {"spares": list(spares)}}
    return parse_yaml(yaml.safe_dump(doc, sort_keys=False), "inv.yaml", EXAMPLES)


def state(*added: AddedInstance, cluster: str = CLUSTER) -> ScaleState:
    return ScaleState(cluster=cluster, added=list(added))


M3 = AddedInstance(role="mixed", name="mixed-3", nodes=["a2-node7", "a2-node8"])


# ------------------------------------------------------------------ base_groups

def test_base_groups_are_the_roles_own_instances_spares_left_out():
    assert base_groups(fleet()) == {"mixed": [("mixed-0", ("a2-node1", "a2-node2")),
                                              ("mixed-1", ("a2-node3", "a2-node4")),
                                              ("mixed-2", ("a2-node5", "a2-node6"))]}


def test_base_groups_of_a_layout_that_does_not_parse_is_none():
    raw = fleet()
    raw.data["layout"] = {"replicas": "many"}
    assert base_groups(raw) is None


# ------------------------------------------------------------------ scaled

def test_without_a_run_dir_spares_leave_the_nodes_and_nothing_is_added():
    raw = fleet()
    planned, added, free = scaled(raw, None)
    assert added == () and free == ("a2-node7", "a2-node8")
    assert [n["name"] for n in planned.data["nodes"]] == [f"a2-node{i}" for i in range(1, 7)]


def test_no_spare_and_no_state_plans_the_file_as_written(tmp_path):
    raw = fleet(spares=None, replicas=4)
    assert scaled(raw, tmp_path) == (raw, (), ())
    assert scaled(raw, tmp_path)[0] is raw


def test_an_added_instance_of_the_state_is_planned_and_its_spares_are_no_longer_free(tmp_path):
    write_state(tmp_path, state(M3))
    planned, added, free = scaled(fleet(spares=("a2-node7", "a2-node8")), tmp_path)
    assert added == (M3,) and free == ()
    assert [g["name"] for g in planned.data["layout"]["instances"]] == ["mixed-0", "mixed-1", "mixed-2", "mixed-3"]
    assert [n["name"] for n in planned.data["nodes"]] == [f"a2-node{i}" for i in range(1, 9)]


def test_a_state_naming_servers_that_are_no_spares_any_more_is_refused_naming_the_file(tmp_path):
    write_state(tmp_path, state(M3))
    raw = fleet(spares=("a2-node8",), replicas=7)         # a2-node7 went back into the layout
    with pytest.raises(UsageError) as exc:
        scaled(raw, tmp_path)
    err = exc.value
    assert str(state_path(tmp_path, CLUSTER)) in err.message
    assert "scale added mixed-3 on a2-node7, which" in err.message     # the server that is no spare any more
    assert "deploy.scaling.spares" in err.hint and "scale --apply" in err.hint


def test_a_state_file_that_is_a_link_is_refused_never_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    write_state(elsewhere, state(M3))                     # a valid state, one a link could point at
    link = state_path(tmp_path, CLUSTER)
    link.parent.mkdir(parents=True)
    os.symlink(state_path(elsewhere, CLUSTER), link)
    with pytest.raises(UsageError) as exc:
        read_state(tmp_path, CLUSTER)
    assert str(link) in exc.value.render()
    with pytest.raises(UsageError):
        scaled(fleet(), tmp_path)
    dangling = state_path(tmp_path, "gone")
    os.symlink(tmp_path / "nothing-here.json", dangling)  # a link to nothing is there all the same
    with pytest.raises(UsageError):
        read_state(tmp_path, "gone")


def test_the_state_of_another_cluster_is_refused(tmp_path):
    other = state(M3, cluster="someone-else")
    path = state_path(tmp_path, CLUSTER)
    path.parent.mkdir(parents=True)
    path.write_text(other.model_dump_json())
    with pytest.raises(UsageError) as exc:
        read_state(tmp_path, CLUSTER)
    assert str(path) in exc.value.message and "someone-else" in exc.value.message and CLUSTER in exc.value.message
    assert exc.value.hint
    with pytest.raises(UsageError):
        scaled(fleet(), tmp_path)


def test_a_state_file_that_is_not_the_model_is_refused(tmp_path):
    path = state_path(tmp_path, CLUSTER)
    path.parent.mkdir(parents=True)
    path.write_text('{"cluster": "r1-fleet", "added": [{"role": "nope", "name": "x", "nodes": ["a"]}]}')
    with pytest.raises(UsageError) as exc:
        read_state(tmp_path, CLUSTER)
    assert str(path) in exc.value.message


# ------------------------------------------------------------------ write_state

def test_no_file_means_nothing_added(tmp_path):
    assert read_state(tmp_path, CLUSTER) is None


def test_the_state_is_written_0600_and_read_back(tmp_path):
    path = write_state(tmp_path, state(M3))
    assert path == state_path(tmp_path, CLUSTER)
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    assert read_state(tmp_path, CLUSTER) == state(M3)
    assert not [p for p in path.parent.iterdir() if p != path]        # no temporary file left


def test_nothing_added_removes_the_file(tmp_path):
    path = write_state(tmp_path, state(M3))
    assert path.exists()
    assert write_state(tmp_path, state()) == path
    assert not os.path.lexists(path) and read_state(tmp_path, CLUSTER) is None
    write_state(tmp_path, state())                      # nothing to remove: no error
    assert not os.path.lexists(path)


def test_a_link_in_the_states_place_is_replaced_not_written_through(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    path = state_path(tmp_path, CLUSTER)
    path.parent.mkdir(parents=True)
    os.symlink(victim, path)
    write_state(tmp_path, state(M3))
    assert victim.read_text() == "keep me\n"
    assert stat.S_ISREG(os.lstat(path).st_mode) and read_state(tmp_path, CLUSTER) == state(M3)
    os.symlink(victim, tmp_path / "scale" / "other.json")
    write_state(tmp_path, state(cluster="other"))       # nothing added: the link goes, its target stays
    assert not os.path.lexists(tmp_path / "scale" / "other.json") and victim.read_text() == "keep me\n"


# ------------------------------------------------------------------ the commands that plan see the state

def test_plan_with_the_run_dir_lists_the_instance_scale_added(tmp_path):
    import json

    from conftest import run_cli

    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(fleet().data, sort_keys=False))
    runs = tmp_path / "runs"
    write_state(runs, state(M3))
    res = run_cli("plan", "-i", str(inv), "--output", "json", "--run-dir", str(runs))
    assert res.returncode == 0, res.stdout + res.stderr
    plan = json.loads(res.stdout)
    assert [i["name"] for i in plan["instances"]] == ["mixed-0", "mixed-1", "mixed-2", "mixed-3"]
    assert plan["joined"] == ["mixed-3"]


def test_a_link_planted_at_the_temporary_name_is_not_written_through(tmp_path):
    """The temporary file (.<name>.<pid>.tmp beside the state) is created, never opened through a link."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    path = state_path(tmp_path, CLUSTER)
    path.parent.mkdir(parents=True)
    os.symlink(victim, path.with_name(f".{path.name}.{os.getpid()}.tmp"))
    try:
        write_state(tmp_path, state(M3))
    except OSError:
        pass                                           # refusing is fine; writing into the link's target is not
    assert victim.read_text() == "keep me\n"
