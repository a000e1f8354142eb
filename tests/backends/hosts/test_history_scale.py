"""`scale-up` / `scale-down` entries in the hosts' history (deployctl.backends.hosts.history): they say what runs
(live entries, the previous entry of the next row's "changed"), they are no rollback target, and a scale-down is
described as the instance removed from its servers."""

from __future__ import annotations

import pytest

from deployctl.backends.hosts.history import live_entry, rollback_target, rows
from deployctl.core.errors import UsageError
from deployctl.core.models.deploy import DeployedState


def entry(revision: int, operation: str, nodes: dict[str, str], result: str = "successful") -> dict:
    return {"revision": revision, "run_id": f"run-{revision}", "time": f"2026-01-01T00:0{revision}:00+00:00",
            "user": "ops", "operation": operation, "result": result, "summary": "", "nodes": nodes, "files": {}}


def states(**current: str) -> dict[str, DeployedState]:
    return {n: DeployedState(node=n, current_rev=rev) for n, rev in current.items()}


UP = entry(1, "up", {"n1": "a", "n2": "a"})
SCALE_UP = entry(2, "scale-up", {"n1": "a", "n2": "a", "n3": "a", "n4": "a"})
SCALE_DOWN = entry(3, "scale-down", {"n1": "a", "n2": "a"})


@pytest.mark.parametrize("operation", ["scale-up", "scale-down"])
def test_a_successful_scale_entry_the_hosts_agree_with_is_live(operation):
    e = entry(2, operation, {"n1": "a", "n2": "a"})
    assert live_entry([UP, e], states(n1="a", n2="a")) is e


def test_a_scale_up_entry_is_live_with_its_added_nodes():
    assert live_entry([UP, SCALE_UP], states(n1="a", n2="a", n3="a", n4="a")) is SCALE_UP
    assert live_entry([UP, SCALE_UP, SCALE_DOWN], states(n1="a", n2="a")) is SCALE_DOWN


def test_a_scale_entry_the_hosts_do_not_agree_with_is_not_live():
    # n3 runs something else than the scale-up says: nothing is live (as for an up entry)
    assert live_entry([UP, SCALE_UP], states(n1="a", n2="a", n3="b", n4="a")) is None


def test_a_failed_scale_entry_is_passed_over():
    failed = entry(2, "scale-up", {"n1": "a", "n2": "a", "n3": "x"}, result="failed")
    assert live_entry([UP, failed], states(n1="a", n2="a")) is UP


def test_rows_describe_a_scale_down_as_the_instance_removed_from_its_servers():
    out = rows([UP, SCALE_UP, SCALE_DOWN], states(n1="a", n2="a"))
    assert [(r.revision, r.operation) for r in out] == [(1, "up"), (2, "scale-up"), (3, "scale-down")]
    # against the scale-up before it (a live entry): n3 and n4 are gone
    assert out[2].changed == "instance removed from n3, n4"
    assert [r.live for r in out] == [False, False, True]


def test_rows_of_a_scale_down_with_no_server_gone_say_instance_removed():
    out = rows([UP, entry(2, "scale-down", {"n1": "a", "n2": "a"})], states(n1="a", n2="a"))
    assert out[1].changed == "instance removed"


def test_a_scale_up_is_the_previous_entry_of_what_follows_it():
    # an up after a scale-up is compared with the scale-up (its files), not with the up before it
    up1 = {**entry(1, "up", {"n1": "a"}), "files": {"n1": {"engine.env": "1"}}}
    grown = {**entry(2, "scale-up", {"n1": "a", "n3": "a"}),
             "files": {"n1": {"engine.env": "1"}, "n3": {"engine.env": "1"}}}
    up3 = {**entry(3, "up", {"n1": "b", "n3": "b"}), "files": {"n1": {"engine.env": "2"}, "n3": {"engine.env": "1"}}}
    # against the up, n3's file would be new too ("engine.env on n1, n3")
    assert rows([up1, grown, up3], states(n1="b", n3="b"))[2].changed == "engine.env on n1"


def test_a_scale_entry_is_no_rollback_target_by_number():
    for e in (SCALE_UP, SCALE_DOWN):
        with pytest.raises(UsageError) as exc:
            rollback_target([UP, SCALE_UP, SCALE_DOWN], states(n1="a", n2="a"), e["revision"])
        assert f"revision {e['revision']} is a successful {e['operation']}" in exc.value.message
        assert exc.value.message.endswith("only a successful deployment can be rolled back to")


def test_without_a_number_a_scale_entry_is_not_the_one_rolled_back_to():
    # the live deployment is the scale-down (n1, n2 at a); the only different successful entry before it is
    # the scale-up: it is no deployment to go back to
    with pytest.raises(UsageError) as exc:
        rollback_target([UP, SCALE_UP, SCALE_DOWN], states(n1="a", n2="a"), None)
    assert exc.value.message == "no earlier successful deployment to roll back to (revisions: 1)"
