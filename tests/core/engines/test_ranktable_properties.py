"""Property tests: any valid generated inventory renders rank tables that obey every HCCL rule.

Spec: shared/reference/ascend-facts.md §1.1-1.2 (HCCL concise rank table 1.0/1.2, MindIE's own
checks) and §1.5 (MindIE-MS global rank table). Each rule is one ``check_*`` helper whose
AssertionError starts with ``[rule-tag]``, so a failure names the rule that broke. The negative
tests at the end feed hand-broken copies of a rendered table to every checker and expect it to fire.

Pipeline, all in-process: hypothesis dict -> yaml.safe_dump -> parse_yaml -> validate_inventory
-> plan_layout -> render_artifacts. A LayoutError for memory, or a support-matrix refusal (a LayoutError
whose problems cite ``[source: ...]``, i.e. something upstream MindIE refuses), is rejected with
``assume``; any other error on a generated (valid) inventory is a test failure.

MindIE PD split as upstream runs it (shared/reference/mindie-upstream-rules.md §1.1; Motor
``deploy_scripts/user_config_base_A3.json``, ``boot_helper/boot.sh`` L115-142,
``gen_config_single_container.py``): prefill is ONE centralized instance (``multiNodesInferEnabled`` =
more than one node, one ``config.json`` per node); decode is DISTRIBUTED DP: every decode node runs
N = devices / (tp*cp) servers, ``config1..N.json``, identical except the four ports 10000+4k..+3, with
``distDPServerEnabled true``, ``multiNodesInferEnabled false``, ``ScheduleConfig.distributedEnable true``.
``distributedEnable`` makes MindIE load the instance's HCCL rank table even on one node
(MindIE-LLM ``src/config_manager/config_manager_impl.cpp`` L129-135, flag read in ``schedule_config.cpp``
L210-211), but the [2, 60] server_count check (``ranktable_config.cpp`` L258-263) runs only when
``IsMultiNodeInfer()`` (``config_manager_impl.cpp`` L307-308).

Bugs this file found are kept as regression tests (see the "regressions" section);
the main generator produces only valid inventories; those tests cover the invalid neighbours.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import random
import stat
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, assume, event, given, settings
from hypothesis import strategies as st
from hypothesis.errors import UnsatisfiedAssumption
from tiers import examples

from deployctl.core.errors import InventoryError, LayoutError
from deployctl.core.input.raw import parse_yaml
from deployctl.app.inventory import validate_inventory
from deployctl.core.sizing.planner import plan_layout
from deployctl.core.render import render_artifacts
from deployctl.io.rendered_tree import write_tree

PER_NODE = {"a2": 8, "a3": 16}
EXPERTS = {"deepseek-r1": 256, "deepseek-v3": 256, "deepseek-v3.2-exp": 256, "qwen3-235b-a22b": 128}
# weighted towards combinations that fit in memory on small clusters; the rest are kept so the
# memory planner's refusals are exercised too (rejected via assume)
MODELS = ([("deepseek-r1", "w4a8")] * 4 + [("qwen3-235b-a22b", "w8a8")] * 4 +
          [("deepseek-v3", "w4a8"), ("deepseek-r1", "w8a8"), ("deepseek-v3", "w8a8"),
           ("qwen3-235b-a22b", "bf16"), ("deepseek-v3.2-exp", "w8a8"), ("deepseek-v3.2-exp", "w8a8c8")])
# pd-split: upstream large-EP PD is DeepSeek only (Motor user_config*.json; atb deepseekv2 is the model with
# lm_head/o_proj local TP and DP partition-up) and not with KV-cache int8 (Motor
# pd_separation_service_deployment.md L63). Mostly accepted models; one refused neighbour each is kept
# so support-matrix refusals are exercised (rejected via assume, like memory refusals).
PD_MODELS = ([("deepseek-r1", "w4a8")] * 6 + [("deepseek-v3", "w4a8")] * 2 +
             [("deepseek-r1", "w8a8"), ("deepseek-v3", "w8a8"), ("deepseek-v3.2-exp", "w8a8"),
              ("qwen3-235b-a22b", "w8a8"), ("deepseek-v3.2-exp", "w8a8c8")])
TORCH_MODELS = {"deepseek-v3.2-exp"}   # backendType torch: MindIE 3.0 only (mindie-upstream-rules.md §1.3)
IMAGE_22 = "swr.example.com/ascendhub/mindie:2.2.RC1-800I-A2-py311-openeuler24.03-lts"
IMAGE_30 = "swr.example.com/ascendhub/mindie:3.0.0-800I-A3-py311-openeuler24.03-lts"
DIST_DP_BASE_PORT = 10000   # ms_controller initial_dist_server_port (Motor deploy_ac_job.py INIT_PORT L112)
PROPERTY_SETTINGS = settings(max_examples=examples(150), deadline=None,
                             suppress_health_check=[HealthCheck.too_slow])


# =========================================================================== generated cases
@dataclass
class ExpNode:
    """What the inventory says about one node, independent of deployctl."""

    name: str
    server_ip: str                         # container_ip, else address
    devices: dict[int, tuple[str | None, int | None]] = field(default_factory=dict)  # id -> (ip, sdid)
    pod: str | None = None


@dataclass
class Case:
    data: dict                             # the inventory as plain data (dumped to YAML)
    files: dict[str, str]                  # hccn.conf copies, path relative to the inventory
    hardware: str
    super_pod: bool
    nodes: dict[str, ExpNode]
    instances: list[tuple[str, list[str]]]  # (role, node names in rank-table order)

    @property
    def per_node(self) -> int:
        return PER_NODE[self.hardware]

    def version(self) -> str:
        return "1.2" if self.super_pod else "1.0"

    def by_server(self) -> dict[str, ExpNode]:
        return {n.server_ip: n for n in self.nodes.values()}


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _pow2_divisors(n: int) -> list[int]:
    return [d for d in _divisors(n) if d & (d - 1) == 0]


@st.composite
def full_degrees(draw, nodes: int, per: int, experts: int, role: str, torch: bool = False) -> dict:
    """Explicit degrees that satisfy catalog/layouts.yaml and the upstream runtime's own checks.

    atb (``atb_llm/utils/mapping.py``): L354 cp with dp refused, L360 pp with dp refused,
    ``feature/context_parallel.md`` L32 cp in [1, 2]. torch (``parallel_info_manager.py`` L252): no pp.
    Decode (distributed DP) is drawn mostly as the upstream A3 preset tp 1 (``user_config_base_A3.json``).
    """
    devices = nodes * per
    tp = draw(st.sampled_from(_divisors(per)))
    if role == "decode" and draw(st.integers(0, 3)):
        tp = 1
    pp = 1
    if role == "mixed" and not torch and nodes > 1 and draw(st.integers(0, 2)) == 0:
        pp, tp = nodes, per   # pp > 1 only with dp 1 (mapping.py L360): tp * pp == world
    rest = devices // (tp * pp)
    cp = 2 if role == "prefill" and rest == 2 and draw(st.booleans()) else 1   # cp only with dp 1 (L354)
    dp = rest // cp
    stage = devices // pp
    eps = [d for d in _pow2_divisors(stage) if experts % d == 0]
    # mostly the widest EP (experts per die shrink with it), sometimes anything consistent
    moe_ep = draw(st.one_of(st.just(max(eps)), st.sampled_from(eps)))
    return {"tp": tp, "dp": dp, "pp": pp, "cp": cp, "moe_tp": stage // moe_ep, "moe_ep": moe_ep}


def _assign_pods(draw, rnd, names: list[str], instances: list[tuple[str, list[str]]], mode: str):
    """Node name -> pod index. Every pod has the same number of servers (cluster-wide).

    mode "balanced": also every instance has the same number of servers in each pod it touches.
    mode "unbalanced": cluster-wide equal, but some instance is not (the known bug region).
    """
    n = len(names)
    if len(instances) == 1:
        k = draw(st.sampled_from([k for k in (1, 2, 3) if n % k == 0]))
        order = rnd.sample(names, n)
        return {name: i // (n // k) for i, name in enumerate(order)}
    (_, pre), (_, dec) = instances
    p, d = len(pre), len(dec)
    if mode == "balanced":
        options = [("spread", k) for k in (1, 2, 3) if p % k == 0 and d % k == 0]
        if p == d:
            options.append(("disjoint", 2))
        how, k = draw(st.sampled_from(options))
        if how == "disjoint":
            return {**{x: 0 for x in pre}, **{x: 1 for x in dec}}
        out = {}
        for members in (pre, dec):
            order = rnd.sample(members, len(members))
            out.update({x: i // (len(members) // k) for i, x in enumerate(order)})
        return out
    # unbalanced: pods of equal size whose split of some instance is uneven
    choices = []
    for k in (2, 3):
        if n % k:
            continue
        for _ in range(20):
            order = rnd.sample(names, n)
            pods = {x: i // (n // k) for i, x in enumerate(order)}
            if any(len(set(Counter(pods[x] for x in m).values())) > 1 for _, m in instances):
                choices.append(pods)
                break
    assume(choices)
    return draw(st.sampled_from(choices))


@st.composite
def cases(draw, *, pods: str = "balanced", preset_for_degrees: bool = True, kinds=None) -> Case:
    # bulk shuffles/samples come from one seeded Random (drawing each element through hypothesis
    # would overrun its buffer on 8 x 16-device clusters); the seed itself is drawn, so replays work
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    # one draw over every (hardware, super pod, layout kind) combination keeps them all well covered
    combos = [(hw, sp, kind) for hw, sp in (("a2", False), ("a3", False), ("a3", True))
              for kind in kinds or ("single", "tp-pp", "dp-ep", "pd-split", "explicit")]
    if pods == "unbalanced":
        combos = [("a3", True, "pd-split")]
    hw, super_pod, kind = draw(st.sampled_from(combos))
    per = PER_NODE[hw]
    model, quant = draw(st.sampled_from(PD_MODELS if kind == "pd-split" else MODELS))
    torch = model in TORCH_MODELS
    experts = EXPERTS[model]

    # ---- node names and instances
    if kind == "single":
        n = 1
    elif kind == "tp-pp":
        n = draw(st.integers(2, 8))
    elif kind == "dp-ep":
        n = draw(st.sampled_from([1, 2, 4, 8]))
    elif kind == "pd-split":
        p = draw(st.sampled_from([1, 2, 4]))
        d = draw(st.sampled_from([x for x in (1, 2, 4) if p + x <= 8]))
        n = p + d
    else:  # explicit degrees (1 node too: "single" is only implied when no degree is given)
        n = draw(st.integers(1, 8))
    prefix = draw(st.sampled_from(["node", "gx", "a3-srv-", "n"]))
    names = [f"{prefix}{i}" for i in rnd.sample(range(100), n)]  # YAML order = inventory order
    if kind == "pd-split":
        roles = rnd.sample(names, n)
        instances = [("prefill", roles[:p]), ("decode", roles[p:])]
    else:
        instances = [("mixed", list(names))]

    # ---- layout
    layout: dict = {}
    if kind == "single":
        layout = draw(st.sampled_from([{"preset": "single"}, {}]))
    elif kind in ("tp-pp", "dp-ep"):
        layout = {"preset": kind}
    elif kind == "pd-split":
        if draw(st.booleans()):
            layout["preset"] = "pd-split"   # else implied by the prefill/decode blocks
        for role, members in instances:
            block = {"nodes": list(members)}
            if draw(st.integers(0, 3)) == 0:
                block.update(draw(full_degrees(len(members), per, experts, role, torch)))
            layout[role] = block
    else:
        layout = draw(full_degrees(n, per, experts, "mixed", torch))
        if preset_for_degrees:
            presets = ["dp-ep"] + (["single"] if n == 1 else ["tp-pp"])
            layout["preset"] = draw(st.sampled_from(presets))

    # ---- super pods
    pod_of: dict[str, int] = {}
    pod_names: list = []
    if super_pod:
        pod_of = _assign_pods(draw, rnd, names, instances, pods)
        k = max(pod_of.values()) + 1
        style = draw(st.sampled_from(["digits", "ints", "words"]))
        base = draw(st.integers(0, 50))
        pod_names = {"digits": [str(base + i) for i in range(k)], "ints": [base + i for i in range(k)],
                     "words": [f"spod-{chr(97 + base % 20 + i)}" for i in range(k)]}[style]

    # ---- addresses: unique host IPs; optional container_ip; hostnames only with container_ip
    host_v6 = draw(st.integers(0, 4)) == 0
    pool = rnd.sample(range(1, 60000), 2 * n)
    host_base = ipaddress.ip_address("fd10:200::" if host_v6 else "10.200.0.0")
    host_ips = [str(host_base + x) for x in pool]
    # ---- device IPs: unique over the cluster, one family
    dev_v6 = draw(st.integers(0, 4)) == 0
    dev_base = ipaddress.ip_address(draw(st.sampled_from(
        ["fd00:29::", "2001:db8:a3::"] if dev_v6 else ["29.0.0.0", "172.16.0.0", "192.168.0.0"])))
    dev_ips = [str(dev_base + x) for x in rnd.sample(range(1, 1 << 20), n * per)]
    # SDIDs: unique within a super pod; sometimes the very same values in every pod (allowed)
    sdid_of: dict[str, list[int]] = {}
    if super_pod:
        members_of: dict[int, list[str]] = {}
        for name in names:
            members_of.setdefault(pod_of[name], []).append(name)
        size = per * (n // len(members_of))
        shared = rnd.sample(range(1 << 28), size) if draw(st.booleans()) else None
        for members in members_of.values():
            values = shared or rnd.sample(range(1 << 28), size)
            for j, name in enumerate(members):
                sdid_of[name] = values[j * per:(j + 1) * per]

    single_mixed = kind != "pd-split" and n == 1
    nodes_yaml, files, exp = [], {}, {}
    for i, name in enumerate(names):
        # the torch runtime needs GLOO_SOCKET_IFNAME on every node of a multi-node instance
        # (deepseek_v3.2.md; mindie-upstream-rules.md §2): set it mostly everywhere
        node: dict = {"name": name, **({"interface": "eth0"} if torch or draw(st.integers(0, 3)) else {})}
        addr_mode = draw(st.sampled_from(["ip", "ip", "ip+container", "ip+same", "host+container"]))
        address = host_ips[2 * i] if addr_mode != "host+container" else f"{name}.dc.example.com"
        node["address"] = address
        container = None
        if addr_mode in ("ip+container", "host+container"):
            container = host_ips[2 * i + 1]
        elif addr_mode == "ip+same":
            container = address
        if container:
            node["container_ip"] = container
        pod = None
        if super_pod:
            pod = pod_names[pod_of[name]]
            node["super_pod_id"] = pod
        ips = dev_ips[i * per:(i + 1) * per]
        sdids: list[int | None] = sdid_of.get(name) or [None] * per
        source = draw(st.sampled_from(
            ["list", "list", "hccn+ids"] + ([] if super_pod else ["hccn"]) + (["omit"] if single_mixed else [])))
        ids = list(range(per))
        if draw(st.booleans()):
            rnd.shuffle(ids)  # YAML order must not matter: ranks follow the physical id
        devices = []
        for dev_id in ids:
            entry: dict = {"id": dev_id}
            if source == "list":
                entry["ip"] = ips[dev_id]
            if super_pod:
                entry["sdid"] = sdids[dev_id]
            devices.append(entry)
        if source in ("list", "hccn+ids"):
            node["devices"] = devices
        if source in ("hccn", "hccn+ids"):
            lines = [f"address_{d}={ips[d]}" for d in range(per)]
            lines += [f"netmask_{d}=255.255.0.0" for d in range(per)]
            rnd.shuffle(lines)
            path = f"hccn/{name}.conf"
            node["hccn_conf"] = path
            files[path] = "\n".join(lines) + "\n"
        event(f"device source: {source}; address: {addr_mode}")
        exp_devices = {} if source == "omit" else {
            d: (ips[d], sdids[d] if super_pod else None) for d in range(per)}
        exp[name] = ExpNode(name=name, server_ip=container or address, devices=exp_devices,
                            pod=None if pod is None else str(pod))
        nodes_yaml.append(node)

    seq = draw(st.sampled_from([4096, 8192, 16384]))
    # DeepSeek-V3.2 exists only on MindIE 3.0's torch runtime (mindie-upstream-rules.md version caveat)
    # the image of the drawn hardware (an A2 build on A3 is refused: deployctl/core/engines/mindie/images.py)
    engine: dict = ({"image": IMAGE_30.replace("-A3-", f"-{hw.upper()}-"), "version": "3.0"} if torch else
                    {"image": IMAGE_22.replace("-A2-", f"-{hw.upper()}-")})
    if draw(st.booleans()):
        engine["env"] = draw(st.fixed_dictionaries({}, optional={
            "HCCL_CONNECT_TIMEOUT": st.sampled_from([600, 1200, 7200]),
            "HCCL_EXEC_TIMEOUT": st.sampled_from([0, 120, "1800"]),
            "MINDIE_LOG_LEVEL": st.sampled_from(["debug", "warn"])}))
    data = {
        "cluster": {"name": f"gen-{hw}-{n}", "hardware": hw,
                    **({"super_pod": True} if super_pod else
                       draw(st.sampled_from([{}, {"super_pod": False}])))},
        "engine": engine,
        "model": {"name": model, "quant": quant, "weights_path": f"/data/models/{model}-{quant}",
                  "served_name": "served-model", "max_seq_len": seq,
                  "max_input_len": draw(st.sampled_from([seq // 4, seq // 2])),
                  "max_batch_size": draw(st.sampled_from([8, 32, 64]))},
        "nodes": nodes_yaml,
    }
    if layout:
        data["layout"] = layout
    event(f"kind={kind} hw={hw}{'+superpod' if super_pod else ''}")
    event(f"device ips: {'ipv6' if dev_v6 else 'ipv4'}; host ips: {'ipv6' if host_v6 else 'ipv4'}")
    return Case(data=data, files=files, hardware=hw, super_pod=super_pod, nodes=exp, instances=instances)


# =========================================================================== pipeline
def run_pipeline(case: Case) -> list:
    """YAML text -> artifacts; memory refusals are rejected, every other error fails the test."""
    text = yaml.safe_dump(case.data, sort_keys=False)

    def read_text(path: Path) -> str:
        return case.files[Path(path).as_posix()]

    raw = parse_yaml(text, "gen.yaml", Path("."))
    try:
        inv = validate_inventory(raw, read_text=read_text)
    except InventoryError as exc:
        raise AssertionError(f"[validate-accepts-valid-inventory] deployctl rejected a valid inventory:\n"
                             f"{exc.render()}\n---\n{text}") from None
    try:
        plan = plan_layout(inv)
    except LayoutError as exc:
        if "does not fit in memory" in exc.message:
            event("rejected: memory")
            assume(False)
        if any("[source:" in p.message for p in exc.problems):
            # the engine's support matrix: upstream MindIE would refuse this combination
            event("rejected: support matrix")
            assume(False)
        raise AssertionError(f"[plan-accepts-valid-layout] {exc.render()}\n---\n{text}") from None
    event("accepted")
    return render_artifacts(plan)


def env_of(content: bytes) -> dict[str, str]:
    out = {}
    for line in content.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, f"[env-syntax] line {line!r} is not KEY=VALUE"
        assert key not in out, f"[env-syntax] {key} set twice"
        out[key] = value
    return out


# =========================================================================== rank table rules
def fail(tag: str, msg: str):
    raise AssertionError(f"[{tag}] {msg}")


def _is_decimal(v) -> bool:
    return isinstance(v, str) and v.isascii() and v.isdigit()


def _valid_ip(v) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(v)
    except (ValueError, TypeError):
        return None


def check_file_mode(path: str, mode: int):
    """MindIE-LLM: RANK_TABLE_FILE must have mode 640."""
    if stat.S_IMODE(mode) != 0o640:
        fail("file-mode-640", f"{path} has mode {oct(mode)}, MindIE requires 0o640")


def check_valid_json(path: str, content: bytes) -> dict:
    try:
        doc = json.loads(content)
    except ValueError as exc:
        fail("valid-json", f"{path}: {exc}")
    if not isinstance(doc, dict):
        fail("valid-json", f"{path}: top level is {type(doc).__name__}, not an object")
    return doc


def check_all_scalars_strings(doc, where: str = "$"):
    """HCCL reads every scalar with is_string(); MindIE uses get<std::string>()."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            check_all_scalars_strings(v, f"{where}.{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            check_all_scalars_strings(v, f"{where}[{i}]")
    elif not isinstance(doc, str):
        fail("scalars-are-strings", f"{where} = {doc!r} is a {type(doc).__name__}, not a string")


def check_status(doc):
    if doc.get("status") != "completed":
        fail("status-completed", f"status is {doc.get('status')!r}; HCCL waits until 'completed'")


def check_version(doc, expected: str):
    if doc.get("version") != expected:
        fail("version", f"version {doc.get('version')!r}, expected {expected!r} "
                        "(1.0 = A2 / A3 without super pod, 1.2 = A3 super pod)")


def check_server_count(doc, mindie_range: bool = True):
    sc, servers = doc.get("server_count"), doc.get("server_list")
    if not isinstance(servers, list):
        fail("server-count", f"server_list is {servers!r}, not a list")
    if not _is_decimal(sc):
        fail("server-count", f"server_count {sc!r} is not a decimal string")
    if int(sc) != len(servers):
        fail("server-count", f"server_count {sc} != {len(servers)} servers in server_list")
    if int(sc) == 0:
        fail("server-count", "server_count is 0")
    if mindie_range and not 2 <= int(sc) <= 60:
        fail("server-count", f"server_count {sc} outside MindIE's [2, 60]")


def check_server_ids(doc):
    ids = [s.get("server_id") for s in doc["server_list"]]
    for sid in ids:
        if not isinstance(sid, str) or not sid or len(sid) > 64:
            fail("server-id", f"server_id {sid!r} must be a non-empty string of at most 64 chars")
    dup = [s for s, c in Counter(ids).items() if c > 1]
    if dup:
        fail("server-id", f"server_id not unique: {dup}")


def check_container_ips(doc):
    """MindIE: container_ip non-empty on every server; the local server is matched by it."""
    ips = [s.get("container_ip") for s in doc["server_list"]]
    for ip in ips:
        if not isinstance(ip, str) or not ip:
            fail("container-ip", f"container_ip {ip!r} is empty or missing")
    dup = [s for s, c in Counter(ips).items() if c > 1]
    if dup:
        fail("container-ip", f"container_ip not unique (MIES_CONTAINER_IP matching is ambiguous): {dup}")


def check_host_ips(doc):
    """HCCL rule 5: host_ip is optional, but all servers have a valid one or none has."""
    have = [s for s in doc["server_list"] if "host_ip" in s]
    if have and len(have) != len(doc["server_list"]):
        fail("host-ip", "hostIp config between ranks is different")
    for s in have:
        if _valid_ip(s["host_ip"]) is None:
            fail("host-ip", f"host_ip {s['host_ip']!r} is not an IP")


def check_device_lists(doc):
    counts = []
    for s in doc["server_list"]:
        dev = s.get("device")
        if not isinstance(dev, list) or not dev:
            fail("device-list", f"server {s.get('server_id')!r}: device must be a non-empty list")
        if not 1 <= len(dev) <= 32:
            fail("device-list", f"server {s.get('server_id')!r}: {len(dev)} devices outside [1, 32]")
        counts.append(len(dev))
    if len(set(counts)) > 1:
        fail("device-list", f"servers have different device counts {counts}")


def check_device_ids(doc, per_node: int, physical: dict[str, set[int]] | None = None):
    """Decimal, in [0, per_node-1], unique per server, and a physical id of that node."""
    for s in doc["server_list"]:
        seen = set()
        for d in s["device"]:
            v = d.get("device_id")
            if not _is_decimal(v):
                fail("device-id", f"device_id {v!r} on {s['server_id']} is not decimal")
            if not 0 <= int(v) < per_node:
                fail("device-id", f"device_id {v} on {s['server_id']} outside 0-{per_node - 1}")
            if int(v) in seen:
                fail("device-id", f"device_id {v} twice on {s['server_id']}")
            seen.add(int(v))
            if physical is not None and int(v) not in physical.get(s["server_id"], set()):
                fail("device-id", f"device_id {v} is not a physical device of {s['server_id']} in the inventory")


def check_device_ips(doc, expected: dict[tuple[str, int], str] | None = None):
    """Valid IP(s), globally unique, same number per device, one family (EI0001), and the
    IP configured on that NPU per the inventory (EI0014)."""
    seen: dict[str, str] = {}
    per_dev, families = set(), set()
    for s in doc["server_list"]:
        for d in s["device"]:
            raw = d.get("device_ip")
            if not isinstance(raw, str) or not raw:
                fail("device-ip", f"{s['server_id']} device {d.get('device_id')}: device_ip {raw!r} missing")
            parts = raw.split(",")
            per_dev.add(len(parts))
            for ip in parts:
                addr = _valid_ip(ip)
                if addr is None:
                    fail("device-ip", f"{s['server_id']} device {d.get('device_id')}: {ip!r} is not an IP")
                families.add(addr.version)
                where = f"{s['server_id']} device {d.get('device_id')}"
                if ip in seen:
                    fail("device-ip", f"device_ip {ip} used by {seen[ip]} and {where} (must be globally unique)")
                seen[ip] = where
            if expected is not None:
                want = expected.get((s["server_id"], int(d["device_id"])))
                if raw != want:
                    fail("device-ip", f"{s['server_id']} device {d['device_id']}: device_ip {raw} but the "
                                      f"inventory configures {want} on that NPU (EI0014)")
    if len(per_dev) > 1:
        fail("device-ip", "devices have different numbers of IPs")
    if len(families) > 1:
        fail("device-ip", "device IPs mix IPv4 and IPv6 (EI0001)")


def check_rank_ids(doc):
    """Decimal; sorted rank ids are exactly 0..N-1 (and within MindIE's [0, 511])."""
    ranks = []
    for s in doc["server_list"]:
        for d in s["device"]:
            v = d.get("rank_id")
            if not _is_decimal(v):
                fail("rank-id", f"rank_id {v!r} on {s['server_id']} is not decimal")
            ranks.append(int(v))
    if sorted(ranks) != list(range(len(ranks))):
        fail("rank-id", f"rank ids are not exactly 0..{len(ranks) - 1}: {sorted(ranks)}")
    if ranks and max(ranks) > 511:
        fail("rank-id", f"rank_id {max(ranks)} > 511 (MindIE)")


def check_rank_order(doc):
    """No interleaving: server k holds a contiguous block right after server k-1's; inside a
    server ranks ascend with device_id (physical-connection order)."""
    nxt = 0
    for s in doc["server_list"]:
        devs = sorted(s["device"], key=lambda d: int(d["device_id"]))
        ranks = [int(d["rank_id"]) for d in devs]
        if ranks != list(range(nxt, nxt + len(ranks))):
            fail("rank-order", f"server {s['server_id']}: ranks by device_id are {ranks}, expected "
                               f"{nxt}..{nxt + len(ranks) - 1} (no interleaving, ascending with device_id)")
        nxt += len(ranks)


def check_super_pod_v12(doc, expected_pod: dict[str, str] | None = None,
                        expected_sdid: dict[tuple[str, int], int] | None = None):
    """Version 1.2 rules (HCCL rule 11)."""
    pods = doc.get("super_pod_list")
    if not isinstance(pods, list) or not pods:
        fail("super-pod", "version 1.2 needs a non-empty super_pod_list")
    ids = [p.get("super_pod_id") for p in pods]
    if any(not isinstance(i, str) or not i for i in ids):
        fail("super-pod", f"super_pod_id empty or missing: {ids}")
    if len(set(ids)) != len(ids):
        fail("super-pod", f"super_pod_id not unique: {ids}")
    servers = {s["server_id"]: s for s in doc["server_list"]}
    pod_of: dict[str, str] = {}
    sizes = []
    for p in pods:
        members = [m.get("server_id") for m in p.get("server_list") or []]
        if not members:
            fail("super-pod", f"super pod {p['super_pod_id']} lists no servers")
        sizes.append(len(members))
        for sid in members:
            if sid not in servers:
                fail("super-pod", f"super pod {p['super_pod_id']} lists {sid!r}, which is not in server_list")
            if sid in pod_of:
                fail("super-pod", f"server {sid} is in super pods {pod_of[sid]} and {p['super_pod_id']}")
            pod_of[sid] = p["super_pod_id"]
    if len(set(sizes)) > 1:
        fail("super-pod", f"super pods have different server counts {dict(zip(ids, sizes))} "
                          "(HCCL: every super pod must have the same number of servers)")
    if sum(sizes) != int(doc["server_count"]):
        fail("super-pod", f"super_pod_list holds {sum(sizes)} servers, server_count is {doc['server_count']}")
    seen: dict[tuple[str, int], str] = {}
    for sid, s in servers.items():
        for d in s["device"]:
            v = d.get("super_device_id")
            if not isinstance(v, str) or not v.isascii() or not v.isdigit():
                fail("super-pod", f"{sid} device {d.get('device_id')}: super_device_id {v!r} invalid")
            key = (pod_of.get(sid), int(v))
            if key in seen:
                fail("super-pod", f"super_device_id {v} used by {seen[key]} and {sid} device "
                                  f"{d['device_id']} in super pod {key[0]} (EI0014)")
            seen[key] = f"{sid} device {d['device_id']}"
            if expected_sdid is not None and int(v) != expected_sdid.get((sid, int(d["device_id"]))):
                fail("super-pod", f"{sid} device {d['device_id']}: super_device_id {v}, inventory sdid "
                                  f"{expected_sdid.get((sid, int(d['device_id'])))}")
    if expected_pod is not None:
        for sid in servers:
            if pod_of.get(sid) != expected_pod.get(sid):
                fail("super-pod", f"{sid} is in super pod {pod_of.get(sid)!r}, the inventory says "
                                  f"{expected_pod.get(sid)!r}")


def check_no_super_pod_fields(doc):
    if "super_pod_list" in doc:
        fail("v1.0-no-super-pod", "version 1.0 table has super_pod_list")
    for s in doc["server_list"]:
        for d in s["device"]:
            if "super_device_id" in d:
                fail("v1.0-no-super-pod", f"version 1.0 table has super_device_id on {s['server_id']}")


def check_ranktable(doc: dict, case: Case | None, *, hardware: str, super_pod: bool, mindie_range: bool = True):
    """Every rule of §1.2 for one parsed rank table (optionally against the inventory)."""
    check_all_scalars_strings(doc)
    check_status(doc)
    check_version(doc, "1.2" if super_pod else "1.0")
    check_server_count(doc, mindie_range=mindie_range)
    check_server_ids(doc)
    check_container_ips(doc)
    check_host_ips(doc)
    check_device_lists(doc)
    physical = ips = sdids = pods = None
    if case is not None:
        by_server = case.by_server()
        unknown = [s["server_id"] for s in doc["server_list"] if s["server_id"] not in by_server]
        if unknown:
            fail("server-id", f"server_id {unknown} is no node's container_ip/address in the inventory")
        physical = {sid: set(n.devices) for sid, n in by_server.items()}
        ips = {(sid, d): v[0] for sid, n in by_server.items() for d, v in n.devices.items()}
        sdids = {(sid, d): v[1] for sid, n in by_server.items() for d, v in n.devices.items()}
        pods = {sid: n.pod for sid, n in by_server.items()}
    check_device_ids(doc, PER_NODE[hardware], physical)
    check_device_ips(doc, ips)
    check_rank_ids(doc)
    check_rank_order(doc)
    if super_pod:
        check_super_pod_v12(doc, pods, sdids)
    else:
        check_no_super_pod_fields(doc)


# =========================================================================== cross-file rules
def needs_table(role: str, members: list[str]) -> bool:
    """MindIE loads RANK_TABLE_FILE when multiNodesInferEnabled (a multi-node centralized instance) or
    ScheduleConfig.distributedEnable (distributed-DP decode, even on ONE node): config_manager_impl.cpp
    L129-135. A single-node centralized instance loads none; were it marked multi-node to use one,
    RanktableConfigManager::CheckParam refuses server_count 1 (ranktable_config.cpp L258-263)."""
    return role == "decode" or len(members) > 1


def check_tables_per_instance(case: Case, arts: dict[str, bytes]):
    """Every node of an instance that loads a table has the same ranktable.json; the others none."""
    for role, members in case.instances:
        paths = [f"{m}/ranktable.json" for m in members]
        if not needs_table(role, members):
            if paths[0] in arts:
                fail("single-node-no-table", f"single-node centralized {role} instance got {paths[0]}: MindIE "
                                             "loads no table there, and a 1-server table fails CheckParam")
            continue
        missing = [p for p in paths if p not in arts]
        if missing:
            fail("table-per-node", f"{role} instance: {missing} not rendered")
        if len({arts[p] for p in paths}) != 1:
            fail("table-identical", f"{role} instance: ranktable.json differs between {paths}")
        doc = json.loads(arts[paths[0]])
        want = [case.nodes[m].server_ip for m in members]
        got = [s["server_id"] for s in doc["server_list"]]
        if sorted(got) != sorted(want):
            fail("table-servers", f"{role} instance table lists {got}, its nodes are {want}")
    expected = {f"{m}/ranktable.json" for r, ms in case.instances if needs_table(r, ms) for m in ms}
    extra = {p for p in arts if p.endswith("ranktable.json") and not p.endswith("global_ranktable.json")} - expected
    if extra:
        fail("table-per-node", f"unexpected rank tables {sorted(extra)}")


def check_env_vs_table(node: str, env: dict[str, str], doc: dict | None, server_ip: str, devices: int):
    """MIES_CONTAINER_IP, WORLD_SIZE, MASTER_IP and RANK_TABLE_FILE agree with the table."""
    if doc is None:
        if "RANK_TABLE_FILE" in env:
            fail("env-ranktable", f"{node}: single-node centralized instance but RANK_TABLE_FILE="
                                  f"{env['RANK_TABLE_FILE']} (with multiNodesInferEnabled MindIE would demand a "
                                  "2-60 server table, ranktable_config.cpp L258-263)")
        if env.get("WORLD_SIZE") != str(devices):
            fail("env-world-size", f"{node}: WORLD_SIZE={env.get('WORLD_SIZE')} but the node has {devices} devices")
        if env.get("MIES_CONTAINER_IP") != server_ip:
            fail("env-container-ip", f"{node}: MIES_CONTAINER_IP={env.get('MIES_CONTAINER_IP')}, expected {server_ip}")
        return
    mine = [s for s in doc["server_list"] if s["server_id"] == server_ip]
    if len(mine) != 1:
        fail("env-container-ip", f"{node}: its server {server_ip} appears {len(mine)} times in the table")
    if env.get("MIES_CONTAINER_IP") != mine[0]["container_ip"]:
        fail("env-container-ip", f"{node}: MIES_CONTAINER_IP={env.get('MIES_CONTAINER_IP')} but its "
                                 f"container_ip in the table is {mine[0]['container_ip']}")
    total = sum(len(s["device"]) for s in doc["server_list"])
    if env.get("WORLD_SIZE") != str(total):
        fail("env-world-size", f"{node}: WORLD_SIZE={env.get('WORLD_SIZE')}, the table has {total} devices")
    master = [s["server_id"] for s in doc["server_list"] for d in s["device"] if d["rank_id"] == "0"]
    if [env.get("MASTER_IP")] != master:
        fail("env-master-ip", f"{node}: MASTER_IP={env.get('MASTER_IP')}, rank 0 is on {master}")
    rtf = env.get("RANK_TABLE_FILE", "")
    if not rtf.startswith("/") or not rtf.endswith("ranktable.json") or rtf.endswith("global_ranktable.json"):
        fail("env-ranktable", f"{node}: RANK_TABLE_FILE={rtf!r} is not an absolute path ending in ranktable.json")


def check_hccl_timeouts_uniform(envs: dict[str, dict[str, str]]):
    for key in ("HCCL_CONNECT_TIMEOUT", "HCCL_EXEC_TIMEOUT"):
        values = {node: env.get(key) for node, env in envs.items()}
        if len(set(values.values())) > 1:
            fail("hccl-timeouts-uniform", f"{key} differs between nodes: {values}")


def check_deterministic(first: list, second: list):
    a = {x.path: (x.content, x.mode) for x in first}
    b = {x.path: (x.content, x.mode) for x in second}
    if a.keys() != b.keys():
        fail("deterministic", f"rendered paths differ: {sorted(a.keys() ^ b.keys())}")
    diff = [p for p in a if a[p] != b[p]]
    if diff:
        fail("deterministic", f"rendering twice gave different bytes for {diff}")


def check_global_ranktable(doc: dict, case: Case, tables: dict[str, dict], ms_ip: str):
    """MindIE-MS global rank table (§1.5): group 0 coordinator, 1 controller, 2+ instances."""
    check_all_scalars_strings(doc)
    check_status(doc)
    check_version(doc, case.version())
    groups = doc.get("server_group_list")
    if not isinstance(groups, list) or len(groups) != 2 + len(case.instances):
        fail("global-groups", f"server_group_list must hold coordinator, controller and "
                              f"{len(case.instances)} instances, got {groups!r:.200}")
    ids = [g.get("group_id") for g in groups]
    if ids != [str(i) for i in range(len(groups))]:
        fail("global-groups", f"group ids {ids}, expected 0..{len(groups) - 1}")
    for g in groups:
        if not _is_decimal(g.get("server_count")) or int(g["server_count"]) != len(g.get("server_list") or []):
            fail("global-server-count", f"group {g.get('group_id')}: server_count {g.get('server_count')!r} "
                                        f"!= {len(g.get('server_list') or [])} servers")
    for g, what in zip(groups[:2], ("coordinator", "controller")):
        if g["server_count"] != "1" or g["server_list"][0].get("server_ip") != ms_ip:
            fail("global-groups", f"group {g['group_id']} ({what}) must be one server at {ms_ip}: {g}")
    all_ips = [d.get("device_ip") for g in groups[2:] for s in g.get("server_list") or []
               for d in s.get("device") or []]
    dup = sorted(ip for ip, c in Counter(all_ips).items() if c > 1)
    if dup:
        fail("global-instance-group", f"device_ip used in more than one place of the global table: {dup}")
    for g, (role, members) in zip(groups[2:], case.instances):
        # P centralized + D distributed: the flags differ, so deploy_server = each flag, P "0" / D "1"
        # (Motor deploy_ac_job.py L1340-1346; ControllerConfig.cpp GetPDInitRole L611-628). "2" would be
        # the equal-flags convention and, with differing flags, parses as DECODE.
        want = "0" if role == "prefill" else "1"
        if g.get("deploy_server") != want:
            fail("global-groups", f"group {g['group_id']} ({role}) has deploy_server {g.get('deploy_server')!r}")
        # the group must itself be a valid rank table of that instance
        pseudo = {"version": doc["version"], "status": doc["status"], "server_count": g["server_count"],
                  "server_list": [{"server_id": s.get("server_id"), "container_ip": s.get("server_ip"),
                                   "device": [{k: v for k, v in d.items() if k != "device_logical_id"}
                                              for d in s.get("device") or []]}
                                  for s in g["server_list"]]}
        if "super_pod_list" in g:
            pseudo["super_pod_list"] = g["super_pod_list"]
        try:
            check_ranktable(pseudo, case, hardware=case.hardware, super_pod=case.super_pod, mindie_range=False)
        except AssertionError as exc:
            fail("global-instance-group", f"group {g['group_id']} ({role}): {exc}")
        for s in g["server_list"]:
            logical = [d.get("device_logical_id") for d in sorted(s["device"], key=lambda d: int(d["device_id"]))]
            if logical != [str(i) for i in range(len(logical))]:
                fail("global-instance-group", f"group {g['group_id']} {s['server_id']}: device_logical_id "
                                              f"{logical} is not 0..{len(logical) - 1} in device_id order")
        if members[0] in tables:   # every instance with a table (decode: even one node)
            own = tables[members[0]]
            if pseudo["server_list"] != own["server_list"] or pseudo.get("super_pod_list") != own.get("super_pod_list"):
                fail("global-matches-instance", f"group {g['group_id']} ({role}) disagrees with "
                                                f"{members[0]}/ranktable.json")


def check_ms_controller(doc: dict, decode_tp_cp: tuple[int, int] | None):
    """ms_controller.json multi_node_infer_config (Motor deploy_ac_job.py update_ms_controller_config
    L1677-1710): P enable_dist_dp_server false, D true; with deploy_server "0"/"1" equal flags leave
    prefill UN_DEF (ControllerConfig.cpp GetPDInitRole L611-628). MS slices each decode server entry into
    DP servers of d cp_size*tp_size devices (RankTableLoader.cpp ParseDistributeNodeInfo L215-277), so
    those must be the decode configs' tp/cp."""
    cfg = doc.get("multi_node_infer_config")
    if not isinstance(cfg, dict):
        fail("ms-controller-flags", f"ms_controller.json has no multi_node_infer_config: {cfg!r:.200}")
    p, d = cfg.get("p_node_config") or {}, cfg.get("d_node_config") or {}
    if cfg.get("multi_node_infer_enable") is not True:
        fail("ms-controller-flags", "multi_node_infer_enable must be true (user_config_base_A3.json L105)")
    if p.get("enable_dist_dp_server") is not False or d.get("enable_dist_dp_server") is not True:
        fail("ms-controller-flags", f"enable_dist_dp_server P {p.get('enable_dist_dp_server')!r} / D "
                                    f"{d.get('enable_dist_dp_server')!r}; upstream P false, D true")
    if decode_tp_cp is not None and (d.get("tp_size"), d.get("cp_size")) != decode_tp_cp:
        fail("ms-controller-flags", f"d_node_config tp_size/cp_size {d.get('tp_size')}/{d.get('cp_size')} but the "
                                    f"decode servers run tp/cp {decode_tp_cp[0]}/{decode_tp_cp[1]}")


_DP_PORTS = ("port", "managementPort", "metricsPort", "interCommPort")


def _model_config(doc: dict) -> dict:
    return doc["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]


def check_server_configs(case: Case, arts: dict[str, bytes], modes: dict[str, int]) -> tuple[int, int] | None:
    """config.json (centralized) or config1..N.json (distributed-DP decode) per node; returns decode (tp, cp).

    Centralized (Motor boot.sh non-distributed path): one config.json; distDPServerEnabled false,
    distributedEnable false, multiNodesInferEnabled = more than one node (needs_table).
    Distributed DP (boot.sh L115-142; gen_config_single_container.py get_server_num L147-162,
    prepare_json_files L196-227, __update_server_env L438-461): N = node devices / (tp*cp) copies
    config1..N.json, no config.json; identical but port/managementPort/metricsPort/interCommPort =
    10000+4k..+3 for k = 0..N-1 (what MS computes: ParseDistributeNodeInfo L239-262); distDPServerEnabled
    true, multiNodesInferEnabled false (llm_manager_impl.cpp L1357-1358: one executor per process),
    distributedEnable true (forces the rank table: config_manager_impl.cpp L129-135), worldSize tp*cp."""
    decode_tp_cp = None
    for role, members in case.instances:
        for m in members:
            numbered = sorted((p for p in arts if p.startswith(f"{m}/config") and p != f"{m}/config.json"
                               and p.endswith(".json")), key=lambda p: (len(p), p))
            if role != "decode":
                if f"{m}/config.json" not in arts or numbered:
                    fail("dist-dp-configs", f"{m} ({role}, centralized) needs exactly config.json, got "
                                            f"{[p for p in arts if p.startswith(m + '/config')]}")
                check_file_mode(f"{m}/config.json", modes[f"{m}/config.json"])
                doc = check_valid_json(f"{m}/config.json", arts[f"{m}/config.json"])
                backend = doc.get("BackendConfig", {})
                if doc.get("ServerConfig", {}).get("distDPServerEnabled", False) is not False or \
                        backend.get("ScheduleConfig", {}).get("distributedEnable", False) is not False:
                    fail("config-centralized", f"{m}/config.json: a centralized {role} server must not be "
                                               "distributed DP")
                if backend.get("multiNodesInferEnabled") is not needs_table(role, members):
                    fail("config-multinode", f"{m}/config.json: multiNodesInferEnabled "
                                             f"{backend.get('multiNodesInferEnabled')!r} for a {len(members)}-node "
                                             f"{role} instance")
                continue
            if f"{m}/config.json" in arts:
                fail("dist-dp-configs", f"{m} (distributed-DP decode) got config.json; upstream runs config1..N.json")
            if not numbered:
                fail("dist-dp-configs", f"{m} (distributed-DP decode) has no config<i>.json")
            docs = [check_valid_json(p, arts[p]) for p in numbered]
            for p in numbered:
                check_file_mode(p, modes[p])
            mc = _model_config(docs[0])
            tp, cp = int(mc.get("tp", 1)), int(mc.get("cp", 1))
            devices = len(case.nodes[m].devices) or case.per_node
            n = devices // (tp * cp)
            want_paths = [f"{m}/config{i}.json" for i in range(1, n + 1)]
            if devices % (tp * cp) or numbered != want_paths:
                fail("dist-dp-configs", f"{m}: {devices} devices / (tp {tp} * cp {cp}) -> expected {want_paths}, "
                                        f"got {numbered}")
            if decode_tp_cp not in (None, (tp, cp)):
                fail("dist-dp-config", f"{m}: decode tp/cp {tp}/{cp} differ from {decode_tp_cp}")
            decode_tp_cp = (tp, cp)
            stripped = []
            for k, (p, doc) in enumerate(zip(numbered, docs)):
                server, backend = doc.get("ServerConfig", {}), doc.get("BackendConfig", {})
                if server.get("distDPServerEnabled") is not True:
                    fail("dist-dp-config", f"{p}: ServerConfig.distDPServerEnabled must be true")
                if backend.get("multiNodesInferEnabled") is not False:
                    fail("dist-dp-config", f"{p}: BackendConfig.multiNodesInferEnabled must be false")
                if backend.get("ScheduleConfig", {}).get("distributedEnable") is not True:
                    fail("dist-dp-config", f"{p}: ScheduleConfig.distributedEnable must be true")
                if int(_model_config(doc).get("worldSize", -1)) != tp * cp:
                    fail("dist-dp-config", f"{p}: worldSize {_model_config(doc).get('worldSize')} != tp*cp {tp * cp}")
                got = [server.get(key) for key in _DP_PORTS]
                want = [DIST_DP_BASE_PORT + 4 * k + j for j in range(4)]
                if got != want:
                    fail("dist-dp-ports", f"{p}: ports {dict(zip(_DP_PORTS, got))}, MS expects {want}")
                copy_ = copy.deepcopy(doc)
                for key in _DP_PORTS:
                    copy_["ServerConfig"].pop(key, None)
                stripped.append(copy_)
            if any(x != stripped[0] for x in stripped):
                fail("dist-dp-config", f"{m}: config<i>.json differ in more than the four ports")
    return decode_tp_cp


# =========================================================================== the check-everything driver
def check_rendered_tree(case: Case, arts: list, again: list | None = None):
    by_path = {a.path: a for a in arts}
    contents = {p: a.content for p, a in by_path.items()}
    check_tables_per_instance(case, contents)
    # MindIE's [2, 60] server_count range applies only to centralized (multiNodesInferEnabled) instances:
    # config_manager_impl.cpp L307-308; a distributed-DP decode table may list one server (HCCL: >= 1)
    centralized = {m: len(ms) > 1 and r != "decode" for r, ms in case.instances for m in ms}
    tables: dict[str, dict] = {}
    for a in arts:
        if a.path.endswith("/ranktable.json"):
            check_file_mode(a.path, a.mode)
            doc = check_valid_json(a.path, a.content)
            node = a.path.split("/")[0]
            check_ranktable(doc, case, hardware=case.hardware, super_pod=case.super_pod,
                            mindie_range=centralized.get(node, True))
            tables[node] = doc
    decode_tp_cp = check_server_configs(case, contents, {p: a.mode for p, a in by_path.items()})
    envs = {}
    for role, members in case.instances:
        for m in members:
            env = env_of(contents[f"{m}/env"])
            envs[m] = env
            devices = len(case.nodes[m].devices) or case.per_node
            check_env_vs_table(m, env, tables.get(m), case.nodes[m].server_ip, devices)
    check_hccl_timeouts_uniform(envs)
    globals_ = [p for p in contents if p.endswith("global_ranktable.json")]
    if case.instances[0][0] == "prefill":
        ms_node = case.instances[0][1][0]
        if globals_ != [f"{ms_node}/global_ranktable.json"]:
            fail("global-ranktable", f"pd-split: expected {ms_node}/global_ranktable.json, got {globals_}")
        art = by_path[globals_[0]]
        check_file_mode(art.path, art.mode)
        doc = check_valid_json(art.path, art.content)
        check_global_ranktable(doc, case, tables, case.nodes[ms_node].server_ip)
        ms_path = f"{ms_node}/ms_controller.json"
        if ms_path not in contents:
            fail("ms-controller-flags", f"pd-split: {ms_path} not rendered")
        check_ms_controller(check_valid_json(ms_path, contents[ms_path]), decode_tp_cp)
        gpath = envs[ms_node].get("GLOBAL_RANK_TABLE_FILE_PATH", "")
        if not gpath.endswith("/global_ranktable.json"):
            fail("global-ranktable", f"{ms_node}: GLOBAL_RANK_TABLE_FILE_PATH={gpath!r}")
    elif globals_:
        fail("global-ranktable", f"non-pd layout rendered {globals_}")
    if again is not None:
        check_deterministic(arts, again)


def _on_disk_modes(arts: list) -> None:
    """The modes survive write_tree (what MindIE actually stats)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        write_tree(out, arts)
        for a in arts:
            if a.path.endswith("ranktable.json"):
                check_file_mode(a.path + " (on disk)", (out / a.path).stat().st_mode)


# =========================================================================== properties
# The two fuzzing runs (150 and 80 generated clusters through the whole pipeline) are the e2e tier's, with the
# fuzzers (CONTRIBUTING.md); the fast tier keeps the explicit cases above and the smaller properties below.
@pytest.mark.e2e
@PROPERTY_SETTINGS
@given(cases())
def test_valid_inventories_render_hccl_conformant_rank_tables(case: Case):
    arts = run_pipeline(case)
    again = run_pipeline(copy.deepcopy(case))  # the whole pipeline, from YAML text, a second time
    check_rendered_tree(case, arts, again)
    _on_disk_modes(arts)


@pytest.mark.e2e
def test_generator_acceptance_rate():
    """Most generated inventories must reach the renderer (memory refusals are the only rejects)."""
    accepted = rejected = 0

    @settings(max_examples=examples(80), deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(cases())
    def probe(case):
        nonlocal accepted, rejected
        try:
            run_pipeline(case)
        except UnsatisfiedAssumption:  # a memory refusal
            rejected += 1
            raise
        accepted += 1

    probe()
    rate = accepted / max(1, accepted + rejected)
    print(f"acceptance: {accepted}/{accepted + rejected} = {rate:.0%}")
    assert rate >= 0.6, f"only {rate:.0%} of generated inventories fit in memory; fix the generator"


# =========================================================================== regressions found by this file
def _pipeline_strict(case: Case) -> list:
    """Like run_pipeline, but a memory refusal is a failure (used for hand-made reproducers)."""
    text = yaml.safe_dump(case.data, sort_keys=False)
    raw = parse_yaml(text, "gen.yaml", Path("."))
    inv = validate_inventory(raw, read_text=lambda p: case.files[Path(p).as_posix()])
    return render_artifacts(plan_layout(inv))


def _simple_case(hw: str, names: list[str], layout: dict, *, pods: dict[str, str] | None = None,
                 model=("deepseek-r1", "w4a8"), container: dict[str, str] | None = None) -> Case:
    per = PER_NODE[hw]
    nodes_yaml, exp = [], {}
    for i, name in enumerate(names):
        devs = [{"id": d, "ip": f"29.{i}.0.{d + 1}"} for d in range(per)]
        if pods:
            for d in devs:
                d["sdid"] = (i << 16) + d["id"]  # unique within (and across) pods
        node = {"name": name, "address": f"10.0.0.{i + 1}", "interface": "eth0", "devices": devs}
        if container and name in container:
            node["container_ip"] = container[name]
        if pods:
            node["super_pod_id"] = pods[name]
        nodes_yaml.append(node)
        exp[name] = ExpNode(name, node.get("container_ip", node["address"]),
                            {d["id"]: (d["ip"], d.get("sdid")) for d in devs}, pods and pods[name])
    if "prefill" in layout:
        instances = [("prefill", layout["prefill"]["nodes"]), ("decode", layout["decode"]["nodes"])]
    else:
        instances = [("mixed", list(names))]
    data = {"cluster": {"name": "repro", "hardware": hw, "super_pod": bool(pods)},
            "engine": {"image": "mindie:2.2.RC1"},
            "model": {"name": model[0], "quant": model[1], "weights_path": "/w", "served_name": "m",
                      "max_seq_len": 8192, "max_input_len": 4096, "max_batch_size": 32},
            "layout": layout, "nodes": nodes_yaml}
    return Case(data, {}, hw, bool(pods), exp, instances)


def test_pd_split_super_pod_instance_with_unequal_pods_is_refused():
    # Instance sizes must be powers of two (moe_ep divides the 256 experts), so the smallest cluster with
    # equal pods that splits an instance unevenly is 6 nodes in 2 pods of 3 with prefill 2 + decode 4:
    names = [f"n{i}" for i in range(6)]
    pods = {n: str(i // 3) for i, n in enumerate(names)}            # pod 0: n0-n2, pod 1: n3-n5
    case = _simple_case("a3", names, {"preset": "pd-split", "prefill": {"nodes": ["n0", "n1"]},
                                      "decode": {"nodes": ["n2", "n3", "n4", "n5"]}}, pods=pods)
    # decode table would get super pod "0" = [n2], super pod "1" = [n3, n4, n5]
    with pytest.raises(InventoryError) as err:
        _pipeline_strict(case)
    assert "super pods of the decode instance have different server counts" in err.value.render()


def test_explicit_degrees_without_preset():
    case = _simple_case("a2", ["n0", "n1"], {"tp": 8, "dp": 2, "pp": 1, "cp": 1, "moe_tp": 1, "moe_ep": 16})
    arts = _pipeline_strict(case)
    check_rendered_tree(case, arts)


def test_container_ip_equal_to_other_nodes_address_is_refused():
    case = _simple_case("a2", ["n0", "n1"], {"preset": "tp-pp"}, container={"n0": "10.0.0.2"})
    with pytest.raises(InventoryError) as err:
        _pipeline_strict(case)
    assert "is also the server IP of nodes[0]" in err.value.render()


@settings(max_examples=examples(30), deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(cases(pods="unbalanced"))
def test_property_pd_split_unbalanced_pods_are_refused(case: Case):
    with pytest.raises(AssertionError, match="super pods of the (prefill|decode) instance"):
        run_pipeline(case)  # turns the InventoryError into an AssertionError carrying its message


@settings(max_examples=examples(30), deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(cases(kinds=["explicit"], preset_for_degrees=False))
def test_property_explicit_degrees_without_preset(case: Case):
    check_rendered_tree(case, run_pipeline(case))


# =========================================================================== the checkers can fail
@pytest.fixture(scope="module")
def good_a3_superpod():
    """2 x A3, two super pods of one server each, tp-pp: a known-good 1.2 table and its tree."""
    case = _simple_case("a3", ["n0", "n1"], {"preset": "tp-pp"}, pods={"n0": "0", "n1": "1"})
    arts = _pipeline_strict(case)
    doc = json.loads(next(a.content for a in arts if a.path == "n0/ranktable.json"))
    return case, arts, doc


@pytest.fixture(scope="module")
def good_a2_pd():
    """A2 pd-split (DeepSeek-R1 W4A8: PD is DeepSeek-only upstream), prefill 2 nodes centralized + decode
    1 node distributed DP: 1.0 tables, a single-node decode WITH its table (distributedEnable), MS files."""
    case = _simple_case("a2", ["n0", "n1", "n2"], {"preset": "pd-split", "prefill": {"nodes": ["n0", "n1"]},
                                                   "decode": {"nodes": ["n2"]}})
    arts = _pipeline_strict(case)
    doc = json.loads(next(a.content for a in arts if a.path == "n0/ranktable.json"))
    return case, arts, doc


@pytest.fixture(scope="module")
def good_a2_single():
    """One A2 node, one centralized MIXED instance: config.json, no rank table, no RANK_TABLE_FILE."""
    case = _simple_case("a2", ["n0"], {"preset": "single"})
    return case, _pipeline_strict(case), None


def test_known_good_trees_pass(good_a3_superpod, good_a2_pd, good_a2_single):
    for case, arts, _ in (good_a3_superpod, good_a2_pd, good_a2_single):
        check_rendered_tree(case, arts, list(arts))


def test_single_node_decode_has_table_and_dp_configs(good_a2_pd):
    """Upstream distributed DP on one node: the table is loaded anyway (config_manager_impl.cpp L129-135)."""
    case, arts, _ = good_a2_pd
    paths = {a.path for a in arts}
    assert "n2/ranktable.json" in paths and "n2/config.json" not in paths and "n2/config1.json" in paths
    assert "n0/config.json" in paths and "n0/config1.json" not in paths
    assert env_of(next(a.content for a in arts if a.path == "n2/env"))["RANK_TABLE_FILE"].endswith("/ranktable.json")


def _dev(doc, s=0, d=0):
    return doc["server_list"][s]["device"][d]


# (rule tag, mutation of a copy of the good 1.2 table); each must make check_ranktable fail with that tag
V12_MUTATIONS = {
    "int-server-count": ("scalars-are-strings", lambda d: d.update(server_count=2)),
    "int-rank-id": ("scalars-are-strings", lambda d: _dev(d).update(rank_id=0)),
    "null-device-ip": ("scalars-are-strings", lambda d: _dev(d).update(device_ip=None)),
    "initializing": ("status-completed", lambda d: d.update(status="initializing")),
    "version-1.0": ("version", lambda d: d.update(version="1.0")),
    "server-count-mismatch": ("server-count", lambda d: d.update(server_count="3")),
    "server-count-hex": ("server-count", lambda d: d.update(server_count="0x2")),
    "one-server": ("server-count", lambda d: (d["server_list"].pop(), d.update(server_count="1"))),
    "empty-server-id": ("server-id", lambda d: d["server_list"][0].update(server_id="")),
    "duplicate-server-id": ("server-id", lambda d: d["server_list"][1].update(
        server_id=d["server_list"][0]["server_id"])),
    "long-server-id": ("server-id", lambda d: d["server_list"][0].update(server_id="x" * 65)),
    "empty-container-ip": ("container-ip", lambda d: d["server_list"][1].update(container_ip="")),
    "missing-container-ip": ("container-ip", lambda d: d["server_list"][1].pop("container_ip")),
    "partial-host-ip": ("host-ip", lambda d: d["server_list"][0].update(host_ip="10.0.0.1")),
    "empty-device-list": ("device-list", lambda d: d["server_list"][1].update(device=[])),
    "uneven-device-count": ("device-list", lambda d: d["server_list"][1]["device"].pop()),
    "device-id-16-on-a3": ("device-id", lambda d: _dev(d).update(device_id="16")),
    "device-id-negative": ("device-id", lambda d: _dev(d).update(device_id="-1")),
    "device-id-duplicate": ("device-id", lambda d: _dev(d, 0, 1).update(device_id=_dev(d)["device_id"])),
    "bad-device-ip": ("device-ip", lambda d: _dev(d).update(device_ip="29.0.0.256")),
    "none-device-ip": ("device-ip", lambda d: _dev(d).update(device_ip="None")),
    "duplicate-device-ip": ("device-ip", lambda d: _dev(d, 1, 0).update(device_ip=_dev(d)["device_ip"])),
    "mixed-family": ("device-ip", lambda d: _dev(d, 1, 3).update(device_ip="fd00::1")),
    "rank-gap": ("rank-id", lambda d: _dev(d, 1, 15).update(rank_id="32")),
    "rank-duplicate": ("rank-id", lambda d: _dev(d, 1, 15).update(rank_id="0")),
    "rank-from-1": ("rank-id", lambda d: [x.update(rank_id=str(int(x["rank_id"]) + 1))
                                          for s in d["server_list"] for x in s["device"]]),
    "rank-interleaved": ("rank-order", lambda d: (_dev(d, 0, 15).update(rank_id="16"),
                                                  _dev(d, 1, 0).update(rank_id="15"))),
    "rank-descending-in-server": ("rank-order", lambda d: (_dev(d, 0, 0).update(rank_id="1"),
                                                           _dev(d, 0, 1).update(rank_id="0"))),
    "sdid-missing": ("super-pod", lambda d: _dev(d).pop("super_device_id")),
    "sdid-not-digits": ("super-pod", lambda d: _dev(d).update(super_device_id="0x10")),
    "sdid-dup-in-pod": ("super-pod", lambda d: _dev(d, 0, 1).update(super_device_id=_dev(d)["super_device_id"])),
    "pod-list-missing": ("super-pod", lambda d: d.pop("super_pod_list")),
    "pod-id-empty": ("super-pod", lambda d: d["super_pod_list"][0].update(super_pod_id="")),
    "pod-id-duplicate": ("super-pod", lambda d: d["super_pod_list"][1].update(super_pod_id="0")),
    "pod-unknown-server": ("super-pod", lambda d: d["super_pod_list"][0]["server_list"][0].update(
        server_id="10.9.9.9")),
    "pods-unequal": ("super-pod", lambda d: (d["super_pod_list"][0]["server_list"].extend(
        d["super_pod_list"].pop()["server_list"]), d["super_pod_list"].append(
        {"super_pod_id": "9", "server_list": []}))),
    "pods-total-short": ("super-pod", lambda d: d["super_pod_list"].pop()),
}


@pytest.mark.parametrize("name", sorted(V12_MUTATIONS))
def test_checker_rejects_broken_v12_table(good_a3_superpod, name):
    case, _, good = good_a3_superpod
    tag, mutate = V12_MUTATIONS[name]
    check_ranktable(good, case, hardware="a3", super_pod=True)  # the original passes
    bad = copy.deepcopy(good)
    mutate(bad)
    with pytest.raises(AssertionError, match=rf"^\[{tag}\]"):
        check_ranktable(bad, None, hardware="a3", super_pod=True)


INVENTORY_MUTATIONS = {  # well-formed tables that contradict the inventory
    "device-ip-not-the-npus": ("device-ip", lambda d: (_dev(d, 0, 0).update(device_ip=_dev(d, 0, 1)["device_ip"]),
                                                       _dev(d, 0, 1).update(device_ip="29.99.0.1"))),
    "sdid-not-the-npus": ("super-pod", lambda d: _dev(d).update(super_device_id="4242")),
    "wrong-pod": ("super-pod", lambda d: (d["super_pod_list"][0].update(super_pod_id="1"),
                                          d["super_pod_list"][1].update(super_pod_id="0"))),
    "unknown-server": ("server-id", lambda d: (d["server_list"][0].update(server_id="10.9.9.9"),
                                               d["super_pod_list"][0]["server_list"][0].update(server_id="10.9.9.9"))),
}


@pytest.mark.parametrize("name", sorted(INVENTORY_MUTATIONS))
def test_checker_rejects_table_contradicting_inventory(good_a3_superpod, name):
    case, _, good = good_a3_superpod
    tag, mutate = INVENTORY_MUTATIONS[name]
    bad = copy.deepcopy(good)
    mutate(bad)
    check_ranktable(bad, None, hardware="a3", super_pod=True)  # still HCCL-valid on its own
    with pytest.raises(AssertionError, match=rf"^\[{tag}\]"):
        check_ranktable(bad, case, hardware="a3", super_pod=True)


def test_checker_rejects_v10_specific_breakage(good_a2_pd):
    case, _, good = good_a2_pd
    check_ranktable(good, case, hardware="a2", super_pod=False)
    bad = copy.deepcopy(good)
    _dev(bad)["super_device_id"] = "1"
    with pytest.raises(AssertionError, match=r"^\[v1.0-no-super-pod\]"):
        check_ranktable(bad, case, hardware="a2", super_pod=False)
    bad = copy.deepcopy(good)
    _dev(bad)["device_id"] = "8"
    with pytest.raises(AssertionError, match=r"^\[device-id\]"):
        check_ranktable(bad, None, hardware="a2", super_pod=False)
    with pytest.raises(AssertionError, match=r"^\[version\]"):
        check_ranktable(good, case, hardware="a3", super_pod=True)


def test_checker_rejects_bad_file_and_json():
    check_file_mode("x", 0o100640)
    for mode in (0o644, 0o600, 0o660, 0o100666):
        with pytest.raises(AssertionError, match=r"^\[file-mode-640\]"):
            check_file_mode("x", mode)
    for content in (b"{", b"[1]", b'{"a": 1,}'):
        with pytest.raises(AssertionError, match=r"^\[valid-json\]"):
            check_valid_json("x", content)


def _with(arts: list, path: str, content: bytes | None = None, mode: int | None = None) -> list:
    out = []
    for a in arts:
        if a.path == path:
            a = a.model_copy(update={k: v for k, v in (("content", content), ("mode", mode)) if v is not None})
        out.append(a)
    return out


def _edit_env(arts, path, key, value) -> list:
    art = next(a for a in arts if a.path == path)
    lines = [ln if not ln.startswith(f"{key}=") else (f"{key}={value}" if value is not None else "")
             for ln in art.content.decode().splitlines()]
    return _with(arts, path, ("\n".join(lines) + "\n").encode())


def _add_env(arts, path, line) -> list:
    art = next(a for a in arts if a.path == path)
    return _with(arts, path, art.content + f"{line}\n".encode())


def _rename(arts, old, new) -> list:
    return [a.model_copy(update={"path": new}) if a.path == old else a for a in arts]


def _edit_json(arts, path, mutate) -> list:
    art = next(a for a in arts if a.path == path)
    doc = json.loads(art.content)
    mutate(doc)
    return _with(arts, path, json.dumps(doc, indent=4).encode())


# Fixtures: "sp" = 2 x A3 tp-pp (one multi-node centralized instance), "pd" = A2 prefill n0+n1 (centralized)
# + decode n2 (distributed DP, single node), "single" = one A2 node, centralized mixed. Each mutation breaks
# something upstream MindIE / MindIE-MS refuses or mis-wires (source in the checker's docstring).
TREE_MUTATIONS = {  # (fixture, rule tag, mutation of the artifact list)
    "table-not-identical": ("sp", "table-identical",
                            lambda a: _with(a, "n1/ranktable.json", next(
                                x.content for x in a if x.path == "n1/ranktable.json").replace(b"    ", b"  "))),
    "table-missing": ("sp", "table-per-node", lambda a: [x for x in a if x.path != "n1/ranktable.json"]),
    # a single-node MIXED (centralized) instance with a table: no upstream pattern loads it, and marked
    # multi-node it fails CheckParam's [2, 60] (ranktable_config.cpp L258-263)
    "table-for-single-node": ("single", "single-node-no-table",
                              lambda a: a + [next(x for x in a if x.path == "n0/config.json").model_copy(
                                  update={"path": "n0/ranktable.json"})]),
    "single-node-multinode-infer": ("single", "config-multinode", lambda a: _edit_json(
        a, "n0/config.json", lambda d: d["BackendConfig"].update(multiNodesInferEnabled=True))),
    "multinode-not-multinode-infer": ("sp", "config-multinode", lambda a: _edit_json(
        a, "n1/config.json", lambda d: d["BackendConfig"].update(multiNodesInferEnabled=False))),
    # distributed-DP decode on one node still needs its table (distributedEnable: config_manager_impl.cpp
    # L129-133 throws "init rank table config error" without one)
    "decode-table-missing": ("pd", "table-per-node", lambda a: [x for x in a if x.path != "n2/ranktable.json"]),
    "decode-env-no-ranktable": ("pd", "env-ranktable", lambda a: _edit_env(a, "n2/env", "RANK_TABLE_FILE", None)),
    "decode-config-json": ("pd", "dist-dp-configs", lambda a: _rename(a, "n2/config1.json", "n2/config.json")),
    "decode-config-missing": ("pd", "dist-dp-configs", lambda a: [
        x for x in a if x.path != max((y.path for y in a if y.path.startswith("n2/config")), key=len)]),
    "decode-port-reuse": ("pd", "dist-dp-ports", lambda a: _edit_json(
        a, "n2/config2.json", lambda d: d["ServerConfig"].update(port=10000))),
    "decode-not-distributed": ("pd", "dist-dp-config", lambda a: _edit_json(
        a, "n2/config1.json", lambda d: d["BackendConfig"]["ScheduleConfig"].update(distributedEnable=False))),
    "decode-multinode-infer": ("pd", "dist-dp-config", lambda a: _edit_json(
        a, "n2/config1.json", lambda d: d["BackendConfig"].update(multiNodesInferEnabled=True))),
    "decode-no-dist-dp-server": ("pd", "dist-dp-config", lambda a: _edit_json(
        a, "n2/config1.json", lambda d: d["ServerConfig"].update(distDPServerEnabled=False))),
    "prefill-dist-dp": ("pd", "config-centralized", lambda a: _edit_json(
        a, "n0/config.json", lambda d: d["ServerConfig"].update(distDPServerEnabled=True))),
    "ms-flags-equal": ("pd", "ms-controller-flags", lambda a: _edit_json(
        a, "n0/ms_controller.json",
        lambda d: d["multi_node_infer_config"]["d_node_config"].update(enable_dist_dp_server=False))),
    "ms-decode-tp": ("pd", "ms-controller-flags", lambda a: _edit_json(
        a, "n0/ms_controller.json", lambda d: d["multi_node_infer_config"]["d_node_config"].update(tp_size=8))),
    "table-mode-644": ("sp", "file-mode-640", lambda a: _with(a, "n1/ranktable.json", mode=0o644)),
    "env-container-ip": ("sp", "env-container-ip", lambda a: _edit_env(a, "n1/env", "MIES_CONTAINER_IP", "10.0.0.1")),
    "env-world-size": ("sp", "env-world-size", lambda a: _edit_env(a, "n0/env", "WORLD_SIZE", "16")),
    "env-master-ip": ("sp", "env-master-ip", lambda a: _edit_env(a, "n0/env", "MASTER_IP", "10.0.0.2")),
    "env-no-ranktable": ("sp", "env-ranktable", lambda a: _edit_env(a, "n1/env", "RANK_TABLE_FILE", None)),
    "env-ranktable-yaml": ("sp", "env-ranktable",
                           lambda a: _edit_env(a, "n1/env", "RANK_TABLE_FILE", "/etc/deployctl/ranktable.yaml")),
    "env-single-node-ranktable": ("single", "env-ranktable",
                                  lambda a: _add_env(a, "n0/env", "RANK_TABLE_FILE=/etc/deployctl/ranktable.json")),
    "env-connect-timeout": ("pd", "hccl-timeouts-uniform",
                            lambda a: _edit_env(a, "n2/env", "HCCL_CONNECT_TIMEOUT", "600")),
    "env-exec-timeout-missing": ("sp", "hccl-timeouts-uniform",
                                 lambda a: _edit_env(a, "n0/env", "HCCL_EXEC_TIMEOUT", None)),
    "global-int-count": ("pd", "scalars-are-strings", lambda a: _edit_json(
        a, "n0/global_ranktable.json", lambda d: d["server_group_list"][2].update(server_count=2))),
    "global-count-mismatch": ("pd", "global-server-count", lambda a: _edit_json(
        a, "n0/global_ranktable.json", lambda d: d["server_group_list"][3].update(server_count="2"))),
    "global-group-order": ("pd", "global-groups", lambda a: _edit_json(
        a, "n0/global_ranktable.json", lambda d: d["server_group_list"].reverse())),
    # D "0" with D enable_dist_dp_server true parses as PREFILL (GetPDInitRole): no decode instance
    "global-deploy-server": ("pd", "global-groups", lambda a: _edit_json(
        a, "n0/global_ranktable.json", lambda d: d["server_group_list"][3].update(deploy_server="0"))),
    # P "2" is the equal-flags convention; with differing flags bool("2") == D's flag -> DECODE
    "global-deploy-server-p2": ("pd", "global-groups", lambda a: _edit_json(
        a, "n0/global_ranktable.json", lambda d: d["server_group_list"][2].update(deploy_server="2"))),
    "global-dup-device-ip": ("pd", "global-instance-group", lambda a: _edit_json(
        a, "n0/global_ranktable.json", lambda d: d["server_group_list"][2]["server_list"][1]["device"][0].update(
            device_ip=d["server_group_list"][2]["server_list"][0]["device"][0]["device_ip"]))),
    "global-ip-across-groups": ("pd", "global-instance-group", lambda a: _edit_json(
        a, "n0/global_ranktable.json", lambda d: d["server_group_list"][3]["server_list"][0]["device"][0].update(
            device_ip=d["server_group_list"][2]["server_list"][0]["device"][0]["device_ip"]))),
    "global-logical-id": ("pd", "global-instance-group", lambda a: _edit_json(
        a, "n0/global_ranktable.json",
        lambda d: d["server_group_list"][3]["server_list"][0]["device"][0].update(device_logical_id="3"))),
    "global-missing": ("pd", "global-ranktable", lambda a: [x for x in a if "global_" not in x.path]),
}


@pytest.mark.parametrize("name", sorted(TREE_MUTATIONS))
def test_checker_rejects_broken_tree(good_a3_superpod, good_a2_pd, good_a2_single, name):
    which, tag, mutate = TREE_MUTATIONS[name]
    case, arts, _ = {"sp": good_a3_superpod, "pd": good_a2_pd, "single": good_a2_single}[which]
    with pytest.raises(AssertionError, match=rf"^\[{tag}\]"):
        check_rendered_tree(case, mutate(list(arts)))


def test_checker_rejects_nondeterminism(good_a2_pd):
    _, arts, _ = good_a2_pd
    check_deterministic(arts, list(arts))
    with pytest.raises(AssertionError, match=r"^\[deterministic\]"):
        check_deterministic(arts, _edit_env(arts, "n1/env", "MINDIE_LOG_LEVEL", "debug"))
    with pytest.raises(AssertionError, match=r"^\[deterministic\]"):
        check_deterministic(arts, arts[:-1])
