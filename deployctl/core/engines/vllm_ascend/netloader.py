"""Loading weights from a running peer: vLLM-Ascend's NetLoader (engine.netloader).

Sources: VA = vllm-project/vllm-ascend@182b75ea; NL = vllm_ascend/model_loader/netloader/netloader.py there,
EL = .../netloader/interaction/elastic.py there, DOC = docs/source/user_guide/feature_guide/netloader.md there.

* `--load-format netloader --model-loader-extra-config '<JSON object>'` (DOC L36-46). Keys rendered: LISTEN_PORT
  (every instance: the base port of its own weight servers), SOURCE (only an instance started while live peers of
  its role are named in Plan.weight_peers), INT8_CACHE (only when not the default "no"). MODEL is not rendered:
  the match is on the model path, which defaults to --model (NL L272-274) and is the same weights_path on every
  instance of a role (at HEAD the server and client even pass model_config.model, NL L375, L502).
* Every netloader instance starts a weight server per rank once its weights are loaded, from disk or from a peer
  (NL L428-512): so the first instance loads from disk and seeds the rest. The server of rank r binds
  vllm.utils.network_utils.get_ip() (NL L433-435): VLLM_HOST_IP when set, else the source address of a route to
  8.8.8.8 (vllm-project/vllm@0c175ae9 vllm/utils/network_utils.py get_ip). deployctl sets VLLM_HOST_IP to the
  node's IP (the HCCL_IF_IP it already renders) on the nodes of a role that turns NetLoader on, so the address it
  names in a new instance's SOURCE is the one the peer listens on; port LISTEN_PORT + r (NL L454), a draft/MTP
  model's LISTEN_PORT + r + 10000 (NL L39, L455-456; a client adds the same offset to the sources, L350-364).
* r is torch.distributed.get_rank() (NL L276): vLLM's global rank, dp_rank x (tp x pp) + pp_rank x tp + tp_rank
  (vllm-project/vllm@0c175ae9 vllm/distributed/parallel_state.py init_distributed_environment offsets the rank by
  data_parallel_rank x world_size; line unverified). In every launch shape deployctl renders, node k of an
  instance holds ranks k x devices_per_node + its logical device ids (launch.py), so an instance's rank r sits on
  the same node index and device in every instance of the role.
* A server accepts a client only when rank, model path, TP and PP are equal (EL L459-464; INT8_CACHE too,
  L465-471); a client tries its rank's sources in order (EL L123-152) and any failure falls back to the disk
  loader (NL L388-413, revert_to_default L536). deployctl's instances of one role are identical (one layout per
  role, support.py refuses others; same weights_path, same engine settings), so every live instance of the role
  qualifies; instances of the other role do not (their TP may differ, and quantized layouts are post-processed per
  role: MindIE-Motor matches the role too, docs/zh/user_guide/features/startup_acceleration.md@0363f5e3).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, cast

from deployctl.core.engine_spec.protocol import Finding
from deployctl.core.models.engine_settings.vllm_ascend import NetLoader, VllmAscendSettings

if TYPE_CHECKING:
    from deployctl.core.errors import Problem
    from deployctl.core.input.raw import KeyPath, RawInventory
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Instance, Plan, PlanNode

DOC = "VA docs/source/user_guide/feature_guide/netloader.md@182b75ea"
# the first release with NetLoader: #2888 (427b17e2), first tagged v0.12.0rc1 (support.yaml features.netloader)
FIRST = (0, 12)
DRAFT_PORT_OFFSET = 10000      # NL L39
HCCL_BUFFER_MB = 200           # "HCCL_BUFFERSIZE, default ~200 MB", reserved via --gpu-memory-utilization (DOC L96)
FLAGS = ("--load-format", "--model-loader-extra-config")     # what deployctl renders when it is on


def settings(inv: Inventory, role: str) -> NetLoader:
    """engine.netloader as the instances of ``role`` see it (a pd-split role's own over the engine block's)."""
    from deployctl.core.input.roles import for_role

    return cast(VllmAscendSettings, for_role(inv, role).engine).netloader


def key_of(inv: Inventory, role: str) -> str:
    """Where ``role``'s NetLoader settings are written: its own layout.<role>.engine.netloader, else the engine's."""
    from deployctl.core.input.roles import role_block

    block = role_block(inv, role)
    return f"layout.{role}.engine.netloader" if block is not None and "netloader" in (block.engine or {}) else \
        "engine.netloader"


def roles_on(inv: Inventory) -> list[str]:
    roles = ("prefill", "decode") if inv.layout.preset == "pd-split" else ("mixed",)
    return [r for r in roles if settings(inv, r).enabled]


def serve_ranks(plan: Plan, inst: Instance, k: int, devices: tuple[int, ...] | None) -> tuple[int, ...]:
    """vLLM's global ranks of one `vllm serve` on node k of ``inst``: k x devices per node + its logical devices
    (``devices``: its slice with external DP; None: the first min(devices per node, world size) of the
    container)."""
    per = plan.inventory.devices_per_node
    d = inst.degrees
    local = devices if devices is not None else range(min(per, d.tp * d.pp * d.dp))
    return tuple(k * per + x for x in local)


def peers(plan: Plan, inst: Instance) -> list[Instance]:
    """The live instances the caller named for ``inst`` (Plan.weight_peers), checked: instances of this plan, not
    ``inst`` itself, of its role. Same role is enough for NetLoader's match (rank, model path, TP, PP): deployctl
    lays out every instance of a role alike and gives them one weights_path; the degrees are compared anyway."""
    names = plan.weight_peers.get(inst.name, ())
    known = {i.name for i in plan.instances}
    unknown = sorted(set(names) - known)
    if unknown:
        raise ValueError(f"weight peers of {inst.name} are not instances of this plan: {', '.join(unknown)}")
    out = []
    for name in dict.fromkeys(names):
        peer = plan.instance(name)
        if peer.name == inst.name:
            raise ValueError(f"{inst.name} cannot load its weights from itself")
        if peer.role != inst.role or peer.degrees != inst.degrees or len(peer.nodes) != len(inst.nodes):
            raise ValueError(f"{inst.name} ({inst.role}) cannot load its weights from {peer.name} ({peer.role}): "
                             "NetLoader serves only an instance of the same shape (rank, model path, TP, PP)")
        out.append(peer)
    return out


def extra_config(plan: Plan, inst: Instance, k: int, ranks: tuple[int, ...]) -> dict:
    """--model-loader-extra-config of one `vllm serve` (DOC L38-46): its LISTEN_PORT and, with live peers, for
    each of its ranks the peers' weight servers of that rank, in the caller's order (EL L123: tried in order)."""
    nl = settings(plan.inventory, inst.role)
    doc: dict = {"LISTEN_PORT": nl.listen_port}
    if nl.int8_cache != "no":
        doc["INT8_CACHE"] = nl.int8_cache
    live = peers(plan, inst)
    if live:
        # the peer's rank r is on its node k too (same shape) and listens on the same role's listen_port + r
        doc["SOURCE"] = [{"device_id": r, "sources": [f"{plan.node(p.nodes[k]).container_ip}:{nl.listen_port + r}"
                                                      for p in live]} for r in ranks]
    return doc


def loader_args(plan: Plan, inst: Instance, k: int, devices: tuple[int, ...] | None) -> tuple[str, ...]:
    """What one `vllm serve` on node k of ``inst`` adds where its role turns NetLoader on (launch.py appends it),
    the config serialised from a dict (compact, keys sorted, as launch.py's other JSON flags)."""
    if not settings(plan.inventory, inst.role).enabled:
        return ()
    doc = extra_config(plan, inst, k, serve_ranks(plan, inst, k, devices))
    return ("--load-format", "netloader",
            "--model-loader-extra-config", json.dumps(doc, separators=(",", ":"), sort_keys=True))


def node_env(plan: Plan, node: PlanNode) -> dict[str, str]:
    """VLLM_HOST_IP = the node's IP where NetLoader is on: the weight servers bind get_ip() (NL L433-435), which
    reads it first; the GLM-5.2 guide sets it the same way (VA docs/source/tutorials/models/GLM5.2.md L1098)."""
    return {"VLLM_HOST_IP": node.container_ip} if settings(plan.inventory, node.role).enabled else {}


def draft_served(plan: Plan) -> bool:
    from deployctl.core.engines.vllm_ascend.support import feature

    return plan.inventory.model.speculative is not None and \
        feature("netloader", plan.engine.version).get("draft_models") == "yes"


def port_spans(plan: Plan, role: str, ranks: list[int]) -> list[tuple[int, int, str]]:
    """The ports the weight servers of ``ranks`` take (ports.py checks them against the rest of the port plan)."""
    nl = settings(plan.inventory, role)
    if not nl.enabled or not ranks:
        return []
    lo, hi = nl.listen_port + min(ranks), nl.listen_port + max(ranks)
    out = [(lo, hi, f"the weight servers {lo}-{hi} (engine.netloader.listen_port + rank)")]
    if draft_served(plan):
        d = DRAFT_PORT_OFFSET
        out.append((lo + d, hi + d, f"the draft model's weight servers {lo + d}-{hi + d} (listen_port + rank + {d})"))
    return out


def findings(plan: Plan) -> list[Finding]:
    """Ports past 65535, the HBM left outside vLLM's share for NetLoader's HCCL buffer, draft models on versions
    that load them from disk (ports.py checks the ports against the others and Mooncake's)."""
    from deployctl.core.engines.vllm_ascend.support import feature

    out: list[Finding] = []
    for role in roles_on(plan.inventory):
        nl = settings(plan.inventory, role)
        path = key_of(plan.inventory, role)
        insts = plan.role(role)
        top = nl.listen_port + max(i.world_size for i in insts) - 1 + (DRAFT_PORT_OFFSET if draft_served(plan) else 0)
        if top > 65535:
            out.append(Finding("error", f"{path}.listen_port", f"the weight server of the last rank would listen on "
                               f"{top}, past 65535: vLLM-Ascend skips servers it cannot open, so no instance could "
                               "load from this one", f"{DOC} L42; NL L457-462",
                               hint=f"set {path}.listen_port to {nl.listen_port - (top - 65535)} or less"))
        for inst in insts[:1]:          # one shape per role: the first speaks for all
            fit = inst.memory
            left = fit.hbm_gb * (1 - fit.memory_fraction)
            if left * 1e9 < HCCL_BUFFER_MB * 2**20:
                out.append(Finding("error", f"{path}.enabled", f"NetLoader builds an HCCL communicator (~"
                                   f"{HCCL_BUFFER_MB} MB of buffer) outside vLLM's {fit.fraction_name} share, and "
                                   f"{fit.memory_fraction} leaves {left:.2f} GB of the die", f"{DOC} L96",
                                   hint="lower gpu_memory_utilization"))
        if plan.inventory.model.speculative is not None and \
                feature("netloader", plan.engine.version).get("draft_models") != "yes":
            out.append(Finding("warning", f"{path}.enabled", f"vLLM-Ascend {plan.engine.version} loads a draft/MTP "
                               "model with NetLoader only from v0.21.0rc1: what this version does with the draft "
                               "model's weights under --load-format netloader is unverified",
                               "VA docs/source/user_guide/release_notes.md@182b75ea L308 (#9893)",
                               hint="use vLLM-Ascend 0.23 with speculative decoding"))
    return out


def memory_notes(inv: Inventory) -> tuple[str, ...]:
    """What the plan's memory fit says of NetLoader (``inv``: the role's view, as the spec's memory() gets it): its
    HCCL buffer lives outside vLLM's --gpu-memory-utilization share, so the note says how much the share leaves;
    findings() refuses a share that leaves less than the buffer."""
    nl = cast(VllmAscendSettings, inv.engine).netloader
    if not nl.enabled:
        return ()
    util = cast(VllmAscendSettings, inv.engine).gpu_memory_utilization
    left = inv.cluster.hbm_gb * 2**30 * (1 - util) / 1e9
    return (f"NetLoader's weight-transfer HCCL buffer (~{HCCL_BUFFER_MB} MB) is allocated outside vLLM's share: "
            f"--gpu-memory-utilization {util} leaves {left:.2f} GB of the die ({DOC} L96)",)


def _version(version: str | None) -> tuple[int, ...] | None:
    m = re.match(r"^(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def problems(inv: Inventory, raw: RawInventory) -> list[Problem]:
    """Inventory refusals: NetLoader on a version without it, the flags deployctl then renders set by hand, and a
    VLLM_HOST_IP of the user's (the weight servers bind it; deployctl names the node's IP to peers)."""
    from deployctl.core.engine_spec.protocol import version_from
    from deployctl.core.engines.vllm_ascend.support import feature
    from deployctl.core.input.envcheck import env_sources
    from deployctl.core.input.roles import ROLES, role_block

    e = cast(VllmAscendSettings, inv.engine)
    blocks: list[tuple[KeyPath, dict, bool]] = [(("engine",), {"args": e.args}, e.netloader.enabled)]
    for role in ROLES:
        block = role_block(inv, role)
        if block is not None:
            own = block.engine or {}
            on = (own.get("netloader") or {}).get("enabled", e.netloader.enabled)
            blocks.append((("layout", role, "engine"), own, bool(on)))
    if not any(on for _, _, on in blocks):
        return []
    out = []
    version = version_from(inv.engine).version
    v = _version(version)
    if v is not None and v < FIRST:
        where = next(path for path, own, on in blocks if on and (path == ("engine",) or "netloader" in own))
        f = feature("netloader", version)
        out.append(raw.problem(where + ("netloader", "enabled"), f"vLLM-Ascend {version} has no NetLoader "
                               f"(--load-format netloader) [source: {f.get('source', '')}]",
                               "use a vLLM-Ascend 0.12 or later image (e.g. quay.io/ascend/vllm-ascend:v0.13.0), "
                               "or turn engine.netloader off"))
    from deployctl.core.engines.vllm_ascend.catalog import known, option

    for path, own, on in blocks:
        args = [str(a) for a in own.get("args") or []]
        for i, arg in enumerate(args):      # engine.args reach every role's argv: checked when any role is on
            flag = arg.partition("=")[0]
            if (on or path == ("engine",)) and flag.startswith("-") and (option(known(version), flag) or flag) in FLAGS:
                out.append(raw.problem(path + ("args", i), f"{flag} is set by deployctl when engine.netloader is "
                                       "on", "remove it from the args (engine.netloader's keys set what it "
                                       "renders)"))
    for path, env in env_sources(inv):
        if "VLLM_HOST_IP" in env:
            out.append(raw.problem(path + ("VLLM_HOST_IP",), "VLLM_HOST_IP is computed per node by deployctl when "
                                   "engine.netloader is on (the weight servers bind it; peers are told the node's IP)",
                                   "remove it: the node's IP is used (nodes[].address or preflight's facts)"))
    return out
