"""What every vLLM-Ascend node launches: `vllm serve` processes with their argv, devices and ports, and the
proxy in front of a prefill/decode split. Pure: Plan -> NodeLaunch per node.

Three shapes (vllm-project/vllm-ascend@182b75ea: docs/source/tutorials/models/DeepSeek-V3.1.md §5.2,
examples/external_online_dp/launch_online_dp.py, docs/source/user_guide/feature_guide/pipeline_parallel.md):

* internal DP (one `vllm serve` per node; node 0 serves the API, the others are `--headless` with their
  `--data-parallel-start-rank`): colocated DP+EP, and pd-split instances on 0.11;
* external DP (one `vllm serve` per DP rank, its device slice in ASCEND_RT_VISIBLE_DEVICES, port api+i,
  `--data-parallel-rank`): pd-split instances from 0.13 (examples/external_online_dp/run_dp_template.sh@v0.13.0);
* TP/PP across nodes (`--nnodes/--node-rank/--master-addr/--master-port`, `--headless` on rank > 0).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, AbstractSet, Any, cast
from dataclasses import dataclass, field

from deployctl.core.engines.vllm_ascend.support import feature, is_moe
from deployctl.core.errors import ExecutionError
from deployctl.core.models.engine_settings.vllm_ascend import VllmAscendSettings

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Speculative
    from deployctl.core.models.plan import Instance, Plan


@dataclass(frozen=True)
class Serve:
    """One `vllm serve` process."""

    argv: tuple[str, ...]               # after `vllm serve`
    devices: tuple[int, ...] | None     # ASCEND_RT_VISIBLE_DEVICES (logical ids), None: all of the container's
    port: int | None                    # its OpenAI port, None for a headless process
    engines: int                        # DP engine cores it runs (each logs one "init engine" line)


@dataclass(frozen=True)
class NodeLaunch:
    serves: tuple[Serve, ...]
    proxy: tuple[str, ...] | None = None    # the proxy's argv (after the script), on the prefill master
    mooncake: bool = False                  # pd-split: Mooncake's libraries on LD_LIBRARY_PATH
    endpoints: tuple[tuple[str, int], ...] = field(default=())   # the API endpoints of this node


def _json(doc: dict) -> str:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def kv_base(plan: Plan) -> int:
    """Above Mooncake's random ports [20000, 20000 + 1000 x NPUs): 28000 with 8 NPUs, 36000 with 16
    (pd_disaggregation_mooncake_multi_node.md@HEAD; mindcluster-deploy role.yaml.j2 uses the same)."""
    base = cast(VllmAscendSettings, plan.inventory.engine).ports.kv_base
    return base if base is not None else (28000 if plan.inventory.devices_per_node == 8 else 36000)


def kv_transfer(plan: Plan, inst: Instance) -> dict[str, Any]:
    version = plan.engine.version
    pd = feature("pd_mooncake", version)
    # unique per instance in the deployment: its place in the plan (the order made once per plan)
    engine_id = plan.memo(("instance-order",), lambda: {i.name: k for k, i in enumerate(plan.instances)})[inst.name]
    # every instance of a role has the same shape (support.py refuses others): the first one speaks for all
    prefill, decode = plan.role("prefill")[0].degrees, plan.role("decode")[0].degrees
    connector = connector_of(plan)
    doc: dict[str, Any] = {
        "kv_connector": connector, "kv_role": "kv_producer" if inst.role == "prefill" else "kv_consumer",
        "kv_port": str(kv_base(plan) + 100 * engine_id), "engine_id": str(engine_id),
        "kv_connector_extra_config": {
            "prefill": {"dp_size": prefill.dp, "tp_size": prefill.tp},
            "decode": {"dp_size": decode.dp, "tp_size": decode.tp}}}
    if "use_ascend_direct" in pd:    # only where the version's connector reads it (support.yaml pd_mooncake)
        doc["kv_connector_extra_config"]["use_ascend_direct"] = pd["use_ascend_direct"] in (True, "yes")
    if "module_path" in pd and cast(VllmAscendSettings, plan.inventory.engine).connector is None:
        doc["kv_connector_module_path"] = pd["module_path"]
    return doc


def connector_of(plan: Plan) -> str:
    """engine.connector, else the model family's (support.yaml families: pd_connector), else the version's."""
    from deployctl.core.engines.vllm_ascend.support import family_entry

    own = cast(VllmAscendSettings, plan.inventory.engine).connector
    family = family_entry(plan.inventory).get("pd_connector", {})
    return own or family.get("value") or feature("pd_mooncake", plan.engine.version).get("connector",
                                                                                         "MooncakeConnectorV1")


def common_args(plan: Plan, inst: Instance) -> list[str]:
    from deployctl.core.input.roles import for_role
    from deployctl.core.sizing.limits import max_prefill_tokens

    inv = for_role(plan.inventory, inst.role)      # a pd-split role's own limits, memory share, additional-config
    m, e = inv.model, cast(VllmAscendSettings, inv.engine)
    args = [m.weights_path, "--served-model-name", m.served_name, "--max-model-len", str(m.max_seq_len),
            "--max-num-seqs", str(m.max_batch_size),
            "--max-num-batched-tokens", str(max_prefill_tokens(inv, inst.role)),
            "--gpu-memory-utilization", str(e.gpu_memory_utilization), "--trust-remote-code"]
    if m.quant != "bf16":
        args += ["--quantization", "ascend"]       # modelslim weights (DeepSeek-V3.2.md §5.2)
    if e.additional_config:
        args += ["--additional-config", _json(e.additional_config)]
    if m.speculative is not None:
        args += ["--speculative-config", _json(speculative_config(m.speculative))]
    return args


def speculative_config(spec: Speculative) -> dict[str, Any]:
    """model.speculative as vLLM's --speculative-config, as vllm-ascend's CI passes it: MTP
    `{"num_speculative_tokens": 1, "method":"mtp"}` (examples/external_online_dp/run_dp_template.sh L32), EAGLE3
    `{"method":"eagle3", "model":<draft>, "num_speculative_tokens":3}` (nightly Kimi-K2_5-W4A8-A2-dual-nodes.yaml
    L44); the same value on P and D. validate.py checks the version's parser has the flag."""
    doc: dict[str, Any] = {"method": spec.method, "num_speculative_tokens": spec.tokens}
    if spec.draft_weights_path is not None:
        doc["model"] = spec.draft_weights_path
    return doc


def _flag_groups(version: str, args: list[str]) -> list[tuple[str | None, list[str]]]:
    """engine.args as (canonical option, [flag, value...]) groups, read with the version's parser table."""
    from deployctl.core.engines.vllm_ascend.catalog import option, takes_value

    out, args, i = [], list(args), 0
    while i < len(args):
        flag, eq, _ = args[i].partition("=")
        n = 2 if flag.startswith("-") and takes_value(version, flag) and not eq else 1
        out.append((option(version, flag), args[i:i + n]))
        i += n
    return out


def extra_args(plan: Plan, inst: Instance) -> list[str]:
    """engine.args, then a pd-split role's own args (layout.<role>.engine.args); a flag both set is passed once,
    with the role's value (`--enforce-eager` on prefill, `--compilation-config` on decode, as vllm-ascend's PD CI
    configs run them)."""
    from deployctl.core.engines.vllm_ascend.catalog import known
    from deployctl.core.input.roles import role_block

    block = role_block(plan.inventory, inst.role)
    own = list((block.engine if block is not None else {}).get("args", []))
    if not own:
        return list(cast(VllmAscendSettings, plan.inventory.engine).args)
    version = known(plan.engine.version)
    mine = {canon for canon, _ in _flag_groups(version, own) if canon is not None}
    kept = [word for canon, group in _flag_groups(version, cast(VllmAscendSettings, plan.inventory.engine).args)
            if canon not in mine
            for word in group]
    return kept + own


def _dp_args(plan: Plan, inst: Instance, master_ip: str) -> list[str]:
    d = inst.degrees
    return ["--data-parallel-size", str(d.dp), "--data-parallel-address", master_ip,
            "--data-parallel-rpc-port", str(cast(VllmAscendSettings, plan.inventory.engine).ports.dp_rpc)]


def _ep(plan: Plan, inst: Instance) -> list[str]:
    return ["--enable-expert-parallel"] if is_moe(plan) and inst.degrees.moe_ep > 1 else []


def _instance_launch(plan: Plan, inst: Instance) -> dict[str, NodeLaunch]:
    """One instance's nodes; where its role turns NetLoader on, every `vllm serve` ends with its flags
    (netloader.py; Plan.weight_peers is read only then)."""
    import dataclasses

    from deployctl.core.engines.vllm_ascend.netloader import loader_args, settings

    out = _shape_launch(plan, inst)
    if not settings(plan.inventory, inst.role).enabled:
        return out
    for k, name in enumerate(inst.nodes):
        out[name] = dataclasses.replace(out[name], serves=tuple(
            dataclasses.replace(s, argv=s.argv + loader_args(plan, inst, k, s.devices)) for s in out[name].serves))
    return out


def _shape_launch(plan: Plan, inst: Instance) -> dict[str, NodeLaunch]:
    inv = plan.inventory
    e, d = cast(VllmAscendSettings, inv.engine), inst.degrees
    per = inv.devices_per_node
    master = plan.node(inst.master).container_ip
    base = common_args(plan, inst) + ["--tensor-parallel-size", str(d.tp)] + _ep(plan, inst)
    pd = inst.role != "mixed"
    if pd:
        base += ["--kv-transfer-config", _json(kv_transfer(plan, inst))]
        if connector_of(plan) == "MooncakeHybridConnector":
            # it moves each of the hybrid manager's cache groups, which vLLM turns off under a KV connector unless
            # told not to (DeepSeek-V4's CI configs pass the flag on both roles: vllm-ascend@182b75ea
            # tests/e2e/nightly/multi_node/external_dp/config/DeepSeek-V4-flash-w8a8-PD-prefix.yaml L84, L140)
            base += ["--no-disable-hybrid-kv-cache-manager"]
    extra = extra_args(plan, inst)
    out: dict[str, NodeLaunch] = {}
    for k, name in enumerate(inst.nodes):
        ip = plan.node(name).container_ip
        if d.pp > 1:    # TP/PP across nodes, multiprocessing backend
            argv = base + ["--pipeline-parallel-size", str(d.pp), "--nnodes", str(len(inst.nodes)),
                           "--node-rank", str(k), "--master-addr", master, "--master-port", str(e.ports.master)]
            serve = Serve(tuple(argv + (["--host", ip, "--port", str(e.ports.api)] if k == 0 else ["--headless"])
                                + extra), None, e.ports.api if k == 0 else None, 1 if k == 0 else 0)
            out[name] = NodeLaunch((serve,), mooncake=pd, endpoints=((ip, e.ports.api),) if k == 0 else ())
            continue
        local = per // d.tp
        if pd and feature("pd_mooncake", plan.engine.version).get("launch") == "external":
            serves: list[Serve] = []
            for j in range(local):
                rank, port = k * local + j, e.ports.api + j
                argv = base + _dp_args(plan, inst, master) + ["--data-parallel-rank", str(rank),
                                                              "--host", ip, "--port", str(port)]
                serves.append(Serve(tuple(argv + extra), tuple(range(j * d.tp, (j + 1) * d.tp)), port, 1))
            out[name] = NodeLaunch(tuple(serves), mooncake=True,
                                   endpoints=tuple((ip, cast(int, s.port)) for s in serves))   # each has its port
            continue
        argv = list(base)
        if d.dp > 1:
            argv += _dp_args(plan, inst, master) + ["--data-parallel-size-local", str(local)]
            if k > 0:
                argv += ["--data-parallel-start-rank", str(k * local)]
        argv += ["--host", ip, "--port", str(e.ports.api)] if k == 0 else ["--headless"]
        out[name] = NodeLaunch((Serve(tuple(argv + extra), None, e.ports.api if k == 0 else None,
                                      local if d.dp > 1 else 1),), mooncake=pd,
                               endpoints=((ip, e.ports.api),) if k == 0 else ())
    return out


def node_launch(plan: Plan, name: str) -> NodeLaunch:
    """One node's launch: only its instance is laid out, unless it is the proxy's node (which lists every
    endpoint), so asking every node in turn stays linear in the nodes."""
    node = plan.node(name)
    if node.runs_router:
        return launches(plan)[name]
    return _instance_launch(plan, plan.instance(node.instance))[name]


def launches(plan: Plan) -> dict[str, NodeLaunch]:
    """Every node's launch; the prefill master also runs the proxy listing every P and D endpoint (made once per
    plan: its port checks and its render read it; a fresh dict each call)."""
    return dict(plan.memo(("vllm-launches",), lambda: _launches(plan)))


def _launches(plan: Plan) -> dict[str, NodeLaunch]:
    out: dict[str, NodeLaunch] = {}
    for inst in plan.instances:
        out.update(_instance_launch(plan, inst))
    router = next((n for n in plan.nodes if n.runs_router), None)
    if router is not None:
        launch = out[router.name]
        out[router.name] = NodeLaunch(launch.serves, proxy_argv(plan, out), launch.mooncake, launch.endpoints)
    return out


def proxy_argv(plan: Plan, every: dict[str, NodeLaunch], leave_out: AbstractSet[str] = frozenset()) -> tuple[str, ...]:
    """The P/D proxy's argv (after the script): the API endpoints of every P and D instance not in ``leave_out``
    (instance names), ``every`` being ``launches(plan)``. The proxy learns its servers only from this argv, at
    start (load_balance_proxy_server_example.py@v0.13.0 parse_args L438-454, lifespan L487-490): where it has no
    safe /instances/remove (support.yaml ``proxy_instances_api``: 0.11, 0.13), restarting it with the live
    instances is how it stops sending to a dead one (docs/dev/router.md). A role left without an instance is refused:
    the proxy needs at least one P and one D (nargs="+")."""
    names = {i.name for i in plan.instances}
    unknown = sorted(set(leave_out) - names)
    # the instances scale added join through POST /instances/add (control.py), not this argv: the proxy's start
    # file stays as the inventory's own instances make it, so adding one restarts nothing
    leave_out = set(leave_out) | set(plan.joined)
    if unknown:
        raise ValueError(f"not instances of this plan: {', '.join(unknown)}")
    router = next(n for n in plan.nodes if n.runs_router)
    ends = {r: [ep for i in plan.role(r) if i.name not in leave_out for n in i.nodes for ep in every[n].endpoints]
            for r in ("prefill", "decode")}
    empty = [r for r in ("prefill", "decode") if not ends[r]]
    if empty:
        raise ExecutionError(f"the P/D proxy cannot run without a {' or '.join(empty)} instance "
                             f"(left out: {', '.join(sorted(leave_out))})",
                             hint="the role has no other instance: recovery restarts it; the proxy keeps its list")
    return ("--host", router.container_ip, "--port", str(cast(VllmAscendSettings, plan.inventory.engine).ports.proxy),
            "--prefiller-hosts", *[h for h, _ in ends["prefill"]],
            "--prefiller-ports", *[str(p) for _, p in ends["prefill"]],
            "--decoder-hosts", *[h for h, _ in ends["decode"]],
            "--decoder-ports", *[str(p) for _, p in ends["decode"]])
