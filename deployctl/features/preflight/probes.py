"""The probes preflight runs on each host, and how their outputs become HostFacts.

Every probe is a fact of deployctl.probes (its command and its parser); here each gets its key in the batch
output: ``npu.info``, ``hccn.ip.3`` (device 3), ``npu.spod.2.1`` (NPU 2, chip 1), ``ping.0.node2.0`` ...
"""

from __future__ import annotations

from typing import Callable

from deployctl.io.executor import HostTarget
from deployctl.core.models.host_facts import DeviceFacts, HostFacts, PingCheck
from deployctl.io.batch import ProbeOutput
from deployctl.probes import containers, hccn_tool, host, image_versions, npu_smi, versions
from deployctl.core.textsafe import clean

NPUS_PER_SERVER = 8          # A2: 8 x 910B; A3: 8 x 910C packages of 2 dies
# what one probe may print to be parsed (npu-smi info of 16 dies with processes is a few kB): a host printing more
# gets a probe error for it, not minutes of parsing
MAX_PROBE_TEXT = 1 << 20


def devices_per_server(hardware: str) -> int:
    return 8 if hardware == "a2" else 16


def host_commands(hardware: str, image: str, weights_path: str,
                  image_packages: tuple[str, ...] = ()) -> list[tuple[str, list[str]]]:
    """Phase 1: everything about one host that needs no other host's facts."""
    cmds = [
        ("npu.info", npu_smi.NPU_INFO.command()),
        ("npu.list", npu_smi.NPU_LIST.command()),
        ("ver.driver", versions.DRIVER_VERSION.command()),
        ("ver.firmware", versions.FIRMWARE_VERSION.command()),
        ("hccn.conf", hccn_tool.HCCN_CONF.command()),
        ("host.os", host.OS_RELEASE.command()),
        ("host.arch", host.ARCH.command()),
        ("host.shm", host.SHM.command()),
        ("host.weights", host.WEIGHTS.command(weights_path)),
        ("host.weights_df", host.WEIGHTS_DISK.command(weights_path)),
        ("host.docker", containers.RUNTIME_VERSION.command()),
        ("host.image", containers.IMAGE.command(image)),
        ("image.versions", image_versions.IMAGE_VERSIONS.command(image, image_packages)),
        ("host.ports", host.PORTS.command()),
        ("host.addr", host.ADDRESSES.command()),
    ]
    cmds += [(f"npu.board.{n}", npu_smi.BOARD.command(n)) for n in range(NPUS_PER_SERVER)]
    for dev in range(devices_per_server(hardware)):
        cmds += [(f"hccn.ip.{dev}", hccn_tool.IP.command(dev)),
                 (f"hccn.link.{dev}", hccn_tool.LINK.command(dev)),
                 (f"hccn.health.{dev}", hccn_tool.NET_HEALTH.command(dev)),
                 (f"hccn.tls.{dev}", hccn_tool.TLS.command(dev))]
        if hardware == "a3":
            npu, chip = divmod(dev, 2)
            cmds += [(f"hccn.vnic.{dev}", hccn_tool.VNIC.command(dev)),
                     (f"npu.spod.{npu}.{chip}", npu_smi.SPOD_INFO.command(npu, chip))]
    return cmds


def _parse(out: dict[str, ProbeOutput], name: str, parse: Callable, errors: dict, ok_rc: tuple | None = (0,)):
    """Parse one probe's output; a missing/failed/unparseable probe records why and yields None.

    ``ok_rc=None`` lets the parser judge any exit code (hccn_tool exits non-zero for "no IP").
    """
    res = out.get(name)
    if res is None or res.rc == -1:     # missing, or its output ends before its end marker (io/batch.split_outputs)
        errors[name] = "no output (the batch was cut short)"
        return None
    if res.rc == 124:
        errors[name] = "timed out"
        return None
    if ok_rc is not None and res.rc not in ok_rc:
        errors[name] = clean(f"exit {res.rc}: {res.text.strip()[:200] or 'no output'}", multiline=False)
        return None
    if len(res.text) > MAX_PROBE_TEXT:
        errors[name] = f"printed {len(res.text)} characters, more than the {MAX_PROBE_TEXT} a probe may: not parsed"
        return None
    try:
        return parse(res.text)
    except ValueError as exc:           # pydantic's ValidationError too: a value outside its fact's pattern
        errors[name] = clean(str(exc), multiline=False)[:300]
        return None
    except Exception as exc:            # noqa: BLE001 - a parser bug on odd output: a finding about the host
        errors[name] = clean(f"could not be parsed ({type(exc).__name__}: {exc})", multiline=False)[:300]
        return None


def _device_facts(hardware: str, out: dict[str, ProbeOutput], errors: dict) -> dict[int, DeviceFacts]:
    devices = {}
    for dev in range(devices_per_server(hardware)):
        link = _parse(out, f"hccn.link.{dev}", hccn_tool.LINK.parse, errors)
        health = _parse(out, f"hccn.health.{dev}", hccn_tool.NET_HEALTH.parse, errors)
        spod = None
        if hardware == "a3":
            npu, chip = divmod(dev, 2)
            spod = _parse(out, f"npu.spod.{npu}.{chip}", npu_smi.SPOD_INFO.parse, errors)
        devices[dev] = DeviceFacts(
            phy_id=dev,
            # hccn_tool exits non-zero when no IP is set, printing the "no ip was preset" form
            ip=_parse(out, f"hccn.ip.{dev}", hccn_tool.IP.parse, errors, ok_rc=None),
            vnic=_parse(out, f"hccn.vnic.{dev}", hccn_tool.VNIC.parse, errors) if hardware == "a3" else None,
            link_up=link.up if link else None,
            net_health=health.status if health else None,
            tls=_parse(out, f"hccn.tls.{dev}", hccn_tool.TLS.parse, errors),
            sdid=spod.sdid if spod else None, super_pod_id=spod.super_pod_id if spod else None)
    return devices


def assemble(target: HostTarget, hardware: str, out: dict[str, ProbeOutput], clock_offset: float | None,
             seconds: float) -> HostFacts:
    """Turn one host's probe outputs into HostFacts (pure)."""
    errors: dict[str, str] = {}
    os_text = out.get("host.os")
    arch = _parse(out, "host.arch", host.ARCH.parse, errors)
    os_info = _parse(out, "host.os", host.OS_RELEASE.parse, errors) if os_text else None
    if os_info and arch:
        os_info = os_info.model_copy(update={"arch": arch})
    boards = {}
    for n in range(NPUS_PER_SERVER):
        board = _parse(out, f"npu.board.{n}", npu_smi.BOARD.parse, errors)
        if board:
            boards[n] = board
    docker = out.get("host.docker")
    # docker's own non-zero exit (no daemon, no binary) is the evidence the image rule reports; no answer at all
    # (the batch cut short, the probe timed out on a busy host) is none: a probe error, not "no runtime answers"
    runtime = (_parse(out, "host.docker", containers.RUNTIME_VERSION.parse, errors)
               if docker is None or docker.rc in (0, 124, -1) else None)
    image = out.get("host.image")
    return HostFacts(
        name=target.name, address=target.address,
        os=os_info,
        npu=_parse(out, "npu.info", npu_smi.NPU_INFO.parse, errors),
        boards=boards,
        driver=_parse(out, "ver.driver", versions.DRIVER_VERSION.parse, errors),
        firmware=_parse(out, "ver.firmware", versions.FIRMWARE_VERSION.parse, errors),
        hccn_conf=_parse(out, "hccn.conf", hccn_tool.HCCN_CONF.parse, errors),
        devices=_device_facts(hardware, out, errors),
        shm=_parse(out, "host.shm", host.SHM.parse, errors),
        weights=_parse(out, "host.weights", host.WEIGHTS.parse, errors),
        weights_disk=_parse(out, "host.weights_df", host.WEIGHTS_DISK.parse, errors),
        runtime_version=runtime,
        image_present=(image.rc == 0) if (image and runtime) else None,
        image_versions=_parse(out, "image.versions", image_versions.IMAGE_VERSIONS.parse, errors) if runtime else None,
        ports=_parse(out, "host.ports", host.PORTS.parse, errors),
        addresses=_parse(out, "host.addr", host.ADDRESSES.parse, errors) or {},
        clock_offset_s=clock_offset, probe_errors=errors, seconds=round(seconds, 3))


def device_ips(f: HostFacts) -> list[tuple[int, str]]:
    """(phy_id, ip) of a reachable host's devices that have an IP, sorted; [] otherwise: what phase 2 pings."""
    return sorted((d.phy_id, d.ip.ip) for d in f.devices.values() if d.ip) if f.reachable else []


def host_ping_checks(name: str, order: list[str], ips: dict[str, list[tuple[int, str]]],
                     sample: int) -> list[tuple[int, str, int, str]] | None:
    """Phase 2 for one host, from the phase-1 facts known so far: its entry of ``ping_plan`` over all hosts,
    or None while that still depends on a host not probed yet.

    ``order``: every host, in inventory order; ``ips``: ``device_ips`` of each host probed so far
    (``name`` among them). A host pings the next ``sample`` hosts after it (in ``order``, wrapping) that
    are reachable and have device IPs, so it needs the facts of the hosts up to the last of those, not of
    the whole cluster: its pings can start while other hosts are still being probed, and they are the
    same pings.
    """
    local = ips[name]
    if not local:
        return []
    i = order.index(name)
    peers: list[tuple[str, list[tuple[int, str]]]] = []
    for k in range(1, len(order)):
        if len(peers) >= sample:
            break
        peer = order[(i + k) % len(order)]
        if peer not in ips:
            return None
        if ips[peer]:
            peers.append((peer, ips[peer]))
    checks = []
    for k, (peer, peer_ips) in enumerate(peers):
        dev, _ = local[k % len(local)]
        peer_dev, peer_ip = peer_ips[k % len(peer_ips)]
        checks.append((dev, peer, peer_dev, peer_ip))
    return checks


def ping_plan(facts: dict[str, HostFacts], sample: int) -> dict[str, list[tuple[int, str, int, str]]]:
    """Phase 2: which peer device IPs each host pings, as (device, peer, peer_device, peer_ip).

    Every host with device IPs pings up to ``sample`` peers (all of them in small clusters), rotating by
    its own position so that at scale every host is still pinged by someone; local devices take turns.
    """
    order = list(facts)
    ips = {name: device_ips(f) for name, f in facts.items()}
    return {name: host_ping_checks(name, order, ips, sample) for name in order if ips[name]}


def ping_commands(checks: list[tuple[int, str, int, str]]) -> list[tuple[str, list[str]]]:
    return [(f"ping.{dev}.{peer}.{peer_dev}", hccn_tool.PING.command(dev, ip)) for dev, peer, peer_dev, ip in checks]


def ping_results(checks: list[tuple[int, str, int, str]], out: dict[str, ProbeOutput]) -> list[PingCheck]:
    results = []
    for dev, peer, peer_dev, ip in checks:
        res = out.get(f"ping.{dev}.{peer}.{peer_dev}")
        if res is None:          # never answered (the batch was cut short): no evidence either way
            results.append(PingCheck(device=dev, peer=peer, peer_device=peer_dev, peer_ip=ip, ok=False,
                                     measured=False, detail="not measured: its answer is missing (the probe batch "
                                                            "was cut short: the host was busy or timed out)"))
            continue
        try:
            ping = hccn_tool.PING.parse(res.text)
            # the replies are the answer: a tool that printed its summary and was then slow to exit (killed
            # by the probe timeout on a loaded host) still saw the peer; its exit code is said beside
            ok = ping.received > 0
            detail = f"{ping.received}/{ping.sent} received" + (f" (hccn_tool exit {res.rc})" if res.rc else "")
        except ValueError:
            ok, detail = False, clean((res.text[-4096:].strip().splitlines() or [f"exit {res.rc}"])[-1][:120],
                                      multiline=False)
        results.append(PingCheck(device=dev, peer=peer, peer_device=peer_dev, peer_ip=ip, ok=ok, detail=detail))
    return results
