"""An in-memory model of the hosts for unit tests of the deploy pipeline (no root, no sshd, no ansible).

`FakeFleet` is both the executor (it answers the argv deployctl sends over SSH: batched reads, the lock,
history writes and prunes) and the playbook runner (it applies up.yml / rollback.yml / down.yml to its
hosts from the inventory deployctl wrote, and emits ansible-runner events). Faults make it lie the way
real tools do: ansible "succeeds" without touching a host, a container exits right after its start
task said ok, a host mounts another revision, a task fails.
"""

from __future__ import annotations

import json
import re
import shlex
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from deployctl.io.executor import CommandResult, HostError, HostTarget
from deployctl.io.ansible import PlaybookResult, TaskFailure
from deployctl.io.batch import BEGIN, END


@dataclass
class Container:
    status: str = "running"
    rev: str = ""
    env: dict[str, str] = field(default_factory=dict)
    exit_code: int = 0


@dataclass
class Host:
    revisions: dict[str, dict] = field(default_factory=dict)   # rev -> {"manifest": {...}, "env": {...}}
    current: str | None = None
    previous: str | None = None
    containers: dict[str, Container] = field(default_factory=dict)
    history: dict[str, str] = field(default_factory=dict)      # run id -> JSON text
    lock: str | None = None
    ready: bool = True
    unreachable: bool = False


class FakeFleet:
    def __init__(self, names: list[str], cdir: str, engine: str, work_dir: str = "/etc/deployctl"):
        self.hosts = {n: Host() for n in names}
        self.cdir, self.engine, self.work_dir = cdir, engine, work_dir
        self.faults: dict[str, object] = {}
        self.playbooks: list[tuple[str, dict]] = []     # (playbook, groups) of every run
        self.commands: list[tuple[str, list[str]]] = []

    # -- executor --------------------------------------------------------------------------------------
    def run(self, target: HostTarget, argv: list[str], timeout: float) -> CommandResult:
        h = self.hosts[target.name]
        if h.unreachable:
            raise HostError(target.name, "timeout", f"{target.address}:22 did not answer", "is it up?")
        self.commands.append((target.name, argv))
        if argv[:2] == ["sh", "-c"] and argv[2].startswith("export PATH"):
            return CommandResult(target.name, "batch", 0, self._batch(target.name, argv[2]))
        rc, out = self._one(target.name, argv)
        return CommandResult(target.name, shlex.join(argv), rc, out)

    def close(self) -> None:
        pass

    def _batch(self, name: str, script: str) -> str:
        out = []
        for m in re.finditer(r"^echo ('[^']*'); (.*?) 2>&1 </dev/null; printf", script, re.S | re.M):
            probe = shlex.split(m.group(1))[0].split(" ", 1)[1]
            argv = shlex.split(m.group(2))[4:]          # drop: timeout -k 2 N
            rc, text = self._one(name, argv)
            out.append(f"{BEGIN} {probe}\n{text}\n{END} {rc}")
        return "\n".join(out) + "\n"

    def _one(self, name: str, argv: list[str]) -> tuple[int, str]:
        h, cdir = self.hosts[name], self.cdir
        if argv[0] == "readlink":
            link = h.current if argv[1].endswith("/current") else h.previous
            return (0, f"revisions/{link}") if link else (1, "")
        if argv[0] == "cat" and argv[1] == f"{cdir}/lock":
            return (0, h.lock) if h.lock else (1, "No such file")
        if argv[0] == "docker" and argv[1] == "inspect":
            c = h.containers.get(argv[-1])
            if c is None:
                return 1, f"Error: No such object: {argv[-1]}"
            state = {"Status": c.status, "ExitCode": c.exit_code, "StartedAt": "2026-11-24T00:00:00Z"}
            mounts = [{"Source": f"{cdir}/revisions/{c.rev}", "Destination": self.work_dir}]
            env = [f"{k}={v}" for k, v in c.env.items()] + ["PATH=/usr/bin"]
            return 0, "\n".join(json.dumps(x) for x in (state, mounts, env))
        if argv[0] == "python3":
            c = h.containers.get(self.engine)
            return 0, "200" if c and c.status == "running" and h.ready else "0"
        if argv[:2] == ["sh", "-c"]:
            return self._script(h, argv[2], argv[4:])
        raise AssertionError(f"the fake fleet does not know {argv}")

    def _script(self, h: Host, script: str, args: list[str]) -> tuple[int, str]:
        if "@@file" in script:                           # CAT_ALL: manifests or history
            if args[0].endswith("/revisions"):
                docs = [(f"{args[0]}/{rev}/.deployctl.json", json.dumps(r["manifest"]))
                        for rev, r in h.revisions.items()]
            else:
                docs = [(f"{args[0]}/{run}.json", text) for run, text in h.history.items()]
            return 0, "".join(f"@@file {path}\n{d}\n" for path, d in docs)
        if 'ln "$t" "$d/lock"' in script:                # acquire
            if self.faults.get("race_lock"):             # another operator takes it between our calls
                h.lock, self.faults["race_lock"] = self.faults["race_lock"], None
            if h.lock:
                return 0, "held\n" + h.lock
            h.lock = args[2]
            return 0, "acquired"
        if "rm -f \"$d/lock\"" in script:                 # release: only our own
            if h.lock and f'"run_id": "{args[1]}"' in h.lock:
                h.lock = None
            return 0, ""
        if 'mv -f "$t" "$d/lock"' in script:             # heartbeat
            if h.lock and f'"run_id": "{args[1]}"' in h.lock:
                h.lock = args[2]
            return 0, ""
        if script.startswith('rm -f "$1/lock"'):          # break
            h.lock = None
            return 0, ""
        if "/history" in script and "printf" in script:  # write an entry
            h.history[args[1]] = args[2]
            return 0, ""
        if "rm -rf" in script:                           # prune
            for path in args[1:]:
                kind, _, item = path.partition("/")
                if kind == "revisions":
                    h.revisions.pop(item, None)
                else:
                    h.history.pop(item.removesuffix(".json"), None)
            return 0, ""
        raise AssertionError(f"the fake fleet does not know the script {script[:60]!r}")

    # -- playbook runner -------------------------------------------------------------------------------
    def __call__(self, private: Path, playbook: str, *, forks: int, limit=None, on_event=None, cancel=None,
                 ident=None) -> PlaybookResult:
        import yaml

        assert Path(private).is_absolute(), "ansible must get absolute paths"
        class Loader(yaml.SafeLoader):        # deployctl writes every string value as !unsafe 'text'
            pass

        Loader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))
        doc = yaml.load((Path(private) / "inventory" / "hosts.yml").read_text(), Loader=Loader)["all"]
        groups = {g: list((v or {}).get("hosts") or {}) for g, v in doc.get("children", {}).items()}
        hv, common = doc["hosts"], doc["vars"]
        self.playbooks.append((playbook, groups))
        emit = on_event or (lambda e: None)
        result = PlaybookResult(status="successful", rc=0)
        if self.faults.get("no_hosts_matched"):
            emit({"event": "playbook_on_play_start", "event_data": {"play": "Push", "play_pattern": "push"}})
            emit({"event": "playbook_on_no_hosts_matched", "event_data": {}})
            return result
        if playbook == "up.yml":
            self._up(groups, hv, common, emit, result)
        elif playbook == "rollback.yml":
            self._restore(groups, hv, common)
        elif playbook == "down.yml":
            for h in self.hosts.values():
                h.containers.clear()
        return result

    def _fail(self, node: str, task: str, msg: str, emit, result: PlaybookResult) -> None:
        emit({"event": "runner_on_failed", "event_data": {"host": node, "task": task,
                                                          "res": {"stdout": msg}}})
        result.failures.append(TaskFailure(node, task, msg))
        result.status, result.rc = "failed", 2

    def _up(self, groups, hv, common, emit, result) -> None:
        for node in groups.get("push", []):
            with tarfile.open(hv[node]["deployctl_archive"]) as tar:
                manifest = json.load(tar.extractfile(".deployctl.json"))
                env = tar.extractfile("env").read().decode()
            pairs = dict(line.split("=", 1) for line in env.splitlines() if line and not line.startswith("#"))
            self.hosts[node].revisions.setdefault(manifest["revision"], {"manifest": manifest, "env": pairs})
        for node in groups.get("start_masters", []) + groups.get("start_workers", []):
            if self.faults.get("fail_on") == node:
                self._fail(node, 'Wait for "Daemon start success!"', "container exited\n[EI0006] timeout", emit,
                           result)
                return
            h, rev = self.hosts[node], hv[node]["deployctl_rev"]
            if h.current and h.current != rev:
                h.previous = h.current
            h.current = rev
            env = dict(h.revisions[rev]["env"])
            if self.faults.get("env_drift") == node:
                env["HCCL_BUFFSIZE"] = "999"
            mounted = self.faults.get("mount_other", {}).get(node, rev) if isinstance(
                self.faults.get("mount_other"), dict) else rev
            status = "exited" if self.faults.get("exits_after_start") == node else "running"
            h.containers[common["deployctl_engine"]] = Container(status, mounted, env, 139 if status != "running"
                                                                 else 0)
            emit({"event": "runner_on_ok", "event_data": {"host": node, "task": "Run start.sh"}})
        for node in groups.get("smoke", []):
            if self.faults.get("smoke_skipped"):
                continue
            emit({"event": "runner_on_ok", "event_data": {"host": node, "task": "POST /v1/chat/completions",
                                                          "res": {"json": {"choices": [{"message": {
                                                              "content": f"hello from {node}"}}]}}}})

    def _restore(self, groups, hv, common) -> None:
        for node in groups.get("rollback", []):
            h, v = self.hosts[node], hv[node]
            h.containers.pop(common["deployctl_engine"], None)
            h.current = v["deployctl_restore_rev"] or None
            h.previous = v["deployctl_restore_prev"] or None
            if v["deployctl_restore_start"] and not self.faults.get("restore_fails") == node:
                h.containers[common["deployctl_engine"]] = Container("running", h.current,
                                                                     dict(h.revisions[h.current]["env"]))
