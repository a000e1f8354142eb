"""Per-node fake files generated from a `NodeSpec`.

* version files in the real format (shared/reference/ascend/versions/): driver `version.info` with
  `compatible_version_fw=[min,max]`, firmware `version.info` with `compatible_version_drv=...`;
* `/etc/hccn.conf` in the documented per-device layout (address_N, netmask_N, netdetect_N, gateway_N,
  send_arp_status_N);
* `/etc/fakecluster/node.json`: everything the fake `npu-smi`, `hccn_tool` and `docker`
  (fake_bin/*.py) print, so one state file drives all three (and the engine faults a container gets
  when it starts);
* the weights directory (config.json + sparse shards), prepared the way MindIE wants it (dir 750, files 640);
* `fake_bin/engine.py` next to the fake docker: the stand-in MindIE a fake container runs.

`install_node()` writes all of it into a node's directories (the overlay upper dirs); `cluster.py` mounts
them. The render functions are pure, so tests can check formats without starting anything.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .spec import NodeSpec, a3_sdid

FAKE_BIN = Path(__file__).resolve().parent / "fake_bin"
STANDIN_SCRIPTS = ("engine.py", "vllm.py", "openai_fake.py", "sglang_fake.py", "standin_common.py",
                   "netloader_fake.py")
# `vllm serve`'s parser tables, one per vLLM release (scripts/vllm_flags/extract.py made them from each wheel)
VLLM_FLAGS = Path(__file__).resolve().parents[2] / "deployctl" / "core" / "engines" / "vllm_ascend" / "flags"
# SGLang's: `python -m sglang.launch_server`'s per release and the router's (scripts/sglang_flags/extract.py)
SGLANG_FLAGS = Path(__file__).resolve().parents[2] / "deployctl" / "core" / "engines" / "sglang" / "flags"
# The REAL sglang-router (PyPI sglang-router==0.3.2, the test extra): the fake SGLang images run it. Its Python
# package and the packages its launcher imports (setproctitle, and fastapi/uvicorn/aiohttp/orjson for the MiniLB)
# are copied once per machine into ROUTER_CACHE (under /tmp, which every node and container-building docker sees);
# each node links /usr/local/lib/fakecluster/sglang-router to it and the fake docker binds it read-only into an
# SGLang container (fake_bin/docker.py SGLANG_ROUTER_SITE).
ROUTER_DIST = "sglang-router"
ROUTER_CACHE = Path("/tmp/fakecluster-cache")

# Bus-Ids in the order the real samples list them
A2_BUS_IDS = ["0000:C1:00.0", "0000:C2:00.0", "0000:81:00.0", "0000:82:00.0",
              "0000:01:00.0", "0000:02:00.0", "0000:41:00.0", "0000:42:00.0"]
A3_BUS_IDS = ["0000:9D:00.0", "0000:9F:00.0", "0000:99:00.0", "0000:9B:00.0", "0000:95:00.0", "0000:97:00.0",
              "0000:91:00.0", "0000:93:00.0", "0000:8D:00.0", "0000:8F:00.0", "0000:89:00.0", "0000:8B:00.0",
              "0000:85:00.0", "0000:87:00.0", "0000:81:00.0", "0000:83:00.0"]

# Driver packages seen in real version.info files (shared/reference/ascend/versions/driver_version.info_*).
KNOWN_DRIVERS = {
    "23.0.7": dict(hal="7.35.19", inner="V100R001C15SPC012B220",
                   compat="[V100R001C29],[V100R001C30],[V100R001C13],[V100R001C15]", fw=("7.0.0", "7.1.99"),
                   fw_drv="[23.0.rc3,23.0.rc3.],[23.0.0,23.0.0.]"),
    "24.1.rc2.2": dict(hal="7.35.23", inner="V100R001C18SPC001B233",
                       compat="[V100R001C30],[V100R001C13],[V100R001C15],[V100R001C17],[V100R001C18]",
                       fw=("7.0.0", "7.2.99"), fw_drv="[23.0.0,23.0.0.],[24.0,24.0.],[24.1,24.1.]"),
    "24.1.rc3": dict(hal="7.35.23", inner="V100R001C19SPC001B124",
                     compat="[V100R001C13],[V100R001C15],[V100R001C17],[V100R001C18],[V100R001C19]",
                     fw=("7.0.0", "7.5.99"), fw_drv="[23.0.0,23.0.0.],[24.0,24.0.],[24.1,24.1.]"),
    "25.0.rc1.1": dict(hal="7.35.23", inner="V100R001C21SPC002B220",
                       compat="[V100R001C17],[V100R001C18],[V100R001C19],[V100R001C20],[V100R001C21]",
                       fw=("7.0.0", "7.7.99"), fw_drv="[23.0.0,23.0.0.],[24.0,24.0.],[24.1,24.1.],[25.0,25.0.]"),
    "25.3.rc1": dict(hal="7.35.23", inner="V100R001C23SPC002B212",
                     compat="[V100R001C19],[V100R001C20],[V100R001C21],[V100R001C22],[V100R001C23]",
                     fw=("7.0.0", "8.9.9"),
                     fw_drv="[23.0.0,23.0.0.],[24.0,24.0.],[24.1,24.1.],[25.0,25.0.],[25.2,25.2.],[25.3,25.3.]"),
}
# For other versions: (driver prefix, CANN inner code, max firmware) by release line (ascend-facts §4.3).
_LINES = [("23.0", 15, "7.1.99"), ("24.1.rc1", 17, "7.2.99"), ("24.1.rc2", 18, "7.2.99"),
          ("24.1.rc3", 19, "7.5.99"), ("24.1", 20, "7.5.99"), ("25.0", 21, "7.7.99"), ("25.2", 22, "7.7.99"),
          ("25.3", 23, "8.9.9"), ("25.5", 25, "8.9.9"), ("26.0", 10, "8.9.9")]


def driver_info(version: str) -> dict:
    """Fields of driver/version.info for a driver version (real values when known, else synthesized)."""
    if version in KNOWN_DRIVERS:
        return dict(KNOWN_DRIVERS[version])
    for prefix, code, fw_max in _LINES:
        if version.lower().startswith(prefix):
            break
    else:
        prefix, code, fw_max = "25.0", 21, "7.7.99"
    codes = [c for c in (13, 15, 17, 18, 19, 20, 21, 22, 23, 25) if c <= code][-5:] if code > 10 else [21, 23, 25]
    mm = ".".join(version.split(".")[:2])
    lines = ["[23.0.0,23.0.0.]", "[24.0,24.0.]", "[24.1,24.1.]", "[25.0,25.0.]", "[25.2,25.2.]", "[25.3,25.3.]",
             "[25.5,25.5.]", "[26.0,26.0.]"]
    keep = []
    for entry in lines:
        keep.append(entry)
        if entry.startswith("[" + mm + ","):
            break
    return dict(hal="7.35.23", inner="V100R001C%02dSPC001B220" % code,
                compat=",".join("[V100R001C%02d]" % c for c in codes), fw=("7.0.0", fw_max),
                fw_drv=",".join(keep))


def _vtuple(v: str, n: int = 3) -> tuple[int, ...]:
    nums = [int(x) for x in re.findall(r"\d+", v)[:n]]
    return tuple(nums + [0] * (n - len(nums)))


def fw_compatible(driver_version: str, firmware_version: str) -> bool:
    """Firmware Version within the driver's compatible_version_fw=[min,max] (first 3 numeric fields)."""
    lo, hi = driver_info(driver_version)["fw"]
    return _vtuple(lo) <= _vtuple(firmware_version) <= _vtuple(hi)


@dataclass(frozen=True)
class Firmware:
    version: str
    package_version: str
    compatible_drv: str


def firmware_of(spec: NodeSpec) -> Firmware:
    """The firmware a node reports; with `wrong_firmware`, one from another HDK outside the driver's range."""
    info = driver_info(spec.driver_version)
    if not spec.wrong_firmware:
        return Firmware(spec.firmware_version, spec.driver_version, info["fw_drv"])
    lo, hi = info["fw"]
    if _vtuple(hi) < (7, 8, 0):   # a newer HDK's firmware (25.5.0 ships 7.8.0.5.216)
        return Firmware("7.8.0.5.216", "25.5.0",
                        "[23.0.0,23.0.0.],[24.0,24.0.],[24.1,24.1.],[25.0,25.0.],[25.2,25.2.],[25.5,25.5.]")
    return Firmware("6.4.0.4.220", "23.0.rc1", "[23.0.rc1,23.0.rc1.]")   # older than every range minimum


def driver_version_info(spec: NodeSpec) -> str:
    i = driver_info(spec.driver_version)
    return ("Version={v}\nascendhal_version={hal}\naicpu_version=1.0\ntdt_version=1.0\nlog_version=1.0\n"
            "prof_version=2.0\ndvppkernels_version=1.1\ntsfw_version=1.0\nInnerversion={inner}\n"
            "compatible_version={compat}\ncompatible_version_fw=[{lo},{hi}]\npackage_version={v}\n"
            ).format(v=spec.driver_version, hal=i["hal"], inner=i["inner"], compat=i["compat"],
                     lo=i["fw"][0], hi=i["fw"][1])


def firmware_version_info(spec: NodeSpec) -> str:
    fw = firmware_of(spec)
    return (f"Version={fw.version}\nfirmware_version=1.0\npackage_version={fw.package_version}\n"
            f"compatible_version_drv={fw.compatible_drv}\n")


def _gateway(spec: NodeSpec, ip: str) -> str:
    if spec.gateway:
        return spec.gateway
    import ipaddress
    net = ipaddress.IPv4Network(f"{ip}/{spec.netmask}", strict=False)
    return str(net.network_address + 1)


def hccn_conf(spec: NodeSpec) -> str:
    """/etc/hccn.conf: per device address_N, netmask_N, netdetect_N, gateway_N, send_arp_status_N
    (the documented layout); devices in `missing_device_ip` have no lines."""
    lines = []
    for phy, ip in sorted(spec.device_ips.items()):
        if phy in spec.missing_device_ip:
            continue
        gw = _gateway(spec, ip)
        lines += [f"address_{phy}={ip}", f"netmask_{phy}={spec.netmask}", f"netdetect_{phy}={gw}",
                  f"gateway_{phy}={gw}", f"send_arp_status_{phy}=1"]
    return "\n".join(lines) + ("\n" if lines else "")


def _h(*parts: object) -> int:
    return int(hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def node_state(spec: NodeSpec, cluster_state: str | None = None) -> dict:
    """The JSON the fake tools read (see fake_bin/*.py)."""
    a3 = spec.hardware == "a3"
    devices = []
    for logic, phy in enumerate(spec.present_phy_ids):
        npu, chip = spec.npu_chip(phy)
        procs = [list(p) for p in spec.foreign_process.get(phy, ())]
        base = (3059 if chip == 0 else 2826) if a3 else (3338, 3337, 3334, 3334, 3334, 3334, 3334, 3338)[phy % 8]
        hbm_used = min(spec.hbm_total_mb, base + sum(p[2] for p in procs))
        h = _h(spec.name, phy)
        power = "-" if a3 and chip == 1 else "%.1f" % ((160.0 if a3 else 95.0) + (h % 150) / 10)
        ip = spec.device_ips.get(phy)
        if phy in spec.missing_device_ip:
            ip = None
        d = dict(phy=phy, npu=npu, chip=chip, logic=logic,
                 bus_id=(A3_BUS_IDS if a3 else A2_BUS_IDS)[phy % (16 if a3 else 8)],
                 health=spec.npu_health.get(phy, "OK"), power=power, temp=45 + h % 14, aicore=0,
                 hbm_used=hbm_used, procs=procs,
                 ip=ip, netmask=spec.netmask if ip else None,
                 gateway=_gateway(spec, ip) if ip else None, netdetect=_gateway(spec, ip) if ip else None,
                 link="DOWN" if phy in spec.link_down else "UP",
                 net_health=spec.net_health.get(phy, "Success"), tls=1 if phy in spec.tls_on else 0,
                 vdie="%08X %08X %08X %08X %08X" % tuple(_h(spec.name, phy, "v", i) for i in range(5)),
                 ndie="%08X %08X %08X %08X %08X" % tuple(_h(spec.name, phy, "n", i) for i in range(5)),
                 peer_mac="00:e0:fc:%02x:%02x:%02x" % (h >> 16 & 0xFF, h >> 8 & 0xFF, h & 0xFF),
                 peer_port="400GE1/%d/%d:%d" % (1 + phy // 2, 5, 1 + phy % 2))
        if a3:
            d.update(vnic_ip=spec.vnic_ips.get(phy), vnic_netmask="255.255.0.0",
                     sdid=spec.sdids.get(phy, a3_sdid(spec.server_index, phy)))
        devices.append(d)
    fw = firmware_of(spec)
    return dict(
        name=spec.name, ip=spec.ip, hardware=spec.hardware, npu_name=spec.name_of_npu,
        chip_name=spec.name_of_npu, chips_per_npu=spec.chips_per_npu,
        driver_version=spec.driver_version, firmware_version=fw.version,
        fw_compatible=fw_compatible(spec.driver_version, fw.version),
        board_id=spec.board, pci_device_id="0xD803" if a3 else "0xD802", hbm_total_mb=spec.hbm_total_mb,
        super_pod_id=spec.pod_id, super_pod_size=spec.super_pod_size, server_index=spec.server_index,
        slow=spec.slow, reachable=spec.reachable, cluster_state=cluster_state,
        boot_time=time.strftime("%a %b %d %H:%M:%S %Y"),
        docker=dict(images=list(spec.visible_images), version=spec.docker_version),
        engine=dict(crash=spec.engine_crash, crash_on=spec.engine_crash_on, never_ready=spec.engine_never_ready,
                    reject_config=spec.engine_reject_config, slow_start=spec.engine_slow_start,
                    join_timeout=spec.engine_join_timeout,
                    # the vLLM stand-in's fault, only when set (the MindIE keys above stay as they were)
                    **({"mooncake_error": spec.engine_mooncake_error} if spec.engine_mooncake_error else {}),
                    # the vLLM stand-in's NetLoader: a peer load's seconds, only when set (slow_start: from disk)
                    **({"load_from_peer_s": spec.engine_load_from_peer_s} if spec.engine_load_from_peer_s else {}),
                    # token timing of the stand-ins (openai_fake.Timing), only when set
                    **({"timing": dict(spec.engine_timing)} if spec.engine_timing else {})),
        devices=devices)


def weights_config(spec: NodeSpec) -> dict:
    return {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
            "num_hidden_layers": 61, "num_attention_heads": 128, "n_routed_experts": 256,
            "vocab_size": 129280, "torch_dtype": "bfloat16", "quantize": "w8a8_dynamic"}


@dataclass(frozen=True)
class NodeDirs:
    """Where a node's private files live on the host (see cluster.FakeNode)."""
    base: Path

    @property
    def usr_local(self) -> Path:        # overlay upper for /usr/local
        return self.base / "usr_local" / "upper"

    @property
    def etc(self) -> Path:              # overlay upper for /etc
        return self.base / "etc" / "upper"

    @property
    def var_lib(self) -> Path:          # overlay upper for /var/lib (deployctl's deploy_dir, fake docker state)
        return self.base / "var_lib" / "upper"

    @property
    def root(self) -> Path:             # bind-mounted on /root
        return self.base / "root"

    def mount_dir(self, top: str) -> Path:   # bind-mounted on /<top> (e.g. /data)
        return self.base / "mnt" / top.strip("/")

    @property
    def state_file(self) -> Path:
        return self.etc / "fakecluster" / "node.json"

    def host_path(self, path: str) -> Path:
        """Where a write to `path` inside the node lands on the host."""
        p = Path(path)
        if not p.is_absolute():
            raise ValueError(f"{path}: need an absolute path")
        parts = p.parts
        if parts[1:3] == ("usr", "local"):
            return self.usr_local.joinpath(*parts[3:])
        if parts[1] == "etc":
            return self.etc.joinpath(*parts[2:])
        if parts[1] == "root":
            return self.root.joinpath(*parts[2:])
        if parts[1:3] == ("var", "lib"):
            return self.var_lib.joinpath(*parts[3:])
        return self.mount_dir(parts[1]).joinpath(*parts[2:])


def weights_top(spec: NodeSpec) -> str | None:
    """The top-level directory that needs a per-node bind mount for the weights (None if covered)."""
    parts = Path(spec.weights_dir).parts
    if len(parts) < 2:
        raise ValueError(f"{spec.name}: weights_dir must be an absolute path below /")
    if parts[1] in ("etc", "root") or parts[1:3] in (("usr", "local"), ("var", "lib")):
        return None
    if parts[1] in ("usr", "proc", "sys", "dev", "run", "tmp", "bin", "lib", "sbin", "var", "boot"):
        raise ValueError(f"{spec.name}: weights_dir {spec.weights_dir} must be under a data directory "
                         "(/data, /models, ...), /root, /etc, /usr/local or /var/lib")
    return parts[1]


def _write(path: Path, text: str, mode: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)


def write_weights(spec: NodeSpec, dirs: NodeDirs) -> None:
    target = dirs.host_path(spec.weights_dir)
    if spec.weights_missing:
        if target.exists():
            shutil.rmtree(target)
        return
    target.mkdir(parents=True, exist_ok=True)
    target.chmod(0o750)          # MindIE: weights owned by the service user, at most 750 (config.json checked)
    _write(target / "config.json", json.dumps(weights_config(spec), indent=2) + "\n", 0o640)
    _write(target / "generation_config.json", '{"bos_token_id": 0, "eos_token_id": 1}\n', 0o640)
    shard = max(1, spec.weights_size_mb) * 1024 * 1024 // 2
    for i in (1, 2):
        f = target / f"model-0000{i}-of-00002.safetensors"
        with open(f, "wb") as fh:
            fh.write(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")   # a tiny safetensors header
            fh.truncate(shard)                                      # sparse: size without disk use
        f.chmod(0o640)
    index = {"metadata": {"total_size": 2 * shard},
             "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                            "lm_head.weight": "model-00002-of-00002.safetensors"}}
    _write(target / "model.safetensors.index.json", json.dumps(index, indent=2) + "\n", 0o640)


# Read-only queries the fake tools answer from a precomputed cache (see _WRAPPER): the Python fakes
# cost ~20 ms of CPU per call, and a 2-core machine probing 16 nodes x ~60 calls would measure the
# fakes, not deployctl. The cache is made by the same Python code, so the answers are identical.
_TOOLS = {"npu-smi": "npu_smi.py", "hccn_tool": "hccn_tool.py", "docker": "docker.py"}
_WRAPPER = """#!/bin/sh
# fake {tool}: precomputed answers for read-only queries, the Python fake for everything else
{ping}c=/etc/fakecluster/cache/{tool}/
for a in "$@"; do case "$a" in */*|*" "*) c= ; break ;; esac; done
if [ -n "$c" ]; then IFS=_; c="$c$*_"; unset IFS; fi
if [ -n "$c" ] && [ -f "$c.rc" ]; then
  {slow}cat "$c.out"; [ -s "$c.err" ] && cat "$c.err" >&2; read rc < "$c.rc"; exit "$rc"
fi
/usr/bin/python3 /usr/local/lib/fakecluster/{script} "$@"; rc=$?
{sweep}exit $rc
"""
# npu-smi / hccn_tool `-s` (set) changes state the caches were made from (docker's `-s` is a signal or a size; in
# `npu-smi info watch -s LETTERS` it picks the columns: npu-smi sets things with `npu-smi set`, never under `info`)
_SWEEP = '[ "$1" = info ] || for a in "$@"; do [ "$a" = -s ] && rm -rf /etc/fakecluster/cache && {stale}; done\n'
_SLOW = 'read s < /etc/fakecluster/slow; [ -n "$s" ] && sleep "$s"\n  '
# `hccn_tool -i D -ping -g address X`: X answers when a file X@<node> exists in the cluster's answers
# directory (written by write_answers for every up device of every reachable node); same text as the
# Python fake's ping().
_PING = """if [ "$#" = 6 ] && [ "$1" = -i ] && [ "$3" = -ping ] && [ "$4" = -g ] && [ "$5" = address ] \\
   && [ -f "/etc/fakecluster/cache/hccn_tool/ping_src_$2.rc" ] && [ ! -e {answers}/.stale ]; then
  d=$2; x=$6; p=/etc/fakecluster/cache/hccn_tool/ping_src_$d
  read rc < "$p.rc"
  if [ "$rc" != 0 ]; then cat "$p.err" >&2; exit "$rc"; fi
  {slow}echo "device $d PING $x"
  set -- {answers}/"$x"@*
  if [ -e "$1" ]; then
    printf 'recv seq=0,time=0.114000ms\\nrecv seq=1,time=0.064000ms\\nrecv seq=2,time=0.065000ms\\n'
    echo "3 packets transmitted, 3 received, 0.00% packet loss"
  else
    echo "3 packets transmitted, 0 received, 100.00% packet loss"
  fi
  exit 0
fi
"""
_MODULES: dict[str, object] = {}


def _fake(script: str):
    if script not in _MODULES:
        import importlib.util

        mod_spec = importlib.util.spec_from_file_location(f"fake_{script[:-3]}", FAKE_BIN / script)
        module = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(module)
        _MODULES[script] = module
    return _MODULES[script]


def preload() -> None:
    """Load what writing node files needs once (the fakes' modules, the router's site): processes forked
    afterwards to write many nodes' files inherit it."""
    router_site()
    for script in _TOOLS.values():
        _fake(script)


def _cached_queries(spec: NodeSpec, st: dict) -> list[tuple[str, list[str]]]:
    per = 16 if spec.hardware == "a3" else 8
    q = [("npu-smi", ["info"]), ("npu-smi", ["info", "-l"]), ("npu-smi", ["info", "-m"])]
    q += [("npu-smi", ["info", "-t", "board", "-i", str(n)]) for n in range(8)]
    q += [("docker", ["version", "--format", "{{.Server.Version}}"])]
    q += [("docker", ["image", "inspect", "--format", "{{.Id}}", img]) for img in spec.docker_images]
    for dev in range(per):
        q += [("hccn_tool", ["-i", str(dev), major, "-g"]) for major in ("-ip", "-link", "-net_health", "-tls")]
        if spec.hardware == "a3":
            q += [("hccn_tool", ["-i", str(dev), "-vnic", "-g"]),
                  ("npu-smi", ["info", "-t", "spod-info", "-i", str(dev // 2), "-c", str(dev % 2)])]
    return q


def write_cache(spec: NodeSpec, dirs: NodeDirs, st: dict) -> None:
    cache = dirs.etc / "fakecluster" / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    for tool, argv in _cached_queries(spec, st):
        if any("/" in a or " " in a for a in argv):
            continue                      # the wrapper sends such calls to the Python fake
        rc, out, err = _fake(_TOOLS[tool]).run(argv, json.loads(json.dumps(st)))
        _write_answer(cache / tool / ("_".join(argv) + "_"), rc, out, err)
    hccn = _fake("hccn_tool.py")
    for d in st["devices"]:
        # ping preconditions of the source device, as the Python fake's ping() checks them
        rc, err = 0, ""
        if not d.get("ip"):
            rc, err = hccn.RC_IPCONF_NOT_PRESET, "Get ipconf failed, because no ip was preset there!\n"
        elif d["link"] != "UP":
            rc, err = hccn.RC_LINK_DOWN, "Execute failed: Link status is down.\n"
        _write_answer(cache / "hccn_tool" / f"ping_src_{d['phy']}", rc, "", err)
    _write(dirs.etc / "fakecluster" / "slow", f"{spec.slow}\n" if spec.slow else "\n")


def _write_answer(key: Path, rc: int, out: str, err: str) -> None:
    key.parent.mkdir(parents=True, exist_ok=True)
    key.with_name(key.name + ".out").write_text(out)
    if err:                   # the wrappers print it only when it is there (`[ -s ]`, or after a failed ping)
        key.with_name(key.name + ".err").write_text(err)
    key.with_name(key.name + ".rc").write_text(f"{rc}\n")


def answers_dir(cluster_state: str | None) -> Path | None:
    return Path(cluster_state).parent / "answers" if cluster_state else None


def _answering(spec: NodeSpec, st: dict | None) -> list[str]:
    if not st or not st.get("reachable", True):
        return []
    return [f"{d[key]}@{spec.name}" for d in st["devices"] for key in ("ip", "vnic_ip")
            if d.get(key) and d["link"] == "UP"]


def write_answers(spec: NodeSpec, st: dict, cluster_state: str | None, before: dict | None = None) -> None:
    """The device IPs of this node that answer pings: one file <ip>@<node> each (`before`: the node's previous
    state, whose files go; the cluster empties the directory when it starts)."""
    where = answers_dir(cluster_state)
    if where is None:
        return
    where.mkdir(parents=True, exist_ok=True)
    for old in _answering(spec, before):
        (where / old).unlink(missing_ok=True)
    for new in _answering(spec, st):
        (where / new).touch()


def write_state(spec: NodeSpec, dirs: NodeDirs, cluster_state: str | None) -> None:
    """(Re)write everything that follows from the spec and may change at runtime."""
    st = node_state(spec, cluster_state)
    before = json.loads(dirs.state_file.read_text()) if dirs.state_file.exists() else None
    _write(dirs.state_file, json.dumps(st, indent=1) + "\n")
    write_cache(spec, dirs, st)
    write_answers(spec, st, cluster_state, before)
    _write(dirs.etc / "hccn.conf", hccn_conf(spec))
    _write(dirs.usr_local / "Ascend" / "driver" / "version.info", driver_version_info(spec))
    _write(dirs.usr_local / "Ascend" / "firmware" / "version.info", firmware_version_info(spec))
    write_weights(spec, dirs)


def install_node(spec: NodeSpec, dirs: NodeDirs, *, cluster_state: str | None = None,
                 hosts: dict[str, str] | None = None, client_pubkey: str | None = None,
                 shared_usr_local: bool = False) -> None:
    """All per-node files: fake tools, version files, hccn.conf, hostname, hosts, state, weights, ssh.
    `shared_usr_local`: the node-independent files of /usr/local are in a layer of their own
    (`install_usr_local`) under the node's overlay, not in the node's directory."""
    if not shared_usr_local:
        install_usr_local(dirs.usr_local, cluster_state)
    dirs.var_lib.mkdir(parents=True, exist_ok=True)
    _install_etc(spec, dirs, cluster_state, hosts, client_pubkey)


def install_usr_local(ul: Path, cluster_state: str | None) -> None:
    """What every node of a cluster has alike in /usr/local: the fake tools and the stand-in engines."""
    for sub in ("sbin", "bin", "Ascend/driver/tools", "Ascend/driver/lib64", "Ascend/driver/include",
                "Ascend/firmware", "dcmi"):
        (ul / sub).mkdir(parents=True, exist_ok=True)
    (ul / "lib" / "fakecluster").mkdir(parents=True, exist_ok=True)
    for tool, dst in (("npu-smi", ul / "sbin" / "npu-smi"),
                      ("hccn_tool", ul / "Ascend" / "driver" / "tools" / "hccn_tool"),
                      ("docker", ul / "bin" / "docker")):
        script = _TOOLS[tool]
        shutil.copyfile(FAKE_BIN / script, ul / "lib" / "fakecluster" / script)
        slow = _SLOW if tool != "docker" else ""
        ping = _PING.format(slow=slow, answers=answers_dir(cluster_state)) if tool == "hccn_tool" \
            and cluster_state else ""
        # a runtime `-s` changes state the caches were made from: drop this node's cache, and send every
        # node's pings to the Python fake (which reads all state files) from then on
        stale = f"touch {answers_dir(cluster_state)}/.stale" if cluster_state else ":"
        sweep = _SWEEP.format(stale=stale) if tool != "docker" else ""
        _write(dst, _WRAPPER.format(tool=tool, script=script, slow=slow, ping=ping, sweep=sweep), 0o755)
    # the stand-in engines (run inside fake containers; the fake docker copies them into each one): MindIE,
    # vLLM-Ascend (`vllm` + the P/D proxy), SGLang, their shared OpenAI answers and process plumbing
    # (standin_common.py), and the engines' own parser tables (the committed flags/vllm-<version>.json and
    # sglang-<release>.json, read as files: the stand-ins never import deployctl)
    for script in STANDIN_SCRIPTS:
        shutil.copyfile(FAKE_BIN / script, ul / "lib" / "fakecluster" / script)
    flags = ul / "lib" / "fakecluster" / "vllm-flags"
    flags.mkdir(parents=True, exist_ok=True)
    for table in sorted(VLLM_FLAGS.glob("vllm-[0-9]*.json")):
        shutil.copyfile(table, flags / table.name)
    flags = ul / "lib" / "fakecluster" / "sglang-flags"
    flags.mkdir(parents=True, exist_ok=True)
    for table in sorted(SGLANG_FLAGS.glob("sglang-*.json")):
        shutil.copyfile(table, flags / table.name)
    site = router_site()
    link = ul / "lib" / "fakecluster" / "sglang-router"
    if link.is_symlink() or link.exists():
        link.unlink()
    if site is not None:
        link.symlink_to(site)
    link = ul / "bin" / "npu-smi"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to("/usr/local/sbin/npu-smi")


def _install_etc(spec: NodeSpec, dirs: NodeDirs, cluster_state: str | None, hosts: dict[str, str] | None,
                 client_pubkey: str | None) -> None:
    etc = dirs.etc
    _write(etc / "hostname", spec.name + "\n")
    _write(etc / "ascend_install.info",
           "UserName=HwHiAiUser\nUserGroup=HwHiAiUser\nDriver_Install_Path_Param=/usr/local/Ascend\n"
           "Driver_Install_Type=full\nFirmware_Install_Path_Param=/usr/local/Ascend\n")
    base_hosts = Path("/etc/hosts").read_text() if Path("/etc/hosts").exists() else "127.0.0.1 localhost\n"
    extra = "".join(f"{ip}\t{name}\n" for name, ip in (hosts or {spec.name: spec.ip}).items())
    _write(etc / "hosts", base_hosts.rstrip("\n") + "\n# fake cluster\n" + extra)
    # no DNS server is reachable from the test bridge: no nameserver line makes lookups fail at once
    # (127.0.0.1 refuses) instead of timing out; node names resolve through /etc/hosts
    _write(etc / "resolv.conf", "# fake cluster: no DNS\noptions timeout:1 attempts:1\n")
    ssh = dirs.root / ".ssh"
    ssh.mkdir(parents=True, exist_ok=True)
    ssh.chmod(0o700)
    if client_pubkey:
        _write(ssh / "authorized_keys", client_pubkey.rstrip("\n") + "\n", 0o600)
    top = weights_top(spec)
    if top:
        dirs.mount_dir(top).mkdir(parents=True, exist_ok=True)
    write_state(spec, dirs, cluster_state)


def _closure(name: str) -> list:
    """The installed distribution `name` and every distribution it requires (extras left out), as
    importlib.metadata Distributions of this interpreter; a requirement not installed is skipped (the import in the
    container then fails, as it would in an image without it)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: dict[str, object] = {}
    todo = [name]
    while todo:
        n = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if n in seen:
            continue
        try:
            dist = metadata.distribution(n)
        except metadata.PackageNotFoundError:
            continue
        seen[n] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


@functools.lru_cache(maxsize=1)
def _router_dists() -> tuple[Path, list] | None:
    """Where the site directory of the installed sglang-router goes (named by the versions and places of the
    distributions in it) and those distributions; None without sglang-router. Reading the metadata costs ~80 ms:
    once per process (every node of a cluster asks)."""
    from importlib import metadata

    try:
        dist = metadata.distribution(ROUTER_DIST)
    except metadata.PackageNotFoundError:
        return None
    dists = _closure(ROUTER_DIST)
    key = hashlib.sha256("\n".join(sorted(f"{d.metadata['Name']}=={d.version}@{d.locate_file('')}"
                                           for d in dists)).encode()).hexdigest()[:12]
    return ROUTER_CACHE / f"sglang-router-{dist.version}-{key}", dists


def router_site() -> Path | None:
    """A site directory holding the installed sglang-router and what it requires (built once, then reused), or
    None when sglang-router is not installed here (`pip install -e '.[test]'` installs it)."""
    found = _router_dists()
    if found is None:
        return None
    target, dists = found
    if target.is_dir():
        return target
    tmp = ROUTER_CACHE / f".{target.name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for d in dists:
        for f in d.files or []:
            src = Path(d.locate_file(f))
            rel = Path(str(f))
            if rel.is_absolute() or ".." in rel.parts or not src.is_file() or "__pycache__" in rel.parts:
                continue      # console scripts (../../bin/...) and byte code stay out
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, tmp / rel)
    tmp.chmod(0o755)
    try:
        tmp.rename(target)
    except OSError:           # another process made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return target
