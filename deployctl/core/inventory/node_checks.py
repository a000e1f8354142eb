"""Checks of the servers: names and addresses, devices and their IPs (inventory, hccn.conf), SKU, super pods."""

from __future__ import annotations

from typing import TYPE_CHECKING

from collections import Counter, defaultdict
from pathlib import Path

from deployctl.core.errors import Problem
from deployctl.core.input.gaps import discovery_hint, needs_facts
from deployctl.core.inventory.hccn import HccnReadError, parse_hccn_conf
from deployctl.core.input.hostile import (HOST_TARGET, JINJA, bad_char, char_hint, ip_address, ip_kind, zone_problem)
from deployctl.core.input.local_files import NOT_READ, LocalFiles
from deployctl.core.input.raw import RawInventory

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory


def check_nodes(inv: Inventory, raw: RawInventory) -> list[Problem]:
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


def resolve_devices(inv: Inventory, raw: RawInventory, local: LocalFiles) -> tuple[Inventory, list[Problem]]:
    """Fill node devices from the hccn_conf copies read into ``local``; return (inventory, problems)."""
    from deployctl.core.models.inventory import Device

    problems, nodes = [], []
    for i, node in enumerate(inv.nodes):
        if not node.hccn_conf:
            nodes.append(node)
            continue
        shown = str(Path(raw.file).parent / node.hccn_conf)
        try:
            text = local.hccn.get(node.hccn_conf, NOT_READ)
            if isinstance(text, Exception):
                raise text
            addresses = parse_hccn_conf(text)
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
                j = [d.id for d in node.devices or ()].index(dev_id)   # dev.ip set: node.devices lists it
                problems.append(raw.problem(("nodes", i, "devices", j, "ip"),
                                            f"device {dev_id} ip {dev.ip} differs from {conf_ip} in {shown}",
                                            "remove one of them or make them agree"))
            merged.append(dev if dev.ip or not conf_ip else dev.model_copy(update={"ip": conf_ip}))
        if node.devices is not None:  # an explicit device list decides which devices are used
            merged = [d for d in merged if d.id in listed]
        nodes.append(node.model_copy(update={"devices": merged}))
    return inv.model_copy(update={"nodes": nodes}), problems


def check_devices(inv: Inventory, raw: RawInventory) -> list[Problem]:
    out = []
    per_node = inv.devices_per_node
    hw = inv.cluster.hardware.upper()
    ips: dict[str, tuple[str, int]] = {}              # device IP -> (node, device) that has it first
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
                kind = ip_kind(dev.ip)
                zone = zone_problem(raw, ipkey, dev.ip)
                if zone:
                    out.append(zone)
                elif kind is None:
                    out.append(raw.problem(ipkey, f"{dev.ip!r} is not a valid IP address",
                                           "use the NPU NIC IP from `hccn_tool -i N -ip -g` (ipaddr:)"))
                elif kind[1]:
                    out.append(raw.problem(ipkey, f"{dev.ip!r} is a placeholder, not an NPU NIC IP",
                                           "use the NPU NIC IP from `hccn_tool -i N -ip -g` (ipaddr:)"))
                else:
                    if dev.ip in ips:
                        out.append(raw.problem(ipkey, f"device IP {dev.ip} is also used by "
                                               f"{ips[dev.ip][0]} device {ips[dev.ip][1]}",
                                               "HCCL requires globally unique device IPs"))
                    else:
                        ips[dev.ip] = (node.name, dev.id)
                    if kind[0] not in families:
                        families[kind[0]] = f"{node.name} device {dev.id}"
                        first_of[kind[0]] = ipkey
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


def check_sku(inv: Inventory, raw: RawInventory) -> list[Problem]:
    """cluster.sku names a SKU (or npu-smi chip name) of the cluster's hardware in the performance catalog."""
    if inv.cluster.sku is None:
        return []
    from deployctl.core.sizing.hardware import sku_for

    try:
        sku_for(inv.cluster.hardware, inv.cluster.sku)
    except ValueError as exc:
        return [raw.problem(("cluster", "sku"), str(exc), "remove it to use the hardware's default, or name one "
                            "of the SKUs listed (deployctl/core/sizing/hardware.yaml)")]
    return []


def check_super_pod(inv: Inventory, raw: RawInventory) -> list[Problem]:
    c = inv.cluster
    if c.super_pod and c.hardware != "a3":
        return [raw.problem(("cluster", "super_pod"), "super_pod is only for a3 hardware",
                            "set super_pod: false (A2 rank tables are version 1.0)")]
    if not c.super_pod:
        return []
    out: list[Problem] = []
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


def _check_pod_sizes(inv: Inventory, raw: RawInventory) -> list[Problem]:
    """Every rank table must have the same number of servers in each of its super pods."""
    from deployctl.core.sizing.instances import groups as instance_groups, is_split

    lay = inv.layout
    # check_layout reports how nodes form instances; groups() of a faulty layout is still safe to read here
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
