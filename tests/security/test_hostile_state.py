"""A host that lies about its deployment state (issue 21, observations 1 (parsing), 3 and 4): planted links,
manifests, history entries, lock files and `docker inspect` answers are parsed at one boundary
(deployctl/core/models/hostdata.py); what does not parse is a finding naming the host, never a crash, and one host's
history never decides what happens to another host. Pure and in-memory (tests/support/fakefleet.py); the same
lies planted on simulated hosts are in test_hostile_state_e2e.py."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest


from conftest import EXAMPLES  # noqa: E402
from deployctl.app.inventory import read_inventory as load_and_validate  # noqa: E402
from deployctl.backends.hosts import history as hist  # noqa: E402
from deployctl.core.models.hostdata import seal  # noqa: E402
from deployctl.backends.hosts.hosts import host_targets_abs  # noqa: E402
from deployctl.backends.common.lockinfo import LockHeld, LockOwner  # noqa: E402
from deployctl.backends.hosts.remote import parse_state, read_deployed, state_commands  # noqa: E402
from deployctl.backends.hosts.revision import cluster_dir  # noqa: E402
from deployctl.backends.hosts.status import judge  # noqa: E402
from deployctl.backends.hosts.up import UpOptions, run_hosts_operation  # noqa: E402
from deployctl.core.errors import UsageError  # noqa: E402
from deployctl.core.sizing.planner import plan_layout  # noqa: E402
from deployctl.io.batch import ProbeOutput  # noqa: E402
from support.fakefleet import FakeFleet  # noqa: E402
from recording import RecordingReporter  # noqa: E402

INV = EXAMPLES / "a2-2x8-tp-pp.yaml"
CDIR = "/var/lib/deployctl/x"
EVIL = 'revisions/{{ lookup("pipe", "id > /tmp/pwned") }}'
REV_A, REV_B = "0123456789abcdef", "fedcba9876543210"
RUNNING = '{"Status": "running", "ExitCode": 0, "StartedAt": "2026-11-24T00:00:00Z"}\n[]\n[]\n'


@pytest.fixture(scope="module")
def inv():
    return load_and_validate(INV)


@pytest.fixture(scope="module")
def plan(inv):
    return plan_layout(inv)


def run_id(i: int, op: str = "up") -> str:
    return f"20260101T0000{i:02d}.000000Z-{op}"


def entry(i: int, revision: int, nodes: dict[str, str], op: str = "up", **kw) -> dict:
    doc = {"revision": revision, "run_id": run_id(i, op), "time": f"2026-01-01T00:00:{i:02d}+00:00",
           "user": "ops@ctl", "deployctl": "0.1.0", "operation": op, "result": "successful", "summary": "s",
           "inventory_digest": "0" * 16, "nodes": nodes, "files": {n: {"env": "a" * 64} for n in nodes}, **kw}
    return seal(doc)


def files(path: str, docs: dict[str, object]) -> str:
    return "".join(f"@@file {path}/{name}\n{d if isinstance(d, str) else json.dumps(d)}\n" for name, d in docs.items())


def outputs(plan, node: str, **over: tuple[int, str]) -> dict[str, ProbeOutput]:
    keys = dict(state_commands(plan, node, CDIR, health=True))
    out = {k: ProbeOutput(k, 0, RUNNING) for k in keys if k.startswith("dep.container.")}
    out.update({k: ProbeOutput(k, rc, text) for k, (rc, text) in over.items()})
    return out


# -- parse_state: each lie is a finding naming the host, the rest of what it said is still read ----------------
def test_a_current_link_to_a_template_is_no_revision(plan):
    s = parse_state(plan, "node1", outputs(plan, "node1", **{"dep.current": (0, EVIL + "\n"),
                                                            "dep.previous": (0, f"revisions/{REV_A}\n")}))
    assert s.current_rev is None and s.previous_rev == REV_A
    assert any(f.startswith("node1: `current` points at") and "not a deployctl revision" in f for f in s.findings)


def test_manifests_and_history_that_do_not_parse_are_ignored_with_a_finding(plan):
    good = {"revision": REV_A, "run": run_id(1), "files": {"env": "a" * 64}, "env_digest": "1" * 16}
    mans = files(f"{CDIR}/revisions", {f"{REV_A}/.deployctl.json": good,
                                       "{{x}}/.deployctl.json": {**good, "revision": "{{ lookup('pipe','id') }}"},
                                       f"{REV_B}/.deployctl.json": "not json"})
    notime = {k: v for k, v in entry(2, 2, {"node1": REV_A}).items() if k not in ("time", "digest")}
    hist_text = files(f"{CDIR}/history", {f"{run_id(1)}.json": entry(1, 1, {"node1": REV_A}),
                                          f"{run_id(2)}.json": notime,
                                          f"{run_id(3)}.json": entry(3, 0, {"node1": REV_A}),
                                          f"{run_id(4)}.json": {**entry(4, 4, {"node1": REV_A}), "revision": 9},
                                          "x.json": entry(5, 5, {"node1": REV_A}),
                                          f"{run_id(6)}.json": {**entry(6, 6, {"node1": EVIL})},
                                          "y.json": [1, 2]})
    s = parse_state(plan, "node1", outputs(plan, "node1", **{"dep.manifests": (0, mans), "dep.history": (0, hist_text)}))
    assert list(s.revisions) == [REV_A] and s.revisions[REV_A].env_digest == "1" * 16
    assert [e.run_id for e in s.history] == [run_id(1)]
    text = "\n".join(s.findings)
    for name in (f"{run_id(2)}.json", f"{run_id(3)}.json", "y.json", f"{run_id(6)}.json"):
        assert f"node1: history/{name} is not a deployctl history entry" in text
    assert f"node1: history/{run_id(4)}.json does not match its own digest" in text
    assert "node1: history/x.json holds run" in text
    assert "not a deployctl revision manifest" in text and f"{REV_B}/.deployctl.json is not JSON" in text


@pytest.mark.parametrize("answer", ["[]\n[]\n[]\n", "[]\n", "null\nnull\nnull\n", '{"Status": 5}\n[7]\n["a"]\n',
                                    '"x"\n{}\n{}\n', "junk\x1b]0;pwned\x07\n"])
def test_docker_inspect_junk_is_an_unknown_container_not_a_crash(plan, answer):
    keys = [k for k in dict(state_commands(plan, "node1", CDIR, health=True)) if k.startswith("dep.container.")]
    s = parse_state(plan, "node1", outputs(plan, "node1", **{keys[0]: (0, answer)}))
    name = next(iter(s.containers))
    assert s.containers[name].status == "unknown"
    assert any(f.startswith(f"node1: `docker inspect {name}` answered") for f in s.findings)
    assert not any("\x1b" in f for f in s.findings)


def test_a_lock_with_a_non_numeric_pid_is_not_a_lock_owner(plan):
    lock = json.dumps({"user": "u", "host": socket.gethostname(), "pid": "abc", "command": "c",
                       "run_id": run_id(1), "started": "2026-01-01T00:00:00+00:00"})
    s = parse_state(plan, "node1", outputs(plan, "node1", **{"dep.lock": (0, lock)}))
    assert s.lock is None and s.findings == ["node1: the lock file is not a deployctl lock (it still counts as held)"]
    assert LockOwner.from_json(lock) is None


@pytest.mark.parametrize("count", ["²\n", "9" * 40])
def test_a_ready_line_count_that_is_no_number_is_no_readiness(count):
    plan = plan_layout(load_and_validate(EXAMPLES / "vllm-a2-2x8-v32-dp-ep.yaml"))
    s = parse_state(plan, "node2", outputs(plan, "node2", **{"dep.readylog": (0, count)}))
    assert s.ready is None


def test_a_host_listing_endless_history_files_is_read_up_to_a_bound(plan):
    many = "".join(f"@@file {CDIR}/history/{i}.json\n{{}}\n" for i in range(20000))
    s = parse_state(plan, "node1", outputs(plan, "node1", **{"dep.history": (0, many)}))
    assert s.history == [] and s.findings[0] == "node1: 20000 history files, only the first 4096 read"


# -- the merge: a host cannot forge another host's entry; pruning is per host -----------------------------------
def states_of(plan, per_node: dict[str, dict]):
    out = {}
    for node, docs in per_node.items():
        text = files(f"{CDIR}/history", {f"{d['run_id']}.json": d for d in docs["history"]})
        mans = files(f"{CDIR}/revisions", {f"{r}/.deployctl.json": {"revision": r, "files": {"env": "a" * 64}}
                                           for r in docs.get("revisions", ())})
        out[node] = parse_state(plan, node, outputs(plan, node, **{
            "dep.history": (0, text), "dep.manifests": (0, mans),
            "dep.current": (0, f"revisions/{docs['current']}") if docs.get("current") else (1, "")}))
    return out


def test_copies_that_disagree_are_used_from_no_host_and_named(plan):
    e1, e2 = entry(1, 1, {"node1": REV_A, "node2": REV_B}), entry(2, 2, {"node1": REV_A, "node2": REV_B})
    forged = {k: v for k, v in {**e2, "nodes": {"node1": REV_A, "node2": REV_A}}.items() if k != "digest"}
    legacy = {k: v for k, v in entry(3, 3, {"node1": REV_A, "node2": REV_B}).items() if k != "digest"}
    states = states_of(plan, {"node1": {"history": [e1, forged, legacy]}, "node2": {"history": [e1, e2, legacy]}})
    assert [e["revision"] for e in hist.merged(states)] == [1, 3]     # 3: written before digests existed, agreed
    m = hist.merge(states)
    assert [f.split(":")[0] for f in m.findings] == ["node1", "node2"]
    assert all(f"history entry {run_id(2)} (revision 2) differs" in f for f in m.findings)
    with pytest.raises(UsageError, match="no revision 2"):
        hist.rollback_target(m.entries, states, 2)


def test_revision_zero_copies_on_one_host_prune_nothing_on_another(plan):
    honest = [entry(1, 1, {"node1": REV_A, "node2": "00000000000000b1"}), entry(2, 2, {"node1": REV_A, "node2": REV_B})]
    lies = [seal({**e, "revision": 0}) for e in honest]
    lies += [entry(10 + i, 10 + i, {}) for i in range(4)]          # fresh entries only the liar holds
    states = states_of(plan, {"node1": {"history": lies, "revisions": [REV_A]},
                              "node2": {"history": honest, "revisions": [REV_B, "00000000000000b1"],
                                        "current": REV_B}})
    merged = hist.merge(states)
    new = seal({**entry(20, hist.next_revision(merged), {"node1": REV_A, "node2": REV_B})})
    assert new["revision"] == 14
    p = hist.prune_plan(new, states, keep=3)
    assert "node2" not in p.history and "node2" not in p.revisions      # its own 3 deployments are kept
    assert p.history["node1"] == [run_id(10), run_id(11)]        # the liar prunes only itself


def test_rollback_needs_the_target_host_to_hold_the_entry_and_its_files_intact(plan):
    e1 = entry(1, 1, {"node1": REV_A, "node2": REV_B})
    e2 = entry(2, 2, {"node1": "00000000000000a2", "node2": "00000000000000b2"})
    base = {"node1": {"history": [e1, e2], "revisions": [REV_A]}, "node2": {"history": [e1, e2], "revisions": [REV_B]}}
    states = states_of(plan, base)
    assert hist.rollback_target(hist.merged(states), states, 1)["run_id"] == run_id(1)
    # node1 alone serves entry 3 (fresh, with valid revisions): node2 does not hold it itself
    e3 = entry(3, 3, {"node1": REV_A, "node2": REV_B})
    states = states_of(plan, {**base, "node1": {**base["node1"], "history": [e1, e2, e3]}})
    with pytest.raises(UsageError, match=r"node2 \(its own history does not hold this entry\)"):
        hist.rollback_target(hist.merged(states), states, 3)
    # node2's manifest of the revision does not have the entry's files
    e4 = entry(4, 4, {"node1": REV_A, "node2": REV_B}, files={"node1": {"env": "a" * 64}, "node2": {"env": "b" * 64}})
    states = states_of(plan, {n: {**d, "history": [e1, e2, e4]} for n, d in base.items()})
    with pytest.raises(UsageError, match="node2 .its revision's manifest does not match"):
        hist.rollback_target(hist.merged(states), states, 4)


# -- the commands, in memory: every one keeps working for the honest host ---------------------------------------
@pytest.fixture
def fleet(inv, plan):
    return FakeFleet([n.name for n in plan.nodes], cluster_dir(plan), f"deployctl_{inv.cluster.name}_mindie")


def op(operation, inv, fleet, tmp_path, env=None, **kw):
    if env:
        inv = inv.model_copy(update={"engine": inv.engine.model_copy(update={"env": env})})
    inv = inv.model_copy(update={"deploy": inv.deploy.model_copy(update={"keep_revisions": 3})})
    opts = UpOptions(yes=True, skip_preflight=True, run_root=tmp_path / "runs", inventory_dir=INV.parent, **kw)
    rep = RecordingReporter()
    return run_hosts_operation(operation, inv, opts, rep, lambda c: True, executor=fleet, runner=fleet), rep


def lie(fleet, honest_runs: list[str]) -> None:
    """node1 rewrites its copies of the honest entries (revision 0), adds fresh ones and junk, and its docker
    inspect answers `[]`."""
    h = fleet.hosts["node1"]
    first, second = sorted(honest_runs)
    old = json.loads(h.history[first])
    h.history[first] = json.dumps({**json.loads(h.history[first]), "revision": 0})
    forged = json.loads(h.history[second])
    forged["nodes"]["node2"] = json.loads(h.history[first])["nodes"]["node2"]      # steer node2 elsewhere
    h.history[second] = json.dumps(seal(forged))
    for i in range(4):
        h.history[run_id(40 + i)] = json.dumps(seal({**entry(40 + i, 100 + i, {}), "nodes": old["nodes"],
                                                     "files": old["files"]}))
    h.history["notime"] = json.dumps({k: v for k, v in json.loads(h.history[honest_runs[0]]).items() if k != "time"})
    h.current = '{{ lookup("pipe", "id") }}'
    one = fleet._one

    def answer(name, argv):
        if name == "node1" and argv[:2] == ["docker", "inspect"]:
            return 0, "[]\n[]\n[]"
        return one(name, argv)
    fleet._one = answer


def test_status_history_rollback_down_and_up_survive_a_lying_host(inv, plan, fleet, tmp_path):
    for level in ("a", "b"):
        out, _ = op("up", inv, fleet, tmp_path, env={"MINDIE_LOG_LEVEL": level})
        assert out.status == "successful"
    honest = dict(fleet.hosts["node2"].history)
    node2_revs = set(fleet.hosts["node2"].revisions)
    lie(fleet, list(honest))
    states = read_deployed(plan, host_targets_abs(inv, INV.parent), fleet, fleet.cdir, health=True)
    st = judge(plan, states)
    assert st.state == "degraded" and st.rows[1]["engine"] == "running"
    assert st.rows[1]["revision"] == st.rows[1]["current"] == fleet.hosts["node2"].current
    assert st.rows[0]["engine"] == "unknown"
    assert any(f.startswith("node1: `current` points at") for f in st.findings)
    assert any(f.startswith("node1: history/notime.json is not a deployctl history entry") for f in st.findings)
    rows = hist.rows(hist.merged(states), states)
    # revision 1: node1's copy is no entry, node2's is used; revision 2: the copies differ, none is used
    assert [r.revision for r in rows] == [1, 100, 101, 102, 103]
    assert any(f.startswith("node1: its copy of history entry") and "(revision 2) differs" in f for f in st.findings)
    with pytest.raises(UsageError, match="no revision 2 "):
        op("rollback", inv, fleet, tmp_path, to=2)
    with pytest.raises(UsageError, match=r"node1 \(its own history does not hold this entry\)"):
        op("rollback", inv, fleet, tmp_path, to=1)
    with pytest.raises(UsageError, match=r"not held intact .*node2 \(its own history does not hold"):
        op("rollback", inv, fleet, tmp_path, to=103)
    out, rep = op("up", inv, fleet, tmp_path, env={"MINDIE_LOG_LEVEL": "c"})
    assert any("node1: its copy of history entry" in line for line in rep.lines)
    # node1's lies stopped the read-back there (its containers are unknown), node2 ran its part; nothing of
    # node2's was pruned because of node1
    assert set(honest) <= set(fleet.hosts["node2"].history) and node2_revs <= set(fleet.hosts["node2"].revisions)
    out, rep = op("down", inv, fleet, tmp_path)
    assert fleet.hosts["node2"].containers == {}
    assert out.status in ("successful", "failed")


def test_a_held_lock_with_a_non_numeric_pid_refuses_cleanly(inv, fleet, tmp_path):
    fleet.hosts["node1"].lock = json.dumps({"user": "u", "host": socket.gethostname(), "pid": "abc",
                                            "command": "c", "run_id": run_id(1), "started": "2026-01-01T00:00:00Z"})
    with pytest.raises(LockHeld, match="locked on node1 .* by an unreadable lock"):
        op("up", inv, fleet, tmp_path)


# -- restarts by `watch` in the hosts' history (deploy/restarts.py) ---------------------------------------------
def test_a_restart_entry_is_read_back_shown_never_live_never_a_rollback_target(plan):
    from deployctl.backends.hosts.restarts import restart_entry

    up1, up2 = entry(1, 1, {"node1": REV_A, "node2": REV_B}), entry(2, 2, {"node1": REV_A, "node2": REV_B})
    ev = {"ts": 1795669451.5, "event": "back", "instance": "mixed-0", "nodes": ["node1"],
          "cause": 'restarted and ready after 5.3 s {{ lookup("pipe", "id") }} \x1b[31m'}
    from deployctl.core.models.hostdata import clean_entry

    r3 = seal(clean_entry(restart_entry(ev, 3, run_id(3, "restart"), "ops@ctl", "0.1.0")))
    held = {"history": [up1, up2, r3], "revisions": [REV_A, REV_B], "current": REV_A}
    states = states_of(plan, {"node1": held, "node2": {**held, "current": REV_B}})
    assert hist.findings(states) == []
    entries = hist.merged(states)
    assert [(e["revision"], e["operation"]) for e in entries] == [(1, "up"), (2, "up"), (3, "restart")]
    rows = hist.rows(entries, states)
    assert rows[2].operation == "restart" and rows[2].result == "successful" and not rows[2].live
    assert rows[2].changed == "engine containers restarted, no file changed" and rows[1].live
    assert "mixed-0 on node1" in rows[2].summary and "\x1b" not in rows[2].summary     # host text stays data
    with pytest.raises(UsageError, match="revision 3 is a successful restart"):
        hist.rollback_target(entries, states, 3)
    assert hist.next_revision(hist.merge(states)) == 4
    # a failed restart says why; a copy one host changed is used from no host (like every entry)
    failed = seal(clean_entry(restart_entry({**ev, "event": "restart-failed", "cause": "not ready in time"}, 4,
                                            run_id(4, "restart"), "ops@ctl", "0.1.0")))
    forged = seal({**failed, "result": "successful"})
    states = states_of(plan, {"node1": {**held, "history": [up1, up2, r3, failed]},
                              "node2": {**held, "history": [up1, up2, r3, forged], "current": REV_B}})
    assert [e["revision"] for e in hist.merged(states)] == [1, 2, 3]
    assert any("history entry " + run_id(4, "restart") in f for f in hist.findings(states))
    only = states_of(plan, {"node1": {**held, "history": [up1, up2, r3, failed]}, "node2": {**held, "current": REV_B}})
    row = hist.rows(hist.merged(only), only)[-1]
    assert (row.operation, row.result) == ("restart", "failed") and hist.merged(only)[-1]["failure"] == \
        "not ready in time"
