"""The stand-in MindIE (fake_bin/engine.py) enforces upstream MindIE / MindIE-MS rules, one test per rule.

Every input here is written by hand (config.json dicts, rank tables, ms_controller.json): never by deployctl's
renderer, so these tests pin what the stand-in checks, independently of what deployctl renders. Sources of
each rule are in the comments next to the checks in engine.py. No cluster except for `docker run --user`.
"""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support import free_port
from support.procs import stop_all

FAKE_BIN = Path(__file__).resolve().parent / "fake_bin"
ENGINE_PY = FAKE_BIN / "engine.py"


@pytest.fixture(scope="module")
def engine():
    spec = importlib.util.spec_from_file_location("fake_engine_rules", ENGINE_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def model_config(**extra) -> dict:
    mc = {"modelInstanceType": "Standard", "modelName": "ds", "modelWeightPath": "/w", "worldSize": 16,
          "cpuMemSize": 5, "npuMemSize": -1, "backendType": "torch", "trustRemoteCode": False}
    mc.update(extra)
    return mc


DS_WEIGHTS = {"model_type": "deepseek_v3", "torch_dtype": "bfloat16", "vocab_size": 129280}


def ranktable(servers: int, per_server: int) -> dict:
    rank = 0
    server_list = []
    for s in range(servers):
        devs = []
        for d in range(per_server):
            devs.append({"device_id": str(d), "device_ip": f"172.16.{s}.{100 + d}", "rank_id": str(rank)})
            rank += 1
        server_list.append({"server_id": f"10.0.0.{s + 1}", "container_ip": f"10.0.0.{s + 1}", "device": devs})
    return {"version": "1.0", "status": "completed", "server_count": str(servers), "server_list": server_list}


def write(path: Path, obj, mode=0o640, uid=None) -> Path:
    path.write_text(json.dumps(obj))
    path.chmod(mode)
    if uid is not None:
        os.chown(path, uid, -1)
    return path


# ---- 1. torch runtime --------------------------------------------------------------------------------

def test_torch_runtime_refuses_pipeline_parallel(engine):
    bad = engine.torch_runtime_problem(model_config(tp=8, dp=1, pp=2, moe_tp=1, moe_ep=16), 16)
    assert bad.startswith("ValueError: Pipeline parallelism is not currently implemented (pp=2)")
    assert engine.torch_runtime_problem(model_config(tp=8, dp=2, pp=1, moe_tp=1, moe_ep=16), 16) is None


def test_torch_runtime_moe_must_span_the_world(engine, tmp_path, monkeypatch, capsys):
    # world = what torch.distributed sees: the rank table's devices (worldSize 16 in config.json is overwritten)
    table = write(tmp_path / "ranktable.json", ranktable(4, 8))
    monkeypatch.setenv("RANK_TABLE_FILE", str(table))
    monkeypatch.setenv("MIES_CONTAINER_IP", "10.0.0.1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    _, _, _, world, _ = engine.parse_ranktable(list(range(8)), 1.0)
    assert world == 32
    mc = model_config(worldSize=16, tp=8, dp=4, moe_tp=1, moe_ep=16)
    assert engine.torch_runtime_problem(mc, world) == (
        "ValueError: MoE parallel strategy process number mismatch: global world_size(32) != "
        "moe_tp.group_size(1) \u00d7 moe_ep.group_size(16)")
    assert engine.torch_runtime_problem(dict(mc, moe_ep=32), world) is None
    assert engine.torch_runtime_problem(model_config(tp=8, dp=4), world) is None   # defaults: moe_tp = world
    assert engine.torch_runtime_problem(dict(mc, moe_ep=12), world) == "ValueError: 32 is not evenly divisible by 12."
    # and the daemon fails the way MindIE's model init does: the exception, the error result, exit 1
    with pytest.raises(engine.Fatal) as e:
        engine.model_init_failure([engine.torch_runtime_problem(mc, world)])
    assert e.value.code == 1
    text = capsys.readouterr().out
    assert "[Model]\t>>> Exception:MoE parallel strategy process number mismatch" in text
    assert "ValueError: MoE parallel strategy process number mismatch: global world_size(32)" in text
    assert text.rstrip().endswith("Daemon is killing...")


def test_torch_runtime_ignores_local_tp_options(engine):
    mc = model_config(tp=8, dp=4, moe_tp=1, moe_ep=32,
                      models={"deepseekv2": {"parallel_options": {"lm_head_local_tp": 16, "o_proj_local_tp": 4}}})
    assert engine.torch_runtime_problem(mc, 32) is None


# ---- 2. atb DeepSeek: lm_head local TP needs DP partition-up ----------------------------------------------

def test_atb_lm_head_local_tp_needs_dp_partition_up(engine):
    lm16 = {"deepseekv2": {"parallel_options": {"lm_head_local_tp": 16}}}
    mc = model_config(backendType="atb", models=lm16)
    bad = engine.atb_deepseek_problem(mc, DS_WEIGHTS, {})
    assert bad.startswith("ValueError: If LmHeadLocalTp is enabled, DpPartitionUp should also be enabled.")
    assert engine.atb_deepseek_problem(mc, DS_WEIGHTS, {"DP_PARTITION_UP_ENABLE": "0"}) == bad.replace(
        "DP_PARTITION_UP_ENABLE=unset", "DP_PARTITION_UP_ENABLE=0")
    assert engine.atb_deepseek_problem(mc, DS_WEIGHTS, {"DP_PARTITION_UP_ENABLE": "1"}) is None
    # the models key may be the HF model_type (renamed to deepseekv2 by atb_llm.models.get_model)
    mc_v3 = model_config(backendType="atb", models={"deepseek_v3": lm16["deepseekv2"]})
    assert engine.atb_deepseek_problem(mc_v3, DS_WEIGHTS, {}) == bad
    # models may come as a JSON string
    assert engine.atb_deepseek_problem(model_config(backendType="atb", models=json.dumps(lm16)), DS_WEIGHTS, {}) == bad
    # not enabled: -1 (default) and 1 (mapping.py: enabled when > 1); other models are not concerned
    for value in (-1, 1):
        off = model_config(backendType="atb", models={"deepseekv2": {"parallel_options": {"lm_head_local_tp": value}}})
        assert engine.atb_deepseek_problem(off, DS_WEIGHTS, {}) is None
    assert engine.atb_deepseek_problem(mc, {"model_type": "qwen3_moe"}, {}) is None


# ---- 3. MindIE-MS: library path, KMC --------------------------------------------------------------------

def ms_home(tmp_path: Path) -> Path:
    """A mindie-service directory as in the image: bin/ (unused here) and lib/ with MindIE-MS's libraries."""
    svc = tmp_path / "mindie-service"
    (svc / "lib").mkdir(parents=True)
    (svc / "bin").mkdir()
    for lib in ("libboundscheck.so", "libcrypto.so.3", "libssl.so.3", "libhse_cryption.so",
                "libmie_role_manager.so", "libmie_digs.so"):
        (svc / "lib" / lib).touch()
    return svc


def run_ms(role: str, cwd: Path, env: dict, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    base = {"PATH": "/usr/bin:/bin", "FAKECLUSTER_ARGV0": f"./bin/{role}"}
    return subprocess.run([sys.executable, str(ENGINE_PY), role, *args], cwd=cwd, env={**base, **env},
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("role,args", [("ms_controller", ()),
                                       ("ms_coordinator", ("127.0.0.1", "1035", "127.0.0.1", "1036"))])
def test_ms_needs_library_path(engine, tmp_path, role, args):
    svc = ms_home(tmp_path)
    r = run_ms(role, svc, {}, *args)                       # nothing sourced, run from mindie-service as boot.sh
    assert r.returncode == 127, r.stdout + r.stderr
    assert f"./bin/{role}: error while loading shared libraries: lib" in r.stderr
    assert ".so: cannot open shared object file: No such file or directory" in r.stderr
    assert engine.ms_missing_library(role, {}, cwd=str(svc)) is not None
    # LD_LIBRARY_PATH with <mindie-service>/lib: the loader is happy, main() runs (and wants its config)
    for ld in (f"/opt/x:{svc}/lib", "lib", f"{svc}/bin/../lib"):
        r = run_ms(role, svc, {"LD_LIBRARY_PATH": ld}, *args)
        assert r.returncode == 1 and "CONFIG_FILE_PATH is not set." in r.stdout, (ld, r.stdout + r.stderr)


def test_ms_needs_hseceasy_path_for_kmc(engine, tmp_path):
    svc = ms_home(tmp_path)
    quiet = {"log_info": {"to_file": False}, "tls_config": {"cluster_tls_enable": False}}
    assert engine.ms_kmc_problem("ms_controller", quiet, {}) is None
    to_file = {"log_info": {"to_file": True}}
    assert "HSECEASY_PATH=(unset)" in engine.ms_kmc_problem("ms_controller", to_file, {})
    assert engine.ms_kmc_problem("ms_controller", to_file, {"HSECEASY_PATH": str(svc / "lib")}) is None
    assert engine.ms_kmc_problem("ms_coordinator", to_file, {}) is None       # coordinator: only with TLS
    tls = {"tls_config": {"controller_server_tls_enable": True}}
    assert "controller_server_tls_enable" in engine.ms_kmc_problem("ms_coordinator", tls, {"HSECEASY_PATH": "/nope"})
    assert engine.ms_kmc_problem("ms_coordinator", tls, {"HSECEASY_PATH": str(svc / "lib")}) is None


# ---- 4. ConstrainOwner: config.json and the rank table, whatever MINDIE_CHECK_INPUTFILES_PERMISSION says ----

def test_config_json_owner_and_mode_checked_even_with_permission_check_off(engine, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MINDIE_CHECK_INPUTFILES_PERMISSION", "0")
    cfg = {"ServerConfig": {}, "BackendConfig": {}}
    monkeypatch.setenv("MIES_CONFIG_JSON_PATH", str(write(tmp_path / "config.json", cfg, uid=os.getuid() + 1000)))
    with pytest.raises(engine.Fatal) as e:
        engine.daemon()                                     # config.json is the daemon's first check
    assert e.value.code == 1
    assert (f"Check path: config.json failed, by:owner id diff: current process user id is {os.getuid()}, file "
            f"owner id is {os.getuid() + 1000}") in capsys.readouterr().out
    monkeypatch.setenv("MIES_CONFIG_JSON_PATH", str(write(tmp_path / "config.json", cfg, mode=0o644, uid=os.getuid())))
    with pytest.raises(engine.Fatal):
        engine.daemon()
    assert "Check Other group permission failed" in capsys.readouterr().out
    write(tmp_path / "config.json", cfg, mode=0o600)
    with pytest.raises(engine.Fatal):                       # passes the file check, fails the (empty) content
        engine.daemon()
    text = capsys.readouterr().out
    assert "Check path" not in text and "Parameter ServerConfig.port is missing" in text


def test_ranktable_owner_and_mode_checked_even_with_permission_check_off(engine, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MINDIE_CHECK_INPUTFILES_PERMISSION", "0")
    monkeypatch.setenv("MIES_CONTAINER_IP", "10.0.0.1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    table = write(tmp_path / "ranktable.json", ranktable(2, 8), uid=os.getuid() + 1000)
    monkeypatch.setenv("RANK_TABLE_FILE", str(table))
    with pytest.raises(engine.Fatal):
        engine.parse_ranktable(list(range(8)), 1.0)
    assert "ranktable.json failed, by:owner id diff" in capsys.readouterr().out
    write(table, ranktable(2, 8), mode=0o644, uid=os.getuid())
    with pytest.raises(engine.Fatal):
        engine.parse_ranktable(list(range(8)), 1.0)
    assert "Required permisssion is 640, but got permission is 644" in capsys.readouterr().out
    write(table, ranktable(2, 8), mode=0o440)                # <= 640 is enough, not exactly 640
    assert engine.parse_ranktable(list(range(8)), 1.0)[3] == 16
    # other files keep the switch (the weights' config.json here)
    weights = write(tmp_path / "wconfig.json", DS_WEIGHTS, mode=0o777, uid=os.getuid() + 1000)
    assert engine.file_problem(str(weights), 0o750, engine.check_perm_enabled()) is None


# ---- 5. MindIE-MS controller: roles from deploy_server, distributed DP servers ----------------------------

def test_pd_init_role_follows_get_pd_init_role(engine):
    P, D, U = engine.PREFILL, engine.DECODE, engine.UNDEF
    # same enable_dist_dp_server on both sides: only "2" is prefill and "1" decode
    for flag in (False, True):
        assert [engine.pd_init_role(c, flag, flag) for c in (2, 1, 0, 3)] == [P, D, U, U]
    # different flags: deploy_server is the group's distribute flag; the side it matches decides
    assert [engine.pd_init_role(c, False, True) for c in (0, 1)] == [P, D]
    assert [engine.pd_init_role(c, True, False) for c in (0, 1)] == [D, P]


def controller_cfg(p_dist: bool, d_dist: bool, p_nodes=2, d_nodes=2, d_tp=1, **extra) -> dict:
    cfg = {"deploy_mode": "pd_separate", "initial_dist_server_port": 10000,
           "multi_node_infer_config": {
               "multi_node_infer_enable": True,
               "p_node_config": {"enable_dist_dp_server": p_dist, "node_machine_num": p_nodes, "tp_size": 16,
                                 "dp_size": 2, "sp_size": 1, "cp_size": 1},
               "d_node_config": {"enable_dist_dp_server": d_dist, "node_machine_num": d_nodes, "tp_size": d_tp,
                                 "dp_size": 32 // d_tp, "sp_size": 1, "cp_size": 1}},
           "log_info": {"to_file": False}}
    cfg.update(extra)
    return cfg


def global_ranktable(p_deploy: str, d_deploy: str, p_ips=("10.0.0.1", "10.0.0.2"), d_ips=("10.0.0.3", "10.0.0.4"),
                     per_server=16, predict=1025, mgmt=1026, ms_ip="10.0.0.1") -> dict:
    def group(gid, deploy, ips):
        servers = []
        rank = 0
        for ip in ips:
            devs = []
            for d in range(per_server):
                devs.append({"device_id": str(d), "device_ip": f"172.16.{ips.index(ip)}.{100 + d}",
                             "device_logical_id": str(d), "rank_id": str(rank)})
                rank += 1
            servers.append({"server_id": ip, "server_ip": ip, "predict_port": str(predict), "mgmt_port": str(mgmt),
                            "device": devs})
        return {"group_id": gid, "deploy_server": deploy, "server_count": str(len(servers)), "server_list": servers}
    ms = [{"server_id": ms_ip, "server_ip": ms_ip}]
    return {"version": "1.0", "status": "completed", "server_group_list": [
        {"group_id": "0", "server_count": "1", "server_list": ms},
        {"group_id": "1", "server_count": "1", "server_list": ms},
        group("2", p_deploy, p_ips), group("3", d_deploy, d_ips)]}


def table_instances(engine, tmp_path, monkeypatch, doc):
    monkeypatch.setenv("GLOBAL_RANK_TABLE_FILE_PATH", str(write(tmp_path / "global_ranktable.json", doc)))
    return engine.global_table()


def test_pd_init_role_0_and_1_with_equal_flags_leave_prefill_undefined(engine, tmp_path, monkeypatch):
    table, coordinators = table_instances(engine, tmp_path, monkeypatch, global_ranktable("0", "1"))
    assert coordinators == ["10.0.0.1"]
    # different P/D node counts: the rank-table roles are final, prefill has none
    insts, errors = engine.assign_roles(table, controller_cfg(False, False, p_nodes=2, d_nodes=4))
    assert [(i["group"], i["role"], i["distributed"]) for i in insts] == [
        ("2", engine.UNDEF, False), ("3", engine.DECODE, True)]
    assert len(errors) == 1 and "deploy_server '0' gives role UN_DEF_INSTANCE" in errors[0]
    # and decode "1" is parsed as distributed DP: one server per device at 10000 + 4k, per server entry
    d = insts[1]["endpoints"]
    assert len(d) == 32 and d[0] == {"ip": "10.0.0.3", "port": 10000, "mgmt": 10001}
    assert d[15] == {"ip": "10.0.0.3", "port": 10060, "mgmt": 10061} and d[16]["port"] == 10000
    # equal node counts: the role manager settles the UN_DEF group (stand-in: the missing role)
    insts, errors = engine.assign_roles(table, controller_cfg(False, False))
    assert [i["role"] for i in insts] == [engine.PREFILL, engine.DECODE] and not errors


def test_pd_init_role_upstream_layouts(engine, tmp_path, monkeypatch):
    # equal flags: "2" / "1" (deploy_ac_job.py L1341-1346) give the roles, and both are distribute flags
    # (isDistribute = bool(stoi(deploy_server))): P served per DP rank (tp 16 -> one server per 16 devices)
    table, _ = table_instances(engine, tmp_path, monkeypatch, global_ranktable("2", "1"))
    insts, errors = engine.assign_roles(table, controller_cfg(False, False))
    assert not errors
    assert [(i["role"], i["distributed"], i["endpoints"][:2]) for i in insts] == [
        (engine.PREFILL, True, [{"ip": "10.0.0.1", "port": 10000, "mgmt": 10001},
                                {"ip": "10.0.0.2", "port": 10000, "mgmt": 10001}]),
        (engine.DECODE, True, [{"ip": "10.0.0.3", "port": 10000, "mgmt": 10001},
                               {"ip": "10.0.0.3", "port": 10004, "mgmt": 10005}])]
    # upstream large EP: centralized P "0" + distributed-DP D "1" (deploy_ac_job.py: flags differ)
    table, _ = table_instances(engine, tmp_path, monkeypatch, global_ranktable("0", "1"))
    insts, errors = engine.assign_roles(table, controller_cfg(False, True, d_tp=2))
    assert not errors
    assert [(i["role"], i["distributed"], len(i["endpoints"])) for i in insts] == [
        (engine.PREFILL, False, 1), (engine.DECODE, True, 16)]      # 16 devices / (tp 2 x cp 1) per server x 2
    assert [e["port"] for e in insts[1]["endpoints"][:3]] == [10000, 10004, 10008]


class Instance(http.server.BaseHTTPRequestHandler):
    """A fake MindIE instance: ready on the management port, answers completions on the business port."""
    def log_message(self, *a):
        pass

    def _send(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._send(200, {})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(200, {"choices": [{"message": {"content": "from %s" % self.server.server_address[0]}}]})


def serve(ip: str, port: int):
    srv = http.server.ThreadingHTTPServer((ip, port), Instance)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def start_ms(tmp_path, engine_doc, ctl_cfg, svc, ip="127.0.0.1"):
    """ms_controller + ms_coordinator as subprocesses (library path set) -> (controller, coordinator, predict)."""
    ports = [free_port(ip) for _ in range(3)]
    ctl = dict(ctl_cfg, http_server={"ip": ip, "port": ports[0]}, mindie_ms_coordinator_port=ports[2])
    env = {"LD_LIBRARY_PATH": str(svc / "lib"),
           "GLOBAL_RANK_TABLE_FILE_PATH": str(write(tmp_path / "global_ranktable.json", engine_doc)),
           "MINDIE_MS_CONTROLLER_CONFIG_FILE_PATH": str(write(tmp_path / "ms_controller.json", ctl)),
           "MINDIE_MS_COORDINATOR_CONFIG_FILE_PATH": str(write(tmp_path / "ms_coordinator.json",
                                                               {"http_config": {}, "log_info": {"to_file": False}}))}
    base = {"PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen([sys.executable, str(ENGINE_PY), "ms_controller"], cwd=svc, env={**base, **env},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
             subprocess.Popen([sys.executable, str(ENGINE_PY), "ms_coordinator", ip, str(ports[1]), ip, str(ports[2])],
                              cwd=svc, env={**base, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)]
    return procs, ports


def chat(ip, port):
    import urllib.error
    import urllib.request
    req = urllib.request.Request(f"http://{ip}:{port}/v1/chat/completions", method="POST",
                                 data=json.dumps({"model": "ds", "messages": [{"role": "user", "content": "hi"}]}).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:                     # not listening yet
        return None, str(e)


def stop(procs) -> list[str]:
    return stop_all(procs)


def test_pd_distributed_decode_without_dp_servers_never_gets_ready(engine, tmp_path):
    """P "0" / D "1" with enable_dist_dp_server false on both sides and different node counts: prefill has no
    role and decode is looked for per DP rank from initial_dist_server_port (nothing there): the controller never
    reports ready, the coordinator never gets ready and answers 503."""
    svc = ms_home(tmp_path)
    p_ip, d_ip = "127.0.0.2", "127.0.0.3"
    pp, dp = free_port(p_ip), free_port(d_ip)
    servers = [serve(p_ip, pp), serve(d_ip, dp)]           # centralized masters answer on predict == mgmt port
    doc = global_ranktable("0", "1", p_ips=(p_ip,), d_ips=(d_ip,), per_server=2, predict=pp, mgmt=pp,
                           ms_ip="127.0.0.1")
    doc["server_group_list"][3]["server_list"][0].update(predict_port=str(dp), mgmt_port=str(dp))
    procs, ports = start_ms(tmp_path, doc, controller_cfg(False, False, p_nodes=1, d_nodes=2,
                                                          initial_dist_server_port=free_port(d_ip)), svc)
    try:
        deadline = time.monotonic() + 60                    # the coordinator answers (it starts, as the controller)
        while (answer := chat("127.0.0.1", ports[1]))[0] is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3)                                       # the controller's rounds: never ready
        code, body = chat("127.0.0.1", ports[1])
        assert answer[0] is not None and code == 503 and "no available prefill or decode instance" in body, body
    finally:
        outs = stop(procs)
        for s in servers:
            s.shutdown()
    assert "gives role UN_DEF_INSTANCE" in outs[0]
    assert "distributed DP" in outs[0] and "no server answers at 127.0.0.3" in outs[0]
    assert "All instances are ready" not in outs[0]
    assert "MindIE-MS coordinator is not ready..." in outs[1] and "is ready!!!" not in outs[1]


def test_pd_centralized_prefill_distributed_decode_gets_ready(engine, tmp_path):
    """Upstream large-EP: P "0" centralized, D "1" distributed DP (d_node_config.enable_dist_dp_server true),
    one decode server per DP rank on initial_dist_server_port + 4k: ready, requests relayed."""
    svc = ms_home(tmp_path)
    p_ip, d_ip = "127.0.0.4", "127.0.0.5"
    pp = free_port(p_ip)
    first = 20000 + (os.getpid() % 1000) * 8
    servers = [serve(p_ip, pp)] + [serve(d_ip, first + 4 * k + off) for k in range(2) for off in (0, 1)]
    doc = global_ranktable("0", "1", p_ips=(p_ip,), d_ips=(d_ip,), per_server=2, predict=pp, mgmt=pp,
                           ms_ip="127.0.0.1")
    procs, ports = start_ms(tmp_path, doc, controller_cfg(False, True, p_nodes=1, d_nodes=1,
                                                          initial_dist_server_port=first), svc)
    try:
        deadline = time.monotonic() + 60
        while True:
            code, body = chat("127.0.0.1", ports[1])
            if code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert code == 200 and "from 127.0.0.5" in body, body
    finally:
        outs = stop(procs)
        for s in servers:
            s.shutdown()
    assert "All instances are ready" in outs[0] and "UN_DEF" not in outs[0]
    assert "MindIE-MS coordinator is ready!!!" in outs[1]


# ---- gloo: multi-node torch needs GLOO_SOCKET_IFNAME on the NIC of MIES_CONTAINER_IP ------------------------

def test_torch_multinode_needs_gloo_socket_ifname(engine):
    ifaces = {"lo": "127.0.0.1", "eth0": "10.200.0.11"}
    unset = engine.gloo_problem({}, "10.200.0.11", ifaces, rank=8, size=16, master="10.200.0.10", port=7008)
    assert "local=[127.0.0.1]" in unset[0] and "error=SO_ERROR: Connection refused" in unset[0]
    assert unset[-1].startswith("RuntimeError: Gloo connectFullMesh failed")
    missing = engine.gloo_problem({"GLOO_SOCKET_IFNAME": "enp1s0"}, "10.200.0.11", ifaces)
    assert missing == ["RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != "
                       "nullptr. Unable to find address for: enp1s0"]
    wrong = engine.gloo_problem({"GLOO_SOCKET_IFNAME": "lo"}, "10.200.0.11", ifaces)
    assert "Connection refused" in wrong[0] and "carries 127.0.0.1, not MIES_CONTAINER_IP 10.200.0.11" in wrong[0]
    assert engine.gloo_problem({"GLOO_SOCKET_IFNAME": "eth0"}, "10.200.0.11", ifaces) is None
    assert engine.interface_addresses().get("lo") == "127.0.0.1"


# ---- 6. docker run --user (needs a fake node) -----------------------------------------------------------

def test_daemon_takes_config_file_and_expert_parallel_on_the_command_line(engine, capsys):
    """Motor's node_manager starts each distributed DP server as `mindieservice_daemon --config-file configI.json
    --expert-parallel true` (llm_daemon_starter.py L38-47): the path given there replaces MIES_CONFIG_JSON_PATH."""
    assert engine.daemon_args([]) == {"config_file": None, "expert_parallel": False}
    assert engine.daemon_args(["--config-file", "/c/config3.json", "--expert-parallel", "true"]) == {
        "config_file": "/c/config3.json", "expert_parallel": True}
    assert engine.daemon_args(["--config-file=/c/x.json", "--expert-parallel=false"])["config_file"] == "/c/x.json"
    for bad in (["--config-file"], ["--expert-parallel", "yes"], ["--bogus"]):
        with pytest.raises(engine.Fatal):
            engine.daemon_args(bad)
    assert "Unknown option '--bogus'" in capsys.readouterr().out


def test_docker_run_user_and_config_owner(fake_cluster_factory):
    fc = fake_cluster_factory(n=1)
    node = fc.nodes[0].name
    image = fc.specs[0].docker_images[0]
    r = fc.ssh(node, f"docker run --rm --user 1000 {image} id -u; docker run --rm -u 1000:1001 {image} id -g; "
                     f"docker run --rm -u HwHiAiUser {image} sh -c 'id -u; echo $HOME'")
    assert r.stdout.split() == ["1000", "1001", "1000", "/home/HwHiAiUser"], r.stdout + r.stderr
    r = fc.ssh(node, f"docker run --rm -u nosuchuser {image} id -u")
    assert r.returncode != 0 and "unable to find user nosuchuser" in r.stderr
    # config.json pushed as root, read by a container running as 1000: refused (ConstrainOwner), whatever
    # MINDIE_CHECK_INPUTFILES_PERMISSION says
    d = "/var/lib/deployctl/test/user"
    r = fc.ssh(node, f"mkdir -p {d} && echo '{{}}' > {d}/config.json && chmod 640 {d}/config.json && "
                     f"docker run --name u1 -u 1000 -v {d}:/etc/deployctl:ro -e MIES_CONFIG_JSON_PATH=/etc/deployctl/"
                     f"config.json -e MINDIE_CHECK_INPUTFILES_PERMISSION=0 {image} /usr/bin/python3 "
                     f"/.fakecluster/engine.py daemon; echo rc=$?; docker inspect -f '{{{{.Config.User}}}}' u1")
    assert "rc=1" in r.stdout and r.stdout.rstrip().endswith("1000"), r.stdout + r.stderr
    assert "owner id diff: current process user id is 1000, file owner id is 0" in r.stdout + r.stderr
    # the node's network namespace: eth0 carries the node's IP (what GLOO_SOCKET_IFNAME must name)
    r = fc.ssh(node, "/usr/bin/python3 -c \"import sys; sys.path.insert(0, '/usr/local/lib/fakecluster'); "
                     "import engine; print(engine.interface_addresses())\"")
    assert f"'eth0': '{fc.node(node).ip}'" in r.stdout, r.stdout + r.stderr
