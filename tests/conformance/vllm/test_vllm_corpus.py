"""vLLM-Ascend conformance corpus (issue 24, deliverable 4): upstream multi-node CI configs, each rendered by
deployctl from a test inventory and compared with the processes the CI itself starts.

The EXPECTED side is a model of vLLM-Ascend's CI scripts written here from their source, never from deployctl:
  VA = github.com/vllm-project/vllm-ascend @ 182b75ea84ff13ece27b57391331ef8935410aea
  internal DP  tests/e2e/nightly/multi_node/internal_dp/scripts/multi_node_config.py
               - env of node i = the config's envs + DistEnvBuilder.build L89-104 (HCCL_IF_IP, *_SOCKET_IFNAME,
                 LOCAL_IP, NIC_NAME, MASTER_IP), all str(); MASTER_IP = node 0, or the first decoder for decode
                 nodes (DisaggregatedPrefillCfg.master_ip_for_node L70-73)
               - server_cmd: $VAR / ${VAR} replaced from that env (_expand_env L209-216), split by shlex
                 (tests/e2e/conftest.py RemoteOpenAIServer), one `vllm serve` per node
               - proxy on node 0 (ProxyLauncher L130-152): --host <node 0> --port <free port, L196>, every
                 non-headless prefill / decode node at node 0's SERVER_PORT
  external DP  tests/e2e/nightly/multi_node/external_dp/scripts/external_dp_config.py, runtime.py
               - ranks of node i (RankResolver._expand_node L435-465): local r in range(dp_size_local):
                 dp_rank = dp_rank_start + r, port = port_start + r, devices [r*w, (r+1)*w), w = tp*cp*sp*pp (L60)
               - variables runtime.py L358-377, cluster placeholders ${NODE_<k>_IP} ${LOCAL_IP} ${MASTER_IP}
                 (external_dp_config.py L28); unbraced $VAR in args from the rank's env, in env from the env
                 rendered so far (the runner's own environment is taken as empty here)
               - env = template envs + build_dist_envs L566-576 (MASTER_IP = node 0), all str()
               - proxy on node 0 (build_proxy_server_cmd L579-594): --port 1999 (L23-26, L256-257), every rank
Both sides are normalised by the same functions (argv parsed with vLLM 0.23's own parser table,
deployctl/core/engines/vllm_ascend/flags/vllm-0.23.0.json, via tests/core/engines/vllm_model.py) into:
  * one record per DP rank of each instance (instance = role + DP master): node, devices, launch shape, API
    port, DP size / address / rpc port, and every other flag by name (JSON options key by key);
  * the env of each node (keys the config sets, plus what deployctl adds);
  * the proxy (node, port, prefill and decode endpoints).
Every difference must be listed in the config's data file with its reason; a listed difference that no
longer occurs fails too. Not compared (the CI scripts' own templating inputs, read by no vLLM process:
`git grep` of vllm_ascend/ @182b75ea finds none of them): SERVER_PORT, LOCAL_IP, NIC_NAME, MASTER_IP,
DISAGGREGATED_PREFILL_PROXY_SCRIPT. Their effect (the expanded argv) is compared. Nor deployctl's own
bookkeeping variables (DEPLOYCTL_*, read by its start.sh only), nor ASCEND_RT_VISIBLE_DEVICES as an env key (it is
compared as each rank's devices).
"""

from __future__ import annotations

import copy
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "core" / "engines"))
sys.path.insert(0, str(HERE.parents[1]))

import vllm_model as vm  # noqa: E402
from conftest import run_cli  # noqa: E402

CONFIGS = sorted((HERE / "configs").glob("*.yaml"))
VERSION = "0.23"          # the newest vLLM-Ascend deployctl knows; the CI runs main @182b75ea
ABSENT = "<absent>"
CI_TEMPLATING_ENV = ("SERVER_PORT", "LOCAL_IP", "NIC_NAME", "MASTER_IP", "DISAGGREGATED_PREFILL_PROXY_SCRIPT")
PER = {"a2": 8, "a3": 16}
# flags that place a process (compared as rank facts, not as flags)
PLACEMENT = {"model_tag", "host", "port", "headless", "data_parallel_size", "data_parallel_size_local",
             "data_parallel_start_rank", "data_parallel_rank", "data_parallel_address", "data_parallel_rpc_port"}


def load(path: Path) -> dict:
    """The published config (libyaml's parser when PyYAML has it: these are read at collection)."""
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506


# ------------------------------------------------------------------------------------------ the CI's processes

_VAR = re.compile(r"\$(\w+)|\$\{(\w+)\}")
_BRACED = re.compile(r"\$\{(\w+)\}")
_UNBRACED = re.compile(r"\$(\w+)")


def _sub(text: str, values: dict, keep_missing: bool) -> str:
    def repl(m):
        key = m.group(1) or m.group(2)
        return values.get(key, m.group(0) if keep_missing else "")
    return _VAR.sub(repl, text)


def expected(doc: dict) -> dict:
    """{'procs': [(node index, argv, devices or None, env)], 'proxy': argv or None, 'env': {node: env}}."""
    facts = doc["upstream_facts"]
    inv = doc["inventory"]
    ips = [n["address"] for n in inv["nodes"]]
    nic = [n["interface"] for n in inv["nodes"]]
    routing = facts.get("routing")
    procs, node_env = [], {}
    if doc["mechanism"] == "internal":
        heads = []
        for n in facts["nodes"]:
            i = n["index"]
            if routing and i in routing["decoder"]:
                master = ips[routing["decoder"][0]]
            else:
                master = ips[0]
            env = {**{k: str(v) for k, v in n["env"].items()},
                   "HCCL_IF_IP": ips[i], "HCCL_SOCKET_IFNAME": nic[i], "GLOO_SOCKET_IFNAME": nic[i],
                   "TP_SOCKET_IFNAME": nic[i], "LOCAL_IP": ips[i], "NIC_NAME": nic[i], "MASTER_IP": master}
            argv = [facts["model"], *[_sub(a, env, keep_missing=True) for a in n["argv"]]]
            devices = env.get("ASCEND_RT_VISIBLE_DEVICES")
            procs.append((i, argv, [int(x) for x in devices.split(",")] if devices else None, env))
            node_env[i] = env
            heads.append("--headless" in n["argv"])
        proxy = None
        if routing:
            port = node_env[0].get("SERVER_PORT", "8080")
            pre = [ips[i] for i in routing["prefiller"] if not heads[i]]
            dec = [ips[i] for i in routing["decoder"] if not heads[i]]
            proxy = ["--host", ips[0], "--port", "<free port>", "--prefiller-hosts", *pre,
                     "--prefiller-ports", *[port] * len(pre), "--decoder-hosts", *dec, "--decoder-ports", *[port] * len(dec)]
        return {"procs": procs, "proxy": proxy, "env": node_env}
    cluster = {f"NODE_{k}_IP": ip for k, ip in enumerate(ips)}
    ranks = []
    for n in facts["nodes"]:
        i, t = n["index"], n["topology"]
        w = t["tp_size"] * t.get("cp_size", 1) * t.get("sp_size", 1) * t.get("pp_size", 1)
        role = "prefill" if i in routing["prefiller"] else "decode"
        for r in range(t["dp_size_local"]):
            places = {**cluster, "LOCAL_IP": ips[i], "MASTER_IP": ips[0], "LWS_WORKER_INDEX": str(i)}
            address = _BRACED.sub(lambda m: places.get(m.group(1), m.group(0)), str(t["dp_address"]))
            variables = {"PORT_START": str(t["port_start"]), "PORT": str(t["port_start"] + r),
                         "DP_SIZE": str(t["dp_size"]), "DP_SIZE_LOCAL": str(t["dp_size_local"]),
                         "DP_RANK_START": str(t["dp_rank_start"]), "DP_RANK": str(t["dp_rank_start"] + r),
                         "LOCAL_RANK": str(r), "TP_SIZE": str(t["tp_size"]), "CP_SIZE": str(t.get("cp_size", 1)),
                         "SP_SIZE": str(t.get("sp_size", 1)), "PP_SIZE": str(t.get("pp_size", 1)),
                         "DP_ADDRESS": address, "DP_RPC_PORT": str(t["dp_rpc_port"]),
                         "VISIBLE_DEVICES": ",".join(str(d) for d in range(r * w, (r + 1) * w)),
                         "NODE_INDEX": str(i), "CONFIG_INDEX": str(i), "MODEL": facts["model"], **places}
            dist = {"HCCL_IF_IP": ips[i], "HCCL_SOCKET_IFNAME": nic[i], "GLOO_SOCKET_IFNAME": nic[i],
                    "TP_SOCKET_IFNAME": nic[i], "LOCAL_IP": ips[i], "NIC_NAME": nic[i], "MASTER_IP": ips[0]}
            env: dict[str, str] = {}
            for k, v in {**n["env"], **dist}.items():
                v = _BRACED.sub(lambda m: variables[m.group(1)], str(v))
                env[k] = _UNBRACED.sub(lambda m: env.get(m.group(1), ""), v)
            argv = [facts["model"], *[_UNBRACED.sub(lambda m: env[m.group(1)],
                                                    _BRACED.sub(lambda m: variables[m.group(1)], str(a)))
                                      for a in n["argv_template"]]]
            devices = env.get("ASCEND_RT_VISIBLE_DEVICES")
            procs.append((i, argv, [int(x) for x in devices.split(",")] if devices else None, env))
            node_env.setdefault(i, env)
            ranks.append((role, ips[i], str(t["port_start"] + r)))
    pre = [(h, p) for role, h, p in ranks if role == "prefill"]
    dec = [(h, p) for role, h, p in ranks if role == "decode"]
    proxy = ["--host", ips[0], "--port", "1999", "--prefiller-hosts", *[h for h, _ in pre],
             "--prefiller-ports", *[p for _, p in pre], "--decoder-hosts", *[h for h, _ in dec],
             "--decoder-ports", *[p for _, p in dec]]
    return {"procs": procs, "proxy": proxy, "env": node_env}


# ----------------------------------------------------------------------------------- what deployctl renders

def _inventory(doc: dict) -> dict:
    """The config's inventory; a model.config_path (a checkpoint fixture, relative to the repository) made absolute,
    the inventory file being written elsewhere."""
    inv = copy.deepcopy(doc["inventory"])
    cp = inv["model"].get("config_path")
    if cp and not Path(cp).is_absolute():
        inv["model"]["config_path"] = str(HERE.parents[2] / cp)
    return inv


def rendered(doc: dict, tmp: Path) -> dict:
    inv = _inventory(doc)
    src = tmp / "inventory.yaml"
    src.write_text(yaml.safe_dump(inv, sort_keys=False))
    r = run_cli("render", "-i", str(src), "-o", str(tmp / "out"))
    assert r.returncode == 0, f"{doc['id']}: deployctl refused the corpus inventory:\n{r.stdout}{r.stderr}"
    out = tmp / "out"
    procs, node_env, proxy = [], {}, None
    for i, n in enumerate(inv["nodes"]):
        d = out / n["name"]
        env = vm.parse_env((d / "env").read_text())
        node_env[i] = env
        k = 0
        while (d / f"serve-{k}.args").exists():
            dev = d / f"serve-{k}.devices"
            devices = [int(x) for x in dev.read_text().split(",")] if dev.exists() else None
            procs.append((i, vm.read_args(d / f"serve-{k}.args"), devices, env))
            k += 1
        if (d / "proxy.args").exists():
            proxy = vm.read_args(d / "proxy.args")
    return {"procs": procs, "proxy": proxy, "env": node_env}


# ------------------------------------------------------------------------------------------- normalisation

def _num(v):
    if isinstance(v, str) and re.fullmatch(r"-?[0-9]+", v):
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"-?[0-9]*\.[0-9]+", v):
        return float(v)
    return v


def _flatten(prefix: str, doc, out: dict) -> None:
    if isinstance(doc, dict) and doc:
        for k, v in doc.items():
            _flatten(f"{prefix}.{k}", v, out)
    else:
        out[prefix] = doc


def _flags(argv: list[str]) -> dict:
    """vLLM's FlexibleArgumentParser turns '_' into '-' in --option names; then the version's parser."""
    argv = [re.sub(r"^--([^=]*)", lambda m: "--" + m.group(1).replace("_", "-"), a) if a.startswith("--") else a
            for a in argv]
    ns = vars(vm.parse(VERSION, argv))
    table = vm.vllm_table(VERSION)["options"]
    name = {o["dest"]: canon for canon, o in table.items()}
    out = {}
    for dest, value in ns.items():
        if value is None:
            continue
        key = name.get(dest, dest)
        if key in vm.JSON_OPTIONS:
            _flatten(key, json.loads(value), out)
        else:
            out[key] = _num(value)
    return {"ns": ns, "flags": out}


def normalise(side: dict, doc: dict) -> dict:
    """facts: {(kind, where, field): value}."""
    inv = doc["inventory"]
    ips = {n["address"]: f"node{i}" for i, n in enumerate(inv["nodes"])}
    per = PER[doc["hardware"]]
    facts: dict = {}
    groups: dict = defaultdict(list)
    for node, argv, devices, env in side["procs"]:
        parsed = _flags(argv)
        ns, flags = parsed["ns"], parsed["flags"]
        role = {"kv_producer": "prefill", "kv_consumer": "decode"}.get(flags.get("--kv-transfer-config.kv_role"),
                                                                       "mixed")
        master = ips.get(ns.get("data_parallel_address"), f"node{node}") if ns.get("data_parallel_address") \
            else f"node{node}"
        groups[(role, master)].append((node, ns, flags, devices))
    ordinal: dict = defaultdict(int)
    for (role, master), members in sorted(groups.items(), key=lambda kv: min(m[0] for m in kv[1])):
        inst = f"{role}-{ordinal[role]}"
        ordinal[role] += 1
        for node, ns, flags, devices in members:
            dp = int(ns.get("data_parallel_size") or 1)
            world = int(ns.get("tensor_parallel_size") or 1) * int(ns.get("pipeline_parallel_size") or 1)
            visible = devices if devices is not None else list(range(per))
            if ns.get("data_parallel_rank") is not None:
                launch, local = "external (one vllm serve per DP rank)", [(int(ns["data_parallel_rank"]), 0)]
            else:
                launch = "internal (one vllm serve per node)"
                start = int(ns.get("data_parallel_start_rank") or 0)
                count = int(ns.get("data_parallel_size_local") or dp)
                local = [(start + j, j) for j in range(count)]
            for rank, j in local:
                where = (inst, rank)
                if ("rank", where, "node") in facts:
                    facts[("rank", where, "duplicate")] = f"node{node}"
                host = ns.get("host")
                record = {"node": f"node{node}", "launch": launch,
                          "devices": visible[j * world:(j + 1) * world],
                          "api port": None if ns.get("headless") else int(ns.get("port") or 8000),
                          "--host": ("<own node IP>" if host == inv["nodes"][node]["address"] else
                                     ips.get(host, host)) if host else None,
                          "--data-parallel-size": dp,
                          "--data-parallel-address": ips.get(ns.get("data_parallel_address"),
                                                             ns.get("data_parallel_address")),
                          "--data-parallel-rpc-port": _num(ns.get("data_parallel_rpc_port")),
                          "model": ns.get("model_tag"), **{k: v for k, v in flags.items()
                                                            if not k.lstrip("-").replace("-", "_") in PLACEMENT}}
                for k, v in record.items():
                    if v is not None:
                        facts[("rank", where, k)] = v
    for node, env in side["env"].items():
        for k, v in env.items():
            if k not in CI_TEMPLATING_ENV and k != "ASCEND_RT_VISIBLE_DEVICES" and not k.startswith("DEPLOYCTL_"):
                facts[("env", f"node{node}", k)] = ips.get(v, v)
    if side["proxy"] is not None:
        p = side["proxy"]
        def after(opt):
            i = p.index(opt) + 1
            vals = []
            while i < len(p) and not p[i].startswith("--"):
                vals.append(p[i])
                i += 1
            return vals
        facts[("proxy", "proxy", "node")] = ips.get(after("--host")[0])
        facts[("proxy", "proxy", "--port")] = _num(after("--port")[0])
        for role, opt in (("prefill", "prefiller"), ("decode", "decoder")):
            facts[("proxy", "proxy", f"{role} endpoints")] = [
                f"{ips.get(h, h)}:{port}" for h, port in zip(after(f"--{opt}-hosts"), after(f"--{opt}-ports"))]
    return facts


def _ranges(nums: list[int]) -> str:
    nums, out, i = sorted(nums), [], 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ",".join(out)


def differences(exp: dict, got: dict) -> list[dict]:
    """Distinct (field, expected, rendered) with where they occur."""
    exp_ranks = {w for kind, w, _ in exp if kind == "rank"}
    got_ranks = {w for kind, w, _ in got if kind == "rank"}
    agg: dict = defaultdict(lambda: defaultdict(list))
    for w in exp_ranks ^ got_ranks:
        key = ("DP rank", "present" if w in exp_ranks else ABSENT, "present" if w in got_ranks else ABSENT)
        agg[key][w[0]].append(w[1])
    for key in set(exp) | set(got):
        kind, where, field = key
        if kind == "rank" and not (where in exp_ranks and where in got_ranks):
            continue
        e, g = exp.get(key, ABSENT), got.get(key, ABSENT)
        if e != g:
            k = (field, json.dumps(e, sort_keys=True), json.dumps(g, sort_keys=True))
            if kind == "rank":
                agg[k][where[0]].append(where[1])
            else:
                agg[k][where].append(None)
    out = []
    for (field, e, g), places in agg.items():
        if field == "DP rank":
            e, g = json.dumps(e), json.dumps(g)
        where = sorted(f"{p}[{_ranges(r)}]" if r[0] is not None else p for p, r in places.items())
        out.append({"field": field, "expected": json.loads(e), "rendered": json.loads(g), "where": where})
    return sorted(out, key=lambda d: (d["field"], json.dumps(d["expected"]), json.dumps(d["rendered"])))


def _key(d: dict) -> tuple:
    return (d["field"], json.dumps(d["expected"], sort_keys=True), json.dumps(d["rendered"], sort_keys=True),
            tuple(d["where"]))


# ---------------------------------------------------------------------------------------------------- tests

@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_renders_as_ci_runs_it_except_listed_differences(path, tmp_path):
    doc = load(path)
    found = differences(normalise(expected(doc), doc), normalise(rendered(doc, tmp_path), doc))
    listed = doc.get("differences") or []
    for d in listed:
        assert d.get("reason"), f"{path.name}: difference {d['field']} has no reason"
    unexplained = [d for d in found if _key(d) not in {_key(x) for x in listed}]
    stale = [x for x in listed if _key(x) not in {_key(d) for d in found}]
    msg = []
    if unexplained:
        msg.append("differences not listed in the data file (add them with a reason, or fix the cause):\n" +
                   yaml.safe_dump(unexplained, sort_keys=False, width=200))
    if stale:
        msg.append("listed differences that no longer occur (remove them):\n" +
                   yaml.safe_dump([{k: v for k, v in x.items() if k != "reason"} for x in stale],
                                  sort_keys=False, width=200))
    assert not msg, f"{path.name}:\n" + "\n".join(msg)


@pytest.mark.parametrize("path", [p for p in CONFIGS if load(p).get("expressible") is False],
                         ids=lambda p: p.stem)
def test_inexpressible_config_is_still_refused(path, tmp_path):
    """The exact inventory (the CI's real values) is refused today; when deployctl learns it, this fails and the
    config's closest inventory, differences and `expressible` are to be updated."""
    doc = load(path)
    refused = doc["refused"]
    inv = _inventory(doc)
    for dotted, value in refused["edit"].items():
        cur = inv
        *head, last = dotted.split(".")
        for k in head:
            cur = cur.setdefault(k, {})
        cur[last] = value
    src = tmp_path / "exact.yaml"
    src.write_text(yaml.safe_dump(inv, sort_keys=False))
    r = run_cli("render", "-i", str(src), "-o", str(tmp_path / "out"))
    assert r.returncode == 2 and refused["message"] in r.stdout + r.stderr, (r.returncode, r.stdout + r.stderr)


def test_corpus_coverage():
    docs = [load(p) for p in CONFIGS]
    assert len(docs) >= 12
    assert {d["hardware"] for d in docs} == {"a2", "a3"}
    assert {d["mechanism"] for d in docs} == {"internal", "external"}
    assert any(d["upstream_facts"].get("routing") for d in docs)
    for d in docs:
        up = d["upstream"]
        assert up["repo"] == "vllm-project/vllm-ascend" and re.fullmatch(r"[0-9a-f]{40}", up["commit"]), d["id"]
        model = d["inventory"]["model"]
        assert model["name"] in _catalog() or (HERE.parents[2] / model["config_path"] / "config.json").is_file(), d["id"]
    assert {d["inventory"]["model"]["name"] for d in docs} >= {"qwen3-235b-a22b", "deepseek-v3", "deepseek-v3.2"}


def _catalog() -> set[str]:
    return set(yaml.safe_load((HERE.parents[2] / "deployctl" / "core" / "catalog" / "models.yaml").read_text()))


def test_unknown_models_are_absent_from_the_catalog():
    """Every skipped config names a model deployctl's catalog lacks; when a model is added (the model-coverage
    issue), its configs must move from unknown_models.yaml into the corpus."""
    doc = load(HERE / "unknown_models.yaml")
    catalog = _catalog()
    known_here = {load(p)["upstream"]["path"] for p in CONFIGS}
    for entry in doc["configs"]:
        assert entry["catalog_id"] not in catalog, (entry["path"], entry["catalog_id"])
        assert entry["why"], entry["path"]
        assert entry["path"] not in known_here, entry["path"]
