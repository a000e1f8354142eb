"""One host cannot break the history numbering (issue 34, observation 6): a history entry numbered 10^9 on one host
made every later entry (up, rollback, down, watch's restarts) 10^9+1 on every host, a number deployctl's own
parser refuses, so no live revision and no rollback target were left anywhere.

The next number now follows the agreed history (deployctl/backends/hosts/history.py: the entries a majority of the hosts
keeping a history hold; a copy more than AHEAD numbers past them is an outlier, named with its host), and no writer
writes an entry the parser would not read back. In memory (tests/support/fakefleet.py); the same forgery on
simulated hosts is in test_hostile_numbering_e2e.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest


from conftest import EXAMPLES  # noqa: E402
from deployctl.app.inventory import read_inventory as load_and_validate  # noqa: E402
from deployctl.backends.hosts import history as hist  # noqa: E402
from deployctl.backends.hosts.hosts import host_targets_abs  # noqa: E402
from deployctl.backends.hosts.remote import read_deployed  # noqa: E402
from deployctl.backends.hosts.restarts import history_recorder  # noqa: E402
from deployctl.backends.hosts.revision import cluster_dir  # noqa: E402
from deployctl.backends.hosts.up import UpOptions, run_hosts_operation  # noqa: E402
from deployctl.core.errors import DeployctlError, UsageError  # noqa: E402
from deployctl.core.models.hostdata import MAX_HISTORY, seal  # noqa: E402
from deployctl.core.sizing.planner import plan_layout  # noqa: E402
from support.fakefleet import FakeFleet  # noqa: E402
from recording import RecordingReporter  # noqa: E402

INV = EXAMPLES / "a2-2x8-tp-pp.yaml"
FORGED_RUN = "20990101T000000.000000Z-up"
MAX_REVISION = 10**9            # the parser's bound (deployctl.core.models.hostdata.MAX_REVISION)


@pytest.fixture(scope="module")
def inv():
    return load_and_validate(INV)


@pytest.fixture(scope="module")
def plan(inv):
    return plan_layout(inv)


@pytest.fixture
def fleet(inv, plan):
    return FakeFleet([n.name for n in plan.nodes], cluster_dir(plan), f"deployctl_{inv.cluster.name}_mindie")


def op(operation, inv, fleet, tmp_path, level=None, **kw):
    if level:
        inv = inv.model_copy(update={"engine": inv.engine.model_copy(update={"env": {"MINDIE_LOG_LEVEL": level}})})
    opts = UpOptions(yes=True, skip_preflight=True, run_root=tmp_path / "runs", inventory_dir=INV.parent, **kw)
    rep = RecordingReporter()
    return run_hosts_operation(operation, inv, opts, rep, lambda c: True, executor=fleet, runner=fleet), rep


def forge(fleet, node: str, revision: int, run: str = FORGED_RUN) -> None:
    """``node`` gets one more entry: a sealed copy of its last one, renumbered ``revision`` (it names both hosts)."""
    h = fleet.hosts[node]
    last = max((json.loads(t) for t in h.history.values()), key=lambda e: e["revision"])
    h.history[run] = json.dumps(seal({**last, "revision": revision, "run_id": run}))


def numbers(fleet, node: str) -> list[int]:
    return sorted(json.loads(t)["revision"] for t in fleet.hosts[node].history.values())


def states(inv, plan, fleet):
    return read_deployed(plan, host_targets_abs(inv, INV.parent), fleet, fleet.cdir, health=True)


def two_ups(inv, fleet, tmp_path) -> None:
    for level in ("a", "b"):
        out, _ = op("up", inv, fleet, tmp_path, level)
        assert out.status == "successful"
    assert numbers(fleet, "node1") == numbers(fleet, "node2") == [1, 2]


def test_one_host_numbered_1e9_does_not_number_the_next_entries(inv, plan, fleet, tmp_path):
    """Observation 6: up, rollback, down and a watch restart after node1's entry 10^9 are numbered 3, 4, 5, 6 on
    both hosts, read back by the parser: a live revision and a rollback target remain; node1 is named."""
    two_ups(inv, fleet, tmp_path)
    forge(fleet, "node1", MAX_REVISION)

    out, rep = op("up", inv, fleet, tmp_path, "c")
    assert out.status == "successful"
    assert numbers(fleet, "node2") == [1, 2, 3]                 # before the fix: [1, 2, 1000000001]
    named = [line for line in rep.lines if f"node1: history entry {FORGED_RUN} is numbered 1000000000" in line]
    assert named and "remove history/" in named[0]
    s = states(inv, plan, fleet)
    entries = hist.merged(s)
    assert [e["revision"] for e in entries] == [1, 2, 3]
    assert hist.live_entry(entries, s)["revision"] == 3
    assert hist.rollback_target(entries, s, None)["revision"] == 2

    out, _ = op("rollback", inv, fleet, tmp_path)
    assert out.status == "successful"
    out, _ = op("down", inv, fleet, tmp_path)
    assert out.status == "successful"
    record = history_recorder(plan, fleet, host_targets_abs(inv, INV.parent))
    assert record({"ts": 1795669451.5, "event": "back", "instance": plan.instances[0].name, "cause": "ready"}) == []
    s = states(inv, plan, fleet)
    assert [(e["revision"], e["operation"]) for e in hist.merged(s)] == [
        (1, "up"), (2, "up"), (3, "up"), (4, "rollback"), (5, "down"), (6, "restart")]
    assert numbers(fleet, "node2") == [1, 2, 3, 4, 5, 6] and not any(f.endswith("is not a deployctl history entry")
                                                                      for f in hist.findings(s))


def test_numbers_a_little_ahead_still_count_and_a_majority_is_not_outvoted(inv, plan, fleet, tmp_path):
    """A host holding entries the others missed (a write that failed there) keeps them numbered: never one number
    twice. A number far ahead of the agreed history is the outlier, whichever host holds it."""
    two_ups(inv, fleet, tmp_path)
    forge(fleet, "node1", 5)                          # within AHEAD of 2: an entry node2 may have missed
    s = states(inv, plan, fleet)
    m = hist.merge(s)
    assert (m.agreed, m.top, hist.next_revision(m)) == (2, 5, 6)
    forge(fleet, "node2", 2 + MAX_HISTORY + 1, "20990101T000001.000000Z-up")
    m = hist.merge(states(inv, plan, fleet))
    assert hist.next_revision(m) == 6
    assert [f.split(":")[0] for f in m.findings if "more than" in f] == ["node2"]


def test_a_history_the_hosts_agree_ends_at_the_bound_refuses_up_and_down_writes_no_entry(inv, plan, fleet, tmp_path):
    """Every host agrees on 10^9 (a single-host deployment, or all hosts forged): `up` and `rollback` refuse before
    changing anything (exit 2, where the number is and a hint); `down` still stops the containers and says that
    its entry was not written. No entry numbered past the bound is ever written."""
    two_ups(inv, fleet, tmp_path)
    for node in ("node1", "node2"):
        forge(fleet, node, MAX_REVISION)
    before = {n: dict(h.history) for n, h in fleet.hosts.items()}
    with pytest.raises(UsageError) as err:
        op("up", inv, fleet, tmp_path, "c")
    assert "numbered up to 1000000000 on node1 (history/" in err.value.message and "remove it" in err.value.hint
    with pytest.raises(UsageError, match="the last number a history entry can have"):
        op("rollback", inv, fleet, tmp_path, to=1)
    out, rep = op("down", inv, fleet, tmp_path)
    assert out.status == "successful" and all(not h.containers for h in fleet.hosts.values())
    assert any("history entry not written: the hosts' history is numbered up to 1000000000" in line
               for line in rep.lines)
    record = history_recorder(plan, fleet, host_targets_abs(inv, INV.parent))
    with pytest.raises(DeployctlError, match="no entry can follow it"):
        record({"ts": 1795669451.5, "event": "back", "instance": plan.instances[0].name, "cause": "ready"})
    assert {n: dict(h.history) for n, h in fleet.hosts.items()} == before


def test_the_writer_refuses_an_entry_the_parser_would_not_read_back():
    """hist.write_argv, used by up, rollback, down and watch's restarts: never a number past the parser's bound."""
    entry = seal({"revision": MAX_REVISION + 1, "run_id": "20260101T000000.000000Z-up",
                  "time": "2026-01-01T00:00:00+00:00", "operation": "up", "result": "successful", "nodes": {},
                  "files": {}})
    with pytest.raises(DeployctlError, match="would not be read back .revision"):
        hist.write_argv("/var/lib/deployctl/x", entry)
    assert hist.write_argv("/var/lib/deployctl/x", seal({**entry, "revision": MAX_REVISION}))[0] == "sh"
