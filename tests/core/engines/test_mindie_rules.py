"""One test per upstream MindIE rule (../shared/reference/mindie-upstream-rules.md §1-2), checked on what
deployctl plans and renders against an independent model of the upstream behaviour (mindie_upstream.py).

Test names carry the rule number: test_1_1_* is §1.1 (PD roles / distributed-DP decode), test_1_2_* §1.2
(MindIE-MS library env), test_1_3_* §1.3 (V3.2 on the torch runtime), test_1_4_* §1.4 (KV-cache INT8),
test_1_5_* §1.5 (lm_head local TP), test_2_* §2.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mindie_upstream as up  # noqa: E402

from deployctl.core.errors import InventoryError, LayoutError  # noqa: E402

# pd-split layouts that plan (fit in memory) and cover both runtimes and both hardware generations
PD_CASES = {
    "a3-v32-2p2d": dict(hardware="a3", nodes=4, model="deepseek-v3.2", version="3.0", preset="pd-split"),
    "a2-v32-2p2d": dict(hardware="a2", nodes=4, model="deepseek-v3.2", version="3.0", preset="pd-split"),
    "a3-r1-2p2d": dict(hardware="a3", nodes=4, model="deepseek-r1", version="2.2", preset="pd-split"),
    # one decode server: distributedEnable still loads the rank table (schedule_config.cpp L210)
    "a2-r1w4a8-1p1d": dict(hardware="a2", nodes=2, model="deepseek-r1", quant="w4a8", version="2.2",
                           preset="pd-split", prefill_nodes=1),
}


@pytest.fixture
def sandbox(tmp_path) -> Path:
    box = tmp_path / "sandbox"
    box.mkdir()
    return box


def pd(name: str, sandbox: Path | None = None, **engine) -> up.Rendered:
    eng = dict(up.sandbox_engine(sandbox)) if sandbox else {}
    eng.update(engine)
    return up.render(up.inventory(**PD_CASES[name], engine=eng))


def refusal(**kw) -> LayoutError:
    with pytest.raises(LayoutError) as info:
        up.plan(up.inventory(**kw))
    return info.value


def problem_text(err: LayoutError) -> str:
    return "\n".join(f"{p.path}: {p.message} (hint: {p.hint})" for p in err.problems) + f"\nhint: {err.hint}"


# ---------------------------------------------------------------------------------------------- §1.1

@pytest.mark.parametrize("case", PD_CASES)
def test_1_1_pd_roles_from_get_pd_init_role(case):
    """global_ranktable.json deploy_server + ms_controller.json flags give P=PREFILL, D=DECODE in MS."""
    up.check_pd_roles(pd(case))


def test_1_1_get_pd_init_role_model_matches_upstream_table():
    """The model itself, against the cases the rules document spells out."""
    assert up.pd_init_role(0, False, True) == "PREFILL" and up.pd_init_role(1, False, True) == "DECODE"
    assert up.pd_init_role(2, False, False) == "PREFILL" and up.pd_init_role(1, False, False) == "DECODE"
    assert up.pd_init_role(0, False, False) == "UN_DEF"     # the old deployctl bug: P "0" with equal flags


@pytest.mark.parametrize("case", PD_CASES)
def test_1_1_decode_distributed_dp_config_files(case):
    """One config<i>.json per DP rank: distDPServerEnabled, distributedEnable, not multiNodesInfer, ports 10000+4k."""
    up.check_decode_configs(pd(case))


def test_1_1_decode_dp_ports_follow_engine_ports_dist_base():
    r = up.render(up.inventory(**PD_CASES["a3-v32-2p2d"], engine={"ports": {"dist_base": 12000}}))
    up.check_decode_configs(r)
    up.check_ms_controller(r)


@pytest.mark.parametrize("case", PD_CASES)
def test_1_1_decode_env_dp_distributed_and_partition_up(case):
    r = pd(case)
    for node in up.role_nodes(r.inv)["decode"]:
        env = r.env(node)
        assert env.get("MINDIE_ENABLE_DP_DISTRIBUTED") == "1", node
        assert env.get("DP_PARTITION_UP_ENABLE") == "1", node


@pytest.mark.parametrize("case", [c for c, kw in PD_CASES.items() if kw.get("prefill_nodes", 2) > 1])
def test_1_1_prefill_spanning_servers_is_centralized_multi_node(case):
    r = pd(case)
    assert len(up.role_nodes(r.inv)["prefill"]) > 1
    up.check_prefill_centralized(r)


@pytest.mark.parametrize("case", PD_CASES)
def test_1_1_ms_controller_dist_flags_and_node_machine_num(case):
    up.check_ms_controller(pd(case))


@pytest.mark.parametrize("case", PD_CASES)
def test_1_1_decode_start_sh_starts_one_daemon_per_dp_rank(case, sandbox, tmp_path):
    r = pd(case, sandbox)
    tree = up.prepare_tree(r, tmp_path / "tree")
    runs = up.run_starts(r, tree, sandbox)
    up.check_decode_daemons(r, tree, runs, sandbox)


# ---------------------------------------------------------------------------------------------- §1.2

@pytest.mark.parametrize("case", ["a3-v32-2p2d", "a3-r1-2p2d"])
def test_1_2_ms_start_exports_mindie_library_env(case, sandbox, tmp_path):
    """Executes start-ms.sh (recording docker), then each container command with stand-in ms_* binaries."""
    r = pd(case, sandbox)
    tree = up.prepare_tree(r, tmp_path / "tree")
    up.check_ms_library_env(r, tree, sandbox)


# ---------------------------------------------------------------------------------------------- §1.3

V32 = dict(model="deepseek-v3.2", version="3.0", hardware="a2", nodes=2)


@pytest.mark.parametrize("layout", [
    {"preset": "tp-pp"},
    {"preset": "dp-ep", "tp": 8, "dp": 1, "pp": 2, "moe_tp": 8, "moe_ep": 1},
], ids=["tp-pp", "explicit-pp2"])
def test_1_3_v32_torch_refuses_pipeline_parallel(layout):
    err = refusal(**dict(V32, preset=layout["preset"]), layout={k: v for k, v in layout.items() if k != "preset"})
    text = problem_text(err)
    assert "parallel_info_manager.py" in text, text
    assert "dp-ep" in text, f"no dp-ep alternative suggested: {text}"
    assert err.exit_code == 2


def test_1_3_v32_torch_refuses_moe_not_spanning_world():
    """moe_tp x moe_ep = 8 on a world of 16 (parallel_info_manager.py L210)."""
    err = refusal(**dict(V32, preset="dp-ep"), layout={"tp": 8, "dp": 1, "pp": 2, "moe_tp": 1, "moe_ep": 8})
    moe = [p for p in err.problems if "moe" in (p.path + p.message).lower()]
    assert moe, problem_text(err)
    assert any("parallel_info_manager.py" in p.message for p in moe), problem_text(err)


def test_1_3_v32_two_a2_dp_ep_allowed_with_validated_world_warning():
    r = up.render(up.inventory(**V32, preset="dp-ep"))
    assert any("world size" in w and "32" in w for w in r.plan.engine.warnings), r.plan.engine.warnings
    up.check_torch_parallel(r)


def test_1_3_torch_memory_plan_ignores_local_tp_keys():
    """On torch o_proj/lm_head are split by tp whatever the local TP keys say (parallel_info_manager.py
    L234-237): the weights per die must not change; on atb the same key changes them."""
    local = {"o_proj_tp": 2, "lm_head_tp": 2}
    torch_plain = up.plan(up.inventory(**V32, preset="dp-ep")).instances[0].memory.weights_gb
    torch_local = up.plan(up.inventory(**V32, preset="dp-ep", layout=local)).instances[0].memory.weights_gb
    assert torch_local == pytest.approx(torch_plain), (torch_plain, torch_local)
    r1 = dict(V32, model="deepseek-r1", version="2.2")
    atb_plain = up.plan(up.inventory(**r1, preset="dp-ep")).instances[0].memory.weights_gb
    atb_local = up.plan(up.inventory(**r1, preset="dp-ep", layout={"o_proj_tp": 2})).instances[0].memory.weights_gb
    assert atb_local > atb_plain, (atb_plain, atb_local)


# ---------------------------------------------------------------------------------------------- §1.4

def test_1_4_v32_w8a8c8_refused():
    err = refusal(**dict(V32, nodes=4), quant="w8a8c8", preset="dp-ep")
    assert any(p.path == "model.quant" and "deepseek_v3.2.md" in p.message for p in err.problems), problem_text(err)


def test_1_4_multi_node_pd_with_kv_int8_refused():
    err = refusal(hardware="a3", nodes=4, model="deepseek-v3.2", version="3.0", preset="pd-split", quant="w8a8c8")
    assert any("pd_separation_service_deployment.md" in p.message for p in err.problems), problem_text(err)


# ---------------------------------------------------------------------------------------------- §1.5

def test_1_5_atb_decode_lm_head_tp_sets_dp_partition_up():
    r = pd("a3-r1-2p2d")
    decode = up.role_nodes(r.inv)["decode"]
    assert any(up.model_config(doc).get("models", {}).get("deepseekv2", {}).get("parallel_options", {})
               .get("lm_head_local_tp") for n in decode for _, doc in up.decode_docs(r, n)), \
        "the atb decode preset renders no lm_head_local_tp (nothing to check)"
    up.check_lm_head_partition_up(r)


def test_1_5_dp_partition_up_disabled_refused():
    err = refusal(**PD_CASES["a3-r1-2p2d"], engine={"env": {"DP_PARTITION_UP_ENABLE": 0}})
    assert any("flash_causal_deepseekv2.py" in p.message and "L1080" in p.message for p in err.problems), \
        problem_text(err)


# ---------------------------------------------------------------------------------------------- §2

V32_PRESET_CASES = {
    "a2-2x8-mixed": dict(V32, preset="dp-ep"),
    "a3-2x16-mixed": dict(V32, hardware="a3", preset="dp-ep"),
    "a3-pd": PD_CASES["a3-v32-2p2d"],
    "a2-pd": PD_CASES["a2-v32-2p2d"],
}


@pytest.mark.parametrize("case", V32_PRESET_CASES)
def test_2_v32_presets_hccl_buffsize_1050_memory_fraction(case):
    up.check_v32_presets(up.render(up.inventory(**V32_PRESET_CASES[case])))


@pytest.mark.parametrize("kw", [
    dict(hardware="a2", nodes=2, model="deepseek-r1", version="2.2", preset="dp-ep"),
    dict(hardware="a3", nodes=2, model="deepseek-r1", version="2.2", preset="dp-ep"),
    dict(V32, preset="dp-ep"),
    dict(V32, hardware="a3", preset="dp-ep"),
    PD_CASES["a3-v32-2p2d"], PD_CASES["a2-v32-2p2d"], PD_CASES["a3-r1-2p2d"],
], ids=["a2-r1-mixed", "a3-r1-mixed", "a2-v32-mixed", "a3-v32-mixed", "a3-v32-pd", "a2-v32-pd", "a3-r1-pd"])
def test_2_aiv_per_role(kw):
    up.check_aiv(up.render(up.inventory(**kw)))


@pytest.mark.parametrize("value, on", [("1", True), (" 1", True), ("1abc", True), ("01", True), ("+1", True),
                                       ("0", False), ("", False), ("true", False), ("2", False), ("-1", False)])
def test_monitor_switch_read_as_mindie_reads_it(value, on):
    """deployctl's reading of MIES_SERVICE_MONITOR_MODE agrees with the upstream model (std::stoi == 1)."""
    from deployctl.core.engines.mindie.monitor import is_on

    assert up.mindie_metrics_on(value) is on
    assert is_on(value) is on


@pytest.mark.parametrize("kw, env, layout, notes", [
    (dict(hardware="a2", nodes=2, model="deepseek-r1", version="2.2", preset="dp-ep"), None, None, []),
    (dict(hardware="a2", nodes=2, model="deepseek-r1", version="2.2", preset="dp-ep"), {"MIES_SERVICE_MONITOR_MODE": 0},
     None, [("note", "engine.env.MIES_SERVICE_MONITOR_MODE", "mixed")]),
    (dict(hardware="a2", nodes=2, model="deepseek-r1", version="2.2", preset="dp-ep"),
     {"MIES_SERVICE_MONITOR_MODE": "yes"}, None, [("warning", "engine.env.MIES_SERVICE_MONITOR_MODE", "mixed")]),
    (PD_CASES["a3-r1-2p2d"], None, {"decode": {"env": {"MIES_SERVICE_MONITOR_MODE": 0}}},
     [("note", "layout.decode.env.MIES_SERVICE_MONITOR_MODE", "decode")]),
    (PD_CASES["a3-r1-2p2d"], {"MIES_SERVICE_MONITOR_MODE": 0}, {"prefill": {"env": {"MIES_SERVICE_MONITOR_MODE": 1}}},
     [("note", "engine.env.MIES_SERVICE_MONITOR_MODE", "decode")]),
], ids=["default-on", "off", "unreadable", "decode-off", "prefill-back-on"])
def test_metrics_on_by_default_and_said_when_the_inventory_turns_them_off(kw, env, layout, notes):
    """The env preset turns MindIE's Prometheus metrics on; engine.env / layout.<role>.env may turn them off, and
    plan says so per role (a value MindIE cannot read as a number: a warning), with the source."""
    kw = dict(kw)
    if env:
        kw["engine"] = dict(kw.get("engine") or {}, env=env)
    if layout:
        merged = {k: dict(v) for k, v in (kw.get("layout") or {}).items()}
        for role, block in layout.items():
            merged.setdefault(role, {}).update(block)
        kw["layout"] = merged
    r = up.render(up.inventory(**kw))
    up.check_monitor(r)
    said = [f for f in r.plan.engine_spec.check(r.plan) if "MIES_SERVICE_MONITOR_MODE" in f.message]
    assert [(f.level, f.path) for f in said] == [(level, path) for level, path, _ in notes]
    for f, (_, _, role) in zip(said, notes):
        assert f"on the {role} nodes" in f.message and "GET /metrics answers 500" in f.message
        assert f.source.startswith("Ascend/MindIE-LLM@8b4871ad") and "environment_variable.md L51" in f.source


@pytest.mark.parametrize("kw", [dict(V32, preset="dp-ep"), PD_CASES["a3-v32-2p2d"]], ids=["mixed", "pd"])
def test_2_gloo_socket_ifname_per_node(kw):
    inv = up.inventory(**kw)
    for i, n in enumerate(inv["nodes"]):
        n["interface"] = f"enp{i + 1}s0f0"
    r = up.render(inv)
    up.check_gloo(r)
    for n in inv["nodes"]:
        assert r.env(n["name"]).get("GLOO_SOCKET_IFNAME") == n["interface"], n["name"]


@pytest.mark.slow
def test_2_gloo_missing_interface_refused(tmp_path):
    inv = up.inventory(**V32, preset="dp-ep")
    del inv["nodes"][1]["interface"]
    # a gap preflight fills (like a device IP): refused by validation, tolerated where preflight reads it
    with pytest.raises(InventoryError) as info:
        up.plan(inv)
    err = info.value
    assert err.exit_code == 2
    hits = [p for p in err.problems if p.path == "nodes[1]" and "interface" in p.message]
    assert hits and "preflight" in hits[0].hint and "nodes[1].interface" in hits[0].hint, problem_text(err)
    assert not [p for p in err.problems if p.path == "nodes[0]"], problem_text(err)
    # and as users see it: planned without it (said), refused where the files need it
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    cli = Path(sys.executable).parent / "deployctl"
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "200", "NO_COLOR": "1", "HOME": str(tmp_path)}
    proc = subprocess.run([str(cli), "plan", "-i", str(path)], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "left to preflight: network interfaces (`ip -o addr`) of 1 node(s)." in proc.stderr, proc.stderr
    proc = subprocess.run([str(cli), "render", "-i", str(path), "-o", str(tmp_path / "out")], capture_output=True,
                          text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "nodes[1].interface" in proc.stdout + proc.stderr


@pytest.mark.parametrize("uid", [None, 1001])
@pytest.mark.parametrize("kw", [dict(V32, preset="dp-ep"), PD_CASES["a3-v32-2p2d"],
                                dict(hardware="a2", nodes=1, model="deepseek-r1", quant="w4a8", version="2.2", preset="single")],
                         ids=["mixed-2x8", "pd", "single"])
def test_2_file_owner_chown_chmod_and_user(kw, uid, sandbox, tmp_path):
    if os.geteuid() != 0:
        pytest.fail("run as root: start.sh chowns the engine files")
    engine = {"run_as_uid": uid} if uid is not None else {}
    r = up.render(up.inventory(**kw, engine=engine))
    tree = up.prepare_tree(r, tmp_path / "tree")
    runs = up.run_starts(r, tree, sandbox)
    up.check_file_owner(r, tree, runs)


def test_2_qwen3_235b_one_a2_server_warns_world_size_16():
    r = up.render(up.inventory(hardware="a2", nodes=1, model="qwen3-235b-a22b", version="2.2", preset="single"))
    assert any("world size 16" in w for w in r.plan.engine.warnings), r.plan.engine.warnings
    up.check_validated_world(r)


@pytest.mark.parametrize("device_logs", [None, False, True])
def test_2_engine_mounts_and_device_logs(device_logs, sandbox, tmp_path):
    engine = {"mounts": [{"host": "/data/patches/atb-models", "container": "/opt/patches/atb-models"},
                         {"host": "/data/scratch", "container": "/scratch", "rw": True}]}
    if device_logs is not None:
        engine["device_logs"] = device_logs
    r = up.render(up.inventory(hardware="a2", nodes=2, model="deepseek-r1", version="2.2", engine=engine))
    tree = up.prepare_tree(r, tmp_path / "tree")
    runs = up.run_starts(r, tree, sandbox)
    up.check_mounts(r, runs)
    vols = runs["n1"].values("-v")
    assert "/data/patches/atb-models:/opt/patches/atb-models:ro" in vols
    assert "/data/scratch:/scratch:rw" in vols
    assert any(v.startswith("/var/log/npu/slog:") for v in vols) == (device_logs is not False)


@pytest.mark.parametrize("version,image_version,want", [
    (None, "2.2", "2.2"), (None, "3.0", "3.0"), ("2.3", "2.2", "2.3"), ("3.0", "2.2", "3.0")])
def test_2_engine_version_from_image_tag_explicit_wins(version, image_version, want):
    inv = up.inventory(hardware="a2", nodes=2, model="deepseek-r1", version=version, preset="dp-ep")
    inv["engine"]["image"] = up.image(image_version)
    r = up.render(inv)
    assert r.plan.engine.version == want
    up.check_version(r)
    shown = r.json("plan.json") if "plan.json" in r.files else None
    if shown is not None:
        assert want in str(shown.get("engine", shown)), "plan.json does not show the engine version"


@pytest.mark.parametrize("engine", [{"version": "2.9"}, {"image": "swr.example/ascendhub/mindie:latest"}],
                         ids=["unknown-number", "untagged-image"])
def test_2_unknown_engine_version_warns_unverified(engine):
    inv = up.inventory(hardware="a2", nodes=2, model="deepseek-r1", version=None, preset="dp-ep", engine=engine)
    p = up.plan(inv)
    assert any("unverified" in w.lower() for w in p.engine.warnings), p.engine.warnings
