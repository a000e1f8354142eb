#!/usr/bin/python3
"""Fake `docker` client (installed as /usr/local/bin/docker, runs inside a fake node). No daemon.

Images come from the node state (/etc/fakecluster/node.json):
  docker image inspect IMG... [-f FMT]   JSON array, exit 0; unknown image: "[]" on stdout,
                                         "Error: No such image: IMG" on stderr, exit 1
  docker version [--format '{{.Server.Version}}']      docker --version
  docker images / docker image ls [-q] [--format FMT]
  docker info [--format FMT]
  docker load -i FILE                    registers the RepoTags of a `docker save` tarball
  docker pull IMG                        fails like an offline host

Containers live under /var/lib/fakedocker/<name>/ (per node: /var/lib is a per-node overlay):
  config.json     what `docker run` was given: Args, Image, Cmd, Env (image env + --env-file + -e),
                  Mounts (container path -> host path, ro/rw), Devices, HostConfig
  state.json      Status created|running|exited, Pid, StartedAt, FinishedAt, ExitCode, Error
  container.log   stdout+stderr of the container, one JSON line per line written (json-file driver)
  rootfs/         the container's root: the node's /usr (ro), the fake image's /usr/local (usr_local/,
                  the container's writable layer), /etc, /tmp ..., a /dev tmpfs holding the --device
                  nodes, the -v binds, and /.fakecluster/{engine.py,settings.json}
A container's command runs in a private mount namespace chrooted into rootfs, in the node's network
namespace (every container behaves as --net=host), supervised by a detached `docker.py __shim NAME`
process (setsid: it survives the ssh session) that records the logs, the pid and the exit status.
The fake image is a MindIE image: /usr/local/Ascend/mindie/latest/mindie-service/bin/{mindieservice_daemon,
mindie_llm_server,ms_controller,ms_coordinator} run fake_bin/engine.py (the stand-in MindIE). An image whose
repository is `.../vllm-ascend` (any tag) is a vLLM-Ascend image instead: /usr/local/bin/vllm runs
fake_bin/vllm.py, /vllm-workspace/vllm-ascend/examples/disaggregated_prefill_v1/
load_balance_proxy_server_example.py is its stand-in proxy, the CANN set_env.sh files and Mooncake's directory
exist; /.fakecluster/vllm-flags/ holds vLLM's parser tables. An image whose repository is `sglang`
(`lmsysorg/sglang:TAG`, `quay.io/ascend/sglang:TAG`) is an SGLang image (make_sglang_layer): a `sglang` package in
/usr/local/lib/python3.X/dist-packages whose `python3 -m sglang.launch_server` runs fake_bin/sglang_fake.py (the
release from the tag, its parser table from /.fakecluster/sglang-flags/), and the REAL sglang-router 0.3.2 with the
packages it imports, bound read-only from the node's /usr/local/lib/fakecluster/sglang-router (tools.router_site) at
/usr/local/lib/sglang-router-site (a .pth file puts it on python3's path). An image whose repository is `haproxy` (`haproxy:TAG`,
`library/haproxy`, `<registry>/.../haproxy`) is the official HAProxy image (make_haproxy_layer): this machine's
/usr/sbin/haproxy as /usr/local/sbin/haproxy, the image's ENTRYPOINT docker-entrypoint.sh, CMD, USER haproxy (99) and
STOPSIGNAL SIGUSR1 (image_config: the run defaults of every image, merged into `docker run` as the daemon does).

  docker run [-d] [--name N] [--net=host] [--ipc=host] [--shm-size S] [--privileged] [--device D]...
             [-v SRC:DST[:ro]]... [--mount type=bind,source=S,target=T[,readonly]] [--env-file F]...
             [-e K[=V]]... [-w DIR] [--entrypoint E] [--rm] [-i] [-t] [-h NAME] [--restart no]
             [-l K=V]... [-u/--user NAME|UID[:GROUP|GID]] IMAGE [CMD...]
  (--user: the command runs as that uid/gid, names looked up in the container's /etc/passwd and /etc/group)
  docker create ... (same flags, not started)     docker start|restart NAME...
  docker stop [-t S] [-s SIG] NAME...             the image's STOPSIGNAL (else SIGTERM) to the container's process
                                                  group, SIGKILL after S
  docker kill [-s SIG] NAME...                    docker rm [-f] NAME...       docker wait NAME...
  docker ps [-a] [-q] [--no-trunc] [--filter name=X|status=S|id=I|ancestor=IMG] [--format FMT]
  docker inspect / docker container inspect NAME... [-f FMT]
  docker logs [-f] [-t] [--tail N] [--since T] [--until T] NAME

Errors are the real client's texts and exit codes (unknown flag 125; image not present 125 without a
pull; name in use 125; missing --device 125 with the container left "created"; --mount source missing
125; -v source missing: created as an empty directory, as real docker does). Other subcommands exit 125
saying they are not simulated.
"""

import ctypes
import datetime
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import threading
import time

STATE_PATH = "/etc/fakecluster/node.json"
API_VERSION = "1.43"
DOCKER_ROOT = os.environ.get("FAKEDOCKER_ROOT", "/var/lib/fakedocker")
HERE = os.path.dirname(os.path.abspath(__file__))
ENGINE = os.path.join(HERE, "engine.py")
IMAGE_ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"]
IMAGE_CMD = ["/bin/bash"]
CONTROL_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
ZERO_TIME = "0001-01-01T00:00:00Z"


def load_state():
    with open(os.environ.get("FAKECLUSTER_STATE", STATE_PATH)) as f:
        return json.load(f)


def save_state(st):
    path = os.environ.get("FAKECLUSTER_STATE", STATE_PATH)
    with open(path + ".tmp", "w") as f:
        json.dump(st, f, indent=1)
    os.replace(path + ".tmp", path)


# ---- images ------------------------------------------------------------------------------------

def split_ref(ref):
    name, tag = ref, "latest"
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = ref.rsplit(":", 1)
    return name, tag


def normalize(ref):
    name, tag = split_ref(ref)
    return "%s:%s" % (name, tag)


def image_id(ref):
    return "sha256:" + hashlib.sha256(normalize(ref).encode()).hexdigest()


# The official HAProxy image (Docker Hub `haproxy`, docker-library/haproxy 2.6/Dockerfile @ec437dd, the last lines:
# STOPSIGNAL SIGUSR1, ENTRYPOINT ["docker-entrypoint.sh"], USER haproxy (uid/gid 99, home /var/lib/haproxy, made by
# groupadd/useradd at the top), CMD ["haproxy", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]; `make install-bin` puts
# the binary at /usr/local/sbin/haproxy). The fake image runs this machine's Debian HAProxy (/usr/sbin/haproxy from
# the node's /usr; `apt-get install haproxy`) through a /usr/local/sbin/haproxy symlink.
HAPROXY_REPO = re.compile(r"(^|/)haproxy$")
HAPROXY_BIN = "/usr/sbin/haproxy"
HAPROXY_CFG = "/usr/local/etc/haproxy/haproxy.cfg"
HAPROXY_UID = 99


def is_haproxy_image(ref):
    return bool(HAPROXY_REPO.search(split_ref(normalize(ref))[0]))


def image_config(ref):
    """The image's run defaults (docker's Config fields): Env, Entrypoint, Cmd, User, WorkingDir, StopSignal.
    MindIE and vLLM-Ascend images: bash, root, SIGTERM; HAProxy: the official image's (see HAPROXY_REPO)."""
    if is_haproxy_image(ref):
        tag = split_ref(normalize(ref))[1]
        env = [IMAGE_ENV[0]] + (["HAPROXY_VERSION=%s" % tag] if re.fullmatch(r"\d+\.\d+\.\d+", tag) else [])
        return {"Env": env, "Entrypoint": ["docker-entrypoint.sh"], "Cmd": ["haproxy", "-f", HAPROXY_CFG],
                "User": "haproxy", "WorkingDir": "", "StopSignal": "SIGUSR1"}
    return {"Env": list(IMAGE_ENV), "Entrypoint": None, "Cmd": list(IMAGE_CMD), "User": "", "WorkingDir": "/",
            "StopSignal": None}


def image_obj(ref):
    iid = image_id(ref)
    name, _ = split_ref(ref)
    icfg = image_config(ref)
    config = {"Env": list(IMAGE_ENV[:1]), "Cmd": list(IMAGE_CMD), "WorkingDir": "/", "Labels": None}
    if is_haproxy_image(ref):
        config = {"User": icfg["User"], "Env": icfg["Env"], "Cmd": icfg["Cmd"], "WorkingDir": "",
                  "Entrypoint": icfg["Entrypoint"], "Labels": None, "StopSignal": icfg["StopSignal"]}
    return {
        "Id": iid,
        "RepoTags": [normalize(ref)],
        "RepoDigests": ["%s@sha256:%s" % (name, hashlib.sha256(iid.encode()).hexdigest())],
        "Parent": "",
        "Comment": "",
        "Created": "2025-09-30T08:00:00.000000000Z",
        "DockerVersion": "",
        "Author": "",
        "Config": config,
        "Architecture": "arm64",
        "Os": "linux",
        "Size": 21474836480,
        "GraphDriver": {"Data": None, "Name": "overlay2"},
        "RootFS": {"Type": "layers", "Layers": [iid]},
        "Metadata": {"LastTagTime": "0001-01-01T00:00:00Z"},
    }


def find(st, ref):
    want = normalize(ref)
    for img in st["docker"]["images"]:
        if normalize(img) == want or image_id(img) == ref or image_id(img)[7:19] == ref:
            return img
    return None


# ---- Go templates (a small subset) ------------------------------------------------------------

def lookup(obj, path):
    for part in [p for p in path.split(".") if p]:
        if isinstance(obj, dict):
            obj = obj.get(part)
        else:
            return None
    return obj


def go_str(val):
    """How Go's text/template prints a value: true/false, [a b], map[k:v]."""
    if isinstance(val, bool):
        return "true" if val else "false"
    if isinstance(val, list):
        return "[" + " ".join(go_str(v) for v in val) + "]"
    if isinstance(val, dict):
        return "map[" + " ".join("%s:%s" % (k, go_str(val[k])) for k in sorted(val)) + "]"
    if val is None:
        return "<nil>"
    return str(val)


def render(fmt, obj):
    """{{.A.B}}, {{json .A}}, {{json .}}, {{index .A 0}}, {{lower .A}}, {{upper .A}}; \\t \\n escapes."""
    def one(m):
        expr = m.group(1).strip()
        if expr.startswith("json "):
            return json.dumps(lookup(obj, expr[5:].strip()), separators=(",", ":"))
        im = re.match(r"index\s+(\.\S*)\s+(\d+)$", expr)
        if im:
            seq = lookup(obj, im.group(1)) or []
            return go_str(seq[int(im.group(2))]) if int(im.group(2)) < len(seq) else ""
        fm = re.match(r"(lower|upper)\s+(\.\S*)$", expr)
        if fm:
            val = go_str(lookup(obj, fm.group(2)))
            return val.lower() if fm.group(1) == "lower" else val.upper()
        if expr.startswith("."):
            val = lookup(obj, expr)
            if val is None:
                return "<no value>"
            return go_str(val)
        return ""
    return re.sub(r"\{\{(.*?)\}\}", one, fmt).replace("\\n", "\n").replace("\\t", "\t")


def pop_opt(args, *names):
    """Remove `--format X` / `--format=X` / `-f X` from args; return X or None."""
    for i, a in enumerate(list(args)):
        for n in names:
            if a == n and i + 1 < len(args):
                val = args[i + 1]
                del args[i:i + 2]
                return val
            if a.startswith(n + "="):
                del args[i]
                return a.split("=", 1)[1]
    return None


def expand_short(args, letters):
    """-aq -> -a -q when every letter is a boolean short flag of the command (pflag allows that)."""
    out = []
    for a in args:
        if re.fullmatch(r"-[A-Za-z]{2,}", a) and all(ch in letters for ch in a[1:]):
            out += ["-" + ch for ch in a[1:]]
        else:
            out.append(a)
    args[:] = out
    return args


def pop_flag(args, *names):
    found = False
    for n in names:
        while n in args:
            args.remove(n)
            found = True
    return found


def version_obj(st):
    v = st["docker"]["version"]
    return {"Client": {"Version": v, "ApiVersion": API_VERSION, "Os": "linux", "Arch": "arm64"},
            "Server": {"Version": v, "ApiVersion": API_VERSION, "MinAPIVersion": "1.12", "Os": "linux",
                       "Arch": "arm64", "KernelVersion": "5.10.0-182.0.0.95.oe2203sp3.aarch64"}}


def cmd_version(st, args):
    fmt = pop_opt(args, "--format", "-f")
    obj = version_obj(st)
    if fmt:
        return 0, render(fmt, obj) + "\n", ""
    c, s = obj["Client"], obj["Server"]
    return 0, ("Client:\n Version:           %s\n API version:       %s\n OS/Arch:           linux/arm64\n\n"
               "Server: Docker Engine - Community\n Engine:\n  Version:          %s\n  API version:      %s "
               "(minimum version 1.12)\n  OS/Arch:          linux/arm64\n" % (c["Version"], c["ApiVersion"],
                                                                             s["Version"], s["ApiVersion"])), ""


def cmd_inspect(st, args, kind=None):
    """`docker inspect` (containers, then images), `docker image inspect`, `docker container inspect`."""
    fmt = pop_opt(args, "--format", "-f")
    kind = pop_opt(args, "--type") or kind
    pop_flag(args, "-s", "--size")
    refs = [a for a in args if not a.startswith("-")]
    if not refs:
        what = {"image": "image inspect", "container": "container inspect"}.get(kind, "inspect")
        return 1, "", "\"docker %s\" requires at least 1 argument.\n" % what
    found, err = [], ""
    for ref in refs:
        obj = None
        if kind in (None, "container"):
            c = find_container(ref)
            if c is not None:
                obj = container_obj(c)
        if obj is None and kind in (None, "image"):
            img = find(st, ref)
            if img is not None:
                obj = image_obj(img)
        if obj is None:
            noun = {"image": "image", "container": "container"}.get(kind, "object")
            err += "Error: No such %s: %s\n" % (noun, ref)
        else:
            found.append(obj)
    if fmt:
        out = "".join(render(fmt, o) + "\n" for o in found)
    else:
        out = json.dumps(found, indent=4) + "\n"
    return (1 if err else 0), out, err


def cmd_images(st, args):
    fmt = pop_opt(args, "--format")
    expand_short(args, "aq")
    quiet = "-q" in args or "--quiet" in args
    repo = next((a for a in args if not a.startswith("-")), None)
    rows = []
    for img in st["docker"]["images"]:
        name, tag = split_ref(img)
        if repo and normalize(repo) != normalize(img) and repo != name:
            continue
        rows.append({"Repository": name, "Tag": tag, "ID": image_id(img)[7:19], "CreatedSince": "7 weeks ago",
                     "Size": "21.5GB"})
    if quiet:
        return 0, "".join(r["ID"] + "\n" for r in rows), ""
    if fmt:
        return 0, "".join(render(fmt, r) + "\n" for r in rows), ""
    w = max([len(r["Repository"]) for r in rows] + [10]) + 3
    out = ["%-*s%-23s%-15s%-15s%s" % (w, "REPOSITORY", "TAG", "IMAGE ID", "CREATED", "SIZE")]
    out += ["%-*s%-23s%-15s%-15s%s" % (w, r["Repository"], r["Tag"], r["ID"], r["CreatedSince"], r["Size"])
            for r in rows]
    return 0, "\n".join(out) + "\n", ""


def cmd_info(st, args):
    fmt = pop_opt(args, "--format", "-f")
    cs = [c for c in all_containers()]
    running = sum(1 for c in cs if c["state"]["Status"] == "running")
    obj = {"ServerVersion": st["docker"]["version"], "Images": len(st["docker"]["images"]),
           "Containers": len(cs), "ContainersRunning": running, "ContainersPaused": 0,
           "ContainersStopped": len(cs) - running,
           "Driver": "overlay2", "DefaultRuntime": "runc",
           "Runtimes": {"ascend": {"path": "/usr/local/Ascend/Ascend-Docker-Runtime/ascend-docker-runtime"},
                        "runc": {"path": "runc"}},
           "OperatingSystem": "openEuler 22.03 (LTS-SP3)", "Architecture": "aarch64", "Name": st["name"]}
    if fmt:
        return 0, render(fmt, obj) + "\n", ""
    return 0, ("Server:\n Containers: %d\n  Running: %d\n  Paused: 0\n  Stopped: %d\n Images: %d\n"
               " Server Version: %s\n Storage Driver: overlay2\n"
               " Runtimes: ascend io.containerd.runc.v2 runc\n Default Runtime: runc\n Name: %s\n"
               % (obj["Containers"], running, obj["ContainersStopped"], obj["Images"], obj["ServerVersion"],
                  obj["Name"])), ""


def cmd_load(st, args):
    path = pop_opt(args, "-i", "--input")
    if not path:
        return 1, "", "requested load from stdin, but stdin is empty\n"
    try:
        with tarfile.open(path) as tar:
            manifest = json.load(tar.extractfile("manifest.json"))
    except (OSError, KeyError, tarfile.TarError, ValueError) as e:
        return 1, "", "Error processing tar file(exit status 1): %s\n" % e
    out = ""
    for entry in manifest:
        for tag in entry.get("RepoTags") or []:
            if find(st, tag) is None:
                st["docker"]["images"].append(tag)
            out += "Loaded image: %s\n" % tag
    save_state(st)
    return 0, out, ""


def pull_error(ref):
    host = ref.split("/")[0] if "/" in ref else "registry-1.docker.io"
    return "Error response from daemon: Get \"https://%s/v2/\": dial tcp: lookup %s: no such host" % (host, host)


# ---- time --------------------------------------------------------------------------------------

def go_time(ts):
    """RFC 3339 with nanoseconds, UTC, as docker prints StartedAt."""
    if not ts:
        return ZERO_TIME
    dt = datetime.datetime.fromtimestamp(ts, datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%09d" % int(round((ts % 1) * 1e9) % 1000000000) + "Z"


def human_duration(seconds):
    """github.com/docker/go-units HumanDuration."""
    s = int(seconds)
    if s < 1:
        return "Less than a second"
    if s == 1:
        return "1 second"
    if s < 60:
        return "%d seconds" % s
    minutes = int(seconds / 60)
    if minutes == 1:
        return "About a minute"
    if minutes < 60:
        return "%d minutes" % minutes
    hours = int(seconds / 3600 + 0.5)
    if hours == 1:
        return "About an hour"
    if hours < 48:
        return "%d hours" % hours
    if hours < 24 * 7 * 2:
        return "%d days" % (hours // 24)
    if hours < 24 * 30 * 2:
        return "%d weeks" % (hours // 24 // 7)
    if hours < 24 * 365 * 2:
        return "%d months" % (hours // 24 // 30)
    return "%d years" % (int(seconds / 3600) // 24 // 365)


def parse_time(value, now=None):
    """--since/--until: RFC 3339 (with or without fraction/zone), a date, unix seconds, or a duration
    (10s, 5m, 1h30m) meaning that long ago."""
    now = time.time() if now is None else now
    v = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", v):
        return float(v)
    if re.fullmatch(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+", v):
        mult = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
        return now - sum(float(n) * mult[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(ns|us|µs|ms|s|m|h)", v))
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?)(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?", v)
    if not m:
        raise ValueError("failed to parse value as time or duration: %r" % value)
    date, clock, frac, zone = m.groups()
    clock = clock or "00:00:00"
    if len(clock) == 5:
        clock += ":00"
    dt = datetime.datetime.strptime(date + "T" + clock, "%Y-%m-%dT%H:%M:%S")
    if zone in (None, "Z"):
        tz = datetime.timezone.utc if zone else datetime.datetime.now().astimezone().tzinfo
    else:
        sign = 1 if zone[0] == "+" else -1
        hh, mm = int(zone[1:3]), int(zone[-2:])
        tz = datetime.timezone(sign * datetime.timedelta(hours=hh, minutes=mm))
    return dt.replace(tzinfo=tz).timestamp() + (float(frac) if frac else 0.0)


# ---- container store ---------------------------------------------------------------------------

def cdir(name):
    return os.path.join(DOCKER_ROOT, name)


def read_json(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def write_json(path, obj):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def proc_start_time(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return None if fields[0] == "Z" else int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def alive(pid, start_time):
    return bool(pid) and proc_start_time(pid) is not None and proc_start_time(pid) == start_time


def load_container(name):
    """{"name", "dir", "config", "state"} with the state reconciled: a container whose process and shim
    are both gone is exited even if nobody could record it."""
    d = cdir(name)
    cfg = read_json(os.path.join(d, "config.json"))
    if cfg is None:
        return None
    st = read_json(os.path.join(d, "state.json"), {}) or {}
    st.setdefault("Status", "created")
    starting_too_long = st["Status"] == "starting" and time.time() - st.get("StartingSince", 0) > 60
    if (st["Status"] == "running" or starting_too_long) and not alive(st.get("ShimPid"), st.get("ShimStart")) \
            and not alive(st.get("Pid"), st.get("PidStart")):
        st = read_json(os.path.join(d, "state.json"), {}) or st     # the shim may just have written it
        if st.get("Status") in ("running", "starting"):
            st.update(Status="exited" if st.get("Pid") else "created", ExitCode=st.get("ExitCode") or 255,
                      FinishedAt=time.time(), Pid=0, Error=st.get("Error") or "container supervisor died")
            write_json(os.path.join(d, "state.json"), st)
    return {"name": name, "dir": d, "config": cfg, "state": st}


def all_containers():
    try:
        names = sorted(os.listdir(DOCKER_ROOT))
    except OSError:
        return []
    out = [load_container(n) for n in names if os.path.isfile(os.path.join(DOCKER_ROOT, n, "config.json"))]
    out = [c for c in out if c is not None]
    out.sort(key=lambda c: c["config"].get("CreatedTs", 0), reverse=True)
    return out


def find_container(ref):
    ref = ref.lstrip("/")
    if re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*", ref) and os.path.isfile(os.path.join(cdir(ref), "config.json")):
        return load_container(ref)
    if re.fullmatch(r"[0-9a-f]{1,64}", ref):
        hits = [c for c in all_containers() if c["config"]["Id"].startswith(ref)]
        if len(hits) == 1:
            return hits[0]
    return None


def no_such(ref):
    return "Error response from daemon: No such container: %s" % ref


def status_text(c, now=None):
    now = time.time() if now is None else now
    s = c["state"]
    if s["Status"] == "running":
        return "Up " + human_duration(now - (s.get("StartedAt") or now))
    if s["Status"] == "exited":
        return "Exited (%d) %s ago" % (s.get("ExitCode", 0), human_duration(now - (s.get("FinishedAt") or now)))
    return "Created"


def container_obj(c):
    """`docker container inspect` JSON (the fields tools read; same names and shapes as docker 24)."""
    cfg, s = c["config"], c["state"]
    status = s["Status"] if s["Status"] != "starting" else "created"
    cmd = cfg["Cmd"]
    path, args = (cfg["Entrypoint"] + cmd)[0], (cfg["Entrypoint"] + cmd)[1:]
    return {
        "Id": cfg["Id"], "Created": go_time(cfg["CreatedTs"]), "Path": path, "Args": args,
        "State": {"Status": status, "Running": status == "running", "Paused": False, "Restarting": False,
                  "OOMKilled": False, "Dead": False, "Pid": s.get("Pid", 0) if status == "running" else 0,
                  "ExitCode": s.get("ExitCode", 0), "Error": s.get("Error", ""),
                  "StartedAt": go_time(s.get("StartedAt")), "FinishedAt": go_time(s.get("FinishedAt"))},
        "Image": image_id(cfg["Image"]), "ResolvConfPath": "", "HostnamePath": "", "HostsPath": "",
        "LogPath": os.path.join(c["dir"], "container.log"), "Name": "/" + cfg["Name"],
        "RestartCount": 0, "Driver": "overlay2", "Platform": "linux", "MountLabel": "", "ProcessLabel": "",
        "AppArmorProfile": "", "ExecIDs": None,
        "HostConfig": {"Binds": [m["Spec"] for m in cfg["Mounts"] if m.get("Spec")], "NetworkMode": cfg["NetworkMode"],
                       "IpcMode": cfg["IpcMode"], "ShmSize": cfg["ShmSize"], "Privileged": cfg["Privileged"],
                       "AutoRemove": cfg["AutoRemove"], "RestartPolicy": {"Name": cfg["Restart"],
                                                                          "MaximumRetryCount": 0},
                       "Devices": [{"PathOnHost": d["host"], "PathInContainer": d["container"],
                                    "CgroupPermissions": d["perms"]} for d in cfg["Devices"]]},
        "Mounts": [{"Type": "bind", "Source": m["Source"], "Destination": m["Destination"], "Mode": m["Mode"],
                    "RW": m["RW"], "Propagation": "rprivate"} for m in cfg["Mounts"]],
        "Config": {"Hostname": cfg["Hostname"], "Domainname": "", "User": cfg.get("User", ""), "AttachStdin": False,
                   "AttachStdout": not cfg["Detach"], "AttachStderr": not cfg["Detach"], "Tty": cfg["Tty"],
                   "OpenStdin": cfg["Interactive"], "StdinOnce": False, "Env": cfg["Env"], "Cmd": cmd,
                   "Image": cfg["Image"], "Volumes": None, "WorkingDir": cfg["WorkingDir"],
                   "Entrypoint": cfg["Entrypoint"] or None, "OnBuild": None, "Labels": cfg["Labels"],
                   **({"StopSignal": cfg["StopSignal"]} if cfg.get("StopSignal") else {})},
        "NetworkSettings": {"Networks": {cfg["NetworkMode"]: {"IPAddress": "", "Gateway": ""}}},
    }


# ---- `docker run` flags (pflag rules: --x=v, --x v, -x v, -xv, -dit; stops at the image) ----------

RUN_FLAGS = {
    "-d": ("detach", "bool"), "--detach": ("detach", "bool"),
    "--name": ("name", "str"),
    "--net": ("network", "str"), "--network": ("network", "str"),
    "--ipc": ("ipc", "str"),
    "--shm-size": ("shm_size", "str"),
    "--privileged": ("privileged", "bool"),
    "--device": ("devices", "list"),
    "-v": ("volumes", "list"), "--volume": ("volumes", "list"),
    "--mount": ("mounts", "list"),
    "--env-file": ("env_files", "list"),
    "-e": ("env", "list"), "--env": ("env", "list"),
    "-w": ("workdir", "str"), "--workdir": ("workdir", "str"),
    "--entrypoint": ("entrypoint", "str"),
    "--rm": ("rm", "bool"),
    "-i": ("interactive", "bool"), "--interactive": ("interactive", "bool"),
    "-t": ("tty", "bool"), "--tty": ("tty", "bool"),
    "-h": ("hostname", "str"), "--hostname": ("hostname", "str"),
    "--restart": ("restart", "str"),
    "-l": ("labels", "list"), "--label": ("labels", "list"),
    "-u": ("user", "str"), "--user": ("user", "str"),
}
# real `docker run` flags this fake does not simulate (refused with a clear message, not "unknown")
NOT_SIMULATED = {
    "-p", "--publish", "-P", "--publish-all", "--cpus", "-m", "--memory", "--memory-swap",
    "--ulimit", "--cap-add", "--cap-drop", "--security-opt", "--pid", "--uts", "--userns", "--cgroupns",
    "--add-host", "--dns", "--dns-search", "--dns-option", "--init", "--health-cmd", "--health-interval",
    "--log-driver", "--log-opt", "--runtime", "--gpus", "--tmpfs", "-a", "--attach", "--cidfile", "--expose",
    "--group-add", "--platform", "--pull", "--stop-signal", "--stop-timeout", "--volumes-from",
    "--network-alias", "--sysctl", "--oom-kill-disable", "--cpuset-cpus", "--device-cgroup-rule",
    "--read-only", "--sig-proxy", "--mac-address", "--ip", "--link", "--label-file", "--volume-driver",
    "--pids-limit", "--cpu-shares", "-c", "--isolation", "--storage-opt", "--detach-keys", "--domainname",
}


class CliError(Exception):
    def __init__(self, rc, msg):
        super().__init__(msg)
        self.rc, self.msg = rc, msg


def parse_flags(args, table, cmd, stop_at_positional=True):
    """pflag-style parsing -> (opts, positionals)."""
    opts, rest, i = {}, [], 0
    see = "See 'docker %s --help'." % cmd

    def setv(flag, value):
        key, kind = table[flag]
        if kind == "bool":
            if value is None:
                opts[key] = True
            elif value.lower() in ("true", "1"):
                opts[key] = True
            elif value.lower() in ("false", "0"):
                opts[key] = False
            else:
                raise CliError(125, "invalid argument %r for %r flag: strconv.ParseBool: parsing %r: "
                                    "invalid syntax\n%s" % (value, flag, value, see))
        elif kind == "list":
            opts.setdefault(key, []).append(value)
        else:
            opts[key] = value

    while i < len(args):
        a = args[i]
        if a == "--":
            rest += args[i + 1:]
            break
        if not a.startswith("-") or a == "-":
            if stop_at_positional:
                rest += args[i:]
                break
            rest.append(a)
            i += 1
            continue
        if a.startswith("--"):
            name, eq, value = a.partition("=")
            if name in NOT_SIMULATED:
                raise CliError(125, "docker: flag %s is not simulated by the fake cluster (tests/fakecluster)."
                                    "\n%s" % (name, see))
            if name not in table:
                raise CliError(125, "unknown flag: %s\n%s" % (name, see))
            if table[name][1] == "bool":
                setv(name, value if eq else None)
            elif eq:
                setv(name, value)
            elif i + 1 < len(args):
                i += 1
                setv(name, args[i])
            else:
                raise CliError(125, "flag needs an argument: %s\n%s" % (name, see))
            i += 1
            continue
        # short flags: -d, -dit, -e K=V, -eK=V, -v=x
        j = 1
        while j < len(a):
            flag = "-" + a[j]
            if flag in NOT_SIMULATED:
                raise CliError(125, "docker: flag %s is not simulated by the fake cluster (tests/fakecluster)."
                                    "\n%s" % (flag, see))
            if flag not in table:
                raise CliError(125, "unknown shorthand flag: %r in %s\n%s" % (a[j], a, see))
            if table[flag][1] == "bool":
                setv(flag, None)
                j += 1
                continue
            value = a[j + 1:]
            if value.startswith("="):
                value = value[1:]
            if not value:
                if i + 1 >= len(args):
                    raise CliError(125, "flag needs an argument: '%s' in %s\n%s" % (a[j], a, see))
                i += 1
                value = args[i]
            setv(flag, value)
            break
        i += 1
    return opts, rest


def parse_size(value, flag="--shm-size"):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([bkmgtp]?)b?", value.strip().lower())
    if not m:
        raise CliError(125, "invalid argument %r for %r flag: invalid size: %r\nSee 'docker run --help'."
                       % (value, flag, value))
    mult = {"": 1, "b": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4, "p": 1024 ** 5}
    return int(float(m.group(1)) * mult[m.group(2)])


def read_env_file(path):
    """docker's opts.ParseEnvFile: KEY=VALUE taken literally, `#` comments, blank lines skipped, a bare
    KEY takes the client's value (skipped if unset)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise CliError(125, "docker: open %s: %s.\nSee 'docker run --help'." % (path, e.strerror.lower()))
    out = []
    for n, raw in enumerate(lines, 1):
        line = raw.lstrip()
        if not line or line.startswith("#"):
            continue
        key, eq, _ = line.partition("=")
        if not key:
            raise CliError(125, "docker: invalid environment variable: %s.\nSee 'docker run --help'." % line)
        if re.search(r"\s", key):
            raise CliError(125, "docker: variable '%s' contains whitespaces.\nSee 'docker run --help'." % key)
        if eq:
            out.append(line)
        elif key in os.environ:
            out.append("%s=%s" % (key, os.environ[key]))
    return out


def merge_env(entries):
    """Later entries win; order of first appearance kept (docker's ReplaceOrAppendEnvValues)."""
    keys, vals = [], {}
    for e in entries:
        k, _, v = e.partition("=")
        if k not in vals:
            keys.append(k)
        vals[k] = v
    return ["%s=%s" % (k, vals[k]) for k in keys]


def parse_volume(spec):
    """-v SRC:DST[:MODE] -> mount dict (bind mounts of absolute host paths only)."""
    see = "\nSee 'docker run --help'."
    parts = spec.split(":")
    if len(parts) == 1:
        raise CliError(125, "docker: anonymous volumes (-v %s) are not simulated by the fake cluster.%s" % (spec, see))
    if len(parts) > 3:
        raise CliError(125, "docker: Error response from daemon: invalid volume specification: '%s'.%s" % (spec, see))
    src, dst = parts[0], parts[1]
    mode = parts[2] if len(parts) == 3 else ""
    if not src.startswith("/"):
        raise CliError(125, "docker: named volumes (-v %s) are not simulated by the fake cluster.%s" % (spec, see))
    modes = [m for m in mode.split(",") if m]
    valid = {"ro", "rw", "z", "Z", "private", "rprivate", "shared", "rshared", "slave", "rslave", "nocopy"}
    if any(m not in valid for m in modes) or ("ro" in modes and "rw" in modes):
        raise CliError(125, "docker: Error response from daemon: invalid mode: %s.%s" % (mode, see))
    if not dst.startswith("/"):
        raise CliError(125, "docker: Error response from daemon: invalid volume specification: '%s': invalid mount "
                            "config for type \"bind\": invalid mount path: '%s' mount path must be absolute.%s"
                       % (spec, dst, see))
    if os.path.normpath(dst) == "/":
        raise CliError(125, "docker: Error response from daemon: invalid volume specification: '%s': invalid mount "
                            "config for type \"bind\": invalid specification: destination can't be '/'.%s" % (spec, see))
    return {"Source": os.path.normpath(src), "Destination": os.path.normpath(dst), "Mode": mode,
            "RW": "ro" not in modes, "Spec": spec, "Kind": "volume"}


def parse_mount(spec):
    kv = {}
    for item in spec.split(","):
        k, eq, v = item.partition("=")
        kv[k.strip().lower()] = v.strip() if eq else "true"
    typ = kv.get("type", "volume")
    if typ != "bind":
        raise CliError(125, "docker: --mount type=%s is not simulated by the fake cluster (bind only).\n"
                            "See 'docker run --help'." % typ)
    src = kv.get("source") or kv.get("src")
    dst = kv.get("target") or kv.get("destination") or kv.get("dst")
    if not src:
        raise CliError(125, "invalid argument \"%s\" for \"--mount\" flag: source is required when specifying "
                            "volume-specific options\nSee 'docker run --help'." % spec)
    if not dst:
        raise CliError(125, "invalid argument \"%s\" for \"--mount\" flag: target is required\n"
                            "See 'docker run --help'." % spec)
    ro = kv.get("readonly", kv.get("ro", "false")).lower() in ("true", "1")
    return {"Source": os.path.normpath(src), "Destination": os.path.normpath(dst), "Mode": "",
            "RW": not ro, "Spec": None, "Kind": "mount"}


def parse_device(spec):
    parts = spec.split(":")
    host = parts[0]
    ctr = parts[1] if len(parts) > 1 and parts[1].startswith("/") else host
    perms = parts[-1] if len(parts) > 1 and not parts[-1].startswith("/") else "rwm"
    return {"host": host, "container": ctr, "perms": perms}


def node_devices(st):
    """Device nodes this host has: /dev/davinciN of every NPU npu-smi sees, the control devices."""
    present = {"/dev/davinci%d" % d["phy"] for d in st.get("devices", [])}
    if present:
        present.update(CONTROL_DEVICES)
    return present


def device_exists(st, path):
    if re.fullmatch(r"/dev/davinci\d+", path) or path in CONTROL_DEVICES:
        return path in node_devices(st)
    return os.path.exists(path)


def image_version(ref):
    m = re.search(r":(\d+\.\d+\.(?:RC\d+|T\d+|\d+))", ref)
    return m.group(1) if m else "2.2.RC1"


# ---- run / create / start ----------------------------------------------------------------------

def cmd_create(st, args, cmd="create"):
    opts, rest = parse_flags(args, RUN_FLAGS, cmd)
    if not rest:
        return 1, "", ("\"docker %s\" requires at least 1 argument.\nSee 'docker %s --help'.\n\nUsage:  docker %s "
                       "[OPTIONS] IMAGE [COMMAND] [ARG...]\n\n" % (cmd, cmd, cmd)), None
    image, command = rest[0], rest[1:]
    name = opts.get("name")
    if name is not None and not re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]+", name.lstrip("/")):
        raise CliError(125, "docker: Error response from daemon: Invalid container name (%s), only "
                            "[a-zA-Z0-9][a-zA-Z0-9_.-] are allowed.\nSee 'docker %s --help'." % (name, cmd))
    network = opts.get("network", "default")
    if network not in ("host", "default", "bridge", "none"):
        raise CliError(125, "docker: --net=%s is not simulated by the fake cluster (containers share the "
                            "node's network, like --net=host; --net=none gets a network namespace of its "
                            "own with nothing in it).\nSee 'docker %s --help'." % (network, cmd))
    ipc = opts.get("ipc", "private")
    if ipc not in ("host", "private", "shareable", "none"):
        raise CliError(125, "docker: Error response from daemon: invalid IPC mode: %s.\nSee 'docker %s --help'."
                       % (ipc, cmd))
    shm = parse_size(opts["shm_size"]) if "shm_size" in opts else 64 * 1024 ** 2
    restart = opts.get("restart", "no")
    if restart != "no":
        raise CliError(125, "docker: --restart=%s is not simulated by the fake cluster.\nSee 'docker %s --help'."
                       % (restart, cmd))
    env = []
    for f in opts.get("env_files", []):
        env += read_env_file(f)
    for e in opts.get("env", []):
        if "=" in e:
            env.append(e)
        elif e in os.environ:
            env.append("%s=%s" % (e, os.environ[e]))
    mounts = [parse_volume(v) for v in opts.get("volumes", [])] + [parse_mount(m) for m in opts.get("mounts", [])]
    devices = [parse_device(d) for d in opts.get("devices", [])]
    user = opts.get("user", "")
    if user and not re.fullmatch(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*(:[A-Za-z0-9_.][A-Za-z0-9_.-]*)?", user):
        raise CliError(125, "docker: Error response from daemon: invalid user %r.\nSee 'docker %s --help'." % (user, cmd))
    labels = {}
    for lab in opts.get("labels", []):
        k, _, v = lab.partition("=")
        labels[k] = v
    # the image must be here: no registry is reachable from a fake node
    img = find(st, image)
    if img is None:
        raise CliError(125, "Unable to find image '%s' locally\ndocker: %s.\nSee 'docker %s --help'."
                       % (normalize(image), pull_error(image), cmd))
    for m in mounts:
        if m["Kind"] == "mount" and not os.path.exists(m["Source"]):
            raise CliError(125, "docker: Error response from daemon: invalid mount config for type \"bind\": "
                                "bind source path does not exist: %s.\nSee 'docker %s --help'." % (m["Source"], cmd))
    cid = secrets.token_hex(32)
    if name is None:
        name = "%s_%s" % (secrets.choice(["eager", "jolly", "brave", "calm"]),
                          secrets.choice(["turing", "hopper", "curie", "noether"]) + cid[:4])
    name = name.lstrip("/")
    os.makedirs(DOCKER_ROOT, exist_ok=True)
    d = cdir(name)
    try:
        os.mkdir(d, 0o710)
    except FileExistsError:
        other = read_json(os.path.join(d, "config.json"), {}) or {}
        raise CliError(125, "docker: Error response from daemon: Conflict. The container name \"/%s\" is already "
                            "in use by container \"%s\". You have to remove (or rename) that container to be able "
                            "to reuse that name.\nSee 'docker %s --help'." % (name, other.get("Id", "?"), cmd))
    for m in mounts:   # -v creates a missing host path as an empty directory (real docker does)
        if m["Kind"] == "volume" and not os.path.lexists(m["Source"]):
            os.makedirs(m["Source"], exist_ok=True)
        if not os.path.exists(m["Source"]):
            shutil.rmtree(d, ignore_errors=True)
            raise CliError(125, "docker: Error response from daemon: invalid mount config for type \"bind\": "
                                "bind source path does not exist: %s.\nSee 'docker %s --help'." % (m["Source"], cmd))
    # docker's merge of the run config with the image's (daemon/create.go merge): --entrypoint X replaces the
    # image's entrypoint and drops its Cmd; --entrypoint "" clears the entrypoint; no command: the image's Cmd
    icfg = image_config(img)
    if "entrypoint" in opts:
        entrypoint = [opts["entrypoint"]] if opts["entrypoint"] else []
    else:
        entrypoint = list(icfg["Entrypoint"] or [])
    if entrypoint and "entrypoint" in opts:
        cmdline = command
    else:
        cmdline = command or list(icfg["Cmd"] or [])
    if "user" not in opts:
        user = icfg["User"]
    cfg = {
        "Id": cid, "Name": name, "Image": image, "ImageRef": img, "CreatedTs": time.time(),
        "Args": ["docker", cmd] + list(args), "Cmd": cmdline, "Entrypoint": entrypoint,
        "Env": merge_env(icfg["Env"] + env),
        "WorkingDir": opts.get("workdir", ""), "Mounts": mounts,
        "MountMap": {m["Destination"]: m["Source"] for m in mounts},
        "Devices": devices, "NetworkMode": "host" if network == "host" else network, "IpcMode": ipc,
        "ShmSize": shm, "Privileged": bool(opts.get("privileged")), "AutoRemove": bool(opts.get("rm")),
        "Restart": restart, "Detach": bool(opts.get("detach")), "Tty": bool(opts.get("tty")),
        "Interactive": bool(opts.get("interactive")), "Hostname": opts.get("hostname") or os.uname().nodename,
        "Labels": labels, "MindieVersion": image_version(img), "User": user, "StopSignal": icfg["StopSignal"],
    }
    write_json(os.path.join(d, "config.json"), cfg)
    write_json(os.path.join(d, "state.json"), {"Status": "created", "ExitCode": 0})
    with open(os.path.join(d, "env"), "w") as f:            # readable copy of the container env
        f.write("".join(e + "\n" for e in cfg["Env"]))
    open(os.path.join(d, "container.log"), "a").close()
    make_image_layer(cfg, d)
    return 0, cid + "\n", "", name


def start_container(st, name):
    """Start a created/exited container: (0, "") or (exit code, docker's error text without prefix)."""
    c = load_container(name)
    cfg, s = c["config"], c["state"]
    if s["Status"] == "running":
        return 0, ""
    devs = list(cfg["Devices"])
    for dev in devs:
        if not device_exists(st, dev["host"]):
            s.update(Status=s["Status"] if s["Status"] != "starting" else "created", Error=(
                "error gathering device information while adding custom device \"%s\": no such file or directory"
                % dev["host"]))
            s["ExitCode"] = 128
            write_json(os.path.join(c["dir"], "state.json"), s)
            return 125, "Error response from daemon: " + s["Error"]
    seq = int(s.get("Seq", 0)) + 1
    write_json(os.path.join(c["dir"], "state.json"),
               {"Status": "starting", "Seq": seq, "ExitCode": 0, "StartedAt": s.get("StartedAt"),
                "FinishedAt": s.get("FinishedAt"), "StartingSince": time.time()})
    write_settings(st, cfg, c["dir"])
    subprocess.Popen([sys.executable, os.path.abspath(__file__), "__shim", name], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True,
                     cwd="/")
    deadline = time.time() + 120
    while time.time() < deadline:
        s = read_json(os.path.join(c["dir"], "state.json"), {}) or {}
        if s.get("Seq") == seq and s.get("Status") != "starting":
            break
        time.sleep(0.01)
    else:
        return 125, "Error response from daemon: the container supervisor did not start within 120 s"
    if s.get("Status") == "created" and s.get("Error"):
        return s.get("ExitCode") or 126, "Error response from daemon: " + s["Error"]
    return 0, ""


def cmd_run(st, args):
    try:
        rc, out, err, name = cmd_create(st, args, "run")
    except CliError as e:
        return e.rc, "", e.msg + "\n"
    if name is None:
        return rc, out, err
    c = load_container(name)
    rc, err = start_container(st, name)
    if rc:
        return rc, "", "docker: %s.\nSee 'docker run --help'.\n" % err
    if c["config"]["Detach"]:
        return 0, out, ""
    follow_logs(c, sys.stdout, sys.stderr, since=None, timestamps=False, tail=None)
    c = wait_exit(name, None)
    code = c["state"].get("ExitCode", 0) if c else 0
    if c and c["config"]["AutoRemove"]:
        remove_container(c)
    return code, "", ""


def cmd_start(st, args):
    pop_flag(args, "-a", "--attach", "-i", "--interactive")
    names = [a for a in args if not a.startswith("-")]
    if not names:
        return 1, "", "\"docker start\" requires at least 1 argument.\n"
    out, err, failed = "", "", []
    for ref in names:
        c = find_container(ref)
        if c is None:
            err += no_such(ref) + "\n"
            failed.append(ref)
            continue
        rc, msg = start_container(st, c["name"])
        if rc:
            err += msg + "\n"
            failed.append(ref)
        else:
            out += ref + "\n"
    if failed:
        err += "Error: failed to start containers: %s\n" % ", ".join(failed)
    return (1 if failed else 0), out, err


# Signals the whole container gets (the fake has no pid namespace whose end would take the other processes along);
# any other signal reaches the container's main process only, as docker's kill/stop does (PID 1): a HAProxy master
# gets its SIGUSR1 (the image's STOPSIGNAL) or SIGHUP/SIGUSR2 (reload) once and passes it on to its workers itself.
GROUP_SIGNALS = (signal.SIGTERM, signal.SIGKILL, signal.SIGINT, signal.SIGQUIT)


def signal_group(c, sig):
    pid = c["state"].get("Pid")
    if not pid or not alive(pid, c["state"].get("PidStart")):
        return False
    try:
        if sig in GROUP_SIGNALS:
            os.killpg(pid, sig)         # the container's process group (its main process leads it)
        else:
            os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        pass
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    return True


def wait_exit(name, timeout):
    deadline = None if timeout is None else time.time() + timeout
    while True:
        c = load_container(name)
        if c is None or c["state"]["Status"] not in ("running", "starting"):
            return c
        if deadline is not None and time.time() > deadline:
            return c
        time.sleep(0.02)


def stop_container(c, timeout, sig=signal.SIGTERM):
    if c["state"]["Status"] not in ("running", "starting"):
        return c
    signal_group(c, sig)
    c = wait_exit(c["name"], timeout)
    if c is not None and c["state"]["Status"] in ("running", "starting"):
        signal_group(c, signal.SIGKILL)
        c = wait_exit(c["name"], 10)
    return c


def parse_signal(name):
    """`KILL`, `SIGUSR1`, `10` -> the signal number, or None."""
    name = str(name).upper()
    if name.isdigit():
        return int(name)
    sig = getattr(signal, name if name.startswith("SIG") else "SIG" + name, None)
    return int(sig) if isinstance(sig, int) else None


def stop_signal(c, override=None):
    """What `docker stop` sends: --signal, else the container's StopSignal (the image's STOPSIGNAL), else SIGTERM."""
    return parse_signal(override or c["config"].get("StopSignal") or "SIGTERM") or signal.SIGTERM


def cmd_stop(st, args, restart=False):
    t = pop_opt(args, "-t", "--time", "--timeout")
    sig_opt = pop_opt(args, "-s", "--signal")
    if sig_opt is not None and parse_signal(sig_opt) is None:
        return 1, "", "Error response from daemon: Invalid signal: %s\n" % sig_opt
    try:
        timeout = 10.0 if t is None else float(t)
    except ValueError:
        return 125, "", "invalid argument %r for \"-t, --time\" flag: strconv.ParseInt: parsing %r: invalid " \
                        "syntax\nSee 'docker stop --help'.\n" % (t, t)
    names = [a for a in args if not a.startswith("-")]
    if not names:
        return 1, "", "\"docker %s\" requires at least 1 argument.\n" % ("restart" if restart else "stop")
    out, err, rc = "", "", 0
    for ref in names:
        c = find_container(ref)
        if c is None:
            err += no_such(ref) + "\n"
            rc = 1
            continue
        stop_container(c, timeout, stop_signal(c, sig_opt))
        if restart:
            r, msg = start_container(st, c["name"])
            if r:
                err += msg + "\n"
                rc = 1
                continue
        out += ref + "\n"
    return rc, out, err


def cmd_kill(st, args):
    sig_name = (pop_opt(args, "-s", "--signal") or "KILL").upper()
    sig = parse_signal(sig_name)
    if sig is None:
        return 1, "", "Error response from daemon: Invalid signal: %s\n" % sig_name
    out, err, rc = "", "", 0
    for ref in [a for a in args if not a.startswith("-")]:
        c = find_container(ref)
        if c is None:
            err += no_such(ref) + "\n"
            rc = 1
        elif c["state"]["Status"] != "running":
            err += "Error response from daemon: Cannot kill container: %s: container %s is not running\n" \
                   % (ref, c["config"]["Id"])
            rc = 1
        else:
            signal_group(c, sig)
            if sig == signal.SIGKILL:
                wait_exit(c["name"], 10)
            out += ref + "\n"
    return rc, out, err


def safe_rmtree(path):
    """rmtree that never crosses a mount point (a leaked bind mount must not take host files with it)."""
    root_dev = os.lstat(path).st_dev
    for entry in os.scandir(path):
        p = entry.path
        st = os.lstat(p)
        if stat.S_ISDIR(st.st_mode):
            if st.st_dev != root_dev or os.path.ismount(p):
                raise OSError("refusing to remove %s: it is a mount point" % p)
            safe_rmtree(p)
        else:
            os.unlink(p)
    os.rmdir(path)


def remove_container(c):
    d = c["dir"]
    tomb = d + ".removing-" + secrets.token_hex(4)
    os.rename(d, tomb)
    try:
        safe_rmtree(tomb)
    except OSError:
        shutil.rmtree(tomb, ignore_errors=True) if not mounts_under(tomb) else None


def mounts_under(path):
    try:
        with open("/proc/self/mountinfo") as f:
            return [line.split()[4] for line in f if line.split()[4].startswith(path.rstrip("/") + "/")]
    except OSError:
        return []


def cmd_rm(st, args):
    expand_short(args, "fv")
    force = pop_flag(args, "-f", "--force")
    pop_flag(args, "-v", "--volumes")
    names = [a for a in args if not a.startswith("-")]
    if not names:
        return 1, "", "\"docker rm\" requires at least 1 argument.\n"
    out, err, rc = "", "", 0
    for ref in names:
        c = find_container(ref)
        if c is None:
            err += no_such(ref) + "\n"
            if not force:          # `rm -f` of a missing container prints the error but exits 0
                rc = 1
            continue
        if c["state"]["Status"] in ("running", "starting"):
            if not force:
                err += ("Error response from daemon: You cannot remove a running container %s. Stop the "
                        "container before attempting removal or force remove\n" % c["config"]["Id"])
                rc = 1
                continue
            signal_group(c, signal.SIGKILL)
            c = wait_exit(c["name"], 10)
        remove_container(c)
        out += ref + "\n"
    return rc, out, err


def cmd_wait(st, args):
    out, err, rc = "", "", 0
    for ref in [a for a in args if not a.startswith("-")]:
        c = find_container(ref)
        if c is None:
            err += no_such(ref) + "\n"
            rc = 1
            continue
        c = wait_exit(c["name"], None)
        out += "%d\n" % c["state"].get("ExitCode", 0)
    return rc, out, err


# ---- ps ----------------------------------------------------------------------------------------

PS_HEADERS = {"ID": "CONTAINER ID", "Image": "IMAGE", "Command": "COMMAND", "CreatedAt": "CREATED AT",
              "RunningFor": "CREATED", "Status": "STATUS", "State": "STATE", "Ports": "PORTS", "Names": "NAMES",
              "Labels": "LABELS", "Mounts": "MOUNTS", "Networks": "NETWORKS", "Size": "SIZE"}


def ellipsis(s, n):
    return s if len(s) <= n else s[:n - 1] + "…"


def ps_command(argv):
    """The daemon's summary: path, then the args, those holding a space in single quotes."""
    return " ".join(argv[:1] + ["'%s'" % a if " " in a else a for a in argv[1:]])


def ps_row(c, trunc, now):
    cfg, s = c["config"], c["state"]
    command = ps_command(cfg["Entrypoint"] + cfg["Cmd"])
    if trunc:
        command = ellipsis(command, 20)
    created = datetime.datetime.fromtimestamp(cfg["CreatedTs"]).astimezone()
    return {"ID": cfg["Id"][:12] if trunc else cfg["Id"], "Image": cfg["Image"],
            "Command": json.dumps(command, ensure_ascii=False),
            "CreatedAt": created.strftime("%Y-%m-%d %H:%M:%S %z %Z"),
            "RunningFor": human_duration(now - cfg["CreatedTs"]) + " ago", "Status": status_text(c, now),
            "State": s["Status"] if s["Status"] != "starting" else "created", "Ports": "", "Names": cfg["Name"],
            "Labels": ",".join("%s=%s" % kv for kv in sorted(cfg["Labels"].items())),
            "Mounts": ",".join(m["Destination"] for m in cfg["Mounts"]), "Networks": cfg["NetworkMode"],
            "Size": "0B"}


def tabwrite(rows):
    """text/tabwriter as docker uses it: minwidth 10, padding 3."""
    if not rows:
        return ""
    cols = max(len(r) for r in rows)
    widths = [max(10, max(len(r[i]) for r in rows if i < len(r)) + 3) for i in range(cols)]
    return "".join("".join(cell.ljust(widths[i]) if i < len(r) - 1 else cell for i, cell in enumerate(r))
                   .rstrip() + "\n" for r in rows)


def cmd_ps(st, args):
    expand_short(args, "aqls")
    fmt = pop_opt(args, "--format")
    show_all = pop_flag(args, "-a", "--all")
    quiet = pop_flag(args, "-q", "--quiet")
    no_trunc = pop_flag(args, "--no-trunc")
    latest = pop_flag(args, "-l", "--latest")
    last = pop_opt(args, "-n", "--last")
    filters = []
    while True:
        f = pop_opt(args, "--filter", "-f")
        if f is None:
            break
        k, eq, v = f.partition("=")
        if not eq or k not in ("name", "status", "id", "ancestor", "label"):
            return 1, "", "Error response from daemon: invalid filter '%s'\n" % f
        filters.append((k, v))
    if args:
        return 1, "", "\"docker ps\" accepts no arguments.\nSee 'docker ps --help'.\n"
    now = time.time()
    cs = all_containers()
    if not show_all and not filters and not latest and last is None:
        cs = [c for c in cs if c["state"]["Status"] == "running"]

    def match(c, k, v):
        cfg, state = c["config"], c["state"]["Status"]
        if k == "name":
            return re.search(v.lstrip("/"), cfg["Name"]) is not None
        if k == "status":
            return (state if state != "starting" else "created") == v
        if k == "id":
            return cfg["Id"].startswith(v)
        if k == "ancestor":
            return normalize(v) == normalize(cfg["Image"])
        lk, _, lv = v.partition("=")
        return lk in cfg["Labels"] and (not lv or cfg["Labels"][lk] == lv)

    for key in sorted({k for k, _ in filters}):
        vals = [v for k, v in filters if k == key]
        cs = [c for c in cs if any(match(c, key, v) for v in vals)]
    if not show_all and filters and not any(k == "status" for k, _ in filters):
        cs = [c for c in cs if c["state"]["Status"] == "running"]
    if latest:
        cs = cs[:1]
    elif last is not None:
        cs = cs[:int(last)]
    rows = [ps_row(c, not no_trunc, now) for c in cs]
    if quiet:
        return 0, "".join(r["ID"] + "\n" for r in rows), ""
    if fmt:
        if fmt.startswith("table"):
            body = fmt[5:].strip()
            header = render(re.sub(r"\{\{\s*\.(\w+)\s*\}\}", lambda m: PS_HEADERS.get(m.group(1), m.group(1).upper()),
                                   body), {})
            lines = [header] + [render(body, r) for r in rows]
            if any("\t" in line for line in lines):
                return 0, tabwrite([line.split("\t") for line in lines]), ""
            return 0, "".join(line + "\n" for line in lines), ""
        if fmt == "json":
            return 0, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows), ""
        return 0, "".join(render(fmt, r) + "\n" for r in rows), ""
    table = [["CONTAINER ID", "IMAGE", "COMMAND", "CREATED", "STATUS", "PORTS", "NAMES"]]
    table += [[r["ID"], r["Image"], r["Command"], r["RunningFor"], r["Status"], r["Ports"], r["Names"]] for r in rows]
    return 0, tabwrite(table), ""


# ---- logs --------------------------------------------------------------------------------------

def read_log(c):
    out = []
    try:
        with open(os.path.join(c["dir"], "container.log"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.endswith("\n"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return out


def emit(entries, out, err, timestamps):
    for e in entries:
        text = e["log"]
        if timestamps:
            text = go_time(e["ts"]) + " " + text
        (err if e["stream"] == "stderr" else out).write(text)
    out.flush()
    err.flush()


def follow_logs(c, out, err, since, timestamps, tail, until=None):
    entries = read_log(c)
    seen = len(entries)
    if since is not None:
        entries = [e for e in entries if e["ts"] >= since]
    if until is not None:
        entries = [e for e in entries if e["ts"] <= until]
    if tail is not None:
        entries = entries[len(entries) - tail:] if tail > 0 else []
    emit(entries, out, err, timestamps)
    while True:
        cur = load_container(c["name"])
        running = cur is not None and cur["state"]["Status"] in ("running", "starting")
        now_entries = read_log(c) if cur is not None else []
        emit(now_entries[seen:], out, err, timestamps)
        seen = len(now_entries)
        if not running:
            return
        time.sleep(0.05)


def cmd_logs(st, args):
    expand_short(args, "ft")
    follow = pop_flag(args, "-f", "--follow")
    timestamps = pop_flag(args, "-t", "--timestamps")
    pop_flag(args, "--details")
    tail = pop_opt(args, "--tail", "-n")
    since = pop_opt(args, "--since")
    until = pop_opt(args, "--until")
    names = [a for a in args if not a.startswith("-")]
    if len(names) != 1 or len(names) != len(args):
        bad = [a for a in args if a.startswith("-")]
        if bad:
            return 125, "", "unknown flag: %s\nSee 'docker logs --help'.\n" % bad[0]
        return 1, "", "\"docker logs\" requires exactly 1 argument.\nSee 'docker logs --help'.\n"
    c = find_container(names[0])
    if c is None:
        return 1, "", no_such(names[0]) + "\n"
    try:
        t_since = parse_time(since) if since else None
        t_until = parse_time(until) if until else None
    except ValueError as e:
        return 1, "", "Error response from daemon: %s\n" % e
    n = None
    if tail not in (None, "all"):
        try:
            n = int(tail)
        except ValueError:
            return 1, "", "Error response from daemon: invalid tail value %r\n" % tail
        n = None if n < 0 else n
    if follow:
        follow_logs(c, sys.stdout, sys.stderr, t_since, timestamps, n, t_until)
        return 0, "", ""
    entries = read_log(c)
    if t_since is not None:
        entries = [e for e in entries if e["ts"] >= t_since]
    if t_until is not None:
        entries = [e for e in entries if e["ts"] <= t_until]
    if n is not None:
        entries = entries[len(entries) - n:] if n > 0 else []
    out = "".join((go_time(e["ts"]) + " " if timestamps else "") + e["log"] for e in entries if e["stream"] != "stderr")
    err = "".join((go_time(e["ts"]) + " " if timestamps else "") + e["log"] for e in entries if e["stream"] == "stderr")
    return 0, out, err


# ---- the fake image and the container's root ---------------------------------------------------

DEFAULT_MINDIE_CONFIG = {
    "Version": "1.0.0",
    "ServerConfig": {"ipAddress": "127.0.0.1", "managementIpAddress": "127.0.0.2", "port": 1025,
                     "managementPort": 1026, "metricsPort": 1027, "allowAllZeroIpListening": False,
                     "maxLinkNum": 1000, "httpsEnabled": True, "fullTextEnabled": False,
                     "tlsCaPath": "security/ca/", "tlsCaFile": ["ca.pem"], "tlsCert": "security/certs/server.pem",
                     "tlsPk": "security/keys/server.key.pem", "tlsCrlPath": "security/certs/",
                     "tlsCrlFiles": ["server_crl.pem"], "inferMode": "standard", "interCommTLSEnabled": True,
                     "interCommPort": 1121, "openAiSupport": "vllm", "tokenTimeout": 600, "e2eTimeout": 600},
    "BackendConfig": {"backendName": "mindieservice_llm_engine", "modelInstanceNumber": 1,
                      "npuDeviceIds": [[0, 1, 2, 3]], "tokenizerProcessNumber": 8,
                      "multiNodesInferEnabled": False, "multiNodesInferPort": 1120, "interNodeTLSEnabled": True,
                      "ModelDeployConfig": {"maxSeqLen": 2560, "maxInputTokenLen": 2048, "truncation": False,
                                            "ModelConfig": [{"modelInstanceType": "Standard",
                                                             "modelName": "llama_65b",
                                                             "modelWeightPath": "/data/atb_testdata/weights/"
                                                                                "llama1-65b-safetensors",
                                                             "worldSize": 4, "cpuMemSize": 5, "npuMemSize": -1,
                                                             "backendType": "atb", "trustRemoteCode": False}]},
                      "ScheduleConfig": {"templateType": "Standard", "templateName": "Standard_LLM",
                                         "cacheBlockSize": 128, "maxPrefillBatchSize": 50,
                                         "maxPrefillTokens": 8192, "prefillTimeMsPerReq": 150,
                                         "prefillPolicyType": 0, "decodeTimeMsPerReq": 50, "decodePolicyType": 0,
                                         "maxBatchSize": 200, "maxIterTimes": 512, "maxPreemptCount": 0,
                                         "supportSelectBatch": False, "maxQueueDelayMicroseconds": 5000}},
}
SET_ENV = {
    "ascend-toolkit/set_env.sh": "export ASCEND_TOOLKIT_HOME=/usr/local/Ascend/ascend-toolkit/latest\n"
                                 "export ASCEND_HOME_PATH=$ASCEND_TOOLKIT_HOME\n"
                                 "export ASCEND_OPP_PATH=$ASCEND_TOOLKIT_HOME/opp\n"
                                 "export LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64:${LD_LIBRARY_PATH:-}\n",
    # with the ATB defaults it exports (hicann/ascend-transformer-boost scripts/set_env.sh L54-71), e.g. the
    # workspace allocator 1 that replaced a tuned 3 set before it when launchers sourced it last
    "nnal/atb/set_env.sh": "export ATB_HOME_PATH=/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1\n"
                           "export ATB_WORKSPACE_MEM_ALLOC_ALG_TYPE=1\nexport ATB_OPSRUNNER_KERNEL_CACHE_LOCAL_COUNT=1\n",
    "atb-models/set_env.sh": "export ATB_SPEED_HOME_PATH=/usr/local/Ascend/atb-models\n",
    "mindie/set_env.sh": "export MIES_INSTALL_PATH=/usr/local/Ascend/mindie/latest/mindie-service\n"
                         "export MINDIE_LLM_HOME_PATH=/usr/local/Ascend/mindie/latest/mindie-llm\n"
                         "export PATH=$MIES_INSTALL_PATH/bin:$PATH\n",
}
# What MindIE-MS needs from mindie-service/lib (Motor docs: controller.md L621 "libboundscheck.so, libcrypto.so.3,
# libhse_cryption.so, libmie_role_manager.so, libssl.so.3"; coordinator.md L305 adds libmie_digs.so). Empty files:
# the stand-in only looks for them where the dynamic loader would (LD_LIBRARY_PATH).
MS_LIBS = ("libboundscheck.so", "libcrypto.so.3", "libssl.so.3", "libhse_cryption.so", "libmie_role_manager.so",
           "libmie_digs.so")
ENGINE_BINS = {"mindieservice_daemon": "daemon", "mindie_llm_server": "daemon", "ms_controller": "ms_controller",
               "ms_coordinator": "ms_coordinator"}


VLLM_REPO = re.compile(r"(^|/)vllm-ascend$")
# where the vLLM-Ascend images keep the repository (Dockerfile.a3@v0.13.0 L24 COPY . /vllm-workspace/vllm-ascend/)
# and the proxy of the P/D guides in it
VLLM_PROXY = "vllm-workspace/vllm-ascend/examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py"
# Mooncake inside the images since v0.11 (vllm-ascend.md §1.4); the guides put it on LD_LIBRARY_PATH
MOONCAKE_DIR = "Ascend/ascend-toolkit/latest/python/site-packages/mooncake"


def is_vllm_image(ref):
    return bool(VLLM_REPO.search(split_ref(normalize(ref))[0]))


def make_vllm_layer(cfg, d):
    """A vLLM-Ascend image: CANN set_env.sh, Mooncake's libraries, `vllm` on PATH (fake_bin/vllm.py) and the
    repository's examples with the P/D proxy (the stand-in proxy of vllm.py)."""
    ul = os.path.join(d, "usr_local")
    for rel in ("ascend-toolkit/set_env.sh", "nnal/atb/set_env.sh"):
        p = os.path.join(ul, "Ascend", rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(SET_ENV[rel])
    moon = os.path.join(ul, MOONCAKE_DIR)
    os.makedirs(moon, exist_ok=True)
    for lib in ("libtransfer_engine.so", "engine.so"):
        open(os.path.join(moon, lib), "w").close()
    for sub in ("bin", "sbin", "lib", "include", "share"):
        os.makedirs(os.path.join(ul, sub), exist_ok=True)
    p = os.path.join(ul, "bin", "vllm")
    with open(p, "w") as f:
        f.write("#!/bin/sh\n# fake vLLM (tests/fakecluster/fake_bin/vllm.py)\n"
                "exec /usr/bin/python3 -u /.fakecluster/vllm.py \"$@\"\n")
    os.chmod(p, 0o755)
    proxy = os.path.join(d, "rootfs", VLLM_PROXY)
    os.makedirs(os.path.dirname(proxy), exist_ok=True)
    with open(proxy, "w") as f:
        f.write("# fake load_balance_proxy_server_example.py (tests/fakecluster/fake_bin/vllm.py proxy_main)\n"
                "import sys\nsys.path.insert(0, '/.fakecluster')\nimport vllm as fake_vllm  # noqa: E402\n"
                "sys.exit(fake_vllm.proxy_main(sys.argv[1:]))\n")


# What the official image's docker-entrypoint.sh does (docker-library/haproxy docker-entrypoint.sh @ec437dd): a first
# argument that is an option means "haproxy <options>"; `haproxy ...` becomes `haproxy -W -db ...` (master-worker,
# foreground). Written here in our own words.
HAPROXY_ENTRYPOINT = """#!/bin/sh
# fake HAProxy image (tests/fakecluster/fake_bin/docker.py make_haproxy_layer): the official entrypoint's rules
set -e
case "$1" in -*) set -- haproxy "$@" ;; esac
if [ "$1" = haproxy ]; then
    shift
    set -- haproxy -W -db "$@"
fi
exec "$@"
"""
HAPROXY_MISSING = """#!/bin/sh
echo "[ALERT] fake cluster: the HAProxy image runs this machine's HAProxy (%s), which is not installed:" \
     "apt-get install -y haproxy" >&2
exit 127
""" % HAPROXY_BIN


def make_haproxy_layer(cfg, d):
    """The official HAProxy image (HAPROXY_REPO): /usr/local/sbin/haproxy (-> this machine's /usr/sbin/haproxy),
    /usr/local/bin/docker-entrypoint.sh, /usr/local/etc/haproxy/, the haproxy user (99:99) in /etc/passwd and
    /etc/group, /var/lib/haproxy owned by it. Nothing else: no MindIE, no CANN."""
    ul = os.path.join(d, "usr_local")
    for sub in ("bin", "sbin", "lib", "include", "share", "etc/haproxy/errors"):
        os.makedirs(os.path.join(ul, sub), exist_ok=True)
    binary = os.path.join(ul, "sbin", "haproxy")
    if os.path.exists(HAPROXY_BIN):
        os.symlink(HAPROXY_BIN, binary)
    else:
        with open(binary, "w") as f:
            f.write(HAPROXY_MISSING)
        os.chmod(binary, 0o755)
    entry = os.path.join(ul, "bin", "docker-entrypoint.sh")
    with open(entry, "w") as f:
        f.write(HAPROXY_ENTRYPOINT)
    os.chmod(entry, 0o755)
    root = os.path.join(d, "rootfs")
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    # debian:*-slim's accounts + what the Dockerfile's groupadd/useradd add
    with open(os.path.join(root, "etc", "passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
                "haproxy:x:%d:%d::/var/lib/haproxy:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:"
                "/usr/sbin/nologin\n" % (HAPROXY_UID, HAPROXY_UID))
    with open(os.path.join(root, "etc", "group"), "w") as f:
        f.write("root:x:0:\ndaemon:x:1:\nhaproxy:x:%d:\nnogroup:x:65534:\n" % HAPROXY_UID)
    home = os.path.join(root, "var", "lib", "haproxy")
    os.makedirs(home, exist_ok=True)
    os.chown(home, HAPROXY_UID, HAPROXY_UID)


def write_engine_bin(path, role, version=None):
    """A MindIE binary of the fake image: runs the stand-in (engine.py) as `role`; a 3.x image also tells it
    its version (the coordinator's arguments differ)."""
    ver = "FAKECLUSTER_MINDIE_VERSION=%s " % version if version else ""
    with open(path, "w") as f:
        f.write("#!/bin/sh\n# fake MindIE (tests/fakecluster/fake_bin/engine.py)\n"
                "%sFAKECLUSTER_ARGV0=\"$0\" exec /usr/bin/python3 -u /.fakecluster/engine.py %s \"$@\"\n" % (ver, role))
    os.chmod(path, 0o550)


def write_mindie_files(ms_home, server_home):
    """MindIE-MS's libraries under ms_home/lib, the server's default conf/config.json (640) under server_home."""
    for lib in MS_LIBS:
        open(os.path.join(ms_home, "lib", lib), "w").close()
    conf = os.path.join(server_home, "conf", "config.json")
    with open(conf, "w") as f:
        json.dump(DEFAULT_MINDIE_CONFIG, f, indent=4)
    os.chmod(conf, 0o640)


SGLANG_REPO = re.compile(r"(^|/)sglang$")
# the real router's site directory on the node (a link tools.py makes to its copy under /tmp), and where an SGLang
# container sees it
SGLANG_ROUTER_NODE = "/usr/local/lib/fakecluster/sglang-router"
SGLANG_ROUTER_SITE = "lib/sglang-router-site"       # under the image's /usr/local


def is_sglang_image(ref):
    return bool(SGLANG_REPO.search(split_ref(normalize(ref))[0]))


def sglang_release(ref):
    """The SGLang release of an image tag: `v0.5.18-cann9.0.0-a3` and `cann9.0.0-a3-v0.5.16` (the quay.io tags put
    it last) -> "0.5.18" / "0.5.16"; None when the tag names none."""
    m = re.search(r"(?:^|-)v(\d+\.\d+\.\d+)", split_ref(normalize(ref))[1])
    return m.group(1) if m else None


def make_sglang_layer(cfg, d):
    """An SGLang image (lmsysorg/sglang, quay.io/ascend/sglang: docker/npu.Dockerfile): CANN set_env.sh, the
    `sglang` package (its launch_server module runs the stand-in) and a .pth naming the real router's site."""
    ul = os.path.join(d, "usr_local")
    for rel in ("ascend-toolkit/set_env.sh", "nnal/atb/set_env.sh"):
        p = os.path.join(ul, "Ascend", rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(SET_ENV[rel])
    for sub in ("bin", "sbin", "lib", "include", "share", SGLANG_ROUTER_SITE):
        os.makedirs(os.path.join(ul, sub), exist_ok=True)
    site = os.path.join(ul, "lib", "python%d.%d" % sys.version_info[:2], "dist-packages")
    pkg = os.path.join(site, "sglang")
    os.makedirs(pkg, exist_ok=True)
    version = sglang_release(cfg.get("ImageRef") or cfg["Image"]) or ""
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write("# fake SGLang (tests/fakecluster/fake_bin/sglang_fake.py)\n__version__ = %r\n" % version)
    with open(os.path.join(pkg, "version.py"), "w") as f:
        f.write("__version__ = %r\n" % version)
    with open(os.path.join(pkg, "launch_server.py"), "w") as f:
        f.write("# fake sglang.launch_server (tests/fakecluster/fake_bin/sglang_fake.py)\n"
                "import os, sys\nsys.path.insert(0, '/.fakecluster')\nimport sglang_fake  # noqa: E402\n"
                "if __name__ == '__main__':\n    code = sglang_fake.main(sys.argv[1:])\n"
                "    sys.stdout.flush()\n    sys.stderr.flush()\n    os._exit(code)\n")
    with open(os.path.join(site, "sglang-router-site.pth"), "w") as f:
        f.write("/usr/local/%s\n" % SGLANG_ROUTER_SITE)


def make_image_layer(cfg, d):
    """The fake image's /usr/local (the container's writable layer for it): MindIE + CANN set_env.sh
    (make_mindie_layer), or vLLM-Ascend (make_vllm_layer) for a `.../vllm-ascend:TAG` image, each with the CANN
    toolkit and Python packages of its release (write_software), or HAProxy (make_haproxy_layer) for
    `haproxy:TAG`."""
    ref = cfg.get("ImageRef") or cfg["Image"]
    if is_haproxy_image(ref):
        return make_haproxy_layer(cfg, d)
    if is_vllm_image(ref):
        make_vllm_layer(cfg, d)
    elif is_sglang_image(ref):
        make_sglang_layer(cfg, d)
    else:
        make_mindie_layer(cfg, d)
    write_software(os.path.join(d, "usr_local"), ref, cfg)


# What each engine release's image ships. vLLM-Ascend: its compatibility matrix (vllm-project/vllm-ascend
# releases/v0.23.0 @50e87d63 docs/source/community/versioning_policy.md L24-61: "Stable CANN", PyTorch/torch_npu).
# MindIE 2.2: unverified (MindIE 2.3.0 ships CANN 8.5.0, 3.0.0 8.5.1; 2.2's not found): CANN 8.3.RC2 is assumed.
# The CANN install files: CANN 8.3.RC2's is the real one (tests/samples/ascend/versions/); 9.x follows CANN 9.0.0's
# real innerversion family and list (V100R001C10; [C21],[C22],[C23],[C25],[C10]: vllm-ascend issue #9305's
# collect_env dump, the same set as hicann/driver@ef377e95 compatible_version.conf L2-4); the 8.5.x inner code (C25,
# between 8.3's C23 and 9.0's C10 in that list) and its list are synthesized by this simulator, unverified.
CANN_FILES = {
    "8.3.RC2": ("V100R001C23SPC002B210", "[V100R001C15],[V100R001C18],[V100R001C19],[V100R001C20],[V100R001C21],"
                                         "[V100R001C23]"),
    "8.5.0": ("V100R001C25SPC001B210", "[V100R001C21],[V100R001C23],[V100R001C25]"),
    "8.5.1": ("V100R001C25SPC002B220", "[V100R001C21],[V100R001C23],[V100R001C25]"),
    "9.1.0": ("V100R001C10SPC002B210", "[V100R001C21],[V100R001C22],[V100R001C23],[V100R001C25],[V100R001C10]"),
}
VLLM_SOFTWARE = {   # vllm-ascend tag -> (CANN, torch, torch_npu)
    "v0.11.0": ("8.3.RC2", "2.7.1", "2.7.1.post1"), "v0.13.0": ("8.5.0", "2.8.0", "2.8.0.post2"),
    "v0.18.0": ("8.5.1", "2.9.0", "2.9.0.post1"), "v0.23.0": ("9.1.0", "2.10.0", "2.10.0.post4"),
}


def write_software(ul, ref, cfg):
    """The CANN toolkit install file (under ascend-toolkit/<version>/, `latest` pointing at it when the layer has
    no `latest` of its own) and the Python packages' metadata (python3 -c importlib.metadata finds them under
    /usr/local/lib/python3.X/dist-packages, where this machine's python3 looks) of the image's release."""
    tag = split_ref(normalize(ref))[1]
    if is_vllm_image(ref):
        cann, torch, torch_npu = VLLM_SOFTWARE.get(tag, VLLM_SOFTWARE["v0.13.0"])
        version = tag.lstrip("v")
        packages = {"torch": torch, "torch_npu": torch_npu, "vllm": version, "vllm_ascend": version}
    elif is_sglang_image(ref):
        # SGLang's NPU images: CANN 9.0.0, torch 2.10.0 (research 38: v0.5.18-cann9.0.0-a3); CANN 9.0.0's files are
        # not in CANN_FILES, 9.1.0's family stands in
        cann, packages = "9.1.0", {"torch": "2.10.0", "torch_npu": "2.10.0", "sglang": sglang_release(ref) or "0"}
    else:
        cann, packages = "8.3.RC2", {"torch": "2.1.0", "torch_npu": "2.1.0.post12"}
    inner, compat = CANN_FILES[cann]
    toolkit = os.path.join(ul, "Ascend", "ascend-toolkit")
    arch = os.uname().machine
    where = os.path.join(toolkit, cann, "%s-linux" % arch)
    os.makedirs(where, exist_ok=True)
    with open(os.path.join(where, "ascend_toolkit_install.info"), "w") as f:
        f.write("package_name=Ascend-cann-toolkit\nversion=%s\ninnerversion=%s\ncompatible_version=%s\narch=%s\n"
                "os=linux\npath=/usr/local/Ascend/ascend-toolkit/%s/%s-linux\n" % (cann, inner, compat, arch, cann, arch))
    latest = os.path.join(toolkit, "latest")
    if os.path.isdir(latest) and not os.path.islink(latest):      # the vLLM layer's latest/ (Mooncake) is a folder
        os.makedirs(os.path.join(latest, "%s-linux" % arch), exist_ok=True)
        shutil.copy(os.path.join(where, "ascend_toolkit_install.info"), os.path.join(latest, "%s-linux" % arch))
    elif not os.path.lexists(latest):
        os.symlink(cann, latest)
    site = os.path.join(ul, "lib", "python%d.%d" % sys.version_info[:2], "dist-packages")
    for name, version in packages.items():
        meta = os.path.join(site, "%s-%s.dist-info" % (name, version))
        os.makedirs(meta, exist_ok=True)
        with open(os.path.join(meta, "METADATA"), "w") as f:
            f.write("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))


def make_mindie_layer(cfg, d):
    """A MindIE image: 2.x run packages under /usr/local/Ascend/mindie, or 3.x wheels (make_wheel_layer)."""
    ul = os.path.join(d, "usr_local")
    ver = cfg.get("MindieVersion", "2.2.RC1")
    if ver.split(".")[0].isdigit() and int(ver.split(".")[0]) >= 3:
        return make_wheel_layer(ul, ver)
    svc = os.path.join(ul, "Ascend", "mindie", ver, "mindie-service")
    for sub in ("bin", "conf", "logs", "lib", "security"):
        os.makedirs(os.path.join(svc, sub), exist_ok=True)
    os.makedirs(os.path.join(ul, "Ascend", "mindie", ver, "mindie-llm"), exist_ok=True)
    os.symlink(ver, os.path.join(ul, "Ascend", "mindie", "latest"))
    for binary, role in ENGINE_BINS.items():
        write_engine_bin(os.path.join(svc, "bin", binary), role)
    write_mindie_files(svc, svc)
    with open(os.path.join(svc, "version.info"), "w") as f:
        f.write("Ascend-mindie : %s\nmindie-service: %s\nPlatform : aarch64\n" % (ver, ver))
    os.chmod(os.path.join(svc, "logs"), 0o750)
    os.chmod(os.path.join(svc, "security"), 0o700)
    for rel, text in SET_ENV.items():
        p = os.path.join(ul, "Ascend", rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    for sub in ("bin", "sbin", "lib", "include", "share"):
        os.makedirs(os.path.join(ul, sub), exist_ok=True)


SITE = "lib/python3.11/site-packages"     # under /usr/local (Motor mindie_env_a3.json L5-6 at 5dfb024)


def _wrapper(path, body):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n# fake MindIE 3.x wheel entry point (tests/fakecluster/fake_bin/docker.py)\n" + body)
    os.chmod(path, 0o755)


def make_wheel_layer(ul, ver):
    """A MindIE 3.x image: the wheels only, no run package under /usr/local/Ascend/mindie.
    mindie_llm_server execs site-packages/mindie_llm/bin/mindieservice_daemon with its arguments and sets
    MINDIE_LLM_HOME_PATH (MindIE-LLM v3.0.0 mindie_llm/server/main.py L43-90, setup.py L129-134);
    mindie_motor_controller / mindie_motor_coordinator exec site-packages/mindie_motor/bin/ms_* with
    MIES_INSTALL_PATH and LD_LIBRARY_PATH set (Motor 5dfb024 coordinator_run.py L17-39, setup.py L172-178)."""
    llm = os.path.join(ul, SITE, "mindie_llm")
    motor = os.path.join(ul, SITE, "mindie_motor")
    for sub in (os.path.join(llm, "bin"), os.path.join(llm, "conf"), os.path.join(llm, "lib"),
                os.path.join(motor, "bin"), os.path.join(motor, "lib"), os.path.join(motor, "conf"),
                os.path.join(ul, "bin")):
        os.makedirs(sub, exist_ok=True)
    for binary, role, home in (("mindieservice_daemon", "daemon", llm), ("ms_controller", "ms_controller", motor),
                               ("ms_coordinator", "ms_coordinator", motor)):
        write_engine_bin(os.path.join(home, "bin", binary), role, ver)
    write_mindie_files(motor, llm)
    pkg_llm, pkg_motor = "/usr/local/%s/mindie_llm" % SITE, "/usr/local/%s/mindie_motor" % SITE
    _wrapper(os.path.join(ul, "bin", "mindie_llm_server"),
             "[ -f %s/conf/config.json ] || { echo 'config.json not found' >&2; exit 1; }\n"
             "export MINDIE_LLM_HOME_PATH=%s\nexec %s/bin/mindieservice_daemon \"$@\"\n" % (pkg_llm, pkg_llm, pkg_llm))
    for name, binary in (("mindie_motor_controller", "ms_controller"), ("mindie_motor_coordinator", "ms_coordinator")):
        _wrapper(os.path.join(ul, "bin", name),
                 "export MIES_INSTALL_PATH=%s\nexport LD_LIBRARY_PATH=%s/lib:%s/lib/grpc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n"
                 "exec %s/bin/%s \"$@\"\n" % (pkg_motor, pkg_motor, pkg_motor, pkg_motor, binary))
    # the MindIE-LLM package's set_env.sh exports its own defaults (MindIE-LLM v3.0.0 scripts/set_env.sh L38-39)
    with open(os.path.join(llm, "set_env.sh"), "w") as f:
        f.write("export MINDIE_LLM_HOME_PATH=%s\nexport TASK_QUEUE_ENABLE=1\nexport HCCL_BUFFSIZE=120\n" % pkg_llm)
    for rel in ("ascend-toolkit/set_env.sh", "nnal/atb/set_env.sh"):
        p = os.path.join(ul, "Ascend", rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(SET_ENV[rel])
    for sub in ("sbin", "include", "share"):
        os.makedirs(os.path.join(ul, sub), exist_ok=True)


def write_settings(st, cfg, d):
    """What the engine learns about its host at start: the node's engine faults (read now, so a changed
    node state applies to the next start), its devices and names."""
    fc = os.path.join(d, "rootfs", ".fakecluster")
    os.makedirs(fc, exist_ok=True)
    shutil.copyfile(ENGINE, os.path.join(fc, "engine.py"))
    for script in ("vllm.py", "openai_fake.py", "sglang_fake.py", "standin_common.py", "netloader_fake.py"):
        if os.path.exists(os.path.join(HERE, script)):
            shutil.copyfile(os.path.join(HERE, script), os.path.join(fc, script))
    for tables in ("vllm-flags", "sglang-flags"):
        flags = os.path.join(HERE, tables)
        if os.path.isdir(flags):
            os.makedirs(os.path.join(fc, tables), exist_ok=True)
            for name in os.listdir(flags):
                shutil.copyfile(os.path.join(flags, name), os.path.join(fc, tables, name))
    write_json(os.path.join(fc, "settings.json"), {
        "node": st.get("name"), "ip": st.get("ip"), "hardware": st.get("hardware"), "container": cfg["Name"],
        "id": cfg["Id"],
        "image": cfg.get("ImageRef") or cfg["Image"],
        "engine": dict(st.get("engine") or {}), "node_devices": sorted(node_devices(st))})


def secure_join(root, path):
    """`root`/`path` resolving symlinks as if `root` were / (never escapes root)."""
    parts = [p for p in path.split("/") if p and p != "."]
    cur, hops = [], 0
    while parts:
        p = parts.pop(0)
        if p == "..":
            if cur:
                cur.pop()
            continue
        candidate = os.path.join(root, *cur, p)
        if os.path.islink(candidate):
            hops += 1
            if hops > 40:
                raise OSError("too many levels of symbolic links: %s" % path)
            target = os.readlink(candidate)
            if target.startswith("/"):
                cur = []
            parts = [x for x in target.split("/") if x and x != "."] + parts
            continue
        cur.append(p)
    return os.path.join(root, *cur)


MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 8, 32, 4096, 16384
_libc = None


def mount(src, target, fstype, flags, data=None):
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    enc = (lambda v: v.encode() if v is not None else None)
    if _libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "error mounting \"%s\" to rootfs at \"%s\": %s" % (src, target, os.strerror(e)))


def touch(path, mode=0o644):
    if not os.path.lexists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, mode)
        os.close(fd)


def setup_rootfs(cfg, d):
    """Mount the container's root (we are in a fresh private mount namespace)."""
    root = os.path.join(d, "rootfs")
    for sub in ("usr", "proc", "sys", "dev", "etc", "root", "run", "home", "opt", "mnt", "var/tmp", "var/log",
                "var/lib", "tmp"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    mount("/usr", os.path.join(root, "usr"), None, MS_BIND)
    mount(None, os.path.join(root, "usr"), None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    mount(os.path.join(d, "usr_local"), os.path.join(root, "usr", "local"), None, MS_BIND)
    router_site = os.path.join(d, "usr_local", SGLANG_ROUTER_SITE)
    if os.path.isdir(router_site) and os.path.isdir(SGLANG_ROUTER_NODE):     # an SGLang image: the real router
        target = os.path.join(root, "usr", "local", SGLANG_ROUTER_SITE)
        mount(os.path.realpath(SGLANG_ROUTER_NODE), target, None, MS_BIND)
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host, mine = "/" + top, os.path.join(root, top)
        if os.path.islink(host):
            if not os.path.lexists(mine):
                os.symlink(os.readlink(host), mine)
        elif os.path.isdir(host):
            os.makedirs(mine, exist_ok=True)
            mount(host, mine, None, MS_BIND | MS_REC)
            mount(None, mine, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    # /etc: the host's name resolution (--net=host), a root user
    etc = os.path.join(root, "etc")
    for name in ("hosts", "resolv.conf", "hostname", "nsswitch.conf", "localtime"):
        src = os.path.join("/etc", name)
        if os.path.exists(src) and not os.path.lexists(os.path.join(etc, name)):
            shutil.copyfile(src, os.path.join(etc, name))
    if not os.path.exists(os.path.join(etc, "passwd")):
        with open(os.path.join(etc, "passwd"), "w") as f:
            f.write("root:x:0:0:root:/root:/bin/bash\nHwHiAiUser:x:1000:1000::/home/HwHiAiUser:/bin/bash\n"
                    "nobody:x:65534:65534:nobody:/:/sbin/nologin\n")
        with open(os.path.join(etc, "group"), "w") as f:
            f.write("root:x:0:\nHwHiAiUser:x:1000:\nnogroup:x:65534:\n")
    mount("proc", os.path.join(root, "proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mount("/sys", os.path.join(root, "sys"), None, MS_BIND | MS_REC)
    mount(None, os.path.join(root, "sys"), None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    dev = os.path.join(root, "dev")
    mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=755,size=65536k")
    for name in ("null", "zero", "full", "random", "urandom", "tty"):
        if os.path.exists("/dev/" + name):
            touch(os.path.join(dev, name), 0o666)
            mount("/dev/" + name, os.path.join(dev, name), None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2"), ("core", "/proc/kcore")):
        os.symlink(target, os.path.join(dev, name))
    os.makedirs(os.path.join(dev, "shm"))
    os.makedirs(os.path.join(dev, "pts"))
    if cfg["IpcMode"] == "host" and os.path.isdir("/dev/shm"):
        mount("/dev/shm", os.path.join(dev, "shm"), None, MS_BIND)
    else:
        mount("shm", os.path.join(dev, "shm"), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=1777,size=%dk" % max(1, cfg["ShmSize"] // 1024))
    # device nodes: the --device list (all of the node's with --privileged); the fake NPUs are plain files
    devices = [dd["container"] for dd in cfg["Devices"]]
    if cfg["Privileged"]:
        settings = read_json(os.path.join(root, ".fakecluster", "settings.json"), {}) or {}
        devices += settings.get("node_devices", [])
    for path in devices:
        target = secure_join(root, path)
        if not os.path.lexists(target):
            if os.path.exists(path) and not path.startswith("/dev/davinci") and path not in CONTROL_DEVICES:
                touch(target, 0o666)
                mount(path, target, None, MS_BIND)
            else:
                touch(target, 0o660)
    # the binds, parents first (docker sorts mounts by destination)
    for m in sorted(cfg["Mounts"], key=lambda m: m["Destination"].count("/")):
        target = secure_join(root, m["Destination"])
        if os.path.isdir(m["Source"]):
            os.makedirs(target, exist_ok=True)
        else:
            touch(target)
        mount(m["Source"], target, None, MS_BIND | MS_REC)
        if not m["RW"]:
            mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    return root


def find_executable(name, env, cwd):
    if "/" in name:
        p = name if name.startswith("/") else os.path.join(cwd, name)
        return p if os.path.exists(p) else None
    path = next((e.partition("=")[2] for e in env if e.startswith("PATH=")), "/usr/bin:/bin")
    for d in path.split(":"):
        p = os.path.join(d or ".", name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def _passwd(path):
    try:
        with open(path) as f:
            return [line.rstrip("\n").split(":") for line in f if line.strip() and not line.startswith("#")]
    except OSError:
        return []


def resolve_user(spec):
    """docker's --user NAME|UID[:GROUP|GID] against the container's /etc/passwd and /etc/group (we are
    chrooted) -> (uid, gid, home). A numeric uid missing from passwd is fine (gid 0, home /), a name is not."""
    if not spec:
        return 0, 0, "/root"
    user, _, group = spec.partition(":")
    users = _passwd("/etc/passwd")
    entry = next((e for e in users if len(e) >= 6 and (e[0] == user or (user.isdigit() and e[2] == user))), None)
    if entry is None and not user.isdigit():
        raise LookupError(126, "unable to find user %s: no matching entries in passwd file" % user)
    uid = int(user) if user.isdigit() else int(entry[2])
    gid = int(entry[3]) if entry else 0
    home = entry[5] if entry else "/"
    if group:
        if group.isdigit():
            gid = int(group)
        else:
            g = next((e for e in _passwd("/etc/group") if len(e) >= 3 and e[0] == group), None)
            if g is None:
                raise LookupError(126, "unable to find group %s: no matching entries in group file" % group)
            gid = int(g[2])
    return uid, gid, home


def init_main(name, status_fd):
    """Inside the container's fresh mount namespace: mount the root, chroot, exec the command.
    Any failure before the exec is written to status_fd (close-on-exec: EOF means the exec worked)."""
    status_fd = int(status_fd)
    try:
        d = cdir(name)
        cfg = read_json(os.path.join(d, "config.json"))
        root = setup_rootfs(cfg, d)
        os.chroot(root)
        workdir = cfg["WorkingDir"] or "/"
        os.makedirs(workdir, exist_ok=True)
        uid, gid, home = resolve_user(cfg.get("User", ""))
        argv = cfg["Entrypoint"] + cfg["Cmd"]
        env = merge_env(["HOSTNAME=" + cfg["Hostname"]] + cfg["Env"])      # docker sets HOSTNAME (and HOME)
        if not any(e.startswith("HOME=") for e in env):
            env = env + ["HOME=" + home]
        if cfg.get("User"):                 # --user: drop to that uid/gid (after the mounts, before the exec)
            os.setgroups([gid])
            os.setgid(gid)
            os.setuid(uid)
        os.chdir(workdir)
        exe = find_executable(argv[0], env, workdir)
        if exe is None:
            raise LookupError(127, "exec: \"%s\": executable file not found in $PATH" % argv[0]
                              if "/" not in argv[0] else "exec: \"%s\": stat %s: no such file or directory"
                              % (argv[0], argv[0]))
        os.set_inheritable(status_fd, False)
        import fcntl
        fcntl.fcntl(status_fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
        try:
            os.execve(exe, argv, dict(e.partition("=")[::2] for e in env))
        except PermissionError:
            raise LookupError(126, "exec: \"%s\": permission denied" % argv[0])
        except OSError as e:
            raise LookupError(126, "exec: \"%s\": %s" % (argv[0], e.strerror))
    except LookupError as e:
        code, msg = e.args
        os.write(status_fd, json.dumps({"code": code, "msg": msg}).encode())
        os._exit(code)
    except BaseException as e:          # mount errors and the like
        os.write(status_fd, json.dumps({"code": 126, "msg": str(e)}).encode())
        os._exit(126)


# ---- the supervisor ----------------------------------------------------------------------------

def shim_main(name):
    """Detached supervisor of one container run: starts it, writes its logs and its exit status."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)      # `docker stop` signals the container, never the shim
    d = cdir(name)
    cfg = read_json(os.path.join(d, "config.json"))
    state_path = os.path.join(d, "state.json")
    state = read_json(state_path, {}) or {}
    seq = state.get("Seq", 0)
    r_out, w_out = os.pipe()
    r_err, w_err = os.pipe()
    r_st, w_st = os.pipe()
    try:
        child = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private"] + (["--net"] if cfg.get("NetworkMode") == "none"
                                                                   else []) +
            [sys.executable, os.path.abspath(__file__), "__init", name, str(w_st)], stdin=subprocess.DEVNULL, stdout=w_out, stderr=w_err, pass_fds=(w_st,),
            close_fds=True, start_new_session=True, cwd="/")
    except OSError as e:
        write_json(state_path, {"Status": "created", "Seq": seq, "ExitCode": 126, "Error": str(e)})
        return 1
    for fd in (w_out, w_err, w_st):
        os.close(fd)
    report = b""
    while True:
        chunk = os.read(r_st, 65536)
        if not chunk:
            break
        report += chunk
    os.close(r_st)
    me = os.getpid()
    if report:
        child.wait()
        info = json.loads(report.decode() or "{}")
        msg = ("failed to create task for container: failed to create shim task: OCI runtime create failed: "
               "runc create failed: unable to start container process: %s: unknown" % info.get("msg"))
        write_json(state_path, {"Status": "created", "Seq": seq, "ExitCode": info.get("code", 126), "Error": msg,
                                "StartedAt": state.get("StartedAt"), "FinishedAt": state.get("FinishedAt")})
        return 1
    started = time.time()
    state = {"Status": "running", "Seq": seq, "Pid": child.pid, "PidStart": proc_start_time(child.pid),
             "ShimPid": me, "ShimStart": proc_start_time(me), "ExitCode": 0, "Error": "",
             "StartedAt": started, "FinishedAt": None}
    write_json(state_path, state)
    log_path = os.path.join(d, "container.log")
    lock = threading.Lock()
    logf = open(log_path, "a", encoding="utf-8")

    def pump(fd, stream):
        with os.fdopen(fd, "rb", buffering=0) as f:
            buf = b""
            while True:
                chunk = f.read(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    write(line + b"\n", stream)
            if buf:
                write(buf, stream)

    def write(data, stream):
        now = time.time()
        entry = json.dumps({"log": data.decode("utf-8", "replace"), "stream": stream, "time": go_time(now),
                            "ts": now}) + "\n"
        with lock:
            logf.write(entry)
            logf.flush()

    pumps = [threading.Thread(target=pump, args=(r_out, "stdout"), daemon=True),
             threading.Thread(target=pump, args=(r_err, "stderr"), daemon=True)]
    for t in pumps:
        t.start()
    rc = child.wait()
    try:                      # the container's other processes die with it (as with a pid namespace)
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for t in pumps:
        t.join(timeout=2)
    code = rc if rc >= 0 else 128 - rc
    state.update(Status="exited", ExitCode=code, FinishedAt=time.time(), Pid=0)
    cur = read_json(state_path, {}) or {}
    if cur.get("Seq", seq) == seq:
        write_json(state_path, state)
    logf.close()
    if cfg.get("AutoRemove") and cfg.get("Detach"):
        c = load_container(name)
        if c is not None:
            remove_container(c)
    return 0


# ---- dispatch ----------------------------------------------------------------------------------

CONTAINER_SUBCOMMANDS = {"inspect", "ls", "list", "ps", "rm", "stop", "start", "restart", "kill", "logs", "run",
                         "create", "wait"}


def run(argv, st):
    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        return 0, "Usage:  docker [OPTIONS] COMMAND\n", ""
    if args[0] in ("-v", "--version"):
        return 0, "Docker version %s, build afdd53b\n" % st["docker"]["version"], ""
    cmd, rest = args[0], args[1:]
    if cmd == "image" and rest:
        cmd, rest = {"inspect": "inspect", "ls": "images", "list": "images", "load": "load",
                     "pull": "pull"}.get(rest[0], "image " + rest[0]), rest[1:]
        if cmd == "inspect":
            return cmd_inspect(st, rest, kind="image")
    if cmd == "container":
        if not rest:
            return 0, "Usage:  docker container COMMAND\n", ""
        sub, rest = rest[0], rest[1:]
        if sub == "inspect":
            return cmd_inspect(st, rest, kind="container")
        if sub not in CONTAINER_SUBCOMMANDS:
            return 125, "", "docker: 'container %s' is not simulated by the fake cluster (tests/fakecluster).\n" % sub
        cmd = {"ls": "ps", "list": "ps"}.get(sub, sub)
    try:
        if cmd == "version":
            return cmd_version(st, rest)
        if cmd == "inspect":
            return cmd_inspect(st, rest)
        if cmd == "images":
            return cmd_images(st, rest)
        if cmd == "ps":
            return cmd_ps(st, rest)
        if cmd == "info":
            return cmd_info(st, rest)
        if cmd == "load":
            return cmd_load(st, rest)
        if cmd == "pull":
            ref = next((a for a in rest if not a.startswith("-")), "")
            return 1, "", pull_error(ref) + "\n"
        if cmd == "run":
            return cmd_run(st, rest)
        if cmd == "create":
            rc, out, err, _ = cmd_create(st, rest)
            return rc, out, err
        if cmd == "start":
            return cmd_start(st, rest)
        if cmd in ("stop", "restart"):
            return cmd_stop(st, rest, restart=cmd == "restart")
        if cmd == "kill":
            return cmd_kill(st, rest)
        if cmd == "rm":
            return cmd_rm(st, rest)
        if cmd == "logs":
            return cmd_logs(st, rest)
        if cmd == "wait":
            return cmd_wait(st, rest)
    except CliError as e:
        return e.rc, "", e.msg + "\n"
    known = {"exec", "rmi", "cp", "tag", "save", "build", "network", "volume", "system", "compose", "stats", "top",
             "attach", "pause", "unpause", "rename", "update", "commit", "diff", "export", "port"}
    if cmd in known or cmd.startswith("image "):
        return 125, "", "docker: '%s' is not simulated by the fake cluster (tests/fakecluster).\n" % cmd
    return 1, "", "docker: '%s' is not a docker command.\nSee 'docker --help'\n" % cmd


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "__shim":
        return shim_main(sys.argv[2])
    if len(sys.argv) > 1 and sys.argv[1] == "__init":
        return init_main(sys.argv[2], sys.argv[3])
    st = load_state()
    rc, out, err = run(sys.argv[1:], st)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc


if __name__ == "__main__":
    sys.exit(main())
