"""MindIE's support matrix (support.yaml): the engine version, and what this version runs.

``check(plan)`` answers every combination of version x model x quantization x backend x parallel layout
x role with ``Finding``s: ``error`` (refused, with the source and a supported alternative), ``warning``
(allowed, but no source covers it, or upstream never validated it) or ``note``.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING

from deployctl.core.engine_spec.protocol import Finding, MemoryInputs, read_data

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Degrees, Instance, Plan


@cache
def matrix() -> dict:
    return read_data(__package__, "support.yaml")


def model_entry(inv: Inventory) -> tuple[dict, str]:
    """(support entry, note) of the inventory's model; `same_as` entries resolve to their twin."""
    from deployctl.core import catalog

    models = matrix()["models"]
    info = catalog.model_of(inv)
    # a model described from its checkpoint (model.config_path): its family's entry
    entry = models.get(inv.model.name) or matrix().get("families", {}).get(info.family if info else "", {})
    if "same_as" in entry:
        return models[entry["same_as"]], entry.get("note", "")
    return entry, ""


def backend(inv: Inventory) -> str:
    entry, _ = model_entry(inv)
    return entry.get("backend", {}).get("value", "atb")


def role_preset(inv: Inventory, role: str) -> dict | None:
    """The degrees of a pd-split role on this model's backend (support.yaml role_presets)."""
    return matrix()["role_presets"].get(backend(inv), {}).get(role)


def needs_gloo_interface(plan: Plan, inst: Instance) -> bool:
    """The torch runtime's gloo groups span servers: every node must name its interface (GLOO_SOCKET_IFNAME)."""
    return backend(plan.inventory) == "torch" and (inst.multi_node or plan.preset == "pd-split")


def needs_interfaces(inv: Inventory) -> str | None:
    """GLOO_SOCKET_IFNAME on every node of a multi-node torch-runtime deployment (deepseek_v3.2.md L138)."""
    spans = len(inv.nodes) > 1 or inv.layout.prefill is not None
    if backend(inv) != "torch" or not spans:
        return None
    return ("the torch runtime's gloo groups need GLOO_SOCKET_IFNAME on every node of a multi-node instance "
            "(MindIE-LLM deepseek_v3.2.md L138; faq.md: gloo picks a wrong interface, Connection refused)")


def memory_inputs(inv: Inventory, role: str, degrees: Degrees) -> MemoryInputs:
    from deployctl.core.engines.mindie.presets import preset_env

    env = preset_env(inv.cluster.hardware, role, inv.engine.env, model=inv.model.name)
    notes: tuple[str, ...] = ()
    o_proj, lm_head = degrees.o_proj_tp, degrees.lm_head_tp
    if backend(inv) == "torch":
        feat = matrix()["features"]["local_tp"]["torch"]
        o_proj = lm_head = None   # o_proj follows attention tp, lm_head the MLP tp (= tp)
        notes = ("torch runtime: o_proj and lm_head split by tp; local TP keys have no effect ("
                 f"{expand_source(feat['source'])})",)
    return MemoryInputs(fraction=float(env.get("NPU_MEMORY_FRACTION", "0.8")), fraction_name="NPU_MEMORY_FRACTION",
                        comm_buffer_mb=int(float(env.get("HCCL_BUFFSIZE", "200"))),
                        o_proj_tp=o_proj, lm_head_tp=lm_head, notes=notes)


def _value(entry: dict | None, version: str | None) -> tuple[str, str]:
    """(yes|no|unverified|..., source) of a per-version entry."""
    if not entry or version is None or version not in entry:
        return "unverified", ""
    v = entry[version]
    return v["value"], v.get("source", "")


# the repositories behind support.yaml's short source names
REPOS = {"LLM30": "Ascend/MindIE-LLM@8b4871ad (3.0)", "LLM23": "Ascend/MindIE-LLM@40fb063 (2.2-2.3)",
         "MOT22": "Ascend/MindIE-Motor@7be35ef (2.2)", "MOT": "Ascend/MindIE-Motor@5dfb024e"}


def expand_source(source: str) -> str:
    for short, repo in REPOS.items():
        source = re.sub(rf"\b{short}\b", repo, source)
    return source


def _refused(refusal: str, path: str, message: str, source: str = "", hint: str = "") -> tuple[str, Finding]:
    from deployctl.core.engines.mindie.refusal import hint as assume_hint

    return refusal, Finding("error", path, message, source, hint="; ".join(h for h in (hint, assume_hint(refusal)) if h))


def matrix_findings(plan: Plan) -> list[tuple[str | None, Finding]]:
    """(refusal id or None, finding) of the support matrix; ids name what engine.assume may lift."""
    return [x if isinstance(x, tuple) else (None, x) for x in _matrix(plan)]


def _matrix(plan: Plan) -> list[Finding | tuple[str, Finding]]:
    inv = plan.inventory
    ver = plan.engine.version
    out: list[Finding | tuple[str, Finding]] = []    # a refusal: (its id, the finding)
    data = matrix()
    if ver is None:
        out.append(Finding("warning", "engine.version", f"the MindIE version is unknown ({plan.engine.version_source}): "
                           "every rule below is unverified for it", hint="set engine.version, e.g. 2.2 or 3.0"))
    elif ver not in data["versions"]:
        out.append(Finding("warning", "engine.version", f"MindIE {ver} is not in the support matrix (known: "
                           f"{', '.join(data['versions'])}): unverified"))
    elif data["versions"][ver]["sources"].startswith("none"):
        out.append(Finding("warning", "engine.version", f"MindIE {ver}: no public source covers this version; "
                           "every rule below is unverified for it"))
    entry, note = model_entry(inv)
    name = plan.model_display
    if note:
        out.append(Finding("warning", "model.name", note))
    if not entry:
        out.append(Finding("warning", "model.name", f"{name} is not in MindIE's support matrix: unverified"))
        return out
    ok, src = _value(entry.get("versions"), ver)
    if ok == "no":
        out.append(_refused("model-version", "model.name", f"{name} does not run on MindIE {ver}", src,
                            hint=_versions_with(entry) or "no MindIE version runs it: serve it with engine.kind "
                            "vllm-ascend"))
        return out
    if ok == "unverified" and ver in data["versions"]:
        out.append(Finding("warning", "model.name", f"{name} on MindIE {ver}: no source covers it (unverified)"))
    be = entry["backend"]["value"]
    b_ok, b_src = _value(data["backends"].get(be), ver)
    if b_ok == "no" and ok != "no":
        out.append(_refused("backend-version", "model.name", f"{name} needs MindIE's {be} runtime, which MindIE "
                            f"{ver} does not have", b_src, hint=_versions_with(entry)))
    q = entry.get("quants", {}).get(inv.model.quant)
    if q is None:
        out.append(Finding("warning", "model.quant", f"{name} {inv.model.quant} on MindIE: no source covers it "
                           "(unverified)"))
    elif q["value"] == "no":
        ok_q = [k for k, v in entry["quants"].items() if v["value"] == "yes"]
        out.append(_refused("quant", "model.quant", f"MindIE does not run {name} in {inv.model.quant}", q["source"],
                            hint=f"use quant {' or '.join(ok_q)}" if ok_q else ""))
    elif q["value"] == "unverified":
        out.append(Finding("warning", "model.quant", f"{name} {inv.model.quant} on MindIE is unverified",
                           q.get("source", "")))
    return out


def _versions_with(entry: dict) -> str:
    good = [v for v, e in entry.get("versions", {}).items() if e["value"] == "yes"]
    return f"use MindIE {' or '.join(good)} (engine.version or an image of that version)" if good else ""
