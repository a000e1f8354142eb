"""diff: rendered revisions vs deployed state -> what up starts, restarts or keeps (pure)."""

from __future__ import annotations

import os

from conftest import ROOT
from deployctl.backends.hosts.diff import diff_deployment
from deployctl.backends.hosts.remote import container_names
from deployctl.backends.hosts.revision import node_bundles
from deployctl.io.inventory_file import load_inventory
from deployctl.app.inventory import validate_inventory
from deployctl.core.models.deploy import ContainerState, DeployedState
from deployctl.core.sizing.planner import plan_layout
from deployctl.core.render import render_artifacts


def setup(example: str):
    os.chdir(ROOT)
    plan = plan_layout(validate_inventory(load_inventory(f"inventories/examples/{example}.yaml")))
    bundles = node_bundles(plan, render_artifacts(plan))
    engine, ms = container_names(plan)
    return plan, bundles, engine, ms


def running(plan, bundles, engine, ms, **overrides):
    out = {}
    for node in plan.nodes:
        b = bundles[node.name]
        names = [engine] + (list(ms) if node.runs_router else [])
        state = DeployedState(node=node.name, current_rev=b.rev, files=b.digests,
                              containers={n: ContainerState(name=n, status="running") for n in names})
        out[node.name] = state.model_copy(update=overrides.get(node.name, {}))
    return out


def test_fresh_cluster_starts_everything_and_pushes_every_file():
    plan, bundles, engine, ms = setup("a2-2x8-tp-pp")
    empty = {n.name: DeployedState(node=n.name) for n in plan.nodes}
    cs = diff_deployment(plan, bundles, empty, engine, ms)
    assert [h.action for h in cs.hosts] == ["start", "start"]
    assert all(f.kind == "new" for h in cs.hosts for f in h.files)
    assert all(h.push for h in cs.hosts) and not cs.nothing_to_do


def test_nothing_to_do_when_every_node_runs_the_rendered_revision():
    plan, bundles, engine, ms = setup("a2-4x8-dp-ep")
    cs = diff_deployment(plan, bundles, running(plan, bundles, engine, ms), engine, ms)
    assert cs.nothing_to_do
    assert all(h.action == "keep" and not h.push for h in cs.hosts)


def test_one_changed_node_restarts_its_whole_instance():
    plan, bundles, engine, ms = setup("a2-4x8-dp-ep")
    files = dict(bundles["a2-node3"].digests, env="0" * 64)
    state = running(plan, bundles, engine, ms, **{"a2-node3": {"current_rev": "old", "files": files}})
    cs = diff_deployment(plan, bundles, state, engine, ms)
    by = {h.node: h for h in cs.hosts}
    assert by["a2-node3"].action == "restart" and "revision old" in by["a2-node3"].reason
    assert [f.path for f in by["a2-node3"].files if f.kind == "changed"] == ["env"]
    assert by["a2-node1"].action == "restart" and "HCCL needs every rank" in by["a2-node1"].reason
    assert not by["a2-node1"].push and by["a2-node3"].push


def test_pd_split_change_in_decode_leaves_prefill_running():
    plan, bundles, engine, ms = setup("a3-pd-2p2d")
    state = running(plan, bundles, engine, ms, d2={"current_rev": "old"})
    by = {h.node: h for h in diff_deployment(plan, bundles, state, engine, ms).hosts}
    assert by["d1"].action == by["d2"].action == "restart"
    assert by["p1"].action == by["p2"].action == "keep"
    assert by["p1"].ms_action == "restart"        # the coordinator must re-link to the new decode instance


def test_a_stopped_container_is_started_even_with_the_same_revision():
    plan, bundles, engine, ms = setup("a2-1x8-single")
    state = running(plan, bundles, engine, ms)
    node = plan.nodes[0].name
    state[node] = state[node].model_copy(update={"containers": {engine: ContainerState(name=engine,
                                                                                           status="exited")}})
    (h,) = diff_deployment(plan, bundles, state, engine, ms).hosts
    assert h.action == "start" and "exited" in h.reason and not h.push


def test_revision_id_follows_content_and_mode():
    plan, bundles, _, _ = setup("a2-2x8-tp-pp")
    b = bundles["node1"]
    again = node_bundles(plan, render_artifacts(plan))["node1"]
    assert b.rev == again.rev and len(b.rev) == 16
    env = b.files["env"]
    changed = type(b)(b.node, {**b.files, "env": env.model_copy(update={"mode": 0o644})})
    assert changed.rev != b.rev
