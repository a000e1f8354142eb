"""An instance `deployctl scale` added (Plan.joined) joins and leaves the router at run time, never through its
start-up configuration: HAProxy gets it as a dynamic server through its runtime API (`add server`, `enable
health`, `set server ... state ready`; `maint` then `del server` when it goes), and haproxy.cfg, vLLM-Ascend's
P/D proxy argv and SGLang's router argv stay as the inventory's own instances make them (no router restart)."""

from __future__ import annotations

import pytest
import yaml
from conftest import EXAMPLES

from deployctl.app.inventory import validate_inventory
from deployctl.app.scaled import base_groups
from deployctl.backends.hosts.router_control import HaproxyControl
from deployctl.core.errors import ExecutionError
from deployctl.core.input.raw import parse_yaml
from deployctl.core.models.scaling import AddedInstance
from deployctl.core.render.router import backends, config
from deployctl.core.scaling.effective import effective_raw
from deployctl.core.sizing.planner import plan_layout

HEADER = "# pxname,svname,qcur,qmax,scur,smax,slim,stot,status\n"


def stat(*servers: str) -> str:
    return HEADER + "".join(f"instances,{s},0,0,0,0,,0,UP\n" for s in servers) + "instances,BACKEND,0,0,0,0,,0,UP\n"


class FakeRemote:
    """HAProxy's runtime API as the control sees it: every command recorded, answered as HAProxy 2.6 does
    (management guide 9.3) unless the test plants another answer."""

    def __init__(self, listed=("mixed-0", "mixed-1", "mixed-2"), **answers: str):
        self.listed, self.sent, self.nodes = list(listed), [], set()
        self.answers = {"add": "New server registered.\n", "enable": "", "set": "", "del": "Server deleted.\n",
                        **answers}

    def py(self, node, script, port, command):
        self.nodes.add((node, port))
        self.sent.append(command)
        if command == "show stat":
            return stat(*self.listed)
        return self.answers[command.split(" ", 1)[0]]


def plan_of(doc: dict, added: list[AddedInstance]):
    """The plan of ``doc`` as scale left it: its spares out, ``added`` in (app/scaled.py's composition)."""
    raw = parse_yaml(yaml.safe_dump(doc, sort_keys=False), "inv.yaml", EXAMPLES)
    return plan_layout(validate_inventory(effective_raw(raw, added, base_groups(raw))))


def fleet_doc() -> dict:
    """The fleet example as 3 replicas and 2 spare servers, its router checking every 300 ms."""
    doc = yaml.safe_load((EXAMPLES / "a2-fleet-4x2x8-dp-ep.yaml").read_text())
    doc["layout"]["replicas"] = 3
    doc["router"] = {"port": 8080, "admin_port": 8081, "check_interval_ms": 300}
    doc["deploy"] = {"scaling": {"spares": ["a2-node7", "a2-node8"]}}
    return doc


M3 = AddedInstance(role="mixed", name="mixed-3", nodes=["a2-node7", "a2-node8"])


@pytest.fixture(scope="module")
def plans():
    """(the deployment as written, the one with mixed-3 added but not joined, the same with mixed-3 joined)."""
    own = plan_of(fleet_doc(), [])
    scaled = plan_of(fleet_doc(), [M3])
    return own, scaled, scaled.model_copy(update={"joined": frozenset({"mixed-3"})})


def add_command(plan) -> str:
    """What the control must send for mixed-3: its endpoint and health port as the router renders its servers."""
    [b] = [b for b in backends(plan) if b.name == "mixed-3"]
    assert b.host == "10.200.5.8"              # a2-node7, mixed-3's master, in the inventory
    return f"add server instances/mixed-3 {b.host}:{b.port} check port {b.check_port} inter 300ms fall 2 rise 2"


# ------------------------------------------------------------------ HaproxyControl

def test_a_joined_instance_is_added_as_a_dynamic_server_then_its_checks_enabled_then_ready(plans):
    _, _, joined = plans
    remote = FakeRemote()
    HaproxyControl(joined, remote).ready("mixed-3")
    assert remote.sent == ["show stat", add_command(joined), "enable health instances/mixed-3",
                           "set server instances/mixed-3 state ready"]
    assert remote.nodes == {("a2-node1", "8081")}           # the router's node, its runtime API port


def test_the_dynamic_server_has_the_address_the_start_up_file_would_have_given_it(plans):
    _, scaled, joined = plans
    # haproxy.cfg of the same deployment with mixed-3 not joined lists it as a server: the same host and ports
    [b] = [b for b in backends(joined) if b.name == "mixed-3"]
    assert f"server mixed-3 {b.host}:{b.port} check port {b.check_port}" in config(scaled)


@pytest.mark.parametrize("answer", ["", "Proxy 'instances' not found.\n", "Already exists a server with the same name"])
def test_an_add_haproxy_does_not_confirm_raises_and_nothing_is_made_ready(plans, answer):
    _, _, joined = plans
    remote = FakeRemote(add=answer)
    with pytest.raises(ExecutionError) as exc:
        HaproxyControl(joined, remote).ready("mixed-3")
    assert "add server instances/mixed-3" in exc.value.message
    assert remote.sent == ["show stat", add_command(joined)]          # no enable health, no ready


def test_health_checks_haproxy_refuses_to_enable_raise(plans):
    _, _, joined = plans
    remote = FakeRemote(enable="No such server.\n")
    with pytest.raises(ExecutionError, match="enable health instances/mixed-3"):
        HaproxyControl(joined, remote).ready("mixed-3")
    assert remote.sent[-1] == "enable health instances/mixed-3"


def test_a_joined_instance_haproxy_already_lists_is_only_made_ready(plans):
    _, _, joined = plans
    remote = FakeRemote(listed=("mixed-0", "mixed-1", "mixed-2", "mixed-3"))
    HaproxyControl(joined, remote).ready("mixed-3")
    assert remote.sent == ["show stat", "set server instances/mixed-3 state ready"]


@pytest.mark.parametrize("instance", ["mixed-0", "mixed-2"])
def test_an_instance_of_the_start_up_file_only_gets_set_server_ready(plans, instance):
    _, _, joined = plans
    remote = FakeRemote(listed=())                  # even where HAProxy's answer would not list it
    HaproxyControl(joined, remote).ready(instance)
    assert remote.sent == [f"set server instances/{instance} state ready"]


def test_an_added_instance_not_joined_only_gets_set_server_ready(plans):
    _, scaled, _ = plans
    remote = FakeRemote()
    HaproxyControl(scaled, remote).ready("mixed-3")
    assert remote.sent == ["set server instances/mixed-3 state ready"]


def test_forget_puts_the_server_in_maintenance_then_deletes_it(plans):
    _, _, joined = plans
    remote = FakeRemote(listed=("mixed-0", "mixed-1", "mixed-2", "mixed-3"))
    HaproxyControl(joined, remote).forget("mixed-3")
    assert remote.sent == ["show stat", "set server instances/mixed-3 state maint", "del server instances/mixed-3"]


def test_forget_of_a_server_haproxy_does_not_list_sends_nothing_more(plans):
    _, _, joined = plans
    remote = FakeRemote()
    HaproxyControl(joined, remote).forget("mixed-3")
    assert remote.sent == ["show stat"]


def test_a_delete_haproxy_does_not_confirm_raises(plans):
    _, _, joined = plans
    remote = FakeRemote(listed=("mixed-3",), **{"del": "Server still has connections attached to it.\n"})
    with pytest.raises(ExecutionError, match="del server instances/mixed-3"):
        HaproxyControl(joined, remote).forget("mixed-3")
    assert remote.sent[-2:] == ["set server instances/mixed-3 state maint", "del server instances/mixed-3"]


# ------------------------------------------------------------------ start-up configuration of the routers

def test_haproxy_cfg_leaves_joined_instances_out(plans):
    own, scaled, joined = plans
    cfg = config(joined)
    assert "server mixed-3 " not in cfg
    assert all(f"server mixed-{k} " in cfg for k in range(3))
    assert "server mixed-3 " in config(scaled)          # the same plan, nothing joined: listed
    assert cfg == config(own)                            # as the inventory's own instances make it: no restart


def pd_doc(example: str, image: str | None, spares: list[dict]) -> dict:
    doc = yaml.safe_load((EXAMPLES / example).read_text())
    if image:
        doc["engine"]["image"] = image
    doc["nodes"] += spares
    doc["deploy"] = {"scaling": {"spares": [s["name"] for s in spares]}}
    return doc


def test_vllm_ascend_proxy_argv_leaves_joined_instances_out():
    from deployctl.core.engines.vllm_ascend.launch import launches, proxy_argv

    spare = {"name": "d2", "address": "10.202.0.4", "interface": "enp189s0f0"}
    doc = lambda: pd_doc("vllm-a3-1p1d-qwen3.yaml", "quay.io/ascend/vllm-ascend:v0.18.0-a3", [spare])  # noqa: E731
    own = plan_of(doc(), [])
    scaled = plan_of(doc(), [AddedInstance(role="decode", name="decode-1", nodes=["d2"])])
    joined = scaled.model_copy(update={"joined": frozenset({"decode-1"})})
    assert "10.202.0.4" in proxy_argv(scaled, launches(scaled))           # not joined: in the argv
    argv = proxy_argv(joined, launches(joined))
    assert "10.202.0.4" not in argv
    assert argv == proxy_argv(own, launches(own))


def test_sglang_router_argv_leaves_joined_instances_out():
    from deployctl.core.engines.sglang.launch import launches, router_argv

    spares = [{"name": "d3", "address": "10.204.0.6", "interface": "enp189s0f0"},
              {"name": "d4", "address": "10.204.0.7", "interface": "enp189s0f0"}]
    doc = lambda: pd_doc("sglang-a3-2p1d-deepseek-r1.yaml", None, spares)  # noqa: E731
    own = plan_of(doc(), [])
    scaled = plan_of(doc(), [AddedInstance(role="decode", name="decode-1", nodes=["d3", "d4"])])
    joined = scaled.model_copy(update={"joined": frozenset({"decode-1"})})
    assert [a for a in router_argv(scaled, launches(scaled)) if a.startswith("http://10.204.0.6:")]   # d3
    argv = router_argv(joined, launches(joined))
    assert not [a for a in argv if "10.204.0.6" in a]
    assert argv == router_argv(own, launches(own))
