"""What `status` reads back about readiness: health URLs where a process serves HTTP, else its ready log line.

A headless vLLM-Ascend rank serves no HTTP; its readiness is its engine cores' "init engine ... took" line,
once per DP engine core the node runs, in its container's log (the same rule `up` waits on)."""

from __future__ import annotations

import pytest

from conftest import EXAMPLES
from deployctl.backends.hosts.remote import parse_state, state_commands
from deployctl.core.render.processes import processes
from deployctl.io.inventory_file import load_inventory
from deployctl.app.inventory import validate_inventory
from deployctl.core.sizing.planner import plan_layout
from deployctl.io.batch import ProbeOutput

RUNNING = ('{"Status": "running", "ExitCode": 0, "StartedAt": "2026-11-24T00:00:00Z"}\n[]\n[]\n')


@pytest.fixture(scope="module")
def plan():
    return plan_layout(validate_inventory(load_inventory(EXAMPLES / "vllm-a2-2x8-v32-dp-ep.yaml")))


def outputs(plan, node: str, logged: str | None, status: str = RUNNING) -> dict[str, ProbeOutput]:
    cmds = dict(state_commands(plan, node, "/var/lib/deployctl/x", health=True))
    out = {k: ProbeOutput(k, 0, status) for k in cmds if k.startswith("dep.container.")}
    if logged is not None:
        out["dep.readylog"] = ProbeOutput("dep.readylog", 0, logged)
    return out


def test_the_headless_node_is_asked_for_its_ready_line_with_the_line_as_an_argument(plan):
    cmds = dict(state_commands(plan, "node2", "/var/lib/deployctl/x", health=True))
    engine = processes(plan, "node2").engine
    assert not engine.health_urls and engine.ready_count == 1
    argv = cmds["dep.readylog"]
    assert argv[:2] == ["sh", "-c"] and argv[-2:] == [engine.ready_container, engine.ready_line]
    assert engine.ready_line not in argv[2]          # never spliced into the script
    assert "dep.readylog" not in dict(state_commands(plan, "node1", "/var/lib/deployctl/x", health=True))


@pytest.mark.parametrize("logged, ready", [("1\n", True), ("0\n", False), ("2\n", True)])
def test_headless_readiness_counts_the_ready_lines(plan, logged, ready):
    assert parse_state(plan, "node2", outputs(plan, "node2", logged)).ready is ready


def test_an_exited_headless_container_is_not_ready_whatever_its_log_says(plan):
    exited = RUNNING.replace('"running"', '"exited"')
    assert parse_state(plan, "node2", outputs(plan, "node2", "1\n", exited)).ready is False


def test_without_the_log_probe_readiness_stays_unknown(plan):
    assert parse_state(plan, "node2", outputs(plan, "node2", None)).ready is None
