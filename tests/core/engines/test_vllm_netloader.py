"""engine.netloader: loading weights from a running peer with vLLM-Ascend's NetLoader (deployctl/core/engines/
vllm_ascend/netloader.py). Sources: VA = vllm-project/vllm-ascend@182b75ea; DOC = docs/source/user_guide/
feature_guide/netloader.md there."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, run_cli
from deployctl.app.inventory import validate_inventory
from deployctl.core.errors import InventoryError, LayoutError
from deployctl.core.render import render_artifacts
from deployctl.core.sizing.planner import plan_layout
from deployctl.io.inventory_file import load_inventory

# The published example of the key (DOC L40) and of a client's config (DOC L68), verbatim
PUBLISHED_SOURCE = ('{"SOURCE": [{"device_id": 0, "sources": ["10.170.22.152:19374"]}, '
                    '{"device_id": 1, "sources": ["10.170.22.152:11228"]}]}')
PUBLISHED_CLIENT = '{"SOURCE":[{"device_id":0, "sources": ["<server_IP>:<server_Port>"]}]}'


def doc_of(stem: str, **engine) -> dict:
    doc = yaml.safe_load((EXAMPLES / f"{stem}.yaml").read_text())
    doc["engine"].update(engine)
    return doc


def write(doc: dict, tmp_path: Path) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def plan_of(doc: dict, tmp_path: Path):
    return plan_layout(validate_inventory(load_inventory(str(write(doc, tmp_path)))))


def rendered(plan, peers: dict | None = None) -> dict[str, str]:
    if peers is not None:
        plan = plan.model_copy(update={"weight_peers": peers})
    return {a.path: a.content.decode() for a in render_artifacts(plan)}


def argv(files: dict[str, str], path: str) -> list[str]:
    return files[path].splitlines()


def loader_config(args: list[str]) -> dict:
    assert args[args.index("--load-format") + 1] == "netloader"
    return json.loads(args[args.index("--model-loader-extra-config") + 1])


def env(files: dict[str, str], node: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in files[f"{node}/env"].splitlines() if "=" in line and
                not line.startswith("#"))


ON = {"netloader": {"enabled": True}}


def test_the_rendered_config_has_the_published_shape(tmp_path):
    """DOC L36 (--load-format netloader, --model-loader-extra-config as a JSON string), L40/L68 (SOURCE: a list of
    {device_id: int, sources: ["IP:port", ...]}), L42 (LISTEN_PORT an integer, 1024-65535)."""
    published = [json.loads(PUBLISHED_SOURCE), json.loads(PUBLISHED_CLIENT)]
    plan = plan_of(doc_of("vllm-a3-2p1d-qwen3", **ON), tmp_path)
    cfg = loader_config(argv(rendered(plan, {"prefill-1": ("prefill-0",)}), "p2/serve-0.args"))
    for example in published:
        assert set(cfg["SOURCE"][0]) == set(example["SOURCE"][0]) == {"device_id", "sources"}
        assert all(type(e["device_id"]) is int and isinstance(e["sources"], list) for e in cfg["SOURCE"])
    assert all(re.fullmatch(r"\d+\.\d+\.\d+\.\d+:\d+", s) for e in cfg["SOURCE"] for s in e["sources"])
    assert all(re.fullmatch(r"[\d.]+:\d+", s) for e in published[0]["SOURCE"] for s in e["sources"])
    assert type(cfg["LISTEN_PORT"]) is int and 1024 <= cfg["LISTEN_PORT"] <= 65535
    assert set(cfg) <= {"SOURCE", "MODEL", "LISTEN_PORT", "INT8_CACHE", "INT8_CACHE_NAME", "OUTPUT_PREFIX",
                        "CONFIG_FILE"}      # DOC L38-46


def test_every_serve_serves_its_weights_and_binds_the_nodes_ip(tmp_path):
    plan = plan_of(doc_of("vllm-a2-2x8-v32-dp-ep", **ON), tmp_path)
    files = rendered(plan)
    for node in ("node1", "node2"):
        assert loader_config(argv(files, f"{node}/serve-0.args")) == {"LISTEN_PORT": 7000}    # a seed: no SOURCE
        assert env(files, node)["VLLM_HOST_IP"] == env(files, node)["HCCL_IF_IP"] == plan.node(node).container_ip
    assert "engine.netloader" not in plan.engine.warnings
    notes = plan.instances[0].memory.notes
    assert any("HCCL buffer (~200 MB) is allocated outside vLLM's share: --gpu-memory-utilization 0.9 leaves "
               "6.87 GB" in n for n in notes), notes


def test_a_new_instance_names_for_each_rank_the_peers_server_of_that_rank(tmp_path):
    """Internal DP over two nodes (dp-ep, two replicas): node k of the new instance holds ranks 8k..8k+7, and so
    does node k of each peer; the peers in the caller's order (DOC L40: tried in order)."""
    doc = doc_of("vllm-a2-2x8-v32-dp-ep", **ON)
    doc["layout"]["replicas"] = 3
    doc["nodes"] += [{"name": f"node{k}", "address": f"10.200.2.{k + 1}", "interface": "enp189s0f0"}
                     for k in range(3, 7)]
    plan = plan_of(doc, tmp_path)
    names = [i.name for i in plan.instances]
    new, first, second = names[2], names[0], names[1]
    files = rendered(plan, {new: (second, first)})
    for k in range(2):
        node = plan.instance(new).nodes[k]
        cfg = loader_config(argv(files, f"{node}/serve-0.args"))
        ips = [plan.node(plan.instance(p).nodes[k]).container_ip for p in (second, first)]
        assert cfg["SOURCE"] == [{"device_id": r, "sources": [f"{ip}:{7000 + r}" for ip in ips]}
                                 for r in range(8 * k, 8 * k + 8)]
    for peer in (first, second):          # the seeds are rendered as seeds
        assert "SOURCE" not in loader_config(argv(files, f"{plan.instance(peer).nodes[1]}/serve-0.args"))


def test_external_dp_serves_each_name_their_own_ranks(tmp_path):
    plan = plan_of(doc_of("vllm-a3-2p1d-qwen3", **ON), tmp_path)
    files = rendered(plan, {"prefill-1": ("prefill-0",)})
    p1 = plan.node("p1").container_ip
    for j in range(2):                    # DP2 x TP8 on one A3 node: serve j holds ranks 8j..8j+7
        cfg = loader_config(argv(files, f"p2/serve-{j}.args"))
        assert [e["device_id"] for e in cfg["SOURCE"]] == list(range(8 * j, 8 * j + 8))
        assert cfg["SOURCE"][0]["sources"] == [f"{p1}:{7000 + 8 * j}"]
        assert files[f"p2/serve-{j}.devices"].strip() == ",".join(map(str, range(8 * j, 8 * j + 8)))


@pytest.mark.parametrize("stem", ["vllm-a3-2p1d-qwen3", "vllm-a2-2x8-v32-dp-ep", "vllm-a3-pd-roles-qwen3",
                                  "vllm-a3-1p1d-qwen3"])
def test_the_ranks_named_are_the_plans_rank_table(stem, tmp_path):
    """Each serve's ranks (netloader.serve_ranks) are the plan's ranks on its node and devices: vLLM numbers its
    global ranks as deployctl's plan does, node by node (dp_rank x tp + tp_rank)."""
    from deployctl.core.engines.vllm_ascend.launch import launches
    from deployctl.core.engines.vllm_ascend.netloader import serve_ranks

    plan = plan_of(doc_of(stem, **ON), tmp_path)
    for name, launch in launches(plan).items():
        inst = plan.instance(plan.node(name).instance)
        k = inst.nodes.index(name)
        for s in launch.serves:
            want = [r.rank for r in inst.ranks if r.node == name and (s.devices is None or r.local_rank in s.devices)]
            assert list(serve_ranks(plan, inst, k, s.devices)) == want


def test_tp_pp_across_nodes_numbers_ranks_by_stage(tmp_path):
    doc = doc_of("vllm-a2-2x8-v32-dp-ep", **ON)
    doc["model"].update(name="qwen3-235b-a22b", weights_path="/w")
    doc["layout"] = {"preset": "tp-pp"}
    doc["engine"]["image"] = "quay.io/ascend/vllm-ascend:v0.13.0"
    plan = plan_of(doc, tmp_path)
    files = rendered(plan)
    assert loader_config(argv(files, "node2/serve-0.args")) == {"LISTEN_PORT": 7000}
    from deployctl.core.engines.vllm_ascend.launch import launches
    from deployctl.core.engines.vllm_ascend.netloader import serve_ranks

    inst = plan.instances[0]
    assert serve_ranks(plan, inst, 1, launches(plan)["node2"].serves[0].devices) == tuple(range(8, 16))


def test_a_role_may_turn_it_on_alone(tmp_path):
    doc = doc_of("vllm-a3-pd-roles-qwen3")
    doc["layout"]["decode"].setdefault("engine", {})["netloader"] = {"enabled": True, "listen_port": 6000}
    plan = plan_of(doc, tmp_path)
    files = rendered(plan, {"prefill": ("decode",)})      # prefill is off: its peers are not read
    assert "--load-format" not in argv(files, "p1/serve-0.args")
    assert "VLLM_HOST_IP" not in env(files, "p1")
    assert loader_config(argv(files, "d2/serve-3.args")) == {"LISTEN_PORT": 6000}
    assert env(files, "d2")["VLLM_HOST_IP"] == plan.node("d2").container_ip


def test_weight_peers_change_nothing_where_it_is_off(tmp_path):
    plan = plan_of(doc_of("vllm-a3-2p1d-qwen3"), tmp_path)
    with_peers, without = rendered(plan, {"prefill-1": ("prefill-0",)}), rendered(plan)
    assert {p: c for p, c in with_peers.items() if p != "plan.json"} == \
        {p: c for p, c in without.items() if p != "plan.json"}
    assert "weight_peers" not in json.loads(without["plan.json"])
    assert "netloader" not in json.loads(rendered(plan)["plan.json"])["inventory"]["engine"]


def test_plan_json_shows_the_setting_and_the_peers_when_set(tmp_path):
    plan = plan_of(doc_of("vllm-a3-2p1d-qwen3", netloader={"enabled": True, "int8_cache": "hbm"}), tmp_path)
    files = rendered(plan, {"prefill-1": ("prefill-0",)})
    doc = json.loads(files["plan.json"])
    assert doc["weight_peers"] == {"prefill-1": ["prefill-0"]}
    assert doc["inventory"]["engine"]["netloader"] == {"enabled": True, "listen_port": 7000, "int8_cache": "hbm"}
    assert loader_config(argv(files, "d1/serve-0.args")) == {"LISTEN_PORT": 7000, "INT8_CACHE": "hbm"}


@pytest.mark.parametrize("peers,words", [
    ({"prefill-1": ("decode",)}, "cannot load its weights from decode (decode)"),
    ({"prefill-1": ("prefill-9",)}, "not instances of this plan: prefill-9"),
    ({"prefill-1": ("prefill-1",)}, "cannot load its weights from itself")])
def test_peers_of_another_role_or_unknown_are_the_callers_error(peers, words, tmp_path):
    plan = plan_of(doc_of("vllm-a3-2p1d-qwen3", **ON), tmp_path)
    with pytest.raises(ValueError, match=re.escape(words)):
        rendered(plan, peers)


def test_a_version_without_netloader_is_refused_at_the_key(tmp_path):
    doc = doc_of("vllm-a3-2p1d-qwen3", image="quay.io/ascend/vllm-ascend:v0.11.0-a3", **ON)
    with pytest.raises(InventoryError) as exc:
        plan_of(doc, tmp_path)
    text = exc.value.render()
    assert "engine.netloader.enabled: vLLM-Ascend 0.11 has no NetLoader" in text
    assert "first tagged v0.12.0rc1" in text and "use a vLLM-Ascend 0.12 or later image" in text
    res = run_cli("validate", "-i", str(write(doc, tmp_path)))
    assert res.returncode == 2, res.stdout + res.stderr
    assert re.search(r"inv\.yaml:\d+ engine\.netloader\.enabled: vLLM-Ascend 0\.11 has no NetLoader",
                     res.stdout + res.stderr), res.stdout + res.stderr


def test_a_roles_own_switch_on_an_old_version_is_refused_at_the_roles_key(tmp_path):
    doc = doc_of("vllm-a3-pd-roles-qwen3", image="quay.io/ascend/vllm-ascend:v0.11.0-a3")
    doc["layout"]["decode"].setdefault("engine", {})["netloader"] = {"enabled": True}
    with pytest.raises(InventoryError) as exc:
        plan_of(doc, tmp_path)
    assert "layout.decode.engine.netloader.enabled: vLLM-Ascend 0.11 has no NetLoader" in exc.value.render()


def test_flags_and_env_deployctl_renders_are_refused_while_it_is_on(tmp_path):
    doc = doc_of("vllm-a3-2p1d-qwen3", args=["--load-format=auto"], env={"VLLM_HOST_IP": "10.0.0.1"}, **ON)
    with pytest.raises(InventoryError) as exc:
        plan_of(doc, tmp_path)
    text = exc.value.render()
    assert "engine.args[0]: --load-format is set by deployctl when engine.netloader is on" in text
    assert "engine.env.VLLM_HOST_IP: VLLM_HOST_IP is computed per node by deployctl" in text
    plan_of(doc_of("vllm-a3-2p1d-qwen3", args=["--load-format=auto"]), tmp_path)     # off: the user's own


@pytest.mark.parametrize("port,words", [(7995, "overlap"), (65530, "past 65535"), (19995, "Mooncake's random ports")])
def test_the_port_plan_counts_the_weight_servers(port, words, tmp_path):
    doc = doc_of("vllm-a3-2p1d-qwen3", netloader={"enabled": True, "listen_port": port})
    with pytest.raises(LayoutError) as exc:
        plan_of(doc, tmp_path)
    assert words in exc.value.render()


def test_draft_models_are_served_on_0_23_and_unverified_before(tmp_path):
    spec = {"method": "mtp", "tokens": 1}
    doc = doc_of("vllm-a2-2x8-v32-dp-ep", **ON)
    doc["model"]["speculative"] = spec
    plan = plan_of(doc, tmp_path)
    assert any("loads a draft/MTP model with NetLoader only from v0.21.0rc1" in w for w in plan.engine.warnings)
    doc = doc_of("vllm-a3-2p1d-qwen3", image="quay.io/ascend/vllm-ascend:v0.23.0-a3",
                 netloader={"enabled": True, "listen_port": 9995})
    doc["model"]["speculative"] = {"method": "eagle3", "tokens": 3, "draft_weights_path": "/data/models/eagle3"}
    with pytest.raises(LayoutError) as exc:      # the draft's servers 19995-20010 reach Mooncake's ports
        plan_of(doc, tmp_path)
    assert "the weight servers' ports 19995-20010 reach into Mooncake's random ports [20000, 36000)" in \
        exc.value.render()
