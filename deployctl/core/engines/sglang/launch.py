"""What every SGLang node launches: one `python3 -m sglang.launch_server` with its argv, and on the first prefill
server's master, in a P/D split, the router in front (`python3 -m sglang_router.launch_router --pd-disaggregation`).
Pure: Plan -> NodeLaunch per node.

The shapes of SGLang's Ascend guides (sgl-project/sglang@40946a20 docs/docs/hardware-platforms/ascend-npus/
model-deployment/best-practices/deepseek_r1.mdx, "BP" below):

* one server per instance; over several nodes each node runs the same argv with its own --node-rank, --nnodes and
  --dist-init-addr <the server's first node>:<port> (BP L466-474); the HTTP server is node rank 0's;
* attention DP inside a MoE server: --tp-size = every rank of the server, --dp-size = the DP groups with
  --enable-dp-attention (BP L470-478), or --attn-dp-size on releases where that flag replaces them (0.5.22+:
  sglang 0.5.23 server_args.py L417-424); experts over every rank with DeepEP (--moe-a2a-backend deepep, BP L430);
  a dense model's --dp-size is that many replicas of --tp-size ranks;
* attention context parallel on a P/D prefill server: --tp-size = every rank, --attn-cp-size = the layout's cp
  (SGLang's DeepSeek-V3.2 guide: `--nnodes 2 --tp 32 --attn-cp-size 32`, support.CP_SOURCE), its strategy
  (--enable-prefill-cp --cp-strategy) from the role's engine.args;
* P/D: --disaggregation-mode prefill|decode with the ascend (MemFabric) transfer backend, prefill server i on
  bootstrap port base + i (BP L419, `$((8998 + $i))`), the router told each (BP L514-523).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AbstractSet, cast

from deployctl.core.engines.sglang.catalog import groups, known, option, table
from deployctl.core.errors import ExecutionError
from deployctl.core.models.engine_settings.sglang import SglangSettings

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Speculative
    from deployctl.core.models.plan import Instance, Plan

# flags deployctl renders with a default the inventory's engine.args may replace (the user's value is used instead)
DEFAULTED = ("--attention-backend", "--moe-a2a-backend", "--deepep-mode", "--device", "--enable-dp-attention")


@dataclass(frozen=True)
class Server:
    """One `python3 -m sglang.launch_server` (argv after it)."""

    argv: tuple[str, ...]
    port: int | None            # its HTTP port: node rank 0 of the server only
    rank: int = 0               # --node-rank


@dataclass(frozen=True)
class NodeLaunch:
    server: Server
    router: tuple[str, ...] | None = None     # the router's argv (after the module), on the router node
    endpoints: tuple[tuple[str, int], ...] = field(default=())   # the HTTP endpoint of this node (rank 0)


def extra_args(plan: Plan, inst: Instance) -> list[str]:
    """engine.args, then the role's own layout.<role>.engine.args; a flag both set is passed once, the role's."""
    from deployctl.core.input.roles import role_block

    release = known(plan.engine.version)
    base = list(cast(SglangSettings, plan.inventory.engine).args)
    block = role_block(plan.inventory, inst.role)
    own = list((block.engine if block is not None else {}).get("args", []))
    mine = {c for c, _ in groups(release, own) if c is not None}
    return [w for c, g in groups(release, base) if c not in mine for w in g] + own


def speculative_args(spec: Speculative, tokens: int) -> list[str]:
    from deployctl.core.engines.sglang.support import matrix

    out = ["--speculative-algorithm", matrix()["speculative"][spec.method], "--speculative-num-steps", str(tokens),
           "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(tokens + 1)]
    if spec.draft_weights_path is not None:
        out += ["--speculative-draft-model-path", spec.draft_weights_path]
    return out


def _dp_attention(release: str, dp: int) -> list[str]:
    if table(release)["options"].get("--enable-dp-attention", {}).get("deprecated") and \
            option(release, "--attn-dp-size"):
        return ["--attn-dp-size", str(dp)]
    return ["--dp-size", str(dp), "--enable-dp-attention"]


def bootstrap_port(plan: Plan, inst: Instance) -> int:
    e = cast(SglangSettings, plan.inventory.engine)
    return e.ports.bootstrap + [i.name for i in plan.role("prefill")].index(inst.name)


def _server_args(plan: Plan, inst: Instance) -> list[str]:
    """The argv every node of the instance shares (the per-node flags come after)."""
    from deployctl.core.engines.sglang.support import entry, is_moe, matrix
    from deployctl.core.input.roles import for_role
    from deployctl.core.sizing.limits import max_prefill_tokens

    inv = for_role(plan.inventory, inst.role)
    m, e, d = inv.model, cast(SglangSettings, inv.engine), inst.degrees
    release = known(plan.engine.version)
    data = matrix()
    found, _ = entry(inv)
    moe = is_moe(inv)
    args = ["--model-path", m.weights_path, "--served-model-name", m.served_name, "--trust-remote-code",
            "--device", "npu", "--attention-backend", found.get("attention_backend", "ascend")]
    if moe or d.dp == 1:
        args += ["--tp-size", str(d.tp * d.dp * d.cp)] + (_dp_attention(release, d.dp) if d.dp > 1 else [])
    else:   # a dense model's DP: replicas of tp ranks each
        args += ["--tp-size", str(d.tp), "--dp-size", str(d.dp)]
    if d.cp > 1:    # a P/D prefill server's attention context parallel (support.CP_SOURCE; refused elsewhere)
        args += ["--attn-cp-size", str(d.cp)]
    if moe and d.moe_ep > 1:
        args += ["--moe-a2a-backend", "deepep", "--deepep-mode", data["pd"]["deepep_mode"][inst.role]]
    # model.max_batch_size is per DP group, as for every engine (the plan and the estimate read it so); SGLang's
    # --max-running-requests is the server's, each attention-DP scheduler taking its share (sglang 0.5.23
    # srt/mem_cache/kv_cache_configurator.py L3119-3129: max_running_requests // attn_dp_size); a dense model's DP
    # replicas each take the whole value
    running = m.max_batch_size * (d.dp if moe else 1)
    args += ["--mem-fraction-static", str(e.mem_fraction_static), "--context-length", str(m.max_seq_len),
             "--max-running-requests", str(running),
             "--max-prefill-tokens", str(max_prefill_tokens(inv, inst.role))]
    quant = data["quant_flags"].get(m.quant, "")
    if quant:
        args += ["--quantization", quant]
    if m.speculative is not None:
        args += speculative_args(m.speculative, m.speculative.tokens)
    if inst.role != "mixed":
        args += ["--disaggregation-mode", inst.role, "--disaggregation-transfer-backend", e.transfer_backend]
        if inst.role == "prefill":
            args += ["--disaggregation-bootstrap-port", str(bootstrap_port(plan, inst))]
    args.append("--enable-metrics")     # /metrics for `observe`, `watch` and `bench` (off by default in SGLang)
    return args


def _with_extra(release: str, derived: list[str], extra: list[str]) -> list[str]:
    """derived + extra, where an extra flag replaces a DEFAULTED derived one."""
    theirs = {c for c, _ in groups(release, extra) if c in DEFAULTED}
    kept = [w for c, g in groups(release, derived) if c not in theirs for w in g]
    return kept + extra


def instance_launch(plan: Plan, inst: Instance) -> dict[str, NodeLaunch]:
    from deployctl.core.input.roles import for_role

    e = cast(SglangSettings, for_role(plan.inventory, inst.role).engine)   # a role's own ports (layout.<role>.engine)
    release = known(plan.engine.version)
    base = _server_args(plan, inst)
    extra = extra_args(plan, inst)
    master = plan.node(inst.master).container_ip
    out: dict[str, NodeLaunch] = {}
    order = [inst.master] + [n for n in inst.nodes if n != inst.master]
    for k, name in enumerate(order):
        ip = plan.node(name).container_ip
        argv = base + ["--host", ip, "--port", str(e.ports.api)]
        if len(order) > 1:
            argv += ["--nnodes", str(len(order)), "--node-rank", str(k), "--dist-init-addr",
                     f"{master}:{e.ports.dist_init}"]
        port = e.ports.api if k == 0 else None
        out[name] = NodeLaunch(Server(tuple(_with_extra(release, argv, extra)), port, k),
                               endpoints=((ip, e.ports.api),) if k == 0 else ())
    return out


def router_argv(plan: Plan, every: dict[str, NodeLaunch], leave_out: AbstractSet[str] = frozenset()) -> tuple[str, ...]:
    """The P/D router's argv: every prefill server with its bootstrap port and every decode server not in
    ``leave_out`` (instance names); the router learns its workers from this argv at start."""
    e = cast(SglangSettings, plan.inventory.engine)
    names = {i.name for i in plan.instances}
    unknown = sorted(set(leave_out) - names)
    if unknown:
        raise ValueError(f"not instances of this plan: {', '.join(unknown)}")
    # the instances scale added join through POST /workers (control.py), not this argv: adding one restarts nothing
    leave_out = set(leave_out) | set(plan.joined)
    router = next(n for n in plan.nodes if n.runs_router)
    argv = ["--pd-disaggregation"]
    ends = {"prefill": 0, "decode": 0}
    for role in ("prefill", "decode"):
        for inst in plan.role(role):
            if inst.name in leave_out:
                continue
            host, port = every[inst.master].endpoints[0]
            argv += ["--prefill", f"http://{host}:{port}", str(bootstrap_port(plan, inst))] if role == "prefill" \
                else ["--decode", f"http://{host}:{port}"]
            ends[role] += 1
    empty = [r for r, n in ends.items() if not n]
    if empty:
        raise ExecutionError(f"the SGLang router cannot run without a {' or '.join(empty)} server (left out: "
                             f"{', '.join(sorted(leave_out))})", hint="recovery restarts it; the router keeps its list")
    return tuple(argv + ["--host", router.container_ip, "--port", str(e.ports.router),
                         "--prometheus-port", str(e.ports.router_metrics)] + list(e.router_args))


def launches(plan: Plan) -> dict[str, NodeLaunch]:
    out: dict[str, NodeLaunch] = {}
    for inst in plan.instances:
        out.update(instance_launch(plan, inst))
    router = next((n for n in plan.nodes if n.runs_router), None)
    if router is not None:
        own = out[router.name]
        out[router.name] = NodeLaunch(own.server, router_argv(plan, out), own.endpoints)
    return out


def node_launch(plan: Plan, name: str) -> NodeLaunch:
    node = plan.node(name)
    if node.runs_router:
        return launches(plan)[name]
    return instance_launch(plan, plan.instance(node.instance))[name]
