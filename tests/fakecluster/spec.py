"""What one simulated Ascend host looks like: `NodeSpec`, and `default_cluster()` for a healthy cluster.

A spec is plain data. `tools.py` turns it into files (version.info, /etc/hccn.conf, the state file read
by the fake `npu-smi` / `hccn_tool` / `docker`), `cluster.py` turns a list of specs into running hosts.

Device keys are always the *physical* device id (`/dev/davinciN`, hccn.conf `address_N`, rank-table
`device_id`): 0..7 on A2 (one chip per NPU), 0..15 on A3 (NPU n holds phy ids 2n and 2n+1).
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

Hardware = Literal["a2", "a3"]
Health = Literal["OK", "Warning", "Alarm", "Critical", "UNKNOWN"]

HEALTH_VALUES = ("OK", "Warning", "Alarm", "Critical", "UNKNOWN")
# hccn_tool -net_health: DRV tool_ops.c status strings (codes 0..9)
NET_HEALTH_VALUES = ("Success", "Socket fail", "Receive timeout", "Unreachable", "Time exceeded", "Fault",
                     "Init", "Thread error", "Detect ip set", "Unknown")

DEFAULT_DRIVER = "25.0.rc1.1"
DEFAULT_FIRMWARE = "7.7.0.1.231"
DEFAULT_WEIGHTS_DIR = "/data/models/DeepSeek-R1-W8A8"
ROUTER_IMAGE = "haproxy:2.6"     # deployctl's router (inventory router.image default): runs the host's real HAProxy
DEFAULT_IMAGES = {
    "a2": "swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie:2.2.RC1-800I-A2-py311-openeuler24.03-lts",
    "a3": "swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie:2.2.RC1-800I-A3-py311-openeuler24.03-lts",
}
# vLLM-Ascend's images (quay.io/ascend/vllm-ascend:<ver> on A2, <ver>-a3 on A3; vllm-ascend.md §1.5): present on
# default nodes next to MindIE's. The fake docker builds a vLLM-Ascend image for any `.../vllm-ascend:vX.Y.Z[-...]`
# a node lists in docker_images (fake_bin/docker.py make_image_layer).
VLLM_IMAGES = {"a2": "quay.io/ascend/vllm-ascend:v0.13.0", "a3": "quay.io/ascend/vllm-ascend:v0.13.0-a3"}
DEFAULT_NPU_NAME = {"a2": "910B3", "a3": "Ascend910"}
# Board IDs (MindCluster constants): 0x3c = Atlas 800I A2 (0x33 before 2024-09); 0xb3 = an 800I A3 chip board.
DEFAULT_BOARD_ID = {"a2": "0x3c", "a3": "0xb3"}

# engine_timing keys (milliseconds), as fake_bin/openai_fake.py TIMING_KEYS reads them
TIMING_KEYS = ("ttft_ms", "ttft_per_token_ms", "tpot_ms", "tpot_per_request_ms")

# How many fake hosts a test bridge subnet holds (host part 2..254; .1 is the bridge).
SUBNET_PREFIX = "10.200"


def _frozen_map(value: Any, val=lambda v: v) -> Mapping:
    """Any mapping -> read-only {int phy_id: value}."""
    return MappingProxyType({int(k): val(v) for k, v in dict(value or {}).items()})


def _frozen_ids(value: Any) -> frozenset[int]:
    if value is None or value is False:
        return frozenset()
    if isinstance(value, int) and not isinstance(value, bool):
        return frozenset({value})
    return frozenset(int(v) for v in value)


def _proc_list(value: Any) -> tuple[tuple[int, str, int], ...]:
    """(pid, name, MB) or a list of them -> tuple of triples."""
    if not value:
        return ()
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], int):
        value = [value]
    return tuple((int(p), str(n), int(mb)) for p, n, mb in value)


@dataclass(frozen=True)
class NodeSpec:
    """One fake host. Only `name` and `ip` are required; everything else defaults to a healthy A2.

    Fault switches (all off by default) are the fields after `listen_ports`.
    """

    name: str
    ip: str                                   # on the test bridge, e.g. 10.200.0.11
    hardware: Hardware = "a2"
    driver_version: str = DEFAULT_DRIVER      # driver/version.info Version= and npu-smi "Version:"
    firmware_version: str = DEFAULT_FIRMWARE  # firmware/version.info Version=
    device_ips: Mapping[int, str] = field(default_factory=dict)   # phy_id -> RoCE IP (hccn.conf address_N)
    netmask: str = "255.255.0.0"
    gateway: str | None = None                # hccn.conf gateway_N / netdetect_N (None: first host of the subnet)
    vnic_ips: Mapping[int, str] = field(default_factory=dict)     # A3: phy_id -> HCCS vNIC IP (hccn_tool -vnic -g)
    sdids: Mapping[int, int] = field(default_factory=dict)        # A3: phy_id -> SDID (npu-smi -t spod-info)
    super_pod_id: int | None = None           # A3: "Super Pod ID" (None -> 0 on A3)
    server_index: int = 0                     # A3: "Server Index" in spod-info
    super_pod_size: int = 384                 # A3: "Super Pod Size" as npu-smi prints it (unit not documented)
    npu_name: str | None = None               # "910B3" (A2) / "Ascend910" (A3)
    hbm_total_mb: int = 65536
    board_id: str | None = None               # npu-smi -t board "Board ID"
    weights_dir: str = DEFAULT_WEIGHTS_DIR    # created with config.json + a few weight shards
    weights_size_mb: int = 4                  # apparent size of the (sparse) shards
    docker_images: tuple[str, ...] = ()       # images `docker image inspect` knows
    docker_version: str = "24.0.7"            # `docker version --format '{{.Server.Version}}'`
    listen_ports: tuple[int, ...] = ()        # TCP ports something LISTENs on (0.0.0.0)
    # ---- faults ------------------------------------------------------------------------------
    wrong_firmware: bool = False              # firmware outside the driver's compatible_version_fw
    npu_health: Mapping[int, str] = field(default_factory=dict)   # phy_id -> Warning|Alarm|Critical|UNKNOWN
    missing_npus: frozenset[int] = frozenset()                    # phy ids npu-smi / hccn_tool do not see
    link_down: frozenset[int] = frozenset()                       # hccn_tool -link -g: DOWN
    net_health: Mapping[int, str] = field(default_factory=dict)   # phy_id -> "Socket fail", ...
    tls_on: frozenset[int] = frozenset()                          # hccn_tool -tls -g: tls switch[1]
    missing_device_ip: frozenset[int] = frozenset()               # no address_N, -ip -g fails
    foreign_process: Mapping[int, tuple[tuple[int, str, int], ...]] = field(default_factory=dict)
    weights_missing: bool = False             # weights_dir does not exist
    image_missing: bool = False               # docker knows none of docker_images
    port_busy: tuple[int, ...] = ()           # more ports to occupy (same as listen_ports)
    unreachable: bool | str = False           # True/"refused": no sshd; "down": host link down (timeouts)
    changed_host_key: bool = False            # host key regenerated after known_hosts was written
    slow: float = 0.0                         # seconds added to every npu-smi / hccn_tool call
    # ---- engine faults (fake_bin/engine.py; read when a container starts, so `fc.update_node` applies
    # ---- to the next `docker run` / `docker start`) ----------------------------------------------------
    engine_crash: bool | str = False          # exits 1 shortly after start (NPU OOM lines; a str: own message)
    engine_crash_on: str = ""                 # crash only in containers whose env has this KEY=VALUE (a bad revision)
    engine_never_ready: bool = False          # joins the rendezvous, never logs success, ready stays 503
    engine_reject_config: bool | str = False  # refuses its config.json (a str: the reason it prints)
    engine_slow_start: float = 0.0            # seconds of "weight loading" before joining the rendezvous
    engine_load_from_peer_s: float = 0.0      # vLLM stand-in: seconds a NetLoader rank takes to copy its weights from a
                                              # running peer (engine_slow_start stays the disk time)
    engine_join_timeout: float = 15.0         # seconds the multi-node rendezvous waits (HCCL-like timeout)
    engine_mooncake_error: bool | str = False  # vLLM stand-in: a kv_consumer logs a Mooncake transfer failure
                                               # (103902) for a long prompt, and still answers (a str: its text)
    # ---- token timing of the stand-in engines (fake_bin/openai_fake.py Timing; read when a container starts) --------
    # {"ttft_ms": a, "ttft_per_token_ms": b, "tpot_ms": c, "tpot_per_request_ms": d}: TTFT = a + b x prompt tokens,
    # TPOT = c + d x requests in flight on the engine process. Empty: no delays (the deploy tests stay fast).
    engine_timing: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        s = object.__setattr__
        if self.hardware not in ("a2", "a3"):
            raise ValueError(f"{self.name}: hardware must be 'a2' or 'a3', not {self.hardware!r}")
        ipaddress.IPv4Address(self.ip)
        s(self, "device_ips", _frozen_map(self.device_ips, val=str))
        s(self, "vnic_ips", _frozen_map(self.vnic_ips, val=str))
        s(self, "sdids", _frozen_map(self.sdids, val=int))
        s(self, "npu_health", _frozen_map(self.npu_health, val=str))
        s(self, "net_health", _frozen_map(self.net_health, val=str))
        s(self, "foreign_process", _frozen_map(self.foreign_process, val=_proc_list))
        for name in ("missing_npus", "link_down", "tls_on", "missing_device_ip"):
            s(self, name, _frozen_ids(getattr(self, name)))
        s(self, "docker_images", tuple(self.docker_images))
        s(self, "listen_ports", tuple(int(p) for p in self.listen_ports))
        s(self, "port_busy", tuple(int(p) for p in self.port_busy))
        for name in ("engine_slow_start", "engine_join_timeout", "engine_load_from_peer_s"):
            s(self, name, float(getattr(self, name)))
        timing = dict(self.engine_timing or {})
        unknown = set(timing) - set(TIMING_KEYS)
        if unknown:
            raise ValueError(f"{self.name}: engine_timing keys {sorted(unknown)} unknown, expected {TIMING_KEYS}")
        if any(float(v) < 0 for v in timing.values()):
            raise ValueError(f"{self.name}: engine_timing values must be >= 0 (milliseconds)")
        s(self, "engine_timing", MappingProxyType({k: float(v) for k, v in timing.items()}))
        if self.engine_join_timeout <= 0:
            raise ValueError(f"{self.name}: engine_join_timeout must be > 0")
        if self.unreachable not in (False, True, "refused", "down"):
            raise ValueError(f"{self.name}: unreachable must be False, True, 'refused' or 'down'")
        for phy, h in self.npu_health.items():
            if h not in HEALTH_VALUES:
                raise ValueError(f"{self.name}: npu_health[{phy}]={h!r}, expected one of {HEALTH_VALUES}")
        for phy, h in self.net_health.items():
            if h not in NET_HEALTH_VALUES and h != "Socket failed":
                raise ValueError(f"{self.name}: net_health[{phy}]={h!r}, expected one of {NET_HEALTH_VALUES}")
        bad = [p for p in (*self.npu_health, *self.net_health, *self.link_down, *self.tls_on,
                           *self.missing_device_ip, *self.missing_npus, *self.foreign_process)
               if p not in self.phy_ids]
        if bad:
            raise ValueError(f"{self.name}: device ids {sorted(set(bad))} out of range 0..{self.device_count - 1}")

    __hash__ = object.__hash__  # mappings inside; identity hash is enough for sets of specs

    # ---- derived ------------------------------------------------------------------------------
    @property
    def chips_per_npu(self) -> int:
        return 2 if self.hardware == "a3" else 1

    @property
    def device_count(self) -> int:
        return 16 if self.hardware == "a3" else 8

    @property
    def npu_count(self) -> int:
        return 8

    @property
    def phy_ids(self) -> range:
        return range(self.device_count)

    @property
    def present_phy_ids(self) -> list[int]:
        return [p for p in self.phy_ids if p not in self.missing_npus]

    def npu_chip(self, phy_id: int) -> tuple[int, int]:
        """(NPU id, chip id) of a physical device id."""
        return divmod(phy_id, self.chips_per_npu)

    @property
    def name_of_npu(self) -> str:
        return self.npu_name or DEFAULT_NPU_NAME[self.hardware]

    @property
    def board(self) -> str:
        return self.board_id or DEFAULT_BOARD_ID[self.hardware]

    @property
    def pod_id(self) -> int:
        return 0 if self.super_pod_id is None else self.super_pod_id

    @property
    def busy_ports(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.listen_ports) | set(self.port_busy)))

    @property
    def configured_device_ips(self) -> dict[int, str]:
        """phy_id -> IP as the host reports it (absent for missing_device_ip / missing_npus)."""
        return {p: ip for p, ip in sorted(self.device_ips.items())
                if p not in self.missing_device_ip and p not in self.missing_npus}

    @property
    def reachable(self) -> bool:
        return self.unreachable is False

    @property
    def visible_images(self) -> tuple[str, ...]:
        return () if self.image_missing else self.docker_images

    def replace(self, **changes: Any) -> NodeSpec:
        """A copy with some fields changed (faults on: `spec.replace(link_down={3})`)."""
        return dataclasses.replace(self, **changes)


# ---- healthy clusters ---------------------------------------------------------------------------

def a3_sdid(server_index: int, phy_id: int) -> int:
    """An SDID in the layout seen in the A3 example inventories (unique per server index < 256)."""
    return 0x06C00000 | (phy_id // 2) << 18 | (phy_id % 2) << 16 | (server_index & 0xFF) << 8 | phy_id


def default_cluster(n: int, hardware: Hardware = "a2", *, subnet: str | None = None, first_host: int = 11,
                    name_prefix: str = "node", driver_version: str = DEFAULT_DRIVER,
                    firmware_version: str = DEFAULT_FIRMWARE, images: Iterable[str] | None = None,
                    weights_dir: str = DEFAULT_WEIGHTS_DIR, super_pod_id: int = 0,
                    **common: Any) -> list[NodeSpec]:
    """`n` healthy, consistent hosts: node1..nodeN at <subnet>.<first_host>.., same versions, the
    engine image present, weights present, unique device IPs (172.16.<k>.<100+phy>/16); A3 also gets
    unique vNIC IPs (192.168.<k>.<100+phy>), SDIDs and server indexes in one super pod.

    `subnet` is the first three octets of the bridge network ("10.200.0"). None picks a free
    10.200.X subnet and reserves it for this process (see `cluster.free_subnet`), so parallel test
    sessions on one machine never share addresses.
    """
    if not 1 <= n <= 200:
        raise ValueError("n must be 1..200")
    if subnet is None:
        from .cluster import free_subnet   # lazy: spec.py stays importable without the runtime
        subnet = free_subnet()
    if first_host + n - 1 > 254 or first_host < 2:
        raise ValueError("first_host..first_host+n-1 must lie in 2..254")
    return [_healthy(k, hardware, name=f"{name_prefix}{k}", ip=f"{subnet}.{first_host + k - 1}",
                     device_ip=lambda k, p: f"172.16.{k}.{100 + p}", vnic_ip=lambda k, p: f"192.168.{k}.{100 + p}",
                     pod=super_pod_id, index=k - 1, images=images, driver_version=driver_version,
                     firmware_version=firmware_version, weights_dir=weights_dir, common=common)
            for k in range(1, n + 1)]


A3_SERVERS_PER_POD = 48      # an Atlas 900 A3 SuperPoD: 384 NPUs = 48 servers of 8


def _packed(first16: str, i: int) -> str:
    """The i-th address of `first16`.0.0/16 from .1.2 on, 250 a /24 (never .0, .1 or .255)."""
    return f"{first16}.{1 + i // 250}.{2 + i % 250}"


def fleet(n: int, hardware: Hardware = "a3", *, subnet: str | None = None, images: Iterable[str] | None = None,
          driver_version: str = DEFAULT_DRIVER, firmware_version: str = DEFAULT_FIRMWARE,
          weights_dir: str = DEFAULT_WEIGHTS_DIR, **common: Any) -> list[NodeSpec]:
    """`n` (up to 4000) healthy hosts for a ManyHostCluster, as `default_cluster` makes them but on a /16:
    node1..nodeN at <subnet>.<1 + (k-1) // 200>.<11 + (k-1) % 200> (`subnet`: "10.K"; None reserves a free
    one, `hostenv.free_subnet16`), device IPs (and A3 vNIC IPs) packed into 172.16.0.0/16 (192.168.0.0/16),
    A3 servers 48 to a super pod (server index and SDIDs unique in their pod)."""
    if not 1 <= n <= 4000:
        raise ValueError("n must be 1..4000")
    if subnet is None:
        from .hostenv import free_subnet16   # lazy: spec.py stays importable without the runtime
        subnet = free_subnet16()
    per = 16 if hardware == "a3" else 8
    return [_healthy(k, hardware, name=f"node{k}", ip=f"{subnet}.{1 + (k - 1) // 200}.{11 + (k - 1) % 200}",
                     device_ip=lambda k, p: _packed("172.16", (k - 1) * per + p),
                     vnic_ip=lambda k, p: _packed("192.168", (k - 1) * per + p),
                     pod=(k - 1) // A3_SERVERS_PER_POD, index=(k - 1) % A3_SERVERS_PER_POD, images=images,
                     driver_version=driver_version, firmware_version=firmware_version, weights_dir=weights_dir,
                     common=common)
            for k in range(1, n + 1)]


def _healthy(k: int, hardware: Hardware, *, name: str, ip: str, device_ip, vnic_ip, pod: int, index: int,
             images: Iterable[str] | None, driver_version: str, firmware_version: str, weights_dir: str,
             common: dict[str, Any]) -> NodeSpec:
    """Host k of a healthy cluster: `device_ip(k, phy)` / `vnic_ip(k, phy)` give its addresses, `pod` and
    `index` its A3 super pod and server index."""
    imgs = tuple(images) if images is not None else (DEFAULT_IMAGES[hardware], VLLM_IMAGES[hardware], ROUTER_IMAGE)
    devices = 16 if hardware == "a3" else 8
    kw: dict[str, Any] = dict(
        name=name, ip=ip, hardware=hardware, driver_version=driver_version, firmware_version=firmware_version,
        device_ips={p: device_ip(k, p) for p in range(devices)},
        gateway="172.16.0.1", docker_images=imgs, weights_dir=weights_dir)
    if hardware == "a3":
        kw.update(vnic_ips={p: vnic_ip(k, p) for p in range(devices)},
                  sdids={p: a3_sdid(index, p) for p in range(devices)},
                  super_pod_id=pod, server_index=index)
    kw.update(common)
    return NodeSpec(**kw)


def with_faults(specs: list[NodeSpec], **per_node: dict[str, Any]) -> list[NodeSpec]:
    """Copy of `specs` with faults on some nodes: `with_faults(specs, node2={"link_down": {3}})`."""
    unknown = set(per_node) - {s.name for s in specs}
    if unknown:
        raise KeyError(f"no such node(s): {sorted(unknown)}")
    return [s.replace(**per_node[s.name]) if s.name in per_node else s for s in specs]


def parse_fault(text: str) -> tuple[str, str, Any]:
    """'node2:link_down=3' -> ('node2', 'link_down', {3}); used by scripts/fake-cluster --fault.

    Values: `flag` alone -> True; `a=1,2` -> {1, 2} for id-set faults; `npu_health=3:Alarm,4:Warning`;
    `net_health=0:Socket fail`; `foreign_process=2:4242:python:30000`; `port_busy=1025,1026`; `slow=0.5`;
    `engine_slow_start=3`, `engine_join_timeout=5`, `engine_load_from_peer_s=0.5` (seconds); `engine_crash` /
    `engine_reject_config` alone -> True, with a value other than true/false -> that text as the error message;
    `engine_timing=ttft_ms:50,ttft_per_token_ms:0.1,tpot_ms:20,tpot_per_request_ms:1` (milliseconds).
    """
    node, sep, rest = text.partition(":")
    if not sep or not rest:
        raise ValueError(f"--fault {text!r}: expected NODE:FAULT[=VALUE]")
    key, eq, value = rest.partition("=")
    key = key.strip()
    fields = {f.name for f in dataclasses.fields(NodeSpec)}
    if key not in fields:
        raise ValueError(f"--fault {text!r}: unknown fault {key!r}")
    if not eq:
        return node, key, True
    if key in ("missing_npus", "link_down", "tls_on", "missing_device_ip"):
        return node, key, {int(v) for v in value.split(",") if v.strip()}
    if key in ("npu_health", "net_health"):
        out = {}
        for item in value.split(","):
            phy, _, val = item.partition(":")
            out[int(phy)] = val
        return node, key, out
    if key == "foreign_process":
        out2: dict[int, list] = {}
        for item in value.split(","):
            phy, pid, name, mb = item.split(":")
            out2.setdefault(int(phy), []).append((int(pid), name, int(mb)))
        return node, key, out2
    if key in ("port_busy", "listen_ports", "docker_images"):
        items = [v.strip() for v in value.split(",") if v.strip()]
        return node, key, tuple(items if key == "docker_images" else (int(v) for v in items))
    if key == "engine_timing":
        timing = {}
        for item in value.split(","):
            k, _, v = item.partition(":")
            timing[k.strip()] = float(v)
        return node, key, timing
    if key in ("slow", "engine_slow_start", "engine_join_timeout", "engine_load_from_peer_s"):
        return node, key, float(value)
    if key == "unreachable":
        return node, key, value if value in ("refused", "down") else value.lower() in ("1", "true", "yes")
    if value.lower() in ("true", "false"):
        return node, key, value.lower() == "true"
    return node, key, value
