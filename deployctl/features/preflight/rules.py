"""Preflight rules: pure judgements over the inventory and the facts of every host.

Each rule has an id (used in reports, JSON and tests), a severity (FAIL blocks a deployment, WARN
does not) and names the host and device it concerns, with a fix.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from functools import partial

from deployctl.core.models.host_facts import Finding, HostFacts
from deployctl.core.models.inventory import Inventory
from deployctl.features.preflight.pairing import check_image_pairing
from deployctl.probes import versions

GIB = 2**30
BAD_HEALTH = ("Alarm", "Critical", "UNKNOWN")


def _f(rule, severity, message, hint="", host=None, device=None) -> Finding:
    return Finding(rule=rule, severity=severity, host=host, device=device, message=message, hint=hint)


def check_reachable(inv: Inventory, facts: dict[str, HostFacts]):
    for h in facts.values():
        if not h.reachable:
            yield _f("host-reachable", "FAIL", f"{h.error}", h.error_hint or "", h.name)


def check_driver_firmware(inv, facts):
    for h in _up(facts):
        if not (h.driver and h.firmware):
            continue
        try:
            if not versions.firmware_fits_driver(h.driver, h.firmware):
                rng = ", ".join(f"[{lo},{hi}]" for lo, hi in h.driver.compatible_version_fw)
                yield _f("driver-firmware", "FAIL",
                         f"firmware {h.firmware.version} is outside driver {h.driver.package}'s "
                         f"compatible_version_fw {rng}",
                         "install the firmware package of the same HDK release as the driver, then reboot",
                         h.name)
            elif not versions.driver_fits_firmware(h.firmware, h.driver):
                yield _f("driver-firmware", "WARN",
                         f"driver {h.driver.package} is not in firmware {h.firmware.version}'s "
                         "compatible_version_drv list", "check the HDK release notes for this pair", h.name)
        except ValueError as exc:
            yield _f("driver-firmware", "WARN", f"cannot compare versions: {exc}", "", h.name)


def _reference(values: dict[str, object], trusted: set[str]) -> object | None:
    """The value most nodes agree on (preferring trusted nodes); None when there is no majority."""
    pool = {n: v for n, v in values.items() if n in trusted} or values
    counts = Counter(pool.values()).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None
    return counts[0][0]


def _compatible(h: HostFacts) -> bool:
    try:
        return versions.firmware_fits_driver(h.driver, h.firmware)
    except ValueError:
        return False


def check_same_versions(inv, facts):
    pairs = {h.name: (h.driver.package, h.firmware.version) for h in _up(facts) if h.driver and h.firmware}
    if len(set(pairs.values())) <= 1:
        return
    good = {h.name for h in _up(facts) if h.name in pairs and _compatible(h)}
    common = _reference(pairs, good)
    for name, pair in pairs.items():
        if common is None:
            others = ", ".join(f"{n}: {p[0]} / {p[1]}" for n, p in pairs.items() if n != name)
            yield _f("versions-consistent", "FAIL", f"driver {pair[0]} / firmware {pair[1]}; no majority "
                     f"among the nodes ({others})", "install the same HDK (driver + firmware) on every node", name)
        elif pair != common:
            yield _f("versions-consistent", "FAIL",
                     f"driver {pair[0]} / firmware {pair[1]} differs from the other nodes "
                     f"(driver {common[0]} / firmware {common[1]})",
                     "install the same HDK (driver + firmware) on every node", name)


def check_npus(inv, facts):
    want = inv.devices_per_node
    for h in _up(facts):
        if h.npu is None:
            continue
        if h.npu.layout != inv.cluster.hardware:
            yield _f("npu-count", "FAIL", f"npu-smi shows an {h.npu.layout.upper()} server, the inventory "
                     f"says {inv.cluster.hardware}", "fix cluster.hardware or the node list", h.name)
        ids = {c.phy_id for c in h.npu.chips}
        missing = sorted(set(range(want)) - ids)
        if missing:
            yield _f("npu-count", "FAIL", f"{len(ids)} of {want} devices visible; missing "
                     f"{', '.join(map(str, missing))}", "check the card seating/driver (dmesg, npu-smi info -l) "
                     "and reboot if a device dropped", h.name)
        for c in h.npu.chips:
            if c.health in BAD_HEALTH:
                yield _f("npu-health", "FAIL", f"health {c.health}", f"inspect with npu-smi info -t health -i "
                         f"{c.npu}; replace or reset the NPU before deploying", h.name, c.phy_id)
            elif c.health == "Warning":
                yield _f("npu-health", "WARN", "health Warning (minor alarm)",
                         f"npu-smi info -t health -i {c.npu} shows the alarm", h.name, c.phy_id)
            if c.hbm_total_mb and c.hbm_total_mb < inv.cluster.hbm_gb * 1024:
                yield _f("hbm-size", "FAIL", f"{c.hbm_total_mb} MB HBM, the plan assumes "
                         f"{inv.cluster.hbm_gb * 1024} MB", "set cluster.hbm_gb to what npu-smi shows", h.name,
                         c.phy_id)
        for p in h.npu.processes:
            yield _f("npu-busy", "FAIL", f"process {p.pid} ({p.name or 'unnamed'}) holds {p.memory_mb} MB on "
                     f"NPU {p.npu} chip {p.chip}", "stop it (an old engine?) before deploying: the memory "
                     "plan assumes empty NPUs", h.name, p.phy_id)


def check_links(inv, facts):
    for h in _up(facts):
        for d in h.devices.values():
            if d.link_up is False:
                yield _f("link-up", "FAIL", "NPU NIC link DOWN", f"check the cable/switch port; "
                         f"hccn_tool -i {d.phy_id} -link -g", h.name, d.phy_id)
            if d.net_health is not None and d.net_health != "Success":
                yield _f("net-health", "FAIL", f"net health '{d.net_health}'", f"check the detect IP and "
                         f"route: hccn_tool -i {d.phy_id} -netdetect -g / -gateway -g", h.name, d.phy_id)


def check_tls(inv, facts):
    states = {(h.name, d.phy_id): d.tls.enabled for h in _up(facts) for d in h.devices.values() if d.tls}
    if not states:
        return
    if len(set(states.values())) > 1:
        on = [k for k, v in states.items() if v]
        off = [k for k, v in states.items() if not v]
        odd, value = (on, 1) if len(on) <= len(off) else (off, 0)
        for host_name, dev in odd:
            yield _f("tls-consistent", "FAIL", f"TLS switch {value}, the other devices have {1 - value}",
                     f"HCCL needs the same TLS switch on every rank (EI0016): hccn_tool -i {dev} -tls -s "
                     "enable 0", host_name, dev)
    elif all(states.values()):
        yield _f("tls-consistent", "WARN", "TLS is enabled on every device",
                 "the engines' guides set hccn_tool -i N -tls -s enable 0 on every device")


def _inventory_ips(inv: Inventory) -> dict[tuple[str, int], str]:
    return {(n.name, d.id): d.ip for n in inv.nodes for d in n.devices or () if d.ip}


def check_device_ips(inv, facts):
    want = _inventory_ips(inv)
    seen: dict[str, tuple[str, int]] = {}
    for h in _up(facts):
        for d in h.devices.values():
            if d.ip is None:
                visible = h.npu is None or any(c.phy_id == d.phy_id for c in h.npu.chips)
                if f"hccn.ip.{d.phy_id}" in h.probe_errors or not visible:
                    continue          # not read (or no such device): npu-count / "not checked" say so
                if (h.name, d.phy_id) in want or d.link_up is not None:
                    yield _f("device-ip", "FAIL", "no IP configured on the NPU NIC",
                             f"hccn_tool -i {d.phy_id} -ip -s address <ip> netmask <mask>", h.name, d.phy_id)
                continue
            ip = d.ip.ip
            if ip in ("0.0.0.0", "::") or ip.startswith("127."):
                yield _f("device-ip", "FAIL", f"placeholder IP {ip} on the NPU NIC",
                         f"hccn_tool -i {d.phy_id} -ip -s address <ip> netmask <mask>", h.name, d.phy_id)
                continue
            if ip in seen:
                yield _f("device-ip", "FAIL", f"IP {ip} is also on {seen[ip][0]} device {seen[ip][1]}",
                         "device IPs must be unique across the cluster", h.name, d.phy_id)
            seen.setdefault(ip, (h.name, d.phy_id))
            expected = want.get((h.name, d.phy_id))
            if expected and expected != ip:
                yield _f("device-ip", "FAIL", f"inventory says {expected}, the NIC has {ip}",
                         "fix the inventory (or re-render with --facts), or the NIC: HCCL checks it (EI0014)",
                         h.name, d.phy_id)
            conf = h.hccn_conf.addresses.get(d.phy_id) if h.hccn_conf else None
            if conf and conf != ip:
                yield _f("device-ip", "WARN", f"/etc/hccn.conf says {conf}, the NIC has {ip}",
                         "the NIC changes back at reboot: make /etc/hccn.conf agree", h.name, d.phy_id)


def check_sdids(inv, facts):
    if not (inv.cluster.hardware == "a3" and inv.cluster.super_pod):
        return
    want = {(n.name, d.id): d.sdid for n in inv.nodes for d in n.devices or () if d.sdid is not None}
    pod_of = {n.name: n.super_pod_id for n in inv.nodes}
    seen: dict[tuple, tuple[str, int]] = {}
    for h in _up(facts):
        live = {d.super_pod_id for d in h.devices.values() if d.super_pod_id is not None}
        if live and pod_of.get(h.name) is not None and {str(p) for p in live} != {pod_of[h.name]}:
            yield _f("sdid", "FAIL", f"npu-smi says super pod {', '.join(map(str, sorted(live)))}, the inventory "
                     f"says {pod_of[h.name]}", "set nodes[].super_pod_id to the Super Pod ID npu-smi reports "
                     "(the rank table's super_pod_list must match the hardware)", h.name)
        for d in h.devices.values():
            if d.sdid is None:
                continue
            # the inventory's super pod, else the one npu-smi reports (preflight discovers it)
            pod = pod_of.get(h.name) or (str(d.super_pod_id) if d.super_pod_id is not None else None)
            key = (pod, d.sdid)
            if key in seen:
                yield _f("sdid", "FAIL", f"SDID {d.sdid} also on {seen[key][0]} device {seen[key][1]} in super "
                         f"pod {key[0]}", "SDIDs must be unique in a super pod (EI0014)", h.name, d.phy_id)
            seen.setdefault(key, (h.name, d.phy_id))
            if want.get((h.name, d.phy_id)) not in (None, d.sdid):
                yield _f("sdid", "FAIL", f"inventory sdid {want[(h.name, d.phy_id)]}, npu-smi says {d.sdid}",
                         "use the SDID npu-smi reports (or --facts)", h.name, d.phy_id)


def check_pings(inv, facts):
    for h in _up(facts):
        for p in h.pings:
            if not p.measured:
                yield _f("peer-reachable", "WARN", f"device {p.device} to {p.peer} device {p.peer_device} "
                         f"({p.peer_ip}): {p.detail}", "run preflight again to measure it", h.name, p.device)
            elif not p.ok:
                yield _f("peer-reachable", "FAIL", f"device {p.device} cannot reach {p.peer} device "
                         f"{p.peer_device} ({p.peer_ip}): {p.detail}",
                         "check the RoCE switch/VLAN and routes between the two NICs", h.name, p.device)


def _ports_per_node(inv, plan=None) -> dict[str, set[int]]:
    """The host ports each node's processes listen on, as the engine spec says (e.g. a distributed MindIE
    decode node's per-DP-rank ports, the router's on its node), plus the ports every node needs. ``plan``:
    the operation's plan when it has one (else planned here)."""
    from deployctl.core.errors import DeployctlError
    from deployctl.core.sizing.planner import plan_layout

    engine_spec = inv.engine_spec
    common = set(engine_spec.host_ports(inv).values())
    try:
        plan = plan if plan is not None else plan_layout(inv)
    except DeployctlError:          # plan refuses: `plan` says why; check what every node needs
        return {n.name: common for n in inv.nodes}
    out = {}
    from deployctl.core.render.processes import processes

    for node in plan.nodes:
        procs = processes(plan, node.name)       # the engine's, and a fleet's router on its node
        out[node.name] = common | set(procs.engine.ports) | set(procs.router.ports if procs.router else ())
    return out


def check_host_basics(inv, facts, plan=None):
    e = inv.engine
    node_ports = _ports_per_node(inv, plan)
    for h in _up(facts):
        ports = node_ports.get(h.name, set())
        w = h.weights
        if w is not None and (not w.exists or not w.config_json or w.readable is False):
            what = "missing" if not w.exists else ("unreadable" if w.readable is False else "has no config.json")
            yield _f("weights", "FAIL", f"{inv.model.weights_path} {what}", "copy the weights to the same "
                     "path on every node (the engine reads its config.json: torch_dtype, vocab_size)", h.name)
        if h.runtime_version is None and "host.docker" not in h.probe_errors:
            yield _f("image", "FAIL", "no container runtime answers (docker version)",
                     "install and start docker on this node", h.name)
        elif h.image_present is False:
            yield _f("image", "FAIL", f"image {e.image} is not present", f"docker pull {e.image}", h.name)
        if h.ports is not None:
            for port in sorted(ports & h.ports.ports):
                yield _f("ports-free", "FAIL", f"port {port} is already in use",
                         f"find it with ss -ltnp 'sport = :{port}' and stop it, or change engine.ports", h.name)
        if h.shm is not None and h.shm.avail_bytes < 8 * GIB:
            yield _f("shm", "WARN", f"/dev/shm has {h.shm.avail_bytes / GIB:.1f} GiB free",
                     "HCCL and the engine use shared memory (host IPC): free or enlarge /dev/shm", h.name)
        for name, why in sorted(h.probe_errors.items()):
            if name.startswith(("npu.info", "ver.", "hccn.ip.0", "host.docker", "host.addr")):
                yield _f("probe", "WARN", f"probe {name} gave no facts: {why}", "", h.name)


def check_weights_same(inv, facts):
    """A half-copied weights directory shows up as a different size on one node."""
    sizes = {h.name: h.weights.total_bytes for h in _up(facts)
             if h.weights and h.weights.exists and h.weights.total_bytes}
    if len(set(sizes.values())) <= 1:
        return
    common = _reference(sizes, set())
    for name, size in sizes.items():
        if common is None or size != common:
            other = f"the other nodes {common:,}" if common is not None else "no majority: " + ", ".join(
                f"{n} {v:,}" for n, v in sizes.items() if n != name)
            yield _f("weights", "FAIL", f"{inv.model.weights_path} holds {size:,} bytes, {other}",
                     "re-copy the weights (rsync -a --checksum) so every node has the same files", name)


def check_disk_and_clocks(inv, facts):
    for h in _up(facts):
        if h.weights_disk is not None and h.weights_disk.avail_bytes < 20 * GIB:
            yield _f("disk", "WARN", f"{h.weights_disk.avail_bytes / GIB:.1f} GiB free on "
                     f"{h.weights_disk.mount_point}", "logs and core dumps need room: free at least 20 GiB",
                     h.name)
    offsets = {h.name: h.clock_offset_s for h in _up(facts) if h.clock_offset_s is not None}
    if len(offsets) > 1 and max(offsets.values()) - min(offsets.values()) > 1.0:
        early = min(offsets, key=offsets.get)
        late = max(offsets, key=offsets.get)
        yield _f("clock", "WARN", f"clocks of the nodes differ by {offsets[late] - offsets[early]:.1f} s "
                 f"({late} ahead of {early})", "enable NTP/chrony on every node")


def check_uniform_hosts(inv, facts):
    arches = {h.name: h.os.arch for h in _up(facts) if h.os and h.os.arch}
    if len(set(arches.values())) > 1:
        common = Counter(arches.values()).most_common(1)[0][0]
        for name, arch in arches.items():
            if arch != common:
                yield _f("hosts-uniform", "WARN", f"architecture {arch}, the others are {common}",
                         "one image must run on every node", name)


RULES = (check_reachable, check_driver_firmware, check_same_versions, check_npus, check_links, check_tls,
         check_device_ips, check_sdids, check_pings, check_host_basics, check_weights_same,
         check_disk_and_clocks, check_uniform_hosts, check_image_pairing)


def _up(facts: dict[str, HostFacts]):
    return [h for h in facts.values() if h.reachable]


def check_facts(inv: Inventory, facts: dict[str, HostFacts], plan=None) -> list[Finding]:
    """Every finding, FAIL first, then by host and device (stable for reports and tests). ``plan``: the
    operation's plan when it has one (the port rule needs it; else it plans)."""
    rules = [partial(rule, plan=plan) if rule is check_host_basics else rule for rule in RULES]
    return sort_findings(inv, [f for rule in rules for f in rule(inv, facts)])


def sort_findings(inv: Inventory, findings: list[Finding]) -> list[Finding]:
    order = {n.name: i for i, n in enumerate(inv.nodes)}
    return sorted(findings, key=lambda f: (f.severity != "FAIL", order.get(f.host, -1),
                                           -1 if f.device is None else f.device, f.rule))


def check_gaps(inv: Inventory, facts: dict[str, HostFacts], left) -> list[Finding]:
    """``needs-facts``: what the inventory leaves to preflight (device IPs, A3 SDIDs, super pod ids) and
    the facts still do not give (``left``: the NeedsFacts problems of the inventory with the facts
    applied); `plan --facts` and `up` would refuse it. Unreachable hosts already FAIL host-reachable."""
    from deployctl.core.input.gaps import NOUNS

    down = {h.name for h in facts.values() if not h.reachable}
    grouped: dict[tuple[str, str], list] = defaultdict(list)
    for p in left:
        if p.node not in down:
            grouped[(p.node, p.what)].append(p.device)
    out = []
    for (node, what), devices in grouped.items():
        which = sorted(d for d in devices if d is not None)
        on = f" (devices {', '.join(map(str, which))})" if which and len(which) < inv.devices_per_node else ""
        out.append(_f("needs-facts", "FAIL", f"the inventory leaves out the {NOUNS[what]}{on} and preflight "
                      "could not read them", "see this host's other findings (probe, device-ip, sdid), or write "
                      "them into the inventory: `plan --facts` and `up` need them", node))
    return out


def not_checked(inv: Inventory, facts: dict[str, HostFacts], ping_sample: int) -> list[str]:
    notes = []
    down = [h.name for h in facts.values() if not h.reachable]
    if down:
        notes.append(f"nothing on {', '.join(down)} (unreachable)")
    failed = defaultdict(list)
    for h in _up(facts):
        for name in h.probe_errors:
            failed[name.split(".")[0] + "." + name.split(".")[1]].append(h.name)
    for probe, hosts in sorted(failed.items()):
        notes.append(f"{probe} on {', '.join(sorted(set(hosts)))} (probe gave no facts)")
    bare = [n.name for n in inv.nodes if not any(d.ip for d in n.devices or ())]
    if bare:
        notes.append(f"device IPs against the inventory on {', '.join(bare)} (it lists none: the discovered "
                     "ones are saved)")
    if inv.cluster.hardware == "a3" and inv.cluster.super_pod:
        bare = [n.name for n in inv.nodes if n.super_pod_id is None or not any(
            d.sdid is not None for d in n.devices or ())]
        if bare:
            notes.append(f"SDIDs and super pod ids against the inventory on {', '.join(bare)} (it leaves them "
                         "out: the discovered ones are saved)")
    up = len(_up(facts))
    if up - 1 > ping_sample:
        notes.append(f"peer reachability sampled: each node pinged {ping_sample} of {up - 1} peers")
    notes.append("TLS certificate expiry, RoCE bandwidth")
    return notes
