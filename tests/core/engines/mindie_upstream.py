"""Shared helpers for tests/core/engines: MindIE inventories as dicts, the real loader/planner/renderer, a sandbox
that runs the rendered start scripts with a recording `docker`, and independent models of upstream MindIE /
MindIE-MS behaviour (../shared/reference/mindie-upstream-rules.md §1-2).

Nothing here imports deployctl's MindIE driver helpers: expected values come from the upstream sources
(named next to each model), the observed values from the rendered files.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
CATALOG = yaml.safe_load((ROOT / "deployctl" / "core" / "catalog" / "models.yaml").read_text())

DEVICES_PER_NODE = {"a2": 8, "a3": 16}
SERVICE = "/usr/local/Ascend/mindie/latest/mindie-service"
IMAGE_TAG = {"2.2": "2.2.RC1", "2.3": "2.3.0", "3.0": "3.0.0"}
TORCH_MODELS = ("deepseek-v3.2", "deepseek-v3.2-exp")   # deepseek_v3.2.md L184: backendType must be torch


def image(version: str, hardware: str = "a2") -> str:
    tag = IMAGE_TAG.get(version, version)
    return f"swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie:{tag}-800I-{hardware.upper()}-py311-openeuler24.03-lts"


def node_dict(i: int, hardware: str, interface: str | None = "eth0") -> dict:
    n = DEVICES_PER_NODE[hardware]
    node = {"name": f"n{i + 1}", "address": f"10.210.0.{i + 2}",
            "devices": [{"id": d, "ip": f"29.{20 + i}.{d}.2"} for d in range(n)]}
    if interface:
        node["interface"] = interface
    return node


def inventory(*, hardware: str = "a2", nodes: int = 2, model: str = "deepseek-r1", quant: str = "w8a8",
              version: str | None = "2.2", preset: str = "dp-ep", prefill_nodes: int | None = None,
              interfaces: bool = True, engine: dict | None = None, layout: dict | None = None,
              max_seq_len: int = 8192) -> dict:
    """An inventory dict in the shape of inventories/examples/a2-4x8-dp-ep.yaml (device IPs explicit)."""
    inv = {
        "cluster": {"name": "eng-test", "hardware": hardware},
        "engine": {"image": image(version or "2.2", hardware)},
        "model": {"name": model, "quant": quant, "weights_path": f"/data/models/{model}-{quant}",
                  "served_name": "served", "max_seq_len": max_seq_len, "max_input_len": max_seq_len // 2,
                  "max_batch_size": 32},
        "layout": {"preset": preset},
        "nodes": [node_dict(i, hardware, "eth0" if interfaces else None) for i in range(nodes)],
    }
    if version is not None:
        inv["engine"]["version"] = version
    if preset == "pd-split":
        k = prefill_nodes if prefill_nodes is not None else nodes // 2
        names = [n["name"] for n in inv["nodes"]]
        inv["layout"]["prefill"] = {"nodes": names[:k]}
        inv["layout"]["decode"] = {"nodes": names[k:]}
    for key, value in (engine or {}).items():
        inv["engine"][key] = value
    for key, value in (layout or {}).items():
        if isinstance(value, dict) and isinstance(inv["layout"].get(key), dict):
            inv["layout"][key].update(value)
        else:
            inv["layout"][key] = value
    return inv


def load(inv: dict):
    """dict -> YAML -> the real loader and validator (as `deployctl validate` does)."""
    from deployctl.core.input.raw import parse_yaml
    from deployctl.app.inventory import validate_inventory

    raw = parse_yaml(yaml.safe_dump(copy.deepcopy(inv), sort_keys=False), "gen.yaml", ROOT)
    return validate_inventory(raw)


def plan(inv: dict):
    from deployctl.core.sizing.planner import plan_layout

    return plan_layout(load(inv))


@dataclass
class Rendered:
    inv: dict
    plan: object
    files: dict[str, bytes]
    modes: dict[str, int] = field(default_factory=dict)

    def text(self, path: str) -> str:
        return self.files[path].decode()

    def json(self, path: str) -> dict:
        return json.loads(self.files[path])

    def node_files(self, node: str) -> list[str]:
        return sorted(p.split("/", 1)[1] for p in self.files if p.startswith(f"{node}/"))

    def env(self, node: str) -> dict[str, str]:
        return parse_env_file(self.text(f"{node}/env"))

    def write(self, out: Path) -> Path:
        for path, content in self.files.items():
            target = out / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            target.chmod(self.modes.get(path, 0o644))
        return out


def render(inv: dict) -> Rendered:
    from deployctl.core.render import render_artifacts

    p = plan(inv)
    arts = render_artifacts(p)
    files = {a.path: a.content if isinstance(a.content, bytes) else a.content.encode() for a in arts}
    return Rendered(inv=inv, plan=p, files=files, modes={a.path: a.mode for a in arts})


def parse_env_file(text: str) -> dict[str, str]:
    """docker --env-file semantics: KEY=VALUE, the value literal up to the end of the line; # comments."""
    env = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, _, value = line.partition("=")
        env[key] = value
    return env


# ------------------------------------------------------------------------------------------ inventory facts

def devices_per_node(inv: dict) -> int:
    return DEVICES_PER_NODE[inv["cluster"]["hardware"]]


def role_nodes(inv: dict) -> dict[str, list[str]]:
    """role -> node names, from the inventory (not the plan)."""
    names = [n["name"] for n in inv["nodes"]]
    if inv["layout"].get("preset") == "pd-split":
        return {"prefill": list(inv["layout"]["prefill"]["nodes"]), "decode": list(inv["layout"]["decode"]["nodes"])}
    return {"mixed": names}


def node_role(inv: dict, name: str) -> str:
    return next(r for r, ns in role_nodes(inv).items() if name in ns)


def address(inv: dict, name: str) -> str:
    n = next(n for n in inv["nodes"] if n["name"] == name)
    return n.get("container_ip") or n["address"]


def world(inv: dict, role: str) -> int:
    return len(role_nodes(inv)[role]) * devices_per_node(inv)


def is_torch(inv: dict) -> bool:
    return inv["model"]["name"] in TORCH_MODELS


def dist_base(inv: dict) -> int:
    return inv["engine"].get("ports", {}).get("dist_base", 10000)   # controller.md L191 default 10000


def config_names(r: Rendered, node: str) -> list[str]:
    return [f for f in r.node_files(node) if f.startswith("config") and f.endswith(".json")]


def model_config(doc: dict) -> dict:
    return doc["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]


# ------------------------------------------------------------------------------------------ upstream models

G_PREFILL_SERVER, G_DECODE_SERVER = 2, 1      # ControllerConfig.cpp L38-39


def pd_init_role(deploy_server: int, p_flag: bool, d_flag: bool) -> str:
    """Motor controller/constant/ControllerConfig.cpp GetPDInitRole L611-628 (same at 7be35ef)."""
    if p_flag == d_flag:
        if deploy_server == G_PREFILL_SERVER:
            return "PREFILL"
        if deploy_server == G_DECODE_SERVER:
            return "DECODE"
        return "UN_DEF"
    return "PREFILL" if bool(deploy_server) == p_flag else "DECODE"


def dp_rank_ports(base: int, k: int) -> dict[str, int]:
    """RankTableLoader.cpp ParseDistributeNodeInfo L239/L262 + UpdateNodeInfo L128-136 (per server entry,
    rank k on it): predict, management, metrics, inter-comm = base+4k .. +3 (gen_config_single_container.py
    __update_server_env L438-461 assigns them in this order)."""
    p = base + 4 * k
    return {"port": p, "managementPort": p + 1, "metricsPort": p + 2, "interCommPort": p + 3}


def server_num(device_num: int, doc: dict) -> int:
    """gen_config_single_container.py get_server_num L147-162: local devices / tp (cp is 1 upstream; a DP
    server holds tp x cp devices: RankTableLoader npuNumPerDp = cp_size*tp_size)."""
    mc = model_config(doc)
    return device_num // (mc.get("tp", mc.get("worldSize", 1)) * mc.get("cp", 1))


# ------------------------------------------------------------------------------------------ sandbox runs

FAKE_DOCKER = r"""#!/usr/bin/env python3
import os, sys
if sys.argv[1:3] == ["container", "inspect"]:
    sys.exit(1)
with open(os.environ["FAKE_DOCKER_LOG"], "ab") as f:
    args = sys.argv[1:]
    f.write(b"%d\0" % len(args) + b"".join(a.encode("utf-8", "surrogateescape") + b"\0" for a in args))
"""

RECORDER = r"""#!/usr/bin/env python3
# a stand-in MindIE binary: records its argv, cwd and environment, then waits for its peers (so a launcher that
# stops the container when the first daemon exits cannot kill them before they recorded)
import json, os, sys, time
log = os.environ["FAKE_EXEC_LOG"]
with open(log, "a") as f:
    f.write(json.dumps({"exe": sys.argv[0], "argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}) + "\n")
want = int(os.environ.get("FAKE_EXEC_WANT", "1"))
end = time.time() + 10
while time.time() < end:
    with open(log) as f:
        if sum(1 for _ in f) >= want:
            break
    time.sleep(0.05)
"""


def write_exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@dataclass
class DockerRun:
    argv: list[str]

    @property
    def options(self) -> list[str]:
        return self.argv[1:-4]

    @property
    def image(self) -> str:
        return self.argv[-4]

    @property
    def command(self) -> list[str]:
        return self.argv[-3:]

    def values(self, flag: str) -> list[str]:
        out, opts = [], self.options
        for i, a in enumerate(opts):
            if a == flag and i + 1 < len(opts):
                out.append(opts[i + 1])
            elif a.startswith(flag + "="):
                out.append(a.split("=", 1)[1])
        return out

    def env(self, node_dir: Path) -> dict[str, str]:
        """The container environment docker would build: --env-file first, then -e."""
        env: dict[str, str] = {}
        for f in self.values("--env-file"):
            env.update(parse_env_file(Path(f).read_text()))
        for e in self.values("-e"):
            k, _, v = e.partition("=")
            env[k] = v
        return env


def run_script(script: Path, sandbox: Path) -> list[DockerRun]:
    """Run a rendered start script under bash with a recording `docker` first on PATH; the docker runs."""
    bindir = sandbox / "fakebin"
    write_exe(bindir / "docker", FAKE_DOCKER)
    log = sandbox / f"docker-{script.parent.name}-{script.name}.log"
    log.unlink(missing_ok=True)
    cwd = sandbox / "cwd"
    cwd.mkdir(exist_ok=True)
    proc = subprocess.run(["bash", str(script)], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(sandbox), "LC_ALL": "C",
                               "FAKE_DOCKER_LOG": str(log)})
    assert proc.returncode == 0, f"{script} failed ({proc.returncode}): {proc.stderr}"
    parts = log.read_bytes().split(b"\0") if log.exists() else [b""]
    runs, i = [], 0
    while i < len(parts) - 1:
        n = int(parts[i])
        runs.append(DockerRun([p.decode() for p in parts[i + 1:i + 1 + n]]))
        i += 1 + n
    return [r for r in runs if r.argv and r.argv[0] == "run"]


def run_in_container(run: DockerRun, node_dir: Path, sandbox: Path, want: int = 1,
                     overrides: dict | None = None) -> list[dict]:
    """Execute the container command of a docker run (bash -c LAUNCHER) with the container's environment;
    the MindIE binaries it starts must be stand-ins (RECORDER) at the paths the inventory gave."""
    assert run.command[:2] == ["bash", "-c"], run.command
    log = sandbox / f"exec-{time.monotonic_ns()}.log"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(sandbox), "LC_ALL": "C", **run.env(node_dir),
           **(overrides or {}), "FAKE_EXEC_LOG": str(log), "FAKE_EXEC_WANT": str(want)}
    proc = subprocess.run(["bash", "-c", run.command[2]], cwd=sandbox, env=env, capture_output=True, text=True,
                          timeout=60)
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    assert records, f"the launcher started nothing (rc {proc.returncode}): {proc.stderr}"
    return records


def file_state(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_uid, stat.S_IMODE(st.st_mode)


def prepare_tree(r: Rendered, out: Path, foreign_uid: int = 4242) -> Path:
    """Write the rendered files as a different user would have pushed them (foreign owner, mode 644)."""
    r.write(out)
    for path in r.files:
        p = out / path
        if not p.name.endswith(".sh"):
            os.chown(p, foreign_uid, foreign_uid)
            p.chmod(0o644)
    return out


def shell_words(text: str) -> list[str]:
    return shlex.split(text, comments=True)


# ------------------------------------------------------------------------------------------ checks of rendered files
# Each check reads only the rendered files (and the inventory dict) and compares them with the upstream models
# above. They are shared by test_mindie_rules.py (fixed inventories) and test_mindie_properties.py (generated).

PORT_KEYS = ("port", "managementPort", "metricsPort", "interCommPort")


def preset(inv: dict) -> str:
    return inv["layout"].get("preset")


def engine_value(inv: dict, key: str, default=None):
    return inv["engine"].get(key, default)


def ms_folder(r: Rendered) -> str:
    folders = [p.split("/", 1)[0] for p in r.files if p.endswith("/global_ranktable.json")]
    assert len(folders) == 1, f"pd-split renders one global rank table, got {folders}"
    return folders[0]


def check_pd_roles(r: Rendered) -> None:
    """§1.1: MS must give the prefill group PREFILL and the decode group DECODE (GetPDInitRole)."""
    if preset(r.inv) != "pd-split":
        return
    folder = ms_folder(r)
    table = r.json(f"{folder}/global_ranktable.json")
    mnic = r.json(f"{folder}/ms_controller.json")["multi_node_infer_config"]
    p_flag = mnic["p_node_config"]["enable_dist_dp_server"]
    d_flag = mnic["d_node_config"]["enable_dist_dp_server"]
    want = {role: {address(r.inv, n) for n in names} for role, names in role_nodes(r.inv).items()}
    seen = {}
    for g in table["server_group_list"]:
        if int(g["group_id"]) < 2:     # coordinator, controller (gen_global_ranktable.py L133-134)
            continue
        assert "deploy_server" in g, f"group {g['group_id']} has no deploy_server"
        role = pd_init_role(int(g["deploy_server"]), p_flag, d_flag)
        ips = {s["server_ip"] for s in g["server_list"]}
        expected = next((k for k, v in want.items() if v == ips), None)
        assert expected is not None, f"group {g['group_id']} servers {ips} match no role of the inventory {want}"
        assert role == expected.upper(), (
            f"group {g['group_id']} ({expected}) deploy_server={g['deploy_server']!r} with p enable_dist_dp_server="
            f"{p_flag}, d={d_flag}: MS GetPDInitRole gives {role}, not {expected.upper()}")
        seen[expected] = role
    assert set(seen) == {"prefill", "decode"}, f"groups found for {set(seen)}"


def decode_docs(r: Rendered, node: str) -> list[tuple[str, dict]]:
    names = sorted(config_names(r, node), key=lambda n: int(n[6:-5] or 0))
    return [(n, r.json(f"{node}/{n}")) for n in names if n != "config.json"]


def check_decode_configs(r: Rendered) -> None:
    """§1.1: a pd-split decode node runs distributed DP: config1..N.json, one per DP rank, ports base+4k..+3."""
    if preset(r.inv) != "pd-split":
        return
    base = dist_base(r.inv)
    work = engine_value(r.inv, "work_dir", "/etc/deployctl")
    decode = role_nodes(r.inv)["decode"]
    for node in decode:
        docs = decode_docs(r, node)
        assert docs, f"decode node {node} has no config<i>.json (files: {r.node_files(node)})"
        n = server_num(devices_per_node(r.inv), docs[0][1])
        assert [name for name, _ in docs] == [f"config{i}.json" for i in range(1, n + 1)], (
            f"{node}: want config1..{n}.json (devices {devices_per_node(r.inv)} / tp x cp), got {[d for d, _ in docs]}")
        first = None
        for k, (name, doc) in enumerate(docs):
            sc, bc = doc["ServerConfig"], doc["BackendConfig"]
            assert sc.get("distDPServerEnabled") is True, f"{node}/{name}: ServerConfig.distDPServerEnabled"
            assert bc.get("ScheduleConfig", {}).get("distributedEnable") is True, \
                f"{node}/{name}: BackendConfig.ScheduleConfig.distributedEnable"
            assert bc.get("multiNodesInferEnabled") is False, f"{node}/{name}: multiNodesInferEnabled must be false"
            got = {key: sc.get(key) for key in PORT_KEYS}
            assert got == dp_rank_ports(base, k), f"{node}/{name}: ports {got}, MS expects {dp_rank_ports(base, k)}"
            stripped = dict(doc, ServerConfig={k2: v for k2, v in sc.items() if k2 not in PORT_KEYS})
            first = first or stripped
            assert stripped == first, f"{node}/{name} differs from config1.json in more than the four ports"
        env = r.env(node)
        assert env.get("MINDIE_ENABLE_DP_DISTRIBUTED") == "1", f"{node}: env MINDIE_ENABLE_DP_DISTRIBUTED"
        assert env.get("DP_PARTITION_UP_ENABLE") == "1", f"{node}: env DP_PARTITION_UP_ENABLE"
        # distributedEnable forces the HCCL rank table of the whole D group to load (schedule_config.cpp L210)
        rt = env.get("RANK_TABLE_FILE", "")
        assert rt.startswith(work + "/") and rt[len(work) + 1:] in r.node_files(node), \
            f"{node}: RANK_TABLE_FILE={rt!r} is not a rendered file under {work}"
        table = r.json(f"{node}/{rt[len(work) + 1:]}")
        assert {s["container_ip"] for s in table["server_list"]} == {address(r.inv, d) for d in decode}


def check_prefill_centralized(r: Rendered) -> None:
    """§1.1: the prefill instance is centralized: distDPServerEnabled false, multiNodesInferEnabled when it spans
    servers (Motor user_config.json L124, L140)."""
    if preset(r.inv) != "pd-split":
        return
    prefill = role_nodes(r.inv)["prefill"]
    for node in prefill:
        doc = r.json(f"{node}/config.json")
        assert doc["ServerConfig"].get("distDPServerEnabled") is False, f"{node}: prefill distDPServerEnabled"
        if len(prefill) > 1:
            assert doc["BackendConfig"]["multiNodesInferEnabled"] is True, f"{node}: prefill multiNodesInferEnabled"
        assert doc["BackendConfig"].get("ScheduleConfig", {}).get("distributedEnable") in (None, False)


def check_ms_controller(r: Rendered) -> None:
    """§1.1: ms_controller.json: P enable_dist_dp_server false, D true, D node_machine_num = D dp
    (deploy_ac_job.py update_ms_controller_config L1701-1703); initial_dist_server_port = the DP port base."""
    if preset(r.inv) != "pd-split":
        return
    ctl = r.json(f"{ms_folder(r)}/ms_controller.json")
    mnic = ctl["multi_node_infer_config"]
    assert mnic["p_node_config"]["enable_dist_dp_server"] is False
    assert mnic["d_node_config"]["enable_dist_dp_server"] is True
    decode = role_nodes(r.inv)["decode"]
    docs = decode_docs(r, decode[0])
    dp = model_config(docs[0][1])["dp"]
    servers = sum(len(decode_docs(r, n)) for n in decode)
    assert mnic["d_node_config"]["node_machine_num"] == dp, \
        f"d node_machine_num {mnic['d_node_config']['node_machine_num']} != decode dp {dp}"
    assert servers == dp, f"{servers} DP servers on the decode nodes, but decode dp = {dp}"
    assert ctl.get("initial_dist_server_port", 10000) == dist_base(r.inv)


def run_starts(r: Rendered, tree: Path, sandbox: Path) -> dict[str, DockerRun]:
    """Run every node's start.sh (as root, files pushed by another uid); node -> its docker run."""
    out = {}
    for node in {n["name"] for n in r.inv["nodes"]}:
        runs = run_script(tree / node / "start.sh", sandbox)
        assert len(runs) == 1, f"{node}/start.sh ran docker run {len(runs)} times"
        out[node] = runs[0]
    return out


def check_decode_daemons(r: Rendered, tree: Path, runs: dict[str, DockerRun], sandbox: Path) -> None:
    """§1.1: a decode node's container starts N daemons, each `--config-file <work>/config<i>.json`
    (boot.sh L115-142 -> llm_daemon_starter.py L127-144). engine.daemon must be a RECORDER stand-in."""
    if preset(r.inv) != "pd-split":
        return
    work = engine_value(r.inv, "work_dir", "/etc/deployctl")
    daemon = engine_value(r.inv, "daemon", f"{SERVICE}/bin/mindieservice_daemon")
    for node in role_nodes(r.inv)["decode"]:
        n = len(decode_docs(r, node))
        run = runs[node]
        mounts = [v.rsplit(":", 2) for v in run.values("-v")]
        assert any(Path(h).resolve() == (tree / node).resolve() and c == work for h, c, _ in mounts), \
            f"{node}: the rendered folder is not mounted at {work}"
        records = run_in_container(run, tree / node, sandbox, want=n)
        assert all(rec["exe"] == daemon for rec in records), [rec["exe"] for rec in records]
        files = []
        for rec in records:
            argv = rec["argv"]
            assert "--config-file" in argv, f"{node}: daemon started without --config-file: {argv}"
            files.append(argv[argv.index("--config-file") + 1])
        assert sorted(files) == sorted(f"{work}/config{i}.json" for i in range(1, n + 1)), \
            f"{node}: {len(records)} daemons with {sorted(files)}, want {n} (one per config<i>.json)"


def check_ms_library_env(r: Rendered, tree: Path, sandbox: Path) -> None:
    """§1.2: ms_controller / ms_coordinator start with LD_LIBRARY_PATH containing <ms_home>/lib and
    HSECEASY_PATH=<ms_home>/lib (coordinator.md; boot.sh 7be35ef L27-40). engine.ms_home must hold
    RECORDER stand-ins bin/ms_controller and bin/ms_coordinator."""
    if preset(r.inv) != "pd-split":
        return
    ms_home = engine_value(r.inv, "ms_home", SERVICE).rstrip("/")
    folder = ms_folder(r)
    started = set()
    wheel = str(engine_value(r.inv, "version", "2.2")).split(".")[0] >= "3"
    overrides = None
    if wheel:
        # MindIE 3.x: the mindie_motor wheel's entry points set MIES_INSTALL_PATH and LD_LIBRARY_PATH and exec
        # <pkg>/bin/ms_* with the arguments (Motor 5dfb024 coordinator_run.py L17-39, controller_run.py)
        wheelbin = sandbox / "wheelbin"
        for name, binary in (("mindie_motor_controller", "ms_controller"), ("mindie_motor_coordinator", "ms_coordinator")):
            write_exe(wheelbin / name, f'#!/bin/sh\nexport MIES_INSTALL_PATH={ms_home}\n'
                                       f'export LD_LIBRARY_PATH={ms_home}/lib:{ms_home}/lib/grpc${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\n'
                                       f'exec {ms_home}/bin/{binary} "$@"\n')
        overrides = {"PATH": f"{wheelbin}:/usr/bin:/bin"}
    for run in run_script(tree / folder / "start-ms.sh", sandbox):
        (rec,) = run_in_container(run, tree / folder, sandbox, overrides=overrides)
        started.add(Path(rec["exe"]).name)
        if wheel and Path(rec["exe"]).name == "ms_coordinator":   # <predict_ip> <manage_ip> (main.cpp L22-45)
            assert len(rec["argv"]) == 2, rec["argv"]
        assert Path(rec["cwd"]).resolve() == Path(ms_home).resolve() or \
            Path(rec["exe"]).resolve().parent.parent == Path(ms_home).resolve()
        env = rec["env"]
        ld = [p.rstrip("/") for p in env.get("LD_LIBRARY_PATH", "").split(":")]
        assert f"{ms_home}/lib" in ld, f"{rec['exe']}: LD_LIBRARY_PATH={env.get('LD_LIBRARY_PATH')!r}"
        assert env.get("HSECEASY_PATH", "").rstrip("/") == f"{ms_home}/lib", \
            f"{rec['exe']}: HSECEASY_PATH={env.get('HSECEASY_PATH')!r}"
    assert started == {"ms_controller", "ms_coordinator"}, started


def all_configs(r: Rendered):
    for path in sorted(r.files):
        name = path.split("/", 1)[-1]
        if name.startswith("config") and name.endswith(".json") and "/" in path:
            yield path, r.json(path)


def check_torch_parallel(r: Rendered) -> None:
    """§1.3: torch runtime: no pipeline parallel (parallel_info_manager.py L252), moe_tp x moe_ep == world (L210)."""
    if not is_torch(r.inv):
        return
    for path, doc in all_configs(r):
        mc = model_config(doc)
        role = node_role(r.inv, path.split("/", 1)[0])
        assert mc["backendType"] == "torch", f"{path}: backendType {mc['backendType']}"
        assert mc.get("pp", 1) == 1, f"{path}: pp={mc.get('pp')} on the torch runtime"
        assert mc["moe_tp"] * mc["moe_ep"] == world(r.inv, role), \
            f"{path}: moe_tp x moe_ep = {mc['moe_tp'] * mc['moe_ep']}, world of the {role} instance {world(r.inv, role)}"


def check_acceptance(r: Rendered) -> None:
    """What upstream never runs must never be planned (§1.3, §1.4, version caveat)."""
    inv, quant = r.inv, r.inv["model"]["quant"]
    version = r.plan.engine.version
    if is_torch(inv):
        assert version == "3.0", f"{inv['model']['name']} planned on MindIE {version}: the torch runtime is 3.0 only"
        assert preset(inv) != "tp-pp", "V3.2 with pipeline parallel planned on the torch runtime"
        assert quant != "w8a8c8", "V3.2 W8A8C8 planned: deepseek_v3.2.md Table 2, KV cache quantization not supported"
    if preset(inv) == "pd-split":
        assert not quant.endswith("c8"), "multi-node PD with KV-cache int8 planned (pd_separation doc L53, L63)"


def check_lm_head_partition_up(r: Rendered) -> None:
    """§1.5: lm_head local TP needs DP_PARTITION_UP_ENABLE=1 (flash_causal_deepseekv2.py L1080)."""
    for path, doc in all_configs(r):
        opts = model_config(doc).get("models", {}).get("deepseekv2", {}).get("parallel_options", {})
        if opts.get("lm_head_local_tp"):
            env = r.env(path.split("/", 1)[0])
            assert env.get("DP_PARTITION_UP_ENABLE") == "1", f"{path}: lm_head_local_tp without DP_PARTITION_UP_ENABLE=1"


def check_v32_presets(r: Rendered) -> None:
    """§2: deepseek_v3.2.md typical configurations L740-749: HCCL_BUFFSIZE 1050 everywhere, NPU_MEMORY_FRACTION
    0.92 mixed / 0.8 PD."""
    if not is_torch(r.inv):
        return
    frac = 0.8 if preset(r.inv) == "pd-split" else 0.92
    for n in r.inv["nodes"]:
        env = r.env(n["name"])
        assert env.get("HCCL_BUFFSIZE") == "1050", f"{n['name']}: HCCL_BUFFSIZE={env.get('HCCL_BUFFSIZE')}"
        assert float(env.get("NPU_MEMORY_FRACTION", "nan")) == frac, \
            f"{n['name']}: NPU_MEMORY_FRACTION={env.get('NPU_MEMORY_FRACTION')}, want {frac}"


def expected_aiv(hardware: str, role: str, torch: bool) -> bool:
    """HCCL_OP_EXPANSION_MODE=AIV per role, as env.yaml documents its choice between disagreeing sources:
    a colocated (mixed) instance follows the hardware: A3 sets it (MindIE A3_single.sh), A2 does not;
    prefill AIV (mindie_env*.json prefill L37/L39); decode unset (Motor boot.sh L129 for distributed decode)
    except V3.2, whose PD doc sets it for decode (deepseek_v3.2.md L275)."""
    if role == "prefill":
        return True
    if role == "decode":
        return torch
    return hardware == "a3"


def check_aiv(r: Rendered) -> None:
    if "HCCL_OP_EXPANSION_MODE" in r.inv["engine"].get("env", {}):
        return
    for n in r.inv["nodes"]:
        role = node_role(r.inv, n["name"])
        got = r.env(n["name"]).get("HCCL_OP_EXPANSION_MODE")
        want = expected_aiv(r.inv["cluster"]["hardware"], role, is_torch(r.inv))
        assert (got == "AIV") == want and got in (None, "AIV"), \
            f"{n['name']} ({role}): HCCL_OP_EXPANSION_MODE={got!r}, want {'AIV' if want else 'unset'}"


def mindie_metrics_on(value: str | None) -> bool:
    """MindIE's reading of MIES_SERVICE_MONITOR_MODE (MindIE-LLM@8b4871ad prometheus_metrics.cpp L58-69): not empty
    and ``std::stoi(value) == 1`` (leading blanks, a sign and the leading digits; no digits throws: off)."""
    if not value:
        return False
    text = value.lstrip(" \t\n\v\f\r")
    sign = text[:1] if text[:1] in "+-" else ""
    digits = ""
    for ch in text[len(sign):]:
        if not ch.isdigit():
            break
        digits += ch
    return bool(digits) and int(sign + digits) == 1


def check_monitor(r: Rendered) -> None:
    """Every node's env turns MindIE's Prometheus metrics on (without it GET /metrics answers 500, http_handler.cpp
    L960-967), unless the inventory sets MIES_SERVICE_MONITOR_MODE itself: then its value, the role's own over
    engine.env."""
    for n in r.inv["nodes"]:
        role = node_role(r.inv, n["name"])
        own = {**r.inv["engine"].get("env", {}), **r.inv["layout"].get(role, {}).get("env", {})}
        got = r.env(n["name"]).get("MIES_SERVICE_MONITOR_MODE")
        if "MIES_SERVICE_MONITOR_MODE" in own:
            assert got == str(own["MIES_SERVICE_MONITOR_MODE"]), f"{n['name']} ({role}): {got!r}, inventory {own}"
        else:
            assert mindie_metrics_on(got), f"{n['name']} ({role}): MIES_SERVICE_MONITOR_MODE={got!r}: no metrics"


def check_gloo(r: Rendered) -> None:
    """§2: GLOO_SOCKET_IFNAME = the node's interface on every node of a multi-node torch instance."""
    if not is_torch(r.inv):
        return
    for role, names in role_nodes(r.inv).items():
        for name in names:
            iface = next(n for n in r.inv["nodes"] if n["name"] == name).get("interface")
            got = r.env(name).get("GLOO_SOCKET_IFNAME")
            if len(names) > 1:
                assert got == iface, f"{name} ({role}): GLOO_SOCKET_IFNAME={got!r}, nodes[].interface={iface!r}"
            elif got is not None:
                assert got == iface


def engine_files(r: Rendered, node: str) -> list[str]:
    return [f for f in r.node_files(node) if (f.startswith("config") and f.endswith(".json")) or f == "ranktable.json"]


def check_file_owner(r: Rendered, tree: Path, runs: dict[str, DockerRun]) -> None:
    """§2: ConstrainOwner (file_utils.cpp): config*.json and the rank table owned by the engine's uid, mode <= 640.
    Run after run_starts (the files were pushed by uid 4242, mode 644)."""
    uid = r.inv["engine"].get("run_as_uid")
    want_uid = 0 if uid is None else uid
    for node, run in runs.items():
        for f in engine_files(r, node):
            owner, mode = file_state(tree / node / f)
            assert owner == want_uid, f"{node}/{f}: owner {owner}, the engine runs as {want_uid}"
            assert mode & ~0o640 == 0, f"{node}/{f}: mode {oct(mode)} exceeds 640"
        users = run.values("--user") + run.values("-u")
        if uid is None:
            assert users == [], f"{node}: --user {users} without engine.run_as_uid"
        else:
            assert [u.split(":")[0] for u in users] == [str(uid)], f"{node}: --user {users}, run_as_uid {uid}"


def check_mounts(r: Rendered, runs: dict[str, DockerRun]) -> None:
    """§2/§3: engine.mounts as -v host:container:ro|rw; device logs (/var/log/npu/slog) unless device_logs: false."""
    e = r.inv["engine"]
    for node, run in runs.items():
        vols = run.values("-v") + run.values("--volume")
        for m in e.get("mounts", []):
            want = f"{m['host']}:{m['container']}:{'rw' if m.get('rw') else 'ro'}"
            assert want in vols, f"{node}: {want} not in {vols}"
        slog = [v for v in vols if v.split(":", 1)[0] == "/var/log/npu/slog"]
        if e.get("device_logs", True):
            assert slog, f"{node}: no /var/log/npu/slog mount: {vols}"
        else:
            assert not [v for v in vols if "/var/log/npu" in v], f"{node}: device logs mounted with device_logs: false"


VALIDATED_WORLD = {   # model -> (world, at least?): model_support_list.md / deepseek_v3.2.md L15-17 / qwen README L27
    "deepseek-v3": (16, True), "deepseek-r1": (16, True), "deepseek-v3.2": (32, False),
    "deepseek-v3.2-exp": (32, False), "qwen3-235b-a22b": (16, False),
}


def check_validated_world(r: Rendered) -> None:
    """§1.3/§2: a colocated world size upstream never validated is planned with a WARN naming the world size."""
    if preset(r.inv) == "pd-split":
        return
    want, at_least = VALIDATED_WORLD[r.inv["model"]["name"]]
    w = world(r.inv, "mixed")
    if w == want or (at_least and w > want):
        return
    assert any("world size" in m and str(want) in m for m in r.plan.engine.warnings), \
        f"world size {w} (validated {want}) planned without a warning: {r.plan.engine.warnings}"


def check_version(r: Rendered) -> None:
    e = r.inv["engine"]
    if e.get("version"):
        want = ".".join(e["version"].split(".")[:2])
    else:
        tag = e["image"].rsplit(":", 1)[1]
        want = ".".join(tag.split("-")[0].split(".")[:2])
    assert r.plan.engine.version == want, f"plan.engine.version {r.plan.engine.version}, want {want}"


def check_everything(r: Rendered, tree: Path, sandbox: Path) -> None:
    check_acceptance(r)
    check_version(r)
    check_pd_roles(r)
    check_decode_configs(r)
    check_prefill_centralized(r)
    check_ms_controller(r)
    check_torch_parallel(r)
    check_lm_head_partition_up(r)
    check_v32_presets(r)
    check_aiv(r)
    check_monitor(r)
    check_gloo(r)
    check_validated_world(r)
    runs = run_starts(r, tree, sandbox)
    check_file_owner(r, tree, runs)
    check_mounts(r, runs)
    check_decode_daemons(r, tree, runs, sandbox)
    check_ms_library_env(r, tree, sandbox)


def sandbox_engine(sandbox: Path) -> dict:
    """engine keys that put MindIE's binaries at RECORDER stand-ins inside the sandbox."""
    service = sandbox / "mindie-service"
    for exe in ("mindieservice_daemon", "ms_controller", "ms_coordinator"):
        if not (service / "bin" / exe).exists():
            write_exe(service / "bin" / exe, RECORDER)
    return {"daemon": str(service / "bin" / "mindieservice_daemon"), "ms_home": str(service)}
