"""vLLM-Ascend launch rules (../shared/reference/vllm-ascend.md §1.1-§1.4, §1.7) checked on rendered deployments:
internal DP (mixed DP+EP), PD over Mooncake (external DP from 0.13, internal DP on 0.11), TP/PP across nodes, and
the per-node env. Generated layouts go through the `deployctl render` CLI; every argv is parsed with the version's
real parser (rebuilt by vllm_model.py from flags/vllm-<ver>.json) and the rules come from vllm_model.py, written
from the reference, not from deployctl's driver.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from tiers import examples

sys.path.insert(0, str(Path(__file__).resolve().parent))

import vllm_model as vm  # noqa: E402

SETTINGS = settings(max_examples=examples(50), deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])
MODELS = ["qwen3-235b-a22b", "deepseek-v3", "deepseek-r1", "deepseek-v3.2"]
COUNTER = itertools.count()


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def render_or_refusal(inv: dict, work: Path, ports_drawn: bool = False):
    """Render through the CLI. Returns the output dir, or None after hypothesis.assume for the refusals that are
    not the launch rules' business (memory fit; EP sizes that do not divide the expert count). With generated
    engine.ports, a refusal naming engine.ports is fine too. Any other refusal fails."""
    k = next(COUNTER)
    src = vm.write(inv, work / f"inv{k}.yaml")
    out = work / f"out{k}"
    r = vm.cli("render", "-i", src, "-o", out)
    text = r.stdout + r.stderr
    if r.returncode != 0:
        assert r.returncode == 2, text
        if "does not fit in memory" in text:
            event("refused: memory")
            assume(False)
        if "does not divide the" in text and "routed experts" in text:
            event("refused: EP does not divide the experts")
            assume(False)
        if ports_drawn and "engine.ports" in text:
            event("refused: ports")
            return None
        pytest.fail(f"unexpected refusal:\n{text}")
    return out


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("vllm-launch")


# ------------------------------------------------------------------------------------------- internal DP

@st.composite
def internal_dp(draw):
    hw = draw(st.sampled_from(["a2", "a3"]))
    nodes = draw(st.integers(2, 4))
    per = vm.DEVICES[hw]
    tp = draw(st.sampled_from(divisors(per)))
    model = draw(st.sampled_from(MODELS))
    version = draw(st.sampled_from(vm.VERSIONS))
    # safe engine.ports variants only: the clashing ones are in the explicit port-plan tests below
    ports = draw(st.sampled_from([{}, {}, {"api": 9000, "dp_rpc": 14000}]))
    return hw, nodes, tp, model, version, ports


@SETTINGS
@given(case=internal_dp())
def test_internal_dp_launch_rules(case, work):
    hw, nodes, tp, model, version, ports = case
    if model == "deepseek-v3.2" and version == "0.11":
        version = "0.13"      # no 0.11 guide runs V3.2 (reference §1.6 examples are @HEAD)
    per = vm.DEVICES[hw]
    dp = nodes * per // tp
    inv = vm.inventory(hardware=hw, nodes=nodes, model=model, version=version,
                       layout={"tp": tp, "dp": dp, "moe_ep": nodes * per}, engine={"ports": ports} if ports else None)
    out = render_or_refusal(inv, work, bool(ports))
    if out is None:
        return
    event(f"accepted {hw} x{nodes} tp{tp}")
    group = []
    for n in inv["nodes"]:
        ss = vm.serves(out, version, n["name"])
        assert len(ss) == 1, f"{n['name']}: internal DP runs one vllm serve per node, got {len(ss)}"
        assert ss[0].devices is None, "internal DP: the serve owns every device of the node"
        assert ss[0].ns.kv_transfer_config is None
        group.append((n["name"], ss[0]))
    vm.check_internal_dp_group(inv, version, group, dp, tp, model in vm.MOE)
    assert not list(out.glob("*/proxy.args")), "no proxy in a colocated deployment"
    vm.check_host_ports(inv, out, version)
    vm.check_env(inv, out, {n["name"]: "mixed" for n in inv["nodes"]})


# ------------------------------------------------------------------------------------------------- PD

@st.composite
def pd_layouts(draw):
    hw = draw(st.sampled_from(["a2", "a3"]))
    per = vm.DEVICES[hw]
    version = draw(st.sampled_from(vm.VERSIONS))
    model = draw(st.sampled_from(["qwen3-235b-a22b", "qwen3-235b-a22b", "deepseek-v3"]))
    pn, dn = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    ptp, dtp = draw(st.sampled_from(divisors(per))), draw(st.sampled_from(divisors(per)))
    ports = draw(st.sampled_from(PD_PORTS))
    return hw, version, model, pn, dn, ptp, dtp, ports


# safe engine.ports variants (kv_base above both floors; API/proxy/RPC apart); the clashing ones are in the
# explicit port-plan tests below, so that a port finding does not hide the launch rules here
PD_PORTS = [{}, {}, {"kv_base": 40000}, {"api": 9000, "proxy": 2999, "dp_rpc": 14000}]


def _proxy_endpoints(argv: list[str]):
    """load_balance_proxy_server_example.py's options (reference §1.4): --host --port --prefiller-hosts ...
    --prefiller-ports ... --decoder-hosts ... --decoder-ports ..."""
    p = vm._StrictParser(allow_abbrev=False, add_help=False)
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    for side in ("prefiller", "decoder"):
        p.add_argument(f"--{side}-hosts", nargs="+", required=True)
        p.add_argument(f"--{side}-ports", nargs="+", type=int, required=True)
    ns = p.parse_args(argv)
    assert len(ns.prefiller_hosts) == len(ns.prefiller_ports), ns
    assert len(ns.decoder_hosts) == len(ns.decoder_ports), ns
    return ns, list(zip(ns.prefiller_hosts, ns.prefiller_ports)), list(zip(ns.decoder_hosts, ns.decoder_ports))


def check_pd(inv: dict, version: str, out: Path, degrees: dict[str, tuple[int, int]]) -> None:
    """degrees: role -> (dp, tp) of the plan."""
    per = vm.DEVICES[inv["cluster"]["hardware"]]
    role_nodes = {r: inv["layout"][r]["nodes"] for r in ("prefill", "decode")}
    external = version != "0.11"
    all_serves = {}      # node -> [Serve]
    endpoints = {"prefill": [], "decode": []}
    kv_by_role = {}
    for role, names in role_nodes.items():
        dp, tp = degrees[role]
        master_ip = vm.node_ip(inv, names[0])
        ranks = []
        group = []
        for name in names:
            ss = vm.serves(out, version, name)
            all_serves[name] = ss
            ip = vm.node_ip(inv, name)
            if external:
                # §1.1 external DP: one serve per DP rank, its TP slice of devices, --port start+i, its own rank
                assert len(ss) == per // tp, f"{name}: {len(ss)} serves, want one per DP rank ({per // tp})"
                slices = [s.devices for s in ss]
                assert all(sl is not None and len(sl) == tp for sl in slices), (name, slices)
                flat = [d for sl in slices for d in sl]
                assert sorted(flat) == list(range(per)), f"{name}: device slices {slices} overlap or miss devices"
                for s in ss:
                    ns = s.ns
                    assert ns.headless is None, f"{name}: external-DP ranks each serve their port"
                    assert ns.data_parallel_rank is not None, name
                    ranks.append(int(ns.data_parallel_rank))
                    assert ns.data_parallel_size == str(dp) and ns.tensor_parallel_size == str(tp), (name, ns)
                    assert ns.data_parallel_address == master_ip, (name, ns.data_parallel_address, master_ip)
                    assert ns.port is not None, name
                    assert ns.host in (ip, "0.0.0.0"), (name, ns.host)
                    endpoints[role].append((ip, int(ns.port)))
            else:
                assert len(ss) == 1 and ss[0].devices is None, f"{name}: 0.11 PD uses internal DP (one serve/node)"
                group.append((name, ss[0]))
                if ss[0].ns.port is not None:
                    endpoints[role].append((ip, int(ss[0].ns.port)))
            for s in ss:
                assert s.ns.enable_expert_parallel is True, f"{name}: MoE needs --enable-expert-parallel"
                kv_by_role.setdefault(role, []).append((name, s.kv()))
        if external:
            assert sorted(ranks) == list(range(dp)), f"{role}: --data-parallel-rank {sorted(ranks)} != 0..{dp - 1}"
            rpc = {s.ns.data_parallel_rpc_port for n in names for s in all_serves[n]}
            assert len(rpc) == 1 and None not in rpc, (role, rpc)
        else:
            vm.check_internal_dp_group(inv, version, group, dp, tp, True)

    # ports distinct per host (every serve's --port, plus the proxy's on its host)
    for name, ss in all_serves.items():
        ports = [int(s.ns.port) for s in ss if s.ns.port is not None]
        assert len(ports) == len(set(ports)), f"{name}: duplicate serve ports {ports}"

    # kv_transfer_config (§1.4)
    floor = vm.KV_PORT_FLOOR[per]
    instance_ids = {}
    for role, items in kv_by_role.items():
        ids = {kv["engine_id"] for _, kv in items}
        assert len(ids) == 1, f"{role}: one engine_id per instance, got {ids}"
        instance_ids[role] = ids.pop()
        for name, kv in items:
            assert kv is not None, f"{name}: PD serve without --kv-transfer-config"
            assert kv["kv_role"] == ("kv_producer" if role == "prefill" else "kv_consumer"), (name, kv)
            assert int(kv["kv_port"]) >= floor, f"{name}: kv_port {kv['kv_port']} inside Mooncake's random range"
            extra = kv["kv_connector_extra_config"]
            if version == "0.11":
                assert extra.get("use_ascend_direct") is True, (name, extra)
            else:
                assert "use_ascend_direct" not in extra, (name, extra)
            for side in ("prefill", "decode"):
                want = {"dp_size": degrees[side][0], "tp_size": degrees[side][1]}
                assert {k: extra[side].get(k) for k in want} == want, (name, side, extra[side], want)
            if version == "0.11":
                assert kv["kv_connector"] == vm.CONNECTOR_011, (name, kv)
                assert kv.get("kv_connector_module_path") == vm.MODULE_PATH_011, (name, kv)
            else:
                assert kv["kv_connector"] == vm.CONNECTOR_V1, (name, kv)
    assert instance_ids["prefill"] != instance_ids["decode"], f"engine_id shared by P and D: {instance_ids}"
    # every process carries the same description of both sides
    sides = {json.dumps({k: kv["kv_connector_extra_config"][k] for k in ("prefill", "decode")}, sort_keys=True)
             for items in kv_by_role.values() for _, kv in items}
    assert len(sides) == 1, sides
    # kv_port ranges of different instances on one host must not overlap; nor other ports of the host
    for name, ss in all_serves.items():
        ranges = {(s.kv()["engine_id"], int(s.kv()["kv_port"])) for s in ss}
        assert len({eid for eid, _ in ranges}) == len(ranges), f"{name}: one instance, several kv_ports {ranges}"
        spans = sorted((p, p + per) for _, p in ranges)
        for (a0, a1), (b0, _) in zip(spans, spans[1:]):
            assert a1 <= b0, f"{name}: kv_port ranges overlap {spans}"
        used = {int(s.ns.port) for s in ss if s.ns.port} | {int(s.ns.data_parallel_rpc_port) for s in ss
                                                            if s.ns.data_parallel_rpc_port}
        for lo, hi in spans:
            assert not [p for p in used if lo <= p < hi], f"{name}: kv range {lo}..{hi} hits ports {used}"
    # a kv_port range is per instance: instances on different hosts may not share a host, but the same instance
    # id must not appear with different ports
    by_id = {}
    for items in kv_by_role.values():
        for _, kv in items:
            by_id.setdefault(kv["engine_id"], set()).add(kv["kv_port"])
    assert all(len(v) == 1 for v in by_id.values()), by_id

    # the proxy on the prefill master lists exactly every P and every D API endpoint
    proxies = sorted(out.glob("*/proxy.args"))
    assert [p.parent.name for p in proxies] == [role_nodes["prefill"][0]], proxies
    ns, pre, dec = _proxy_endpoints(vm.read_args(proxies[0]))
    assert sorted(pre) == sorted(endpoints["prefill"]), (pre, endpoints["prefill"])
    assert sorted(dec) == sorted(endpoints["decode"]), (dec, endpoints["decode"])
    assert len(set(pre)) == len(pre) and len(set(dec)) == len(dec), (pre, dec)
    host_ports = [int(s.ns.port) for s in all_serves[role_nodes["prefill"][0]] if s.ns.port]
    assert ns.port not in host_ports, f"proxy port {ns.port} collides with a serve port {host_ports}"


@SETTINGS
@given(case=pd_layouts())
def test_pd_launch_rules(case, work):
    hw, version, model, pn, dn, ptp, dtp, ports = case
    per = vm.DEVICES[hw]
    pdp, ddp = pn * per // ptp, dn * per // dtp
    inv = vm.inventory(hardware=hw, model=model, version=version, preset="pd-split",
                       prefill=(pn, {"tp": ptp, "dp": pdp, "moe_ep": pn * per}),
                       decode=(dn, {"tp": dtp, "dp": ddp, "moe_ep": dn * per}),
                       engine={"ports": ports} if ports else None)
    out = render_or_refusal(inv, work, bool(ports))
    if out is None:
        return
    event(f"accepted {hw} {version} {pn}P{dn}D")
    check_pd(inv, version, out, {"prefill": (pdp, ptp), "decode": (ddp, dtp)})
    vm.check_host_ports(inv, out, version)
    roles = {n: r for r in ("prefill", "decode") for n in inv["layout"][r]["nodes"]}
    vm.check_env(inv, out, roles)


@pytest.mark.parametrize("version", vm.VERSIONS)
@pytest.mark.parametrize("hw", ["a2", "a3"])
def test_pd_2p2d_fixed(hw, version, tmp_path):
    """A fixed 2P2D (two nodes per side): multi-node instances on both sides, the reference's Example B shape."""
    per = vm.DEVICES[hw]
    model = "deepseek-v3" if hw == "a3" else "qwen3-235b-a22b"    # DeepSeek with decode TP1 does not fit 2 x A2
    inv = vm.inventory(hardware=hw, model=model, version=version, preset="pd-split",
                       prefill=(2, {"tp": 8, "dp": 2 * per // 8, "moe_ep": 2 * per}),
                       decode=(2, {"tp": 1, "dp": 2 * per, "moe_ep": 2 * per}))
    src = vm.write(inv, tmp_path / "pd.yaml")
    r = vm.cli("render", "-i", src, "-o", tmp_path / "out")
    assert r.returncode == 0, r.stdout + r.stderr
    check_pd(inv, version, tmp_path / "out", {"prefill": (2 * per // 8, 8), "decode": (2 * per, 1)})
    vm.check_env(inv, tmp_path / "out", {n: r for r in ("prefill", "decode") for n in inv["layout"][r]["nodes"]})


# ------------------------------------------------------------------------------------ interfaces, TP/PP

@pytest.mark.parametrize("preset", ["dp-ep", "pd-split"])
def test_multi_node_without_interfaces_refused(preset, tmp_path):
    if preset == "pd-split":
        inv = vm.inventory(hardware="a3", preset="pd-split", interfaces=False,
                           prefill=(1, {"tp": 8, "dp": 2, "moe_ep": 16}), decode=(1, {"tp": 4, "dp": 4, "moe_ep": 16}))
    else:
        inv = vm.inventory(hardware="a2", nodes=2, interfaces=False)
    src = vm.write(inv, tmp_path / "noif.yaml")
    r = vm.cli("render", "-i", src, "-o", tmp_path / "out")
    text = r.stdout + r.stderr
    assert r.returncode == 2, text
    for i in range(len(inv["nodes"])):
        assert f"nodes[{i}].interface" in text, text
    assert "preflight" in text, text
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*/serve-*.args")), \
        "nothing rendered on refusal"


@pytest.mark.parametrize("version", ["0.13", "0.18", "0.23"])
def test_tp_pp_across_nodes_renders_nnodes(version, tmp_path):
    inv = vm.inventory(hardware="a2", nodes=2, model="deepseek-v3", version=version, preset="tp-pp")
    src = vm.write(inv, tmp_path / "tppp.yaml")
    out = tmp_path / "out"
    r = vm.cli("render", "-i", src, "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    head = vm.node_ip(inv, "n0")
    masters = set()
    for k, n in enumerate(inv["nodes"]):
        ss = vm.serves(out, version, n["name"])
        assert len(ss) == 1, n["name"]
        ns = ss[0].ns
        assert ns.nnodes == "2" and ns.node_rank == str(k) and ns.master_addr == head, (n["name"], ns)
        assert ns.master_port is not None
        masters.add(ns.master_port)
        assert ns.tensor_parallel_size == "8" and ns.pipeline_parallel_size == "2", ns
        if k == 0:
            assert ns.headless is None and ns.port is not None, "rank 0 serves the API"
        else:
            assert ns.headless is True and ns.port is None, "rank > 0 runs --headless"
        assert ns.data_parallel_size in (None, "1"), ns
    assert len(masters) == 1, masters
    vm.check_env(inv, out, {n["name"]: "mixed" for n in inv["nodes"]})


def test_tp_pp_across_nodes_refused_on_011_with_flags_source(tmp_path):
    inv = vm.inventory(hardware="a2", nodes=2, model="deepseek-v3", version="0.11", preset="tp-pp")
    src = vm.write(inv, tmp_path / "tppp.yaml")
    r = vm.cli("render", "-i", src, "-o", tmp_path / "out")
    text = r.stdout + r.stderr
    assert r.returncode == 2, text
    line = next((ln for ln in text.splitlines() if "layout.pp" in ln), "")
    assert "--nnodes" in line and "[source: flags/vllm-0.11.0.json" in line, text
    # and the source is true: the 0.11 table has no --nnodes
    assert "--nnodes" not in vm.vllm_table("0.11")["option_strings"]


def test_proxy_parser_is_strict():
    with pytest.raises(vm.ArgvRejected):
        _proxy_endpoints(["--host", "1.2.3.4", "--prefiller-hosts", "a"])
    ns, pre, dec = _proxy_endpoints(["--port", "1999", "--prefiller-hosts", "a", "--prefiller-ports", "1",
                                     "--decoder-hosts", "b", "b", "--decoder-ports", "1", "2"])
    assert pre == [("a", 1)] and dec == [("b", 1), ("b", 2)] and isinstance(ns, argparse.Namespace)


# ------------------------------------------------------------------------------------------ port planning

@pytest.mark.parametrize("hw,ports,why", [
    ("a2", {"kv_base": 25000}, "kv_port inside Mooncake's random range [20000, 28000) of an 8-NPU node"),
    ("a3", {"kv_base": 30000}, "kv_port inside Mooncake's random range [20000, 36000) of a 16-NPU node"),
    ("a2", {"api": 28000, "kv_base": 28000}, "the API ports run into the prefill kv range"),
    ("a3", {"api": 1990}, "16 external-DP API ports 1990..2005 run into the proxy's 1999"),
    ("a3", {"api": 13380}, "16 external-DP API ports 13380..13395 run into the DP RPC port 13389"),
])
def test_pd_port_plan_refused_or_safe(hw, ports, why, tmp_path):
    """Reference §1.4 (kv_port floor, kv_port..kv_port+NPUs per node) and one bind per port per host: deployctl
    must either refuse these engine.ports (exit 2 naming engine.ports) or render a plan without the clash."""
    per = vm.DEVICES[hw]
    inv = vm.inventory(hardware=hw, model="qwen3-235b-a22b", version="0.13", preset="pd-split",
                       prefill=(1, {"tp": 1, "dp": per, "moe_ep": per}),
                       decode=(1, {"tp": 1, "dp": per, "moe_ep": per}), engine={"ports": ports})
    src = vm.write(inv, tmp_path / "pd.yaml")
    out = tmp_path / "out"
    r = vm.cli("render", "-i", src, "-o", out)
    text = r.stdout + r.stderr
    if r.returncode != 0:
        assert r.returncode == 2 and "engine.ports" in text, text
        return
    try:
        check_pd(inv, "0.13", out, {"prefill": (per, 1), "decode": (per, 1)})
        vm.check_host_ports(inv, out, "0.13")
    except AssertionError as err:
        pytest.fail(f"rendered although {why}: {err}")


@pytest.mark.parametrize("ports", [{"api": 13389}, {"api": 9000, "dp_rpc": 9000}])
def test_internal_dp_api_port_equal_to_rpc_port_refused_or_safe(ports, tmp_path):
    inv = vm.inventory(hardware="a2", nodes=2, version="0.13", engine={"ports": ports})
    src = vm.write(inv, tmp_path / "dp.yaml")
    r = vm.cli("render", "-i", src, "-o", tmp_path / "out")
    text = r.stdout + r.stderr
    if r.returncode != 0:
        assert r.returncode == 2 and "engine.ports" in text, text
        return
    vm.check_host_ports(inv, tmp_path / "out", "0.13")
