"""The deploy pipeline on the hosts backend, with an in-memory fleet (tests/support/fakefleet.py): lock
contention, verification against what the containers really run, undo, history, rollback target
choice and the failure descriptions. Milliseconds, no root."""

from __future__ import annotations

import json
import threading

import pytest

from conftest import EXAMPLES
from deployctl.app.inventory import read_inventory as load_and_validate
from deployctl.backends.common.lockinfo import LockHeld, LockOwner
from deployctl.backends.hosts.revision import cluster_dir
from deployctl.backends.hosts.up import UpOptions, run_hosts_operation
from deployctl.core.errors import ExecutionError, UsageError
from deployctl.core.sizing.planner import plan_layout
from support.fakefleet import FakeFleet
from recording import RecordingReporter

INV = EXAMPLES / "a2-2x8-tp-pp.yaml"


@pytest.fixture
def inv():
    return load_and_validate(INV)


@pytest.fixture
def fleet(inv):
    plan = plan_layout(inv)
    return FakeFleet([n.name for n in plan.nodes], cluster_dir(plan), f"deployctl_{inv.cluster.name}_mindie")


def op(operation, inv, fleet, tmp_path, env=None, **kw):
    if env:
        inv = inv.model_copy(update={"engine": inv.engine.model_copy(update={"env": env})})
    opts = UpOptions(yes=True, skip_preflight=True, run_root=tmp_path / "runs", inventory_dir=INV.parent, **kw)
    rep = RecordingReporter()
    out = run_hosts_operation(operation, inv, opts, rep, lambda c: True, executor=fleet, runner=fleet)
    return out, rep


def engine(fleet, node="node1"):
    return fleet.hosts[node].containers.get(fleet.engine)


def test_up_is_successful_only_when_read_back_and_records_history(inv, fleet, tmp_path):
    out, rep = op("up", inv, fleet, tmp_path)
    assert out.status == "successful", rep.lines
    assert [u.ok for u in out.verification.units] == [True, True]
    assert "smoke answered 'hello from node1'" in out.verification.units[0].observed
    for h in fleet.hosts.values():
        assert h.lock is None                                    # released
        (entry,) = [json.loads(t) for t in h.history.values()]
        assert entry["revision"] == 1 and entry["result"] == "successful" and entry["operation"] == "up"
    stages = [s for s, _ in out.stages]
    assert stages == ["read", "render", "diff", "lock", "apply", "verify", "record"]
    again, _ = op("up", inv, fleet, tmp_path)
    assert again.status == "nothing-to-do"


def test_ansible_matching_no_hosts_is_a_failure_not_success(inv, fleet, tmp_path):
    fleet.faults["no_hosts_matched"] = True
    out, rep = op("up", inv, fleet, tmp_path)
    assert out.status == "failed" and out.exit_code == 1
    assert "matched no hosts" in out.failure
    assert engine(fleet) is None


def test_a_container_that_exits_after_its_start_task_said_ok_fails_the_run(inv, fleet, tmp_path):
    fleet.faults["exits_after_start"] = "node2"
    out, rep = op("up", inv, fleet, tmp_path)
    assert out.status == "failed"
    bad = out.verification.failures
    assert [u.unit for u in bad] == ["node2"] and "engine container exited (exit code 139)" in bad[0].cause
    # nothing ran before: the undo leaves no container, and says so after reading the hosts
    assert engine(fleet, "node1") is None and engine(fleet, "node2") is None
    assert out.restored.ok
    entry = json.loads(next(iter(fleet.hosts["node1"].history.values())))
    assert entry["result"] == "failed" and "node2" in entry["failure"]


def test_a_container_mounting_another_revision_or_env_is_a_verification_failure(inv, fleet, tmp_path):
    first, _ = op("up", inv, fleet, tmp_path)
    old = first.changes.hosts[0].rev
    fleet.faults["mount_other"] = {"node1": old}
    fleet.faults["env_drift"] = "node2"
    out, rep = op("up", inv, fleet, tmp_path, env={"MINDIE_LOG_LEVEL": "debug"})
    causes = {u.unit: u.cause for u in out.verification.failures}
    assert causes["node1"].startswith(f"the container runs revision {old}, not ")
    assert causes["node2"] == "the container's environment differs from its revision's env file"
    # the undo restored the first revision everywhere, read back
    assert out.restored.ok and {engine(fleet, n).rev for n in ("node1", "node2")} >= {old}


def test_skipped_smoke_test_is_a_failure(inv, fleet, tmp_path):
    fleet.faults["smoke_skipped"] = True
    out, _ = op("up", inv, fleet, tmp_path)
    assert out.status == "failed"
    assert "smoke request did not answer" in out.verification.failures[0].cause


def test_a_held_lock_refuses_at_once_naming_the_holder(inv, fleet, tmp_path):
    other = LockOwner("alice", "ws7", 4242, "deployctl up", "run-alice", "2026-11-24T00:00:00+00:00",
                      "2099-01-01T00:00:00+00:00")
    fleet.hosts["node1"].lock = other.to_json()
    with pytest.raises(LockHeld) as err:
        op("up", inv, fleet, tmp_path)
    msg = err.value.render()
    assert "alice@ws7 (pid 4242, `deployctl up`, run run-alice)" in msg and "since 2026-11-24" in msg
    assert err.value.exit_code == 1 and not err.value.stale
    assert fleet.playbooks == []                                # nothing applied
    assert fleet.hosts["node1"].lock == other.to_json()         # theirs is untouched
    assert fleet.hosts["node2"].lock is None                    # the first host is taken first, alone


def test_a_lock_taken_on_a_later_host_releases_ours(inv, fleet, tmp_path):
    other = LockOwner("bob", "ws8", 1, "deployctl up", "run-bob", "2026-11-24T00:00:00+00:00",
                      "2099-01-01T00:00:00+00:00")
    fleet.hosts["node2"].lock = other.to_json()
    with pytest.raises(LockHeld):
        op("up", inv, fleet, tmp_path)
    assert fleet.hosts["node1"].lock is None and fleet.hosts["node2"].lock == other.to_json()


def test_a_stale_lock_is_reported_with_its_age(inv, fleet, tmp_path):
    dead = LockOwner("carol", "gone-host", 1, "deployctl up", "run-c", "2026-01-01T00:00:00+00:00",
                     "2026-01-01T00:00:00+00:00")
    fleet.hosts["node1"].lock = dead.to_json()
    with pytest.raises(LockHeld) as err:
        op("up", inv, fleet, tmp_path)
    assert err.value.stale and "stale lock" in err.value.message and "--break-lock" in err.value.hint


def test_a_change_between_read_and_lock_is_refused(inv, fleet, tmp_path):
    op("up", inv, fleet, tmp_path)

    # another operator's up lands while we wait for the lock: our diff is no longer true
    orig = fleet._script

    def script(h, text, args):
        if 'ln "$t" "$d/lock"' in text:
            fleet.hosts["node2"].containers.clear()
        return orig(h, text, args)

    fleet._script = script
    with pytest.raises(ExecutionError, match="changed on the hosts after it was read"):
        op("up", inv, fleet, tmp_path, env={"MINDIE_LOG_LEVEL": "debug"})
    assert all(h.lock is None for h in fleet.hosts.values())


def test_ctrl_c_during_apply_undoes_and_releases_the_lock(inv, fleet, tmp_path):
    op("up", inv, fleet, tmp_path)
    real = fleet.__call__

    def interrupted(*a, **kw):
        if a[1] == "up.yml":
            raise KeyboardInterrupt
        return real(*a, **kw)

    opts = UpOptions(yes=True, skip_preflight=True, run_root=tmp_path / "runs", inventory_dir=INV.parent)
    new = inv.model_copy(update={"engine": inv.engine.model_copy(update={"env": {"MINDIE_LOG_LEVEL": "debug"}})})
    out = run_hosts_operation("up", new, opts, RecordingReporter(), lambda c: True, executor=fleet, runner=interrupted)
    assert out.status == "canceled" and out.exit_code == 1
    assert all(h.lock is None for h in fleet.hosts.values())


def three_ups_and_a_failed_one(inv, fleet, tmp_path):
    revs = []
    for level in ("info", "debug", "warn"):
        out, _ = op("up", inv, fleet, tmp_path, env={"MINDIE_LOG_LEVEL": level})
        assert out.status == "successful"
        revs.append({h.node: h.rev for h in out.changes.hosts})
    fleet.faults["fail_on"] = "node2"
    out, _ = op("up", inv, fleet, tmp_path, env={"MINDIE_LOG_LEVEL": "error"})
    assert out.status == "failed" and out.restored.ok
    fleet.faults.clear()
    return revs


def test_history_after_three_ups_and_a_failed_one(inv, fleet, tmp_path):
    from deployctl.backends.hosts import history as hist
    from deployctl.backends.hosts.remote import read_deployed
    from deployctl.backends.hosts.hosts import host_targets_abs

    revs = three_ups_and_a_failed_one(inv, fleet, tmp_path)
    plan = plan_layout(inv)
    states = read_deployed(plan, host_targets_abs(inv, INV.parent), fleet, fleet.cdir)
    rows = hist.rows(hist.merged(states), states)
    assert [(r.revision, r.operation, r.result, r.live) for r in rows] == [
        (1, "up", "successful", False), (2, "up", "successful", False), (3, "up", "successful", True),
        (4, "up", "failed", False)]
    assert rows[1].changed == "env on node1, node2" and rows[0].changed == "first deployment"
    assert fleet.hosts["node1"].current == revs[2]["node1"]
    # previous still names revision 2 after the failed run's undo (it is never lost)
    assert fleet.hosts["node1"].previous == revs[1]["node1"]


def test_rollback_to_the_oldest_and_default_target(inv, fleet, tmp_path):
    revs = three_ups_and_a_failed_one(inv, fleet, tmp_path)
    out, rep = op("rollback", inv, fleet, tmp_path, to=1)
    assert out.status == "successful", rep.lines
    assert {n: h.current for n, h in fleet.hosts.items()} == revs[0]
    assert {n: engine(fleet, n).rev for n in fleet.hosts} == revs[0]
    assert {n: h.previous for n, h in fleet.hosts.items()} == revs[2]      # what was live before
    assert not any(p == "up.yml" and g["push"] for p, g in fleet.playbooks[-1:])   # nothing pushed
    # default target: the last successful deployment before the live one (revision 5 = rollback to 1
    # is live now, so the default goes to 3, the last successful one whose files differ)
    out, rep = op("rollback", inv, fleet, tmp_path)
    assert out.status == "successful"
    assert {n: h.current for n, h in fleet.hosts.items()} == revs[2]
    entry = max((json.loads(t) for t in fleet.hosts["node1"].history.values()), key=lambda e: e["revision"])
    assert entry["operation"] == "rollback" and entry["to"] == 3


def test_rollback_refuses_unknown_failed_and_pruned_revisions(inv, fleet, tmp_path):
    three_ups_and_a_failed_one(inv, fleet, tmp_path)
    with pytest.raises(UsageError, match="no revision 9"):
        op("rollback", inv, fleet, tmp_path, to=9)
    with pytest.raises(UsageError, match="revision 4 is a failed up"):
        op("rollback", inv, fleet, tmp_path, to=4)
    rev = json.loads(next(t for t in fleet.hosts["node2"].history.values()
                          if json.loads(t)["revision"] == 1))["nodes"]["node2"]
    del fleet.hosts["node2"].revisions[rev]
    with pytest.raises(UsageError, match="no longer on every host: missing on node2"):
        op("rollback", inv, fleet, tmp_path, to=1)


def test_keep_revisions_prunes_old_ones_but_never_current_or_previous(inv, fleet, tmp_path):
    small = inv.model_copy(update={"deploy": inv.deploy.model_copy(update={"keep_revisions": 2})})
    for level in ("a", "b", "c", "d"):
        out, _ = op("up", small, fleet, tmp_path, env={"MINDIE_LOG_LEVEL": level})
        assert out.status == "successful"
    h = fleet.hosts["node1"]
    assert set(h.revisions) == {h.current, h.previous}
    assert sorted(json.loads(t)["revision"] for t in h.history.values()) == [3, 4]


def test_down_is_verified_and_recorded(inv, fleet, tmp_path):
    op("up", inv, fleet, tmp_path)
    out, _ = op("down", inv, fleet, tmp_path)
    assert out.status == "successful" and all(u.ok for u in out.verification.units)
    assert not any(h.containers for h in fleet.hosts.values())
    again, _ = op("down", inv, fleet, tmp_path)
    assert again.status == "nothing-to-do"


def test_unreachable_host_stops_before_any_change(inv, fleet, tmp_path):
    fleet.hosts["node2"].unreachable = True
    with pytest.raises(ExecutionError, match="cannot read the deployment on 1 host"):
        op("up", inv, fleet, tmp_path)
    assert fleet.playbooks == [] and fleet.hosts["node1"].lock is None


def test_concurrent_ups_one_wins_one_is_refused(inv, fleet, tmp_path):
    """Two operators at once: exactly one applies, the other is refused by the lock, no lock remains."""
    barrier = threading.Barrier(2)
    real = fleet._script

    def script(h, text, args):
        if 'ln "$t" "$d/lock"' in text and h is fleet.hosts["node1"]:
            try:
                barrier.wait(timeout=5)
            except threading.BrokenBarrierError:
                pass
        return real(h, text, args)

    fleet._script = script
    results = []

    def one(i):
        try:
            out, _ = op("up", inv, fleet, tmp_path / f"op{i}")
            results.append(out.status)
        except LockHeld:
            results.append("locked")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == ["locked", "successful"]
    assert all(h.lock is None for h in fleet.hosts.values())
    assert [p for p, _ in fleet.playbooks].count("up.yml") == 1


def judge_now(inv, fleet):
    from deployctl.backends.hosts.hosts import host_targets_abs
    from deployctl.backends.hosts.remote import read_deployed
    from deployctl.backends.hosts.status import judge

    plan = plan_layout(inv)
    return judge(plan, read_deployed(plan, host_targets_abs(inv, INV.parent), fleet, fleet.cdir, health=True))


def test_status_states_come_from_the_containers(inv, fleet, tmp_path):
    assert judge_now(inv, fleet).state == "down"                  # nothing deployed yet
    first, _ = op("up", inv, fleet, tmp_path)
    st = judge_now(inv, fleet)
    assert st.state == "serving" and st.live == 1 and st.exit_code(expect_up=True) == 0
    assert all(r["env_matches"] for r in st.rows)
    # the engine exits behind deployctl's back: degraded, although `current` still names its revision
    engine(fleet, "node2").status, engine(fleet, "node2").exit_code = "exited", 137
    st = judge_now(inv, fleet)
    row = st.rows[1]
    assert st.state == "degraded" and st.exit_code(False) == 1
    assert row["engine"] == "exited" and row["exit_code"] == 137 and "engine container exited" in row["problem"]
    # node1 runs another revision than `current` names: drift
    engine(fleet, "node2").status = "running"
    fleet.hosts["node1"].current = "0123456789abcdef"
    st = judge_now(inv, fleet)
    assert st.rows[0]["problem"].startswith(f"drift: the container runs revision {first.changes.hosts[0].rev}, "
                                            "`current` names 0123456789abcdef")
    fleet.hosts["node1"].current = first.changes.hosts[0].rev
    # its env is not its revision's env file
    engine(fleet, "node1").env["HCCL_BUFFSIZE"] = "1"
    st = judge_now(inv, fleet)
    assert st.state == "degraded" and st.rows[0]["env_matches"] is False
    # a host that cannot be read: unknown
    fleet.hosts["node2"].unreachable = True
    assert judge_now(inv, fleet).state == "unknown"
    fleet.hosts["node2"].unreachable = False
    # a deliberate down: down (exit 0; 1 when up is expected)
    engine(fleet, "node1").env["HCCL_BUFFSIZE"] = fleet.hosts["node1"].revisions[
        fleet.hosts["node1"].current]["env"]["HCCL_BUFFSIZE"]
    op("down", inv, fleet, tmp_path)
    st = judge_now(inv, fleet)
    assert st.state == "down" and st.exit_code(False) == 0 and st.exit_code(True) == 1
    # containers gone without a down: degraded
    op("up", inv, fleet, tmp_path)
    for h in fleet.hosts.values():
        h.containers.clear()
    assert judge_now(inv, fleet).state == "degraded"
