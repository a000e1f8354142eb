"""Static validation: plain data -> Inventory, collecting every problem (no network)."""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable

from deployctl import engines
from deployctl.errors import InventoryError, Problem
from deployctl.inventory.envcheck import (HCCL_RANGES, env_range_problems, env_sources, role_only_problems,
                                         secret_env_problems)
from deployctl.inventory.gaps import NeedsFacts, discovery_hint, interface_gaps, needs_facts
from deployctl.inventory.hccn import HccnReadError, parse_hccn_conf, read_hccn_conf
from deployctl.inventory.hostile import (HOST_TARGET, JINJA, bad_char, char_hint, check_image, check_ssh,
                                         hostile_problems, ip_address, zone_problem)
from deployctl.inventory.load import KeyPath, RawInventory
from deployctl.inventory.paths import cluster_dir_problems

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SERVED_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,254}[A-Za-z0-9])?$")

LAYOUT_DEGREES = ("tp", "dp", "pp", "cp", "moe_tp", "moe_ep")
# a bind mount on these (or, for the first group, anywhere below them) hides the image's own files
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/lib", "/lib64", "/proc", "/run", "/sbin", "/sys", "/usr",
                "/var/lib/docker")
SYSTEM_DIRS = ("/", "/etc", "/home", "/root", "/tmp", "/var")
BIND_UNSAFE = re.compile(r"[:,\s]")


# --------------------------------------------------------------------------- structure
def _unwrap(annotation: Any) -> Any:
    """Strip Optional/list/dict wrappers down to a pydantic model class (or None)."""
    from pydantic import BaseModel

    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in args:
        found = _unwrap(arg)
        if found is not None:
            return found
    return None


def _model_at(root: type, loc: tuple) -> type | None:
    cls = root
    for part in loc:
        if isinstance(part, int):
            continue
        field = getattr(cls, "model_fields", {}).get(part)
        if field is None:
            return None
        cls = _unwrap(field.annotation)
        if cls is None:
            return None
    return cls


_TYPE_NAMES = {"int_type": "an integer", "string_type": "a string", "bool_type": "true or false",
               "float_type": "a number", "list_type": "a list", "dict_type": "a mapping",
               "model_type": "a mapping", "int_parsing": "an integer", "bool_parsing": "true or false"}
_ABSOLUTE = ("an absolute path of plain characters",
             "start with '/', then letters, digits, '.', '_', '-' and '/' only (it reaches docker's and the "
             "shell's command lines)")
PATTERN_HINTS = {  # key -> (what the value must be, hint) for the models' string patterns
    "container_name": ("a valid container name", "docker names: letters, digits, '_', '.', '-', starting with "
                       "a letter or digit"),
    "user": ("a valid login name", "letters, digits, '_', '.', '-', starting with a letter, digit or '_'"),
    "work_dir": _ABSOLUTE, "deploy_dir": _ABSOLUTE, "daemon": _ABSOLUTE, "ms_home": _ABSOLUTE,
    "interface": ("a network interface name", "the name `ip -o addr` shows for the node's IP, e.g. enp189s0f0 "
                  "(at most 15 letters, digits, '_', '.', '-')"),
    "shm_size": ("a docker size", "a number with an optional unit k, m or g, e.g. 500g"),
    "k8s_node": ("a Kubernetes node name", "lower-case letters, digits, '-' and '.', starting and ending with a "
                 "letter or digit"),
    "namespace": ("a Kubernetes name", "lower-case letters, digits and '-', starting and ending with a letter "
                  "or digit"),
    "release": ("a Helm release name", "lower-case letters, digits and '-', starting and ending with a letter "
                "or digit"),
    "scheduler_name": ("a scheduler name", "lower-case letters, digits and '-', starting and ending with a "
                       "letter or digit"),
}
_UNION_TAGS = ("str", "int", "float", "bool", "function-after", "function-before")


def _describe(value) -> str:
    kind = {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "mapping",
            type(None): "null"}.get(type(value), type(value).__name__)
    return f"{kind} {value!r}" if not isinstance(value, (dict, list)) or len(repr(value)) < 40 else kind


def _one_problem(raw: RawInventory, loc: KeyPath, errs: list[dict]) -> Problem:
    from deployctl.models.inventory import Inventory

    err = errs[0]
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx", {})
    if len(errs) > 1:  # a union: every member refused the value
        wanted = " or ".join(dict.fromkeys(_TYPE_NAMES.get(e["type"], e["type"]) for e in errs))
        return raw.problem(loc, f"expected {wanted}, got {_describe(value)}")
    if kind == "extra_forbidden":
        model = _model_at(Inventory, loc[:-1])
        if loc[:1] == ("engine",):     # the engine block is a union: the model of the kind this file names
            block = raw.data.get("engine") if isinstance(raw.data, dict) else None
            kind = block.get("kind", engines.DEFAULT_KIND) if isinstance(block, dict) else engines.DEFAULT_KIND
            if kind in engines.KINDS:
                model = _model_at(engines.driver(kind).settings, loc[1:-1])
        allowed = sorted(model.model_fields) if model else []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"did you mean '{close[0]}'?" if close else (
            f"allowed keys here: {', '.join(allowed)}" if allowed else "")
        return raw.problem(loc, f"unknown key '{loc[-1]}'", hint)
    if kind == "missing":
        return raw.problem(loc, f"missing required key '{loc[-1]}'", "see inventories/sample.yaml for every key")
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        return raw.problem(loc, f"unknown engine kind {ctx.get('tag', value)!r}",
                           f"use one of: {', '.join(sorted(engines.KINDS))}")
    if kind == "literal_error":
        return raw.problem(loc, f"{value!r} is not allowed", f"use one of {ctx.get('expected', '')}")
    if kind == "string_pattern_mismatch" and loc[-1] == "name":
        return raw.problem(loc, f"{value!r} is not a valid name",
                           "use lower-case letters, digits and '-', starting and ending with a letter or digit")
    if kind == "string_pattern_mismatch" and loc and loc[-1] in PATTERN_HINTS:
        what, hint = PATTERN_HINTS[loc[-1]]
        return raw.problem(loc, f"{value!r} is not {what}", hint)
    if kind in ("greater_than", "greater_than_equal", "less_than_equal", "less_than"):
        op = {"greater_than": ">", "greater_than_equal": ">=", "less_than_equal": "<=", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()), "")
        return raw.problem(loc, f"{value!r} is out of range: must be {op} {bound}",
                           "sizes, counts and ports are positive integers within the engine's limits")
    if kind in _TYPE_NAMES:
        return raw.problem(loc, f"expected {_TYPE_NAMES[kind]}, got {_describe(value)}",
                           "quote strings that look like numbers; write numbers without quotes")
    if kind == "too_short":
        return raw.problem(loc, "must not be empty")
    return raw.problem(loc, f"{err['msg']} (got {_describe(value)})")


def _structure_problems(raw: RawInventory, exc) -> list[Problem]:
    grouped: dict[KeyPath, list[dict]] = {}
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if isinstance(p, (str, int)) and p not in _UNION_TAGS)
        if loc[:1] == ("engine",) and len(loc) > 1 and loc[1] in engines.KINDS:   # the union's tag
            loc = loc[:1] + loc[2:]
        if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
            loc += ("kind",)
        grouped.setdefault(loc, []).append(err)
    problems = {loc: _one_problem(raw, loc, errs) for loc, errs in grouped.items()}
    # `adress` unknown + `address` missing is one typo: keep the did-you-mean, drop the "missing"
    for loc, prob in list(problems.items()):
        if prob.hint.startswith("did you mean '"):
            twin = loc[:-1] + (prob.hint.split("'")[1],)
            problems.pop(twin, None)
    return list(problems.values())


def _check_nodes(inv, raw: RawInventory) -> list[Problem]:
    out = []
    seen_name: dict[str, int] = {}
    seen_addr: dict[str, int] = {}
    seen_server: dict[str, int] = {}
    for i, node in enumerate(inv.nodes):
        if node.name in seen_name:
            out.append(raw.problem(("nodes", i, "name"), f"duplicate node name '{node.name}' "
                                   f"(also nodes[{seen_name[node.name]}])", "node names must be unique"))
        seen_name.setdefault(node.name, i)
        if node.address in seen_addr:
            out.append(raw.problem(("nodes", i, "address"), f"duplicate address '{node.address}' "
                                   f"(also nodes[{seen_addr[node.address]}])",
                                   "each node is a different server with its own address"))
        seen_addr.setdefault(node.address, i)
        key = ("nodes", i, "container_ip") if node.container_ip else ("nodes", i, "address")
        zone = [z for z in (zone_problem(raw, ("nodes", i, k), getattr(node, k) or "")
                            for k in ("address", "container_ip")) if z]
        if zone:
            out += zone
            seen_server.setdefault(node.server_ip, i)
            continue
        if ip_address(node.address) is None and (not HOST_TARGET.match(node.address) or JINJA.search(node.address)):
            out.append(raw.problem(("nodes", i, "address"), f"{node.address!r} is neither an IP address nor a "
                                   "host name", "give the IP (or DNS name) deployctl connects to over SSH: no "
                                   "spaces, no '{{' templates, starting with a letter or digit"))
            seen_server.setdefault(node.server_ip, i)
            continue
        if ip_address(node.server_ip) is None:
            out.append(raw.problem(key, f"{node.server_ip!r} is not an IP address",
                                   "the engine matches each node's IP against its rank table: "
                                   "set container_ip to the node's IP when address is a host name"))
        elif node.server_ip in seen_server and not (key[-1] == "address" and seen_addr[node.address] != i):
            out.append(raw.problem(key, f"'{node.server_ip}' is also the server IP of "
                                   f"nodes[{seen_server[node.server_ip]}]",
                                   "each server needs its own IP: it is the rank table's server_id and "
                                   "container_ip (container_ip, else address)"))
        seen_server.setdefault(node.server_ip, i)
        if node.super_pod_id is not None and not (inv.cluster.hardware == "a3" and inv.cluster.super_pod):
            out.append(raw.problem(("nodes", i, "super_pod_id"), "super_pod_id is set but "
                                   "cluster.super_pod is not true on a3 hardware",
                                   "remove it, or set cluster.hardware: a3 and cluster.super_pod: true"))
    return out


def _resolve_devices(inv, raw: RawInventory, read_text: Callable[[Path], str]):
    """Fill node devices from hccn_conf files; return (inventory, problems)."""
    from deployctl.models.inventory import Device

    problems, nodes = [], []
    for i, node in enumerate(inv.nodes):
        if not node.hccn_conf:
            nodes.append(node)
            continue
        path = raw.base_dir / node.hccn_conf
        shown = str(Path(raw.file).parent / node.hccn_conf)
        try:
            addresses = parse_hccn_conf(read_text(path))
        except OSError as exc:
            problems.append(raw.problem(("nodes", i, "hccn_conf"), f"cannot read {shown}: "
                                        f"{exc.strerror or exc}", "the path is relative to the inventory file; "
                                        "copy the host's /etc/hccn.conf there"))
            nodes.append(node)
            continue
        except (HccnReadError, UnicodeDecodeError, ValueError) as exc:
            why = str(exc) if isinstance(exc, HccnReadError) else f"is not a UTF-8 text file ({exc})"
            problems.append(raw.problem(("nodes", i, "hccn_conf"), f"cannot use {shown}: it {why}",
                                        "point hccn_conf at a copy of the host's /etc/hccn.conf (a small text "
                                        "file of address_N=IP lines)"))
            nodes.append(node)
            continue
        clean = []
        for a in addresses:
            bad = bad_char(a.ip) or ("a non-ASCII character" if not a.ip.isascii() else None)
            if bad:
                problems.append(Problem(f"address_{a.device_id} contains {bad}", f"nodes[{i}].hccn_conf", shown,
                                        a.line,
                                        f"write the device IP as plain text: {char_hint(bad)}"
                                        if "(" in bad else "write the device IP as plain text"))
            else:
                clean.append(a)
        if not clean and addresses:
            nodes.append(node)
            continue
        addresses = clean
        if not addresses:
            problems.append(Problem(f"no address_N= lines in {shown}", f"nodes[{i}].hccn_conf", raw.file,
                                    raw.line_of(("nodes", i, "hccn_conf")),
                                    "this is not an hccn.conf with device IPs; run `hccn_tool -i N -ip -s "
                                    "address IP netmask MASK` on the host first"))
            nodes.append(node)
            continue
        by_id: dict[int, str] = {}
        for a in addresses:
            if a.device_id in by_id:
                problems.append(Problem(f"address_{a.device_id} appears twice", "", shown, a.line,
                                        "keep one address per device"))
            by_id[a.device_id] = a.ip
        listed = {d.id: d for d in node.devices or ()}
        merged = []
        for dev_id in sorted(set(by_id) | set(listed)):
            dev = listed.get(dev_id) or Device(id=dev_id)
            conf_ip = by_id.get(dev_id)
            if dev.ip and conf_ip and dev.ip != conf_ip:
                j = [d.id for d in node.devices].index(dev_id)
                problems.append(raw.problem(("nodes", i, "devices", j, "ip"),
                                            f"device {dev_id} ip {dev.ip} differs from {conf_ip} in {shown}",
                                            "remove one of them or make them agree"))
            merged.append(dev if dev.ip or not conf_ip else dev.model_copy(update={"ip": conf_ip}))
        if node.devices is not None:  # an explicit device list decides which devices are used
            merged = [d for d in merged if d.id in listed]
        nodes.append(node.model_copy(update={"devices": merged}))
    return inv.model_copy(update={"nodes": nodes}), problems


def _check_devices(inv, raw: RawInventory) -> list[Problem]:
    out = []
    per_node = inv.devices_per_node
    hw = inv.cluster.hardware.upper()
    ips: dict[str, str] = {}
    families: dict[int, str] = {}
    first_of: dict[int, tuple] = {}
    super_pod = inv.cluster.hardware == "a3" and inv.cluster.super_pod
    for i, node in enumerate(inv.nodes):
        if node.devices is None:
            continue
        src = "hccn_conf" if node.hccn_conf else "devices"
        if len(node.devices) != per_node:
            out.append(raw.problem(("nodes", i, src), f"node '{node.name}' lists {len(node.devices)} devices; "
                                   f"an {hw} server has {per_node}",
                                   f"list all {per_node} devices (ids 0-{per_node - 1}) or omit devices"))
        seen: set[int] = set()
        for j, dev in enumerate(node.devices):
            key = ("nodes", i, "devices", j) if not node.hccn_conf else ("nodes", i, "hccn_conf")
            if not 0 <= dev.id < per_node:
                out.append(raw.problem(key + ("id",) if len(key) == 4 else key,
                                       f"device id {dev.id} is out of range for {hw} (0-{per_node - 1})",
                                       "id is the physical device id N of /dev/davinciN"))
            if dev.id in seen:
                out.append(raw.problem(key + ("id",) if len(key) == 4 else key,
                                       f"device id {dev.id} is listed twice on node '{node.name}'",
                                       "each physical device appears once"))
            seen.add(dev.id)
            if dev.ip is not None:
                ipkey = key + ("ip",) if len(key) == 4 else key
                addr = ip_address(dev.ip)
                zone = zone_problem(raw, ipkey, dev.ip)
                if zone:
                    out.append(zone)
                elif addr is None:
                    out.append(raw.problem(ipkey, f"{dev.ip!r} is not a valid IP address",
                                           "use the NPU NIC IP from `hccn_tool -i N -ip -g` (ipaddr:)"))
                elif addr.is_unspecified or addr.is_loopback:
                    out.append(raw.problem(ipkey, f"{dev.ip!r} is a placeholder, not an NPU NIC IP",
                                           "use the NPU NIC IP from `hccn_tool -i N -ip -g` (ipaddr:)"))
                else:
                    where = f"{node.name} device {dev.id}"
                    if dev.ip in ips:
                        out.append(raw.problem(ipkey, f"device IP {dev.ip} is also used by {ips[dev.ip]}",
                                               "HCCL requires globally unique device IPs"))
                    ips.setdefault(dev.ip, where)
                    families.setdefault(addr.version, where)
                    first_of.setdefault(addr.version, ipkey)
            if super_pod and dev.sdid is None:
                out.append(needs_facts(raw, key, f"device {dev.id} on node '{node.name}' has no sdid",
                                       "add sdid: <SDID from `npu-smi info -t spod-info -i NPU -c CHIP`>, or "
                                       + discovery_hint(raw.file, "sdid"),
                                       node=node.name, device=dev.id, what="sdid"))
            if inv.cluster.hardware != "a3" and dev.sdid is not None:
                out.append(raw.problem(key + ("sdid",) if len(key) == 4 else key,
                                       "sdid (super device id) exists only on a3 hardware",
                                       "remove sdid, or set cluster.hardware: a3"))
    if len(families) > 1:
        later = max(first_of, key=lambda v: raw.line_of(first_of[v]) or 0)
        out.append(raw.problem(first_of[later], f"device IPs mix IPv4 ({families[4]}) and IPv6 ({families[6]})",
                               "HCCL needs one IP family on all ranks (EI0001)"))
    return out


def _check_sku(inv, raw: RawInventory) -> list[Problem]:
    """cluster.sku names a SKU (or npu-smi chip name) of the cluster's hardware in the performance catalog."""
    if inv.cluster.sku is None:
        return []
    from deployctl.perf.hardware import sku_for

    try:
        sku_for(inv.cluster.hardware, inv.cluster.sku)
    except ValueError as exc:
        return [raw.problem(("cluster", "sku"), str(exc), "remove it to use the hardware's default, or name one "
                            "of the SKUs listed (deployctl/perf/hardware.yaml)")]
    return []


def _check_super_pod(inv, raw: RawInventory) -> list[Problem]:
    c = inv.cluster
    if c.super_pod and c.hardware != "a3":
        return [raw.problem(("cluster", "super_pod"), "super_pod is only for a3 hardware",
                            "set super_pod: false (A2 rank tables are version 1.0)")]
    if not c.super_pod:
        return []
    out = []
    pods: dict[str, list[int]] = defaultdict(list)
    for i, node in enumerate(inv.nodes):
        if node.super_pod_id is None:
            out.append(needs_facts(raw, ("nodes", i), f"node '{node.name}' has no super_pod_id",
                                   "set it to the Super Pod ID of `npu-smi info -t spod-info`, or "
                                   + discovery_hint(raw.file, "super_pod_id"),
                                   node=node.name, what="super_pod_id"))
            continue
        pods[node.super_pod_id].append(i)
    for pod, members in pods.items():
        seen: dict[int, str] = {}
        for i in members:
            node = inv.nodes[i]
            for j, dev in enumerate(node.devices or ()):
                if dev.sdid is None:
                    continue
                if dev.sdid in seen:
                    out.append(raw.problem(("nodes", i, "devices", j, "sdid"),
                                           f"sdid {dev.sdid} is also used by {seen[dev.sdid]} in super pod {pod}",
                                           "super_device_id must be unique within a super pod (EI0014)"))
                seen.setdefault(dev.sdid, f"{node.name} device {dev.id}")
    out += _check_pod_sizes(inv, raw)
    return out


def _check_pod_sizes(inv, raw: RawInventory) -> list[Problem]:
    """Every rank table must have the same number of servers in each of its super pods."""
    from deployctl.planning.instances import groups as instance_groups, is_split

    lay = inv.layout
    # _check_layout reports how nodes form instances; groups() of a faulty layout is still safe to read here
    if is_split(lay) and (lay.prefill is None or lay.decode is None):
        return []
    pod_of = {n.name: n.super_pod_id for n in inv.nodes if n.super_pod_id is not None}
    groups = [(("nodes",), "the cluster", list(g.nodes)) if g.name == "mixed" else
              (g.key, f"the {g.name} instance", list(g.nodes)) for g in instance_groups(inv)]
    out = []
    for key, what, names in groups:
        sizes = Counter(pod_of[n] for n in names if n in pod_of)
        if len(set(sizes.values())) > 1:
            listing = ", ".join(f"pod {p}: {n}" for p, n in sorted(sizes.items()))
            out.append(raw.problem(key, f"super pods of {what} have different server counts ({listing})",
                                   "HCCL requires the same number of servers in every super pod of a rank "
                                   "table: move servers between pods or roles"))
    return out


def _check_model(inv, raw: RawInventory) -> list[Problem]:
    from deployctl import catalog

    out = []
    m = inv.model
    if m.config_path is not None:
        from deployctl.checkpoint.adopt import adopt

        found = adopt(raw.base_dir / Path(m.config_path).expanduser(), m.name)     # absolute paths stay as given
        if found:
            return [raw.problem(("model", "config_path"), f"the checkpoint in {m.config_path} cannot be sized",
                                "fix the checkpoint files named below, or point model.config_path elsewhere"),
                    *found]
    models = catalog.models()
    info = models.get(m.name)
    if info is None:
        close = [k for k in models if k.startswith(m.name)] or difflib.get_close_matches(m.name, list(models), n=1)
        out.append(raw.problem(("model", "name"), f"model '{m.name}' is not in the catalog",
                               (f"did you mean '{close[0]}'? " if close else "") +
                               f"known: {', '.join(models)}; or set model.config_path to a directory with the "
                               "checkpoint's config.json (docs/models.md)"))
    elif m.quant not in info.quants:
        out.append(raw.problem(("model", "quant"), f"{info.display} does not ship in '{m.quant}'",
                               f"use one of {', '.join(info.quants)}"))
    # equal is allowed: MindIE range-checks maxInputTokenLen only (model_deploy_config.cpp L448) and caps an input
    # at maxSeqLen - 1 (llm_manager_impl.cpp L416); published configs run 6000/6000. vLLM takes max_model_len.
    if m.max_input_len > m.max_seq_len:
        out.append(raw.problem(("model", "max_input_len"), f"max_input_len {m.max_input_len} is more than "
                               f"max_seq_len {m.max_seq_len}",
                               "max_seq_len counts input plus output tokens: raise it, or lower max_input_len"))
    if m.max_prefill_tokens is not None and m.max_prefill_tokens < m.max_input_len:
        out.append(raw.problem(("model", "max_prefill_tokens"), f"max_prefill_tokens {m.max_prefill_tokens} "
                               f"is less than max_input_len {m.max_input_len}",
                               "the engine prefills the longest input in one batch (max_prefill_tokens >= max_input_len)"))
    out += _check_mount_path(raw, ("model", "weights_path"), m.weights_path, "the weights directory")
    spec = m.speculative
    if spec is not None and spec.method == "mtp" and info is not None and not info.mtp_layers:
        out.append(raw.problem(("model", "speculative", "method"), f"{info.display} has no MTP layers "
                               "(its config.json has no num_nextn_predict_layers)",
                               "use eagle/eagle3 with draft_weights_path, or remove model.speculative"))
    if spec is not None and spec.draft_weights_path is not None:
        out += _check_mount_path(raw, ("model", "speculative", "draft_weights_path"), spec.draft_weights_path,
                                 "the draft model's weights")
    if not SERVED_NAME.match(m.served_name):
        out.append(raw.problem(("model", "served_name"), f"'{m.served_name}' is not a valid served model name",
                               "use letters, digits, '-', '.', '_' (not at the start or end), at most 256"))
    return out


def _check_mount_path(raw: RawInventory, key: KeyPath, path: str, what: str) -> list[Problem]:
    """A path that becomes a docker bind mount: absolute, no ':' ',' or spaces, not a system dir."""
    name = key[-1]
    if not path.startswith("/"):
        return [raw.problem(key, f"{name} '{path}' is not absolute",
                            f"give the absolute path of {what} on every host")]
    if BIND_UNSAFE.search(path):
        return [raw.problem(key, f"{name} '{path}' contains ':', ',' or whitespace",
                            "docker -v cannot mount such a path: rename or symlink the directory")]
    clean = "/" + path.strip("/")
    if clean in SYSTEM_DIRS or any(clean == d or clean.startswith(d + "/") for d in SYSTEM_TREES):
        return [raw.problem(key, f"{name} '{path}' is a system directory",
                            "mounting it would hide the image's own files: use a directory of its own "
                            "(e.g. /data/models/<name>)")]
    return []


def _check_container_path(raw: RawInventory, key: KeyPath, path: str) -> list[Problem]:
    """engine.mounts[].container: absolute, plain, and not a whole system tree (a package directory under
    /usr/local is what patched operator packages replace, so subdirectories are fine)."""
    if not path.startswith("/") or BIND_UNSAFE.search(path):
        return [raw.problem(key, f"container path '{path}' must be absolute, without ':', ',' or whitespace",
                            "give the path inside the container, e.g. /usr/local/Ascend/atb-models")]
    clean = "/" + path.strip("/")
    if clean in SYSTEM_DIRS or clean in SYSTEM_TREES or clean in ("/usr/local", "/proc", "/sys", "/dev"):
        return [raw.problem(key, f"container path '{path}' is a system directory",
                            "mounting over it would hide the image's own files: mount a directory below it")]
    return []


def _check_engine(inv, raw: RawInventory) -> list[Problem]:
    """The keys every engine has; the engine's driver checks its own (engines/<kind>/validate.py)."""
    e = inv.engine
    out = env_range_problems(e.env, raw, HCCL_RANGES)
    out += _check_mount_path(raw, ("engine", "work_dir"), e.work_dir, "the directory for rendered files")
    out += _check_mount_path(raw, ("engine", "deploy_dir"), e.deploy_dir, "the directory for deployed files")
    out += check_image(raw, e.image)
    out += role_only_problems(inv, raw, HCCL_RANGES)
    out += secret_env_problems(inv, raw)
    for path, env in env_sources(inv):
        for key, value in env.items():
            if not ENV_NAME.match(key):
                out.append(raw.problem(path + (key,), f"'{key}' is not a valid environment variable name",
                                       "use letters, digits and '_', not starting with a digit"))
            if isinstance(value, str) and ("\n" in value or "\r" in value):
                out.append(raw.problem(path + (key,), "value contains a newline",
                                       "docker --env-file takes one line per variable"))
    targets: dict[str, int] = {}
    for i, m in enumerate(e.mounts):
        key = ("engine", "mounts", i)
        out += _check_mount_path(raw, key + ("host",), m.host, "the host directory or file to mount")
        out += _check_container_path(raw, key + ("container",), m.container)
        inside = "/" + m.container.strip("/")
        if inside in targets:
            out.append(raw.problem(key + ("container",), f"'{m.container}' is mounted twice (also "
                                   f"engine.mounts[{targets[inside]}])", "each container path takes one mount"))
        if inside == "/" + e.work_dir.strip("/") or inside == "/" + inv.model.weights_path.strip("/"):
            out.append(raw.problem(key + ("container",), f"'{m.container}' is where deployctl mounts the "
                                   "rendered files or the weights", "mount it somewhere else"))
        targets.setdefault(inside, i)
    from deployctl import engines as _engines

    return out + _engines.for_inventory(inv).validate(inv, raw)


def _check_kubernetes(inv, raw: RawInventory) -> list[Problem]:
    """kubernetes.values must be chart values (values.schema.json) and leave deployctl's keys alone."""
    values = inv.kubernetes.values
    base = ("kubernetes", "values")
    dashed = [(k, getattr(inv.kubernetes, k)) for k in ("kubeconfig", "context")]
    out = [raw.problem(("kubernetes", k), f"{k} {v!r} starts with '-'",
                       "helm and kubectl would read it as an option: give the file's path (./-name) or the "
                       "context's name") for k, v in dashed if v is not None and v.startswith("-")]
    if values:
        out += _check_chart_values(inv, raw, values, base)
    seen: set[str] = set()
    for i, node in enumerate(inv.nodes):
        if node.k8s_node and node.k8s_node in seen:
            out.append(raw.problem(("nodes", i, "k8s_node"), f"k8s_node '{node.k8s_node}' is used twice",
                                   "each server is a different Kubernetes Node"))
        seen.add(node.k8s_node or node.name)
    return out


def _check_chart_values(inv, raw: RawInventory, values: dict, base: tuple) -> list[Problem]:
    """kubernetes.values against the chart's schema (k8s/chart_values.py), leaving the plan's keys alone."""
    from pydantic import ValidationError

    from deployctl.k8s.chart_values import CHART_NAME, owned_values, values_model
    from deployctl.render.merge import deep_merge

    def has(tree, dotted: str) -> bool:
        for part in dotted.split("."):
            if not isinstance(tree, dict) or part not in tree:
                return False
            tree = tree[part]
        return True

    owned = [raw.problem(base + tuple(key.split(".")), f"kubernetes.values.{key} is rendered by deployctl from "
                         "the plan", "change the inventory's engine/nodes/layout/model instead")
             for key in owned_values(inv.engine.kind) if has(values, key)]
    if owned:
        return owned
    model = values_model()
    out = []
    try:
        model.model_validate(deep_merge(model(engine=inv.engine.kind).model_dump(), values))
    except ValidationError as exc:
        for err in exc.errors():
            loc = base + tuple(err["loc"])
            hint = f"see the chart's values.yaml (charts/{CHART_NAME}/values.yaml) for every key and its meaning"
            if err["type"] == "extra_forbidden":
                out.append(raw.problem(loc, f"unknown chart value '{err['loc'][-1]}'", hint))
            else:
                out.append(raw.problem(loc, err["msg"], hint))
    return out


def _check_layout(inv, raw: RawInventory) -> list[Problem]:
    from deployctl.planning.instances import group_problems

    lay = inv.layout
    out = []
    names = [n.name for n in inv.nodes]
    known = set(names)
    split = lay.preset == "pd-split" or lay.prefill is not None or lay.decode is not None
    if split:
        if lay.preset not in (None, "pd-split"):
            out.append(raw.problem(("layout", "preset"), f"prefill/decode roles need preset pd-split, not "
                                   f"'{lay.preset}'", "set layout.preset: pd-split or remove prefill/decode"))
        for role in ("prefill", "decode"):
            if getattr(lay, role) is None:
                out.append(raw.problem(("layout",), f"pd-split needs layout.{role} with its nodes",
                                       f"add {role}: {{nodes: [...]}}"))
        for deg in LAYOUT_DEGREES + ("o_proj_tp", "lm_head_tp"):
            if getattr(lay, deg) is not None:
                out.append(raw.problem(("layout", deg), f"layout.{deg} is ignored by pd-split",
                                       f"set it per role: layout.prefill.{deg} / layout.decode.{deg}"))
        out += group_problems(inv, raw)
        owner: dict[str, str] = {}
        for role in ("prefill", "decode"):
            rl = getattr(lay, role)
            listed = [] if rl is None else [(("layout", role, "nodes", j), n) for j, n in enumerate(rl.nodes or ())]
            if rl is not None and isinstance(rl.instances, list):
                listed = [(("layout", role, "instances", i, "nodes", j), n)
                          for i, g in enumerate(rl.instances) for j, n in enumerate(g.nodes)]
            for path, name in listed:
                if name not in known:
                    close = difflib.get_close_matches(name, names, n=1)
                    out.append(raw.problem(path, f"node '{name}' is not in nodes",
                                           f"did you mean '{close[0]}'?" if close else
                                           f"known nodes: {', '.join(dict.fromkeys(names))}"))
                elif name in owner:
                    out.append(raw.problem(path, f"node '{name}' is already in {owner[name]}",
                                           "prefill and decode instances need separate nodes"))
                owner.setdefault(name, f"layout.{role}.nodes")
        unused = [n for n in names if n not in owner]
        if unused and not out:
            out.append(raw.problem(("nodes",), f"nodes in no role: {', '.join(unused)}",
                                   "add them to layout.prefill.nodes or layout.decode.nodes, or remove them"))
    else:
        out += group_problems(inv, raw)
    return out


def apply_facts(inv, facts):
    """Fill device IPs, SDIDs and super pod ids the inventory leaves out from preflight facts.

    What the inventory states always wins; preflight's device-ip/sdid rules report disagreements.
    """
    from deployctl.models.inventory import Device

    super_pod = inv.cluster.hardware == "a3" and inv.cluster.super_pod
    nodes = []
    for node in inv.nodes:
        host = facts.hosts.get(node.name)
        if host is not None and node.interface is None and node.server_ip in host.addresses:
            node = node.model_copy(update={"interface": host.addresses[node.server_ip]})
        if host is None or not host.reachable or not host.devices:
            nodes.append(node)
            continue
        live = host.devices
        listed = node.devices if node.devices is not None else [Device(id=i) for i in sorted(live)]
        devices = []
        for dev in listed:
            fact = live.get(dev.id)
            update = {}
            if fact is not None and dev.ip is None and fact.ip is not None:
                update["ip"] = fact.ip.ip
            if fact is not None and super_pod and dev.sdid is None and fact.sdid is not None:
                update["sdid"] = fact.sdid
            devices.append(dev.model_copy(update=update) if update else dev)
        change = {"devices": devices}
        pods = {d.super_pod_id for d in live.values() if d.super_pod_id is not None}
        if super_pod and node.super_pod_id is None and len(pods) == 1:
            change["super_pod_id"] = str(pods.pop())
        nodes.append(node.model_copy(update=change))
    return inv.model_copy(update={"nodes": nodes, "cluster": _sku_from_facts(inv, facts)})


def _sku_from_facts(inv, facts):
    """cluster.sku from npu-smi's chip name when the inventory names none and every host reports the same
    known one (910B3, Ascend910_9391, ...); else the cluster as it is."""
    if inv.cluster.sku is not None:
        return inv.cluster
    from deployctl.perf.hardware import sku_for

    names = {c.name for h in facts.hosts.values() if h.reachable and h.npu for c in h.npu.chips}
    if len(names) != 1:
        return inv.cluster
    name = names.pop()
    try:
        sku_for(inv.cluster.hardware, name)
    except ValueError:
        return inv.cluster
    return inv.cluster.model_copy(update={"sku": name})


CHECKS = (_check_nodes, check_ssh, _check_sku, _check_super_pod, _check_devices, _check_model, _check_engine, _check_kubernetes,
          _check_layout, cluster_dir_problems)


def validate_inventory(raw: RawInventory, read_text: Callable[[Path], str] | None = None, facts=None):
    """Validate the whole inventory and return it with device IPs filled in from hccn_conf and, when
    ``facts`` (a preflight FactsFile) is given, from the live hosts.

    Raises:
        InventoryError: with every problem found, each naming file, line and key path.
    """
    inv, problems = inventory_problems(raw, read_text, facts)
    if problems:
        raise InventoryError(count_problems(raw.file, problems), problems=problems)
    return inv


def validate_for_discovery(raw: RawInventory, read_text: Callable[[Path], str] | None = None, facts=None):
    """Validation for `preflight`: what only the hosts can tell (device IPs, A3 SDIDs and super pod ids
    the inventory leaves out: ``NeedsFacts``) is returned as notes instead of refused.

    Returns:
        (inventory, the NeedsFacts notes), the inventory filled from ``facts`` when given.
    Raises:
        InventoryError: every other problem, as ``validate_inventory`` reports it.
    """
    inv, problems = inventory_problems(raw, read_text, facts)
    refused = [p for p in problems if not isinstance(p, NeedsFacts)]
    if refused:
        raise InventoryError(count_problems(raw.file, refused), problems=refused)
    return inv, [p for p in problems if isinstance(p, NeedsFacts)]


def inventory_problems(raw: RawInventory, read_text: Callable[[Path], str] | None = None, facts=None) -> tuple:
    """(inventory, every value problem, NeedsFacts included), sorted; structure problems raise InventoryError."""
    from pydantic import ValidationError

    from deployctl.models.inventory import Inventory
    from deployctl.planning.layout import layout_problems

    # refused before anything else: no later message, file or command line may carry these values
    hostile = hostile_problems(raw)
    try:
        inv = Inventory.model_validate(raw.data)
    except ValidationError as exc:
        bad = {p.path for p in hostile}
        structure = [p for p in _structure_problems(raw, exc)
                     if not any(p.path == b or p.path.startswith((b + ".", b + "[")) for b in bad)]
        problems = sorted(hostile + structure, key=Problem.sort_key)
        raise InventoryError(count_problems(raw.file, problems), problems=problems) from None
    if hostile:
        problems = sorted(hostile, key=Problem.sort_key)
        raise InventoryError(count_problems(raw.file, problems), problems=problems)
    inv, problems = _resolve_devices(inv, raw, read_text or read_hccn_conf)
    if facts is not None:
        inv = apply_facts(inv, facts)
    bad_hccn = {n.name for i, n in enumerate(inv.nodes)
                if any(p.path == f"nodes[{i}].hccn_conf" for p in problems)}
    for check in CHECKS:
        problems += check(inv, raw)
    if not any(p.path.startswith("layout") for p in problems):
        problems += layout_problems(inv, raw, skip_ips=bad_hccn)
        problems += interface_gaps(inv, raw, engines.for_inventory(inv).needs_interfaces(inv))
    if facts is not None:   # the facts were there and still left the gap: "run preflight" would not help
        problems = [dataclasses.replace(p, hint=discovery_hint(raw.file, p.what, facts_given=True))
                    if isinstance(p, NeedsFacts) else p for p in problems]
    return inv, sorted(dict.fromkeys(problems), key=Problem.sort_key)


def count_problems(file: str, problems: list) -> str:
    n = len(problems)
    return f"{file}: {n} problem{'s' if n != 1 else ''}"
