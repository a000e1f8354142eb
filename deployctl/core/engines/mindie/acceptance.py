"""MindIE's own acceptance checks (acceptance.yaml) evaluated on the files deployctl renders.

MindIE-LLM refuses to start when its config manager rejects config.json or the rank table
(``ConfigManager::Impl`` throws on any ``InitFromJson`` false, then ``CheckAllParam`` fails the start).
acceptance.yaml lists every such check with its source file:line per MindIE version; this module reads it and
answers, for one config.json (plus the node's rank table and the env deployctl exports), what MindIE would
refuse and with which message. MindIE 2.1-2.3 use the 2.x sources (LLM23); 3.0 and 3.1 the 3.0 sources
(3.1 has no public source: its checks are assumed to be 3.0's). Unknown versions are not checked.

``evaluate(config, version, ranktable=None, env=None)`` -> [Refusal]; ``plan_refusals(plan)`` -> [(check id, Finding)]
for every rendered config file of a plan (see docs/engines-mindie-acceptance.md). Never raises on junk input:
a value of the wrong type is reported by the type checks, and the value checks skip it as MindIE never gets
that far.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, TypeGuard, cast
from dataclasses import dataclass
from functools import cache, lru_cache

from deployctl.core.engine_spec.protocol import read_data
from deployctl.core.models.engine_settings.mindie import MindieSettings

if TYPE_CHECKING:
    from deployctl.core.engine_spec.protocol import Finding
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Plan

INT_RANGES = {"int32_t": (-2**31, 2**31 - 1), "uint32_t": (0, 2**32 - 1), "size_t": (0, 2**64 - 1)}
JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null", float: "number",
              int: "number"}


@dataclass(frozen=True)
class Refusal:
    check: str          # acceptance.yaml id
    doc: str            # "config" | "ranktable"
    key: str            # where in the document, e.g. BackendConfig.ScheduleConfig.maxBatchSize
    message: str        # MindIE's message
    source: str         # repo@commit src/config_manager/<file> L..


@cache
def data() -> dict:
    return read_data(__package__, "acceptance.yaml", words_for_booleans=False)


def source_set(version: str | None) -> str | None:
    """LLM23 / LLM30 for a MindIE version, None when no source set covers it."""
    return data()["versions"].get(version) if version else None


def _pick(value: Any, sset: str) -> Any:
    """A field given per source set ({LLM23: x, LLM30: y}) resolved for one set."""
    if isinstance(value, dict) and value and set(value) <= set(data()["repos"]):
        return value.get(sset)
    return value


def checks(version: str | None) -> tuple[dict, ...]:
    """The checks MindIE `version` applies, every per-version field resolved (read-only: shared by callers)."""
    return _checks(source_set(version))


@cache
def _checks(sset: str | None) -> tuple[dict, ...]:
    if sset is None:
        return ()
    return tuple({k: (_pick(v, sset) if k != "src" else v[sset]) for k, v in c.items()} | {"sset": sset}
                 for c in data()["checks"] if sset in c["src"])


def source(check: dict) -> str:
    return f"{data()['repos'][check['sset']]} src/config_manager/{check['src']}"


# ------------------------------------------------------------------ reading documents
MISSING = object()


@lru_cache(maxsize=4096)          # the checks' paths and the keys refused: a few hundred
def _steps(path: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"\.|\[|\]\.?", path) if p != "")


def resolve(doc: Any, path: str) -> list[tuple[str, object]]:
    """(concrete path, value or MISSING) for `path`; `[*]` expands over a list (nothing when it is no list)."""
    found = [("", doc)]
    for step in _steps(path):
        nxt = []
        for where, node in found:
            if step == "*":
                if isinstance(node, list):
                    nxt += [(f"{where}[{i}]", v) for i, v in enumerate(node)]
                continue
            if isinstance(step, int):
                ok = isinstance(node, list) and step < len(node)
                nxt.append((f"{where}[{step}]", node[step] if ok else MISSING))
            else:
                ok = isinstance(node, dict) and step in node
                nxt.append((f"{where}.{step}" if where else step, node[step] if ok else MISSING))
        found = nxt
    return found


def get(doc: Any, path: str, default: object = MISSING) -> Any:
    hits = resolve(doc, path)
    return hits[0][1] if hits and hits[0][1] is not MISSING else default


def is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def type_name(v: object) -> str:
    return JSON_TYPES.get(type(v), type(v).__name__)


def type_ok(value: object, want: str) -> bool:
    if want in INT_RANGES:
        lo, hi = INT_RANGES[want]
        return is_int(value) and lo <= value <= hi
    return {"string": str, "bool": bool, "object": dict, "array": list}[want] is type(value) or (
        want == "bool" and isinstance(value, bool))


def truthy(doc: Any, path: str) -> bool:
    return get(doc, path, False) is True


WHEN = {
    "multinode": lambda c: truthy(c, "BackendConfig.multiNodesInferEnabled"),
    "reads_ranktable": lambda c: truthy(c, "BackendConfig.multiNodesInferEnabled") or truthy(
        c, "BackendConfig.ScheduleConfig.distributedEnable"),
    "https": lambda c: truthy(c, "ServerConfig.httpsEnabled"),
    "inter_node_tls": lambda c: truthy(c, "BackendConfig.interNodeTLSEnabled"),
    "layerwise": lambda c: truthy(c, "ServerConfig.layerwiseDisaggregated"),
    "lwd_multinode": lambda c: truthy(c, "BackendConfig.layerwiseDisaggregated."
                                         "layerwiseDisaggregatedMultiNodesInferEnabled"),
}


def fill(template: str, **values: object) -> str:
    out = template
    for k, v in values.items():
        out = out.replace("{" + k + "}", str(v))
    return out


# ------------------------------------------------------------------ the generic kinds
def _types(c: dict, config: Any) -> list[tuple[str, str]]:
    out = []
    for where, section in resolve(config, c["path"]):
        if not isinstance(section, dict):
            if "[*]" not in c["path"]:
                out.append((where, f"{where}: missing compulsory field" if section is MISSING
                            else f"The type of param {where} should be object, but got {type_name(section)}"))
            continue
        for key, spec in c["keys"].items():
            want, compulsory = spec.rstrip("!"), spec.endswith("!")
            at = f"{where}.{key}"
            if key not in section:
                if compulsory:
                    out.append((at, c.get("message") or
                                f"[ParamChecker::CheckJsonParamType] {key}: missing compulsory field"))
                continue
            value = section[key]
            if type_ok(value, want):
                continue
            if want in INT_RANGES and is_int(value):
                msg = f"The value of param {key} for {want} is invalid."
            else:
                msg = f"The type of param {key} should be {want}, but got {type_name(value)}"
            out.append((at, c["message"] if key == "ModelConfig" and c.get("message") else msg))
    return out


def _bound(spec: Any, config: Any, c: dict, key_default: str) -> Any:
    if isinstance(spec, str) and spec.startswith("@"):
        value = get(config, spec[1:], c.get(key_default, MISSING))
        return value if is_int(value) else MISSING
    return spec if spec is not None else MISSING


def _range(c: dict, config: Any) -> list[tuple[str, str]]:
    out = []
    for where, value in resolve(config, c["path"]):
        if value is MISSING:
            value = _bound(c.get("default"), config, c, "default_default")
        if not is_int(value):
            continue        # absent without a default, or the wrong type: the type checks say so
        lo = _bound(c.get("min"), config, c, "bound_default")
        hi = _bound(c.get("max"), config, c, "bound_default")
        if hi is not MISSING and value > hi:
            out.append((where, fill(c["message"], value=value, why="is out of bound", bound=hi)))
        elif lo is not MISSING and value < lo:
            out.append((where, fill(c["message"], value=value, why="is less than", bound=lo)))
    return out


def _enum(c: dict, config: Any) -> list[tuple[str, str]]:
    out = []
    for where, value in resolve(config, c["path"]):
        if value is MISSING:
            value = c.get("default", MISSING)
        if value is MISSING or isinstance(value, (dict, list)) or isinstance(value, bool):
            continue
        if type(value) is not type(c["values"][0]):
            continue        # the type checks refuse it
        if value not in c["values"]:
            out.append((where, fill(c["message"], value=value)))
    return out


def _pattern(c: dict, config: Any) -> list[tuple[str, str]]:
    out = []
    for where, value in resolve(config, c["path"]):
        if not isinstance(value, str):
            continue
        if len(value) > c.get("maxlen", len(value)):
            out.append((where, f"The length of {where.rsplit('.', 1)[-1]} exceeds {c['maxlen']}."))
        elif not re.fullmatch(c["regex"], value):
            out.append((where, fill(c["message"], value=value)))
    return out


def _differ(c: dict, config: Any) -> list[tuple[str, str]]:
    a, b = get(config, c["path"]), get(config, c["other"], c.get("other_default", MISSING))
    return [(c["path"], c["message"])] if is_int(a) and is_int(b) and a == b else []


def _hits(c: dict, config: Any, ranktable: Any, env: dict) -> list[tuple[str, str]]:
    from deployctl.core.engines.mindie.acceptance_custom import CUSTOM

    if c["kind"] == "custom":
        return CUSTOM[c["fn"]](c, config, ranktable, env)
    return {"types": _types, "range": _range, "enum": _enum, "pattern": _pattern,
            "differ": _differ}[c["kind"]](c, config)


@cache
def _part(sset: str | None, part: str | None) -> tuple[dict, ...]:
    """The checks of one part (None: all but runtime ones; "shared": those that do not read the env; "env":
    those that do), in their order."""
    from deployctl.core.engines.mindie.acceptance_custom import READS_ENV

    return tuple(c for c in _checks(sset) if c["kind"] != "runtime" and
                 (part is None or (c["kind"] == "custom" and c["fn"] in READS_ENV) == (part == "env")))


def evaluate(config: Any, version: str | None, ranktable: Any = None, env: dict | None = None,
             part: str | None = None, memo: dict | None = None) -> list[Refusal]:
    """What MindIE `version` refuses in this config.json (with the node's rank table and exported env).
    ``part``: None, every check; "shared", those that do not read the env (the same answer for every node
    given the same files); "env", only those that read it. ``memo`` keeps the answers of the checks that read
    the rank table alone while that table lives (distributed nodes have several config files, one table)."""
    from deployctl.core.engines.mindie.acceptance_custom import RANKTABLE_ONLY

    env = env or {}
    out: list[Refusal] = []
    for c in _part(source_set(version), part):
        kind = c["kind"]
        if c.get("when") and not WHEN[c["when"]](config):
            continue
        if memo is not None and kind == "custom" and c["fn"] in RANKTABLE_ONLY:
            key = (c["id"], id(ranktable))
            if key not in memo:
                memo[key] = _hits(c, config, ranktable, env)
            hits = memo[key]
        else:
            hits = _hits(c, config, ranktable, env)
        out += [Refusal(c["id"], c.get("doc", "config"), key, msg, source(c)) for key, msg in hits]
    return out


# ------------------------------------------------------------------ a plan's rendered files
# config.json keys deployctl derives from the inventory (the rest it fixes itself)
INVENTORY_KEYS = {
    "BackendConfig.ModelDeployConfig.maxSeqLen": "model.max_seq_len",
    "BackendConfig.ModelDeployConfig.maxInputTokenLen": "model.max_input_len",
    "BackendConfig.ScheduleConfig.maxBatchSize": "model.max_batch_size",
    "BackendConfig.ScheduleConfig.maxPrefillBatchSize": "model.max_batch_size",
    "BackendConfig.ScheduleConfig.maxPrefillTokens": "model.max_prefill_tokens",
    "BackendConfig.ScheduleConfig.maxIterTimes": "model.max_seq_len",
    "ServerConfig.port": "engine.ports.http", "ServerConfig.managementPort": "engine.ports.management",
    "ServerConfig.metricsPort": "engine.ports.metrics", "ServerConfig.interCommPort": "engine.ports.inter_comm",
    "BackendConfig.multiNodesInferPort": "engine.ports.multi_node",
}


def user_key(overrides: dict, key: str) -> str | None:
    """The engine.config path that set `key`. engine.config merges key by key and lists of objects by position
    (render/merge.py): a list of objects is walked into by index; a list of scalars replaces the rendered one
    whole, so it is the user's."""
    node, walked = overrides, []
    for step in _steps(key):
        if isinstance(node, list):
            if not isinstance(step, int) or step >= len(node) or not isinstance(node[step], dict):
                break                          # a list of scalars (or shorter): set whole by the user
            walked.append(step)
            node = node[step]
            continue
        if not isinstance(node, dict) or step not in node:
            return None
        walked.append(step)
        node = node[step]
    if not walked:
        return None
    return "engine.config" + "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in walked)


def _inventory_path(inv: Inventory, role: str, r: Refusal) -> tuple[str, bool]:
    """Where the refused value comes from: the role's layout.<role>.engine.config / .model when it set the key
    (pd-split), else engine.config, else the inventory key deployctl derived it from."""
    from deployctl.core.input.roles import role_block

    block = role_block(inv, role)
    if r.doc == "config":
        own = user_key((block.engine.get("config") or {}) if block is not None else {}, r.key)
        if own:
            return f"layout.{role}.{own}", True
        user = user_key(cast(MindieSettings, inv.engine).config, r.key)
        if user:
            return user, True
        generic = re.sub(r"\[\d+\]", "[0]", r.key)
        for key, where in INVENTORY_KEYS.items():
            if generic == key:
                field = where.split(".", 1)[1] if where.startswith("model.") else None
                if field and block is not None and block.model is not None and getattr(block.model, field, None):
                    return f"layout.{role}.{where}", False
                return where, False
        if r.key.startswith("BackendConfig.ModelDeployConfig.ModelConfig"):
            return "model", False
    return "engine", False


def _has_gaps(ranktable: dict) -> bool:
    """A rank table rendered before preflight filled the device IPs (the inventory leaves them to its facts)."""
    return any(str(d.get("device_ip")) in ("None", "") for s in ranktable.get("server_list") or []
               for d in s.get("device") or [])


def _ms_refusals(plan: Plan, version: str | None) -> list[tuple[str, Finding]]:
    """MindIE-MS's refusals of ms_controller.json / ms_coordinator.json (acceptance_ms.py), pd-split only."""
    from deployctl.core.engine_spec.protocol import Finding
    from deployctl.core.engines.mindie.acceptance_ms import evaluate
    from deployctl.core.engines.mindie.refusal import hint as assume_hint
    from deployctl.core.engines.mindie.ms import controller_doc, coordinator_doc

    router = next((n for n in plan.nodes if n.runs_router), None)
    if router is None:
        return []
    out = []
    for side, doc in (("controller", controller_doc(plan)), ("coordinator", coordinator_doc(plan))):
        user = getattr(cast(MindieSettings, plan.inventory.engine).ms, side)
        for check, key, message, src in evaluate(doc, side, version):
            node, set_by_user = user, True
            for step in key.split("."):
                if not isinstance(node, dict) or step not in node:
                    set_by_user = False
                    break
                node = node[step]
            where = f"engine.ms.{side}.{key}" if set_by_user else "engine.ms"
            hint = (f"MindIE-MS {version} refuses this value at start: change or remove {where}" if set_by_user else
                    f"deployctl rendered this {key!r}: a deployctl bug; report it")
            out.append((check, Finding("error", where, f"MindIE-MS {version} refuses {router.name}/ms_{side}.json: "
                                       f"{key}: {message}", src, hint=f"{hint}; {assume_hint(check)}")))
    return out


def assumable() -> dict[str, str]:
    """Every refusal id engine.assume may name -> what it is about: the support matrix's (assume.MATRIX), every
    acceptance check's and every MindIE-MS check's."""
    from deployctl.core.engines.mindie.acceptance_ms import checks as ms_checks
    from deployctl.core.engines.mindie.assume import MATRIX

    out = dict(MATRIX)
    out.update({c["id"]: f"MindIE's own check {c['id']} (acceptance.yaml)" for c in data()["checks"]
                if c.get("kind") != "runtime"})
    out.update({c["id"]: f"MindIE-MS's check {c['id']} (acceptance_ms.yaml)" for side in ("controller", "coordinator")
                for c in ms_checks(side)})
    return out


def plan_refusals(plan: Plan) -> list[tuple[str, Finding]]:
    """(acceptance check id, Finding error) of every refusal of this plan's rendered config files."""
    from deployctl.core.engines.mindie.refusal import hint as assume_hint
    from deployctl.core.engine_spec.protocol import Finding
    from deployctl.core.engines.mindie.config import config_files
    from deployctl.core.engines.mindie.env import computed_env
    from deployctl.core.engines.mindie.ranktable import ranktable_doc
    from deployctl.core.engines.mindie.topology import distributed

    version = plan.engine.version
    if source_set(version) is None:
        return []
    seen: dict[tuple, list[str]] = {}
    order = {c["id"]: i for i, c in enumerate(checks(version))}     # refusals in the checks' order, as MindIE's
    for inst in plan.instances:
        rt = ranktable_doc(plan, inst) if inst.multi_node or distributed(plan, inst) else None
        if rt is not None and _has_gaps(rt):
            continue           # device IPs preflight has not read yet: this instance's files wait for the facts
        # the nodes of an instance share their files (by identity, config.py config_files): the checks that do not
        # read the env run once per file, the others per node; `rt` and the documents live for the loop
        memo: dict = {}
        shared: dict[int, list[Refusal]] = {}
        for name in inst.nodes:
            node = plan.node(name)
            env = computed_env(plan, node)
            for fname, doc in config_files(plan, node).items():
                if id(doc) not in shared:
                    shared[id(doc)] = evaluate(doc, version, ranktable=rt, part="shared", memo=memo)
                mine = evaluate(doc, version, ranktable=rt, env=env, part="env")
                for r in sorted(shared[id(doc)] + mine, key=lambda r: order[r.check]):
                    what = f"{name}/{fname}" if r.doc == "config" else f"{name}/ranktable.json"
                    seen.setdefault((r.check, r.doc, re.sub(r"\[\d+\]", "[]", r.key), r.message, r.source,
                                     r.key, node.role), []).append(what)
    out = _ms_refusals(plan, version)
    for (check, doc, _, message, src, key, role), files in seen.items():
        where, by_user = _inventory_path(plan.inventory, role, Refusal("", doc, key, message, src))
        more = f" (and {len(files) - 1} more file{'s' if len(files) > 2 else ''})" if len(files) > 1 else ""
        hint = (f"MindIE {version} refuses this value at start: change or remove {where}" if by_user else
                f"deployctl rendered this {key!r}: a deployctl bug (MindIE {version} would refuse the file); "
                f"report it, or set a value MindIE accepts through engine.config")
        hint += f"; {assume_hint(check)}"
        out.append((check, Finding("error", where, f"MindIE {version} refuses {files[0]}{more}: {key}: {message}",
                                   src, hint=hint)))
    return out
