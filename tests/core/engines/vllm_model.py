"""An independent model of what a vLLM-Ascend deployment needs, written from ../shared/reference/vllm-ascend.md and
from the per-version `vllm serve` parser tables (deployctl/core/engines/vllm_ascend/flags/, extracted from each vLLM
release's own argparse parser by scripts/vllm_flags/extract.py). Nothing here imports deployctl's vLLM driver:
the tests compare deployctl's rendered files with these rules.

Rules and their sources (vllm-ascend.md sections):
  §1.1/§1.3 internal DP: one `vllm serve` per node; node 0 serves the API (--host/--port), every other node runs
        --headless; --data-parallel-size/-address (node 0)/-rpc-port identical on every node; start ranks i*d do
        not overlap; d x TP = devices of the node; --enable-expert-parallel for MoE.
  §1.1 external DP (PD from 0.13): one `vllm serve` per DP rank, ASCEND_RT_VISIBLE_DEVICES = its TP slice,
        --port = start+i, --data-parallel-rank = start_rank+i; the proxy lists every (host, port).
  §1.2 per-node env: HCCL_IF_IP = own IP, GLOO/TP/HCCL_SOCKET_IFNAME = the NIC carrying it, timeouts identical,
        HCCL_BUFFSIZE per role, HCCL_OP_EXPANSION_MODE=AIV on A3, HCCL_INTRA_PCIE_ENABLE=1/ROCE=0 on A2 multi-node DeepSeek.
  §1.4 kv_transfer_config: producer (P) / consumer (D), engine_id unique per instance, kv_port >= 28000 (8 NPUs) /
        >= 36000 (16 NPUs), each node uses kv_port..kv_port+NPUs, prefill/decode {dp_size, tp_size} describe both
        sides identically everywhere; MooncakeConnectorV1 (>= 0.13) or MooncakeConnector +
        kv_connector_module_path vllm_ascend.distributed.mooncake_connector (0.11 guide). use_ascend_direct is read by
        the 0.11 connector only (mooncake_connector.py@v0.11.0 L906; the read was removed by #4547 before 0.13):
        present (true) on 0.11, absent from 0.13 on.
  §1.7 multi-node TP/PP with --nnodes/--node-rank/--master-addr exists from the MP backend (not in vLLM 0.11).
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
FLAGS = ROOT / "deployctl" / "core" / "engines" / "vllm_ascend" / "flags"
DEPLOYCTL = Path(sys.executable).parent / "deployctl"

VERSIONS = ("0.11", "0.13", "0.18", "0.23")
# vllm-ascend minor -> the vLLM release it pairs with (scripts/vllm_flags/README.md "Version pairing": each tag's
# Dockerfile VLLM_TAG) and the vllm-ascend tag whose config reader was walked
VLLM_OF = {"0.11": "0.11.0", "0.13": "0.13.0", "0.18": "0.18.0", "0.23": "0.23.0"}
ASCEND_OF = {"0.11": "0.11.0", "0.13": "0.13.0", "0.18": "0.18.0", "0.23": "0.23.0"}
DEVICES = {"a2": 8, "a3": 16}
MOE = {"deepseek-v3", "deepseek-r1", "deepseek-v3.2", "deepseek-v3.2-exp", "qwen3-235b-a22b"}   # all routed-expert
JSON_OPTIONS = ("--kv-transfer-config", "--additional-config", "--compilation-config", "--speculative-config")

# §1.4 kv_port floor: Mooncake's AscendDirectTransport takes random ports in [20000, 20000 + NPUs x 1000)
KV_PORT_FLOOR = {8: 28000, 16: 36000}
# §1.4 connector per version
CONNECTOR_V1 = "MooncakeConnectorV1"
CONNECTOR_011 = "MooncakeConnector"
MODULE_PATH_011 = "vllm_ascend.distributed.mooncake_connector"


# ------------------------------------------------------------------------------------ the real parser, rebuilt

class ArgvRejected(Exception):
    pass


class _StrictParser(argparse.ArgumentParser):
    def error(self, message):       # raise instead of exiting
        raise ArgvRejected(message)


@cache
def vllm_table(version: str) -> dict:
    return json.loads((FLAGS / f"vllm-{VLLM_OF[version]}.json").read_text())


@cache
def ascend_table(version: str) -> dict:
    return json.loads((FLAGS / f"vllm-ascend-{ASCEND_OF[version]}.json").read_text())


def build_parser(version: str) -> argparse.ArgumentParser:
    """argparse.ArgumentParser with every option of the version's table: option strings + aliases, nargs,
    takes_value, choices, boolean negations; positional model_tag (nargs '?'); allow_abbrev=False (strict)."""
    table = vllm_table(version)
    p = _StrictParser(prog=f"vllm serve ({version})", allow_abbrev=False, add_help=False)
    for pos in table["positionals"]:
        p.add_argument(pos["dest"], nargs=pos.get("nargs"))
    for canon, o in table["options"].items():
        strings = [canon] + [a for a in o.get("aliases", []) if a != canon]
        dest = o["dest"]
        action = o["action"]
        if action == "help":
            p.add_argument(*strings, dest=dest, action="store_true")
            continue
        if not o["takes_value"]:
            p.add_argument(*strings, dest=dest, action="store_true", default=None)
            if o.get("negations"):
                p.add_argument(*o["negations"], dest=dest, action="store_false", default=None)
            continue
        kwargs: dict = {"dest": dest}
        if o["nargs"] not in (None, "0"):
            kwargs["nargs"] = o["nargs"]
        if o["choices"]:
            if all(isinstance(c, int) for c in o["choices"]):
                kwargs.update(type=int, choices=o["choices"])
            else:
                kwargs["choices"] = [str(c) for c in o["choices"]]
        if action == "append":
            kwargs["action"] = "append"
        p.add_argument(*strings, **kwargs)
    return p


@cache
def parser(version: str) -> argparse.ArgumentParser:
    return build_parser(version)


def parse(version: str, argv) -> argparse.Namespace:
    """Parse an argv (after `vllm serve`) with the version's parser; ArgvRejected if vLLM would reject it."""
    ns = parser(version).parse_args(list(argv))
    for opt in JSON_OPTIONS:       # vLLM json.loads these (its type for dict-valued config options)
        dest = vllm_table(version)["options"].get(opt, {}).get("dest")
        value = getattr(ns, dest, None) if dest else None
        if value is not None:
            try:
                doc = json.loads(value)
            except ValueError as err:
                raise ArgvRejected(f"{opt}: not JSON: {err}") from err
            if not isinstance(doc, dict):
                raise ArgvRejected(f"{opt}: not a JSON object")
    return ns


def unknown_additional_keys(version: str, doc: dict) -> list[str]:
    """Keys of an --additional-config document that vllm-ascend of that version does not read (top level, and
    nested keys of a strict config class)."""
    keys = ascend_table(version)["additional_config"]["keys"]
    bad = []
    for k, v in doc.items():
        if k not in keys:
            bad.append(k)
            continue
        spec = keys[k]
        if isinstance(v, dict) and spec.get("accepts_unknown_keys") is False:
            bad += [f"{k}.{n}" for n in v if n not in spec.get("nested", {})]
    return bad


# ------------------------------------------------------------------------------------------- inventories

def node(i: int, interface: str | None = "eth0", prefix: str = "n") -> dict:
    d = {"name": f"{prefix}{i}", "address": f"10.9.{i // 200}.{10 + i % 200}"}
    if interface:
        d["interface"] = interface if i % 2 == 0 else f"{interface}x"     # per-node NIC names differ on purpose
    return d


def inventory(*, hardware="a2", nodes=2, model="qwen3-235b-a22b", quant="w8a8", version="0.13", preset="dp-ep",
              layout=None, prefill=None, decode=None, interfaces=True, engine=None) -> dict:
    """prefill/decode: (node count, degree dict) for pd-split."""
    inv = {"cluster": {"name": "vllm-test", "hardware": hardware},
           "engine": {"kind": "vllm-ascend",
                      "image": f"quay.io/ascend/vllm-ascend:v{version}.0" + ("-a3" if hardware == "a3" else ""),
                      "version": version},
           "model": {"name": model, "quant": quant, "weights_path": f"/data/models/{model}", "served_name": "m",
                     "max_seq_len": 8192, "max_input_len": 4096, "max_batch_size": 16},
           "layout": {"preset": preset, **(layout or {})}, "nodes": []}
    if preset == "pd-split":
        (pn, pdeg), (dn, ddeg) = prefill, decode
        inv["nodes"] = [node(i, "eth0" if interfaces else None, "p") for i in range(pn)] + \
                       [node(i + pn, "eth0" if interfaces else None, "d") for i in range(dn)]
        inv["layout"]["prefill"] = {"nodes": [f"p{i}" for i in range(pn)], **pdeg}
        inv["layout"]["decode"] = {"nodes": [f"d{i + pn}" for i in range(dn)], **ddeg}
    else:
        inv["nodes"] = [node(i, "eth0" if interfaces else None) for i in range(nodes)]
    inv["engine"].update(engine or {})
    return inv


def write(inv: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(copy.deepcopy(inv), sort_keys=False))
    return path


def cli(*args) -> subprocess.CompletedProcess:
    from clifork import run

    return run(DEPLOYCTL, list(args), ROOT, {"COLUMNS": "200", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"})


# ---------------------------------------------------------------------------------------- rendered output

@dataclass
class Serve:
    node: str
    index: int
    argv: list[str]
    ns: argparse.Namespace
    devices: list[int] | None

    def kv(self) -> dict | None:
        return json.loads(self.ns.kv_transfer_config) if self.ns.kv_transfer_config else None


def parse_env(text: str) -> dict[str, str]:
    env = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            k, _, v = line.partition("=")
            env[k] = v
    return env


def read_args(path: Path) -> list[str]:
    text = path.read_text()
    assert text.endswith("\n"), f"{path}: no final newline (mapfile would still read it, but check the writer)"
    return text[:-1].split("\n") if text != "\n" else []


def serves(out: Path, version: str, node_name: str) -> list[Serve]:
    d = out / node_name
    found = []
    i = 0
    while (d / f"serve-{i}.args").exists():
        argv = read_args(d / f"serve-{i}.args")
        dev = d / f"serve-{i}.devices"
        devices = [int(x) for x in dev.read_text().strip().split(",")] if dev.exists() else None
        found.append(Serve(node_name, i, argv, parse(version, argv), devices))
        i += 1
    return found


def node_ip(inv: dict, name: str) -> str:
    n = next(n for n in inv["nodes"] if n["name"] == name)
    return n.get("container_ip") or n["address"]


def expected_buffsize(model: str, role: str) -> set[str]:
    """§1.2 HCCL_BUFFSIZE (MB): Qwen3 CI (mixed 2-node and disagg-pd): 1024 on every node; DeepSeek 2-node mixed
    (A2/A3 docs): 200; PD prefill: 256; PD decode: 600 / 1100 / 1200 (docs and CI)."""
    if model.startswith("qwen3"):
        return {"1024"}
    return {"mixed": {"200"}, "prefill": {"256"}, "decode": {"600", "1100", "1200"}}[role]


def check_env(inv: dict, out: Path, roles: dict[str, str]) -> None:
    """roles: node name -> mixed/prefill/decode."""
    hw = inv["cluster"]["hardware"]
    envs = {n["name"]: parse_env((out / n["name"] / "env").read_text()) for n in inv["nodes"]}
    multi = len(inv["nodes"]) > 1
    for n in inv["nodes"]:
        name, env = n["name"], envs[n["name"]]
        assert env.get("HCCL_IF_IP") == node_ip(inv, name), (name, env.get("HCCL_IF_IP"))
        if n.get("interface"):
            for k in ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME"):
                assert env.get(k) == n["interface"], (name, k, env.get(k), n["interface"])
        assert env.get("HCCL_BUFFSIZE") in expected_buffsize(inv["model"]["name"], roles[name]), \
            (name, roles[name], env.get("HCCL_BUFFSIZE"))
        if hw == "a3":
            assert env.get("HCCL_OP_EXPANSION_MODE") == "AIV", (name, "A3 needs HCCL_OP_EXPANSION_MODE=AIV")
        else:
            assert "HCCL_OP_EXPANSION_MODE" not in env, (name, "AIV is an A3 setting")
        # hierarchical MC2: the A2 multi-node DeepSeek guides set the pair (DeepSeek-R1.md L154/L201,
        # DeepSeek-V3.1.md L174/L227 @v0.13.0; DeepSeek-V3.2.md L308/L362 @v0.18.0); the Qwen3-235B guide and
        # vllm-ascend's A2 Qwen3 CI config (Qwen3-235B-A22B-A2.yaml) set neither
        if hw == "a2" and multi and inv["model"]["name"].startswith("deepseek"):
            assert env.get("HCCL_INTRA_PCIE_ENABLE") == "1" and env.get("HCCL_INTRA_ROCE_ENABLE") == "0", name
        else:
            assert "HCCL_INTRA_PCIE_ENABLE" not in env and "HCCL_INTRA_ROCE_ENABLE" not in env, name
        assert "ASCEND_RT_VISIBLE_DEVICES" not in env, "a per-process value, not a node one"
    for k in ("HCCL_CONNECT_TIMEOUT", "HCCL_EXEC_TIMEOUT"):
        values = {name: e.get(k) for name, e in envs.items()}
        assert len(set(values.values())) == 1 and None not in values.values(), (k, values)


def check_internal_dp_group(inv: dict, version: str, group: list[tuple[str, Serve]], dp: int, tp: int,
                            moe: bool) -> None:
    """§1.3: one serve per node in node order; node 0 API, others headless; identical DP group flags; start ranks
    cover 0..dp-1 without overlap; local x tp = devices per node."""
    per = DEVICES[inv["cluster"]["hardware"]]
    master_ip = node_ip(inv, group[0][0])
    covered = []
    for k, (name, s) in enumerate(group):
        ns = s.ns
        assert ns.tensor_parallel_size == str(tp), (name, ns.tensor_parallel_size)
        if dp > 1:
            assert ns.data_parallel_size == str(dp), (name, ns.data_parallel_size)
            assert ns.data_parallel_address == master_ip, (name, ns.data_parallel_address, master_ip)
            assert ns.data_parallel_rpc_port is not None, name
            assert ns.data_parallel_rpc_port == group[0][1].ns.data_parallel_rpc_port, name
            local = int(ns.data_parallel_size_local)
            assert local * tp == per, (name, local, tp, per)
            start = int(ns.data_parallel_start_rank or 0)
            covered += list(range(start, start + local))
        if k == 0:
            assert ns.headless is None, f"{name}: the API node must not be --headless"
            assert ns.host and ns.port, f"{name}: node 0 serves the API"
        else:
            assert ns.headless is True, f"{name}: every node but node 0 runs --headless"
            assert ns.host is None and ns.port is None, f"{name}: a headless node serves no HTTP"
        if moe:
            assert ns.enable_expert_parallel is True, f"{name}: MoE needs --enable-expert-parallel"
    if dp > 1:
        assert sorted(covered) == list(range(dp)), f"DP ranks {sorted(covered)} != 0..{dp - 1}"


def host_port_claims(inv: dict, out: Path, version: str) -> dict[str, list[tuple[str, int, int]]]:
    """node -> [(what, lo, hi)] port ranges the node binds: every serve's --port; the DP RPC port on the DP master
    (the host whose IP is --data-parallel-address); the proxy's --port; one Mooncake kv range
    [kv_port, kv_port + NPUs) per instance on the host (§1.4); the --master-port on the TP/PP head."""
    per = DEVICES[inv["cluster"]["hardware"]]
    claims: dict[str, list] = {}
    for n in inv["nodes"]:
        name, ip = n["name"], node_ip(inv, n["name"])
        c = claims.setdefault(name, [])
        kv_seen = set()
        for s in serves(out, version, name):
            ns = s.ns
            if ns.port is not None:
                c.append((f"serve-{s.index} --port", int(ns.port), int(ns.port) + 1))
            if ns.data_parallel_rpc_port is not None and ns.data_parallel_address == ip:
                c.append(("--data-parallel-rpc-port", int(ns.data_parallel_rpc_port),
                          int(ns.data_parallel_rpc_port) + 1))
            if getattr(ns, "master_port", None) is not None and getattr(ns, "master_addr", None) == ip:
                c.append(("--master-port", int(ns.master_port), int(ns.master_port) + 1))
            kv = s.kv()
            if kv and (kv["engine_id"], kv["kv_port"]) not in kv_seen:
                kv_seen.add((kv["engine_id"], kv["kv_port"]))
                c.append((f"kv range of engine {kv['engine_id']}", int(kv["kv_port"]), int(kv["kv_port"]) + per))
        proxy = out / name / "proxy.args"
        if proxy.exists():
            argv = read_args(proxy)
            port = int(argv[argv.index("--port") + 1])
            c.append(("proxy --port", port, port + 1))
    # the same DP rpc port claimed by several serves of one master is one socket
    return {k: sorted(set(v), key=lambda x: (x[1], x[0])) for k, v in claims.items()}


def check_host_ports(inv: dict, out: Path, version: str) -> None:
    for name, c in host_port_claims(inv, out, version).items():
        spans = sorted((lo, hi, what) for what, lo, hi in c)
        for (a0, a1, aw), (b0, b1, bw) in zip(spans, spans[1:]):
            assert a1 <= b0, f"{name}: port clash: {aw} [{a0}, {a1}) overlaps {bw} [{b0}, {b1})"
