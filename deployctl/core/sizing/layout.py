"""Resolve layout presets into per-instance degrees and check them against the nodes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AbstractSet

from deployctl.core import catalog
from deployctl.core.errors import Problem
from deployctl.core.models.plan import Degrees

if TYPE_CHECKING:
    from deployctl.core.input.raw import RawInventory
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.model_info import ModelInfo

ATTN = ("tp", "dp", "pp", "cp")
MOE = ("moe_tp", "moe_ep")
LOCAL_TP = ("o_proj_tp", "lm_head_tp")
# the degree a preset adjusts when the user pins the others (e.g. dp-ep with tp: 1 -> dp = devices / tp)
FREE_DEGREE: dict[str | None, str] = {"single": "tp", "tp-pp": "pp", "dp-ep": "dp", "prefill": "cp", "decode": "dp", "custom": "dp"}


@dataclass
class InstanceSpec:
    name: str
    role: str
    nodes: list[str]
    key: tuple            # key path of the layout block, for error messages
    preset: str | None = None
    degrees: Degrees | None = None
    problems: list[Problem] = field(default_factory=list)


def effective_preset(inv: Inventory) -> str | None:
    from deployctl.core.sizing.instances import groups

    lay = inv.layout
    if lay.preset:
        return lay.preset
    if lay.prefill is not None or lay.decode is not None:
        return "pd-split"
    if any(getattr(lay, d) for d in ATTN + MOE):
        return "custom"   # explicit degrees, no preset: unset degrees are 1 (moe_ep fills the stage)
    if all(len(g.nodes) == 1 for g in groups(inv)):
        return "single"   # one server per instance
    return None


def _symbol(value: int | str, devices: int, per_node: int, nodes: int) -> int:
    if isinstance(value, int):
        return value
    return {"devices": devices, "devices_per_node": per_node, "nodes": nodes}[value]


def _fill(user: dict, preset_row: dict, free: str, devices: int, per_node: int, nodes: int) -> dict:
    deg = {k: _symbol(v, devices, per_node, nodes) for k, v in preset_row.items()}
    deg.update({k: v for k, v in user.items() if v is not None})
    for k in ATTN + MOE:
        deg.setdefault(k, 1)
    # re-derive the free attention degree when the user pinned the others
    if free not in user or user[free] is None:
        others = 1
        for k in ATTN:
            others *= deg[k] if k != free else 1
        if others and devices % others == 0:
            deg[free] = devices // others
    stage = devices // deg["pp"] if deg["pp"] and devices % deg["pp"] == 0 else devices
    moe_tp, moe_ep = user.get("moe_tp"), user.get("moe_ep")
    if moe_tp is not None and moe_ep is None and stage % moe_tp == 0:
        deg["moe_ep"] = stage // moe_tp
    elif moe_ep is not None and moe_tp is None and stage % moe_ep == 0:
        deg["moe_tp"] = stage // moe_ep
    elif moe_tp is None and moe_ep is None:
        # keep the preset's expert TP when it still divides the stage, else pure EP
        keep = deg["moe_tp"] if preset_row and stage % deg["moe_tp"] == 0 else 1
        deg["moe_tp"], deg["moe_ep"] = keep, stage // keep
    return deg


def _check(spec: InstanceSpec, deg: dict, devices: int, per_node: int, model: ModelInfo | None, raw: RawInventory,
           max_servers: int | None = None) -> list[Problem]:
    out = []
    k = spec.key
    product = deg["tp"] * deg["dp"] * deg["pp"] * deg["cp"]
    n = len(spec.nodes)
    where = f"{spec.name} instance ({n} node{'s' if n > 1 else ''} x {per_node} devices)"
    if product != devices:
        free = FREE_DEGREE.get(spec.role if spec.role != "mixed" else spec.preset, "dp")
        others = product // deg[free]
        fix = f"e.g. {free}: {devices // others}" if others and devices % others == 0 else \
            "make the product equal the device count"
        pinned = [d for d in ATTN if (*k, d) in raw.lines]
        at = free if free in pinned else (pinned[0] if pinned else None)
        out.append(raw.problem(k + ((at,) if at else ()),
                               f"tp*dp*pp*cp = {deg['tp']}*{deg['dp']}*{deg['pp']}*{deg['cp']} = {product}, "
                               f"but the {where} has {devices}",
                               f"every device runs exactly one rank: {fix}"))
    if deg["tp"] > per_node or per_node % deg["tp"]:
        out.append(raw.problem(k + ("tp",), f"tp={deg['tp']} does not fit in one server of {per_node} devices",
                               f"TP stays inside one server's HCCS domain: use a divisor of {per_node} "
                               "and scale across servers with dp, pp or moe_ep"))
    if devices % deg["pp"] == 0:
        stage = devices // deg["pp"]
        if deg["moe_tp"] * deg["moe_ep"] != stage:
            out.append(raw.problem(k, f"moe_tp*moe_ep = {deg['moe_tp']}*{deg['moe_ep']} = "
                                   f"{deg['moe_tp'] * deg['moe_ep']}, but one pipeline stage has {stage} devices",
                                   "the experts of each layer are split over all devices of its stage: "
                                   f"make moe_tp*moe_ep = {stage}"))
    if model is not None:
        if deg["pp"] > model.layers:
            out.append(raw.problem(k + ("pp",), f"pp={deg['pp']} exceeds the {model.layers} layers of "
                                   f"{model.display}", "use fewer pipeline stages"))
        if deg["moe_ep"] > 1 and model.routed_experts % deg["moe_ep"]:
            out.append(raw.problem(k + ("moe_ep",), f"moe_ep={deg['moe_ep']} does not divide the "
                                   f"{model.routed_experts} routed experts of {model.display}",
                                   "use a power-of-two node count (EP sizes that divide the expert count)"))
    for name in LOCAL_TP:
        v = deg.get(name)
        if v is not None and (v > per_node or devices % v or per_node % v):
            out.append(raw.problem(k + (name,), f"{name}={v} must divide the {per_node} devices of a server",
                                   f"local TP stays inside one server: use a divisor of {per_node}"))
    limit = max_servers
    if limit and n > limit:
        out.append(raw.problem(k, f"the {spec.name} instance spans {n} servers; the engine accepts at most "
                               f"{limit} in one instance", "split the nodes into more instances"))
    return out


def _role_specs(inv: Inventory) -> list[InstanceSpec]:
    from deployctl.core.sizing.instances import groups

    preset = effective_preset(inv)
    return [InstanceSpec(g.name, g.role, list(g.nodes), ("layout", g.role) if g.role != "mixed" else ("layout",),
                         preset) for g in groups(inv)]


def resolve_instances(inv: Inventory, raw: RawInventory | None = None) -> list[InstanceSpec]:
    """Return one InstanceSpec per instance with degrees filled in (problems attached)."""
    from deployctl.core.input.raw import RawInventory

    raw = raw or RawInventory(data={}, file="<inventory>", base_dir=None)
    preset = effective_preset(inv)
    per_node = inv.devices_per_node
    model = catalog.model_of(inv)
    specs = _role_specs(inv)
    if preset is None:
        specs[0].problems.append(raw.problem(("layout",), "no layout preset and no degrees for a "
                                 f"{len(inv.nodes)}-node cluster",
                                 "set layout.preset to tp-pp, dp-ep or pd-split (or give tp/dp/pp/moe_ep)"))
        return specs
    meta = catalog.layouts().get(preset)
    # a preset's node range is per instance (pd-split: per prefill + decode pair)
    sizes = [len(s.nodes) for s in specs] if preset != "pd-split" else [
        max(len(s.nodes) for s in specs if s.role == "prefill") + max(len(s.nodes) for s in specs if s.role == "decode")]
    many = len(specs) > 1 and preset != "pd-split"
    bad = next((n for n in sizes if meta is not None and not meta.min_nodes <= n <= meta.max_nodes), None)
    if bad is not None:
        assert meta is not None   # a node count is only refused against a known preset
        where = f"each instance has {bad}" if many else f"the inventory has {bad}"
        specs[0].problems.append(raw.problem(("layout", "preset"), f"preset {preset} needs "
                                 f"{meta.min_nodes}-{meta.max_nodes} nodes; {where}",
                                 "pick the preset for your node count: single (1), tp-pp or dp-ep (2+), "
                                 "pd-split (prefill + decode nodes)"))
        return specs
    engine_spec = inv.engine_spec
    for spec in specs:
        block = getattr(inv.layout, spec.role) if spec.role in ("prefill", "decode") else inv.layout
        user = {d: getattr(block, d) for d in ATTN + MOE + LOCAL_TP}
        devices = len(spec.nodes) * per_node
        # the engine may shape a role for its runtime (e.g. prefill CP on one runtime, DP x TP on another)
        row = engine_spec.role_preset(inv, preset, spec.role) or (meta.roles[spec.role] if meta else {})
        free = next((k for k in ("cp", "dp", "pp", "tp") if row.get(k) in ("devices", "nodes")),
                    FREE_DEGREE[spec.role if preset == "pd-split" else preset])
        deg = _fill(user, row, free, devices, per_node, len(spec.nodes))
        spec.problems += _check(spec, deg, devices, per_node, model, raw, inv.engine_spec.max_servers)
        if not spec.problems:
            spec.degrees = Degrees(**{k: deg.get(k) for k in ATTN + MOE + LOCAL_TP})
    return specs


def layout_problems(inv: Inventory, raw: RawInventory, skip_ips: AbstractSet[str] = frozenset()) -> list[Problem]:
    """Static layout checks used by `validate` (degrees, device IPs of multi-node instances).

    Nodes in ``skip_ips`` already have a reported problem with their device IPs (e.g. an unreadable
    hccn_conf); they are not reported again. Missing device IPs are ``NeedsFacts``: preflight discovers them.
    """
    out: list[Problem] = []
    needs_ips = inv.engine_spec.needs_device_ips
    index = {node.name: i for i, node in enumerate(inv.nodes)}
    for spec in resolve_instances(inv, raw):
        out += spec.problems
        if needs_ips and (len(spec.nodes) > 1 or effective_preset(inv) == "pd-split"):
            out += _missing_ips(inv, raw, spec, skip_ips, index)
    return out


def _missing_ips(inv: Inventory, raw: RawInventory, spec: InstanceSpec, skip: AbstractSet[str],
                 index: dict[str, int]) -> list[Problem]:
    """The instance's nodes (in inventory order) without device IPs."""
    from deployctl.core.input.gaps import discovery_hint, needs_facts

    out: list[Problem] = []
    need = f"the rank table of the {spec.name} instance needs it"
    discover = discovery_hint(raw.file, "ip")
    for i in sorted(index[n] for n in set(spec.nodes) if n in index):
        node = inv.nodes[i]
        if node.name in skip:
            continue
        if node.devices is None:
            out.append(needs_facts(raw, ("nodes", i), f"node '{node.name}' has no device IPs; {need}",
                                   f"{discover}; or list them under devices or hccn_conf", node=node.name))
            continue
        for j, dev in enumerate(node.devices):
            if dev.ip is None:
                key = ("nodes", i, "hccn_conf") if node.hccn_conf else ("nodes", i, "devices", j)
                add = f"add address_{dev.id}= to the hccn.conf copy" if node.hccn_conf else \
                    "add ip: <NPU NIC IP from `hccn_tool -i N -ip -g`>"
                out.append(needs_facts(raw, key, f"device {dev.id} of node '{node.name}' has no ip; {need}",
                                       f"{add}, or {discover}", node=node.name, device=dev.id))
    return out
