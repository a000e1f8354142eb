#!/usr/bin/python3
"""Fake `docker` client (installed as /usr/local/bin/docker). No daemon: images come from the node state.

  docker image inspect IMG... [-f FMT]   JSON array, exit 0; unknown image: "[]" on stdout,
  docker inspect IMG...                  "Error: No such image: IMG" on stderr, exit 1
  docker version [--format '{{.Server.Version}}']      docker --version
  docker images / docker image ls [-q] [--format FMT]
  docker ps [-a] [--format FMT]          (no containers)
  docker info [--format FMT]
  docker load -i FILE                    registers the RepoTags of a `docker save` tarball
  docker pull IMG                        fails like an offline host
Other subcommands exit 125 with a message saying they are not simulated.
"""

import hashlib
import json
import os
import re
import sys
import tarfile

STATE_PATH = "/etc/fakecluster/node.json"
API_VERSION = "1.43"


def load_state():
    with open(os.environ.get("FAKECLUSTER_STATE", STATE_PATH)) as f:
        return json.load(f)


def save_state(st):
    path = os.environ.get("FAKECLUSTER_STATE", STATE_PATH)
    with open(path + ".tmp", "w") as f:
        json.dump(st, f, indent=1)
    os.replace(path + ".tmp", path)


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


def image_obj(ref):
    iid = image_id(ref)
    name, _ = split_ref(ref)
    return {
        "Id": iid,
        "RepoTags": [normalize(ref)],
        "RepoDigests": ["%s@sha256:%s" % (name, hashlib.sha256(iid.encode()).hexdigest())],
        "Parent": "",
        "Comment": "",
        "Created": "2025-09-30T08:00:00.000000000Z",
        "DockerVersion": "",
        "Author": "",
        "Config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                   "Cmd": ["/bin/bash"], "WorkingDir": "/", "Labels": None},
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


def lookup(obj, path):
    for part in [p for p in path.split(".") if p]:
        if isinstance(obj, dict):
            obj = obj.get(part)
        else:
            return None
    return obj


def render(fmt, obj):
    """A small subset of Go templates: {{.A.B}}, {{json .A}}, {{json .}}, {{index .A 0}}."""
    def one(m):
        expr = m.group(1).strip()
        if expr.startswith("json "):
            return json.dumps(lookup(obj, expr[5:].strip()), separators=(",", ":"))
        im = re.match(r"index\s+(\.\S*)\s+(\d+)$", expr)
        if im:
            seq = lookup(obj, im.group(1)) or []
            return str(seq[int(im.group(2))]) if int(im.group(2)) < len(seq) else ""
        if expr.startswith("."):
            val = lookup(obj, expr)
            if val is None:
                return "<no value>"
            return json.dumps(val) if isinstance(val, (dict, list)) else str(val)
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


def cmd_inspect(st, args):
    fmt = pop_opt(args, "--format", "-f")
    pop_opt(args, "--type")
    refs = [a for a in args if not a.startswith("-")]
    if not refs:
        return 1, "", "\"docker image inspect\" requires at least 1 argument.\n"
    found, err = [], ""
    for ref in refs:
        img = find(st, ref)
        if img is None:
            err += "Error: No such image: %s\n" % ref
        else:
            found.append(image_obj(img))
    if fmt:
        out = "".join(render(fmt, o) + "\n" for o in found)
    else:
        out = json.dumps(found, indent=4) + "\n"
    return (1 if err else 0), out, err


def cmd_images(st, args):
    fmt = pop_opt(args, "--format")
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


def cmd_ps(st, args):
    fmt = pop_opt(args, "--format")
    if fmt or "-q" in args:
        return 0, "", ""
    return 0, "CONTAINER ID   IMAGE     COMMAND   CREATED   STATUS    PORTS     NAMES\n", ""


def cmd_info(st, args):
    fmt = pop_opt(args, "--format", "-f")
    obj = {"ServerVersion": st["docker"]["version"], "Images": len(st["docker"]["images"]), "Containers": 0,
           "Driver": "overlay2", "DefaultRuntime": "runc",
           "Runtimes": {"ascend": {"path": "/usr/local/Ascend/Ascend-Docker-Runtime/ascend-docker-runtime"},
                        "runc": {"path": "runc"}},
           "OperatingSystem": "openEuler 22.03 (LTS-SP3)", "Architecture": "aarch64", "Name": st["name"]}
    if fmt:
        return 0, render(fmt, obj) + "\n", ""
    return 0, ("Server:\n Containers: 0\n Images: %d\n Server Version: %s\n Storage Driver: overlay2\n"
               " Runtimes: ascend io.containerd.runc.v2 runc\n Default Runtime: runc\n Name: %s\n"
               % (obj["Images"], obj["ServerVersion"], obj["Name"])), ""


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
    if cmd == "version":
        return cmd_version(st, rest)
    if cmd == "inspect":
        return cmd_inspect(st, rest)
    if cmd == "images":
        return cmd_images(st, rest)
    if cmd in ("ps", "container"):
        return cmd_ps(st, rest[1:] if cmd == "container" else rest)
    if cmd == "info":
        return cmd_info(st, rest)
    if cmd == "load":
        return cmd_load(st, rest)
    if cmd == "pull":
        ref = next((a for a in rest if not a.startswith("-")), "")
        host = ref.split("/")[0] if "/" in ref else "registry-1.docker.io"
        return 1, "", ("Error response from daemon: Get \"https://%s/v2/\": dial tcp: lookup %s: "
                       "no such host\n" % (host, host))
    known = {"run", "exec", "rm", "rmi", "stop", "start", "restart", "logs", "create", "kill", "cp", "tag",
             "save", "build", "network", "volume", "system", "compose", "stats", "top", "wait"}
    if cmd in known or cmd.startswith("image "):
        return 125, "", "docker: '%s' is not simulated by the fake cluster (tests/fakecluster).\n" % cmd
    return 1, "", "docker: '%s' is not a docker command.\nSee 'docker --help'\n" % cmd


def main():
    st = load_state()
    rc, out, err = run(sys.argv[1:], st)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc


if __name__ == "__main__":
    sys.exit(main())
