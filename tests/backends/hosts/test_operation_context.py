"""One operation, read once: `up`, `status`, `diff`, `rollback` and `down` (and `history`) each read the
inventory file once and plan at most once (deployctl/backends/common/context.py), run through the CLI against the
in-memory fleet (tests/support/fakefleet.py) standing in for SSH and ansible-runner. Milliseconds, no root."""

from __future__ import annotations

import shutil
import sys

import pytest
from typer.testing import CliRunner

import deployctl.io.ansible as ansible
import deployctl.io.ssh as ssh
import deployctl.io.inventory_file as load
import deployctl.core.sizing.planner as planning
from conftest import EXAMPLES
from deployctl.cli import app
from deployctl.app.inventory import read_inventory as load_and_validate
from deployctl.backends.hosts.revision import cluster_dir
from deployctl.core.errors import ExecutionError, LayoutError
from deployctl.io.executor import HostError
from support.fakefleet import FakeFleet

EXAMPLE = "a2-2x8-tp-pp.yaml"


@pytest.fixture
def counted(tmp_path, monkeypatch):
    """(inventory path, counts): the example copied with its hccn.conf files; the fleet answers SSH and ansible;
    counts["read"] counts reads of the inventory file, counts["plan"] entries into the planner."""
    shutil.copy(EXAMPLES / EXAMPLE, tmp_path / EXAMPLE)
    shutil.copytree(EXAMPLES / "hccn", tmp_path / "hccn")
    inv_path = tmp_path / EXAMPLE
    plan = planning.plan_layout(load_and_validate(inv_path))
    fleet = FakeFleet([n.name for n in plan.nodes], cluster_dir(plan),
                      f"deployctl_{plan.inventory.cluster.name}_mindie")
    monkeypatch.setattr(ssh, "SshExecutor", lambda *a, **k: fleet)
    monkeypatch.setattr(ansible, "run_playbook", fleet)
    counts = {"read": 0, "plan": 0}
    read, plan_layout = load.read_inventory_bytes, planning.plan_layout

    def reading(path):
        counts["read"] += 1
        return read(path)

    def planning_(*a, **k):
        # the planner's entries from outside it (a refusal's hint plans alternatives inside planning/ and perf/)
        if not sys._getframe(1).f_globals["__name__"].startswith(("deployctl.core.sizing", "deployctl.perf")):
            counts["plan"] += 1
        return plan_layout(*a, **k)

    monkeypatch.setattr(load, "read_inventory_bytes", reading)
    monkeypatch.setattr(planning, "plan_layout", planning_)
    return inv_path, counts


def run(counts, *args) -> tuple[int, str]:
    counts.update(read=0, plan=0)
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_each_operation_reads_the_inventory_once_and_plans_at_most_once(counted, tmp_path):
    inv, counts = counted
    runs = str(tmp_path / "runs")
    steps = [
        (["up", "-i", str(inv), "-y", "--skip-preflight", "--run-dir", runs], 0),
        (["status", "-i", str(inv)], 0),
        (["diff", "-i", str(inv), "--run-dir", runs], 0),
        (["history", "-i", str(inv)], 0),
        ("edit", None),                                   # a second revision, to roll back from
        (["up", "-i", str(inv), "-y", "--skip-preflight", "--run-dir", runs], 0),
        (["rollback", "-i", str(inv), "-y", "--run-dir", runs], 0),
        (["down", "-i", str(inv), "--run-dir", runs], 0),
        (["status", "-i", str(inv)], 0),
    ]
    for args, code in steps:
        if args == "edit":
            inv.write_text(inv.read_text().replace("MINDIE_LOG_LEVEL: info", "MINDIE_LOG_LEVEL: debug"))
            continue
        exit_code, output = run(counts, *args)
        if code is not None:
            assert exit_code == code, (args[0], output)
        assert counts["read"] == 1, (args[0], counts)
        assert counts["plan"] <= 1, (args[0], counts)


def test_a_refused_plan_still_reads_once_and_points_into_the_file(counted):
    inv, counts = counted
    inv.write_text(inv.read_text().replace("max_seq_len: 8192", "max_seq_len: 4000000"))
    counts.update(read=0, plan=0)
    with pytest.raises(LayoutError) as refused:      # main() turns it into exit 2 with file:line
        CliRunner().invoke(app, ["up", "-i", str(inv), "-y", "--skip-preflight"], catch_exceptions=False)
    assert counts["read"] == 1 and counts["plan"] <= 1, counts
    assert refused.value.message.startswith(f"{inv}: ")
    assert refused.value.problems and all(p.file == str(inv) and p.line for p in refused.value.problems)


class ProbesUnanswered:
    """The fleet, except that preflight's first probe (the clock) times out on every host."""

    def __init__(self, fleet):
        self.fleet = fleet

    def run(self, target, argv, timeout):
        if argv[:1] == ["date"]:
            raise HostError(target.name, "timeout", f"{target.address}:22 did not answer", "is it up?")
        return self.fleet.run(target, argv, timeout)

    def close(self) -> None:
        pass


def test_up_with_preflight_plans_once_too(counted, monkeypatch):
    """Preflight inside `up` judges the ports from the operation's plan: here no host answers its probes, so
    preflight fails and the run stops before anything changes, after every rule ran on that plan."""
    inv, counts = counted
    executor = ProbesUnanswered(ssh.SshExecutor())
    monkeypatch.setattr(ssh, "SshExecutor", lambda *a, **k: executor)
    counts.update(read=0, plan=0)
    with pytest.raises(ExecutionError, match="preflight failed: nothing was changed"):   # main(): exit 1
        CliRunner().invoke(app, ["up", "-i", str(inv), "-y", "--run-dir", str(inv.parent / "runs")],
                           catch_exceptions=False)
    assert counts["read"] == 1 and counts["plan"] <= 1, counts
