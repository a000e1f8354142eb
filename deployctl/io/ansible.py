"""Run a shipped playbook through ansible-runner with an inventory built from the plan.

The runner's private data dir lives in the run record (``runs/<id>/ansible/``), so every run keeps its
inventory, playbooks, events and stdout. Users can re-run the same playbook by hand::

    ansible-playbook -i runs/<id>/ansible/inventory/hosts.yml runs/<id>/ansible/project/up.yml

Every value in that inventory is data, never a template: revision ids and paths come from the hosts and
names from the inventory, and Ansible templates inventory strings on the controller (a value holding
``{{ lookup('pipe', ...) }}`` would run there). So each string value, at any depth, is written with YAML's
``!unsafe`` tag, Ansible's documented marker for text it must never template; the playbooks only ever
reference these variables (``"{{ deployctl_rev }}"``), and a template's result is never templated again.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import sys
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable

from deployctl.io.executor import HostTarget

PLAYBOOKS = ("up.yml", "start_engine.yml", "wait_ready.yml", "rollback.yml", "down.yml")


@dataclass
class TaskFailure:
    host: str
    task: str
    message: str
    unreachable: bool = False


@dataclass
class PlaybookResult:
    status: str                       # successful, failed, canceled, timeout
    rc: int
    failures: list[TaskFailure] = field(default_factory=list)
    changed: dict[str, int] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)     # hosts where "Run start.sh" ran

    @property
    def ok(self) -> bool:
        return self.status == "successful" and self.rc == 0


def _ssh_args(targets: list[HostTarget], trust_new_hosts: bool) -> str:
    known = {t.known_hosts for t in targets if t.known_hosts}
    args = ["-o", f"StrictHostKeyChecking={'accept-new' if trust_new_hosts else 'yes'}",
            "-o", "ControlMaster=no", "-o", "BatchMode=yes"]
    for path in sorted(known):
        args += ["-o", f"UserKnownHostsFile={path}"]
    return shlex.join(args)


class _Unsafe(str):
    """A string written as ``!unsafe 'text'``."""


@functools.cache
def _dumper():
    """yaml.SafeDumper plus the ``!unsafe`` tag (yaml is imported only when ansible runs)."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(_Unsafe, lambda d, v: d.represent_scalar("!unsafe", str.__str__(v)))
    return Dumper


def inert(value):
    """``value`` with every string in it (values and keys, in lists and dicts at any depth) marked ``!unsafe``;
    numbers, booleans and None as they are. Anything else is refused: it would not be data Ansible leaves alone."""
    if isinstance(value, str):
        return _Unsafe(str.__str__(value))
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [inert(v) for v in value]
    if isinstance(value, dict):
        return {inert(k): inert(v) for k, v in value.items()}
    raise TypeError(f"not a value for the ansible inventory: {type(value).__name__}")


def write_inventory(path: Path, targets: list[HostTarget], hostvars: dict[str, dict], groups: dict[str, list[str]],
                    common: dict, trust_new_hosts: bool = False) -> Path:
    """hosts.yml for ansible: connection vars from the deployctl inventory, plus deployctl's vars, every
    string value ``!unsafe`` (host names, group and variable names are keys: ours, or validated names)."""
    import yaml

    hosts = {}
    for t in targets:
        hv = {"ansible_host": t.address, "ansible_user": t.user, "ansible_port": t.port}
        if t.key:
            hv["ansible_ssh_private_key_file"] = t.key
        hv.update(hostvars.get(t.name, {}))
        hosts[t.name] = {k: inert(v) for k, v in hv.items()}
    common = {"ansible_ssh_common_args": _ssh_args(targets, trust_new_hosts),
              "ansible_python_interpreter": "auto_silent", **common}
    doc = {"all": {"hosts": hosts,
                   "vars": {k: inert(v) for k, v in common.items()},
                   "children": {g: {"hosts": {h: {} for h in members}} for g, members in groups.items()}}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.dump(doc, Dumper=_dumper(), sort_keys=False))
    return path


def prepare(private_dir: Path) -> Path:
    """Copy the shipped playbooks into the run's project dir (a record of exactly what ran)."""
    project = private_dir / "project"
    project.mkdir(parents=True, exist_ok=True)
    for name in PLAYBOOKS:
        src = resources.files("deployctl.playbooks").joinpath(name)
        (project / name).write_text(src.read_text())
    return project


def run_playbook(private_dir: Path, playbook: str, *, forks: int, limit: str | None = None,
                 on_event: Callable[[dict], None] | None = None, cancel: threading.Event | None = None,
                 ident: str | None = None) -> PlaybookResult:
    """Run ``playbook`` with ansible-runner; failures are collected per host from the event stream."""
    import ansible_runner

    bin_dir = str(Path(sys.executable).parent)   # ansible-playbook of this venv
    if shutil.which("ansible-playbook", path=bin_dir) is None and shutil.which("ansible-playbook") is None:
        from deployctl.core.errors import ExecutionError

        raise ExecutionError("ansible-playbook is not installed", hint="pip install ansible-core ansible-runner")
    result = PlaybookResult(status="starting", rc=-1)

    def handler(event: dict) -> bool:
        data = event.get("event_data", {})
        kind = event.get("event", "")
        host = data.get("host")
        if kind in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
            res = data.get("res", {})
            msg = res.get("msg") or ""
            out = (res.get("stdout") or "").strip()
            err = (res.get("stderr") or "").strip()
            detail = "\n".join(x for x in (msg if not out else "", out, err) if x).strip()
            result.failures.append(TaskFailure(host, data.get("task", ""), detail or msg,
                                               kind == "runner_on_unreachable"))
        if kind == "runner_on_ok" and data.get("task") == "Run start.sh":
            result.started.add(host)
        if on_event:
            on_event(event)
        return True

    env = {"PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "ANSIBLE_PIPELINING": "True",
           "ANSIBLE_HOST_KEY_CHECKING": "True", "ANSIBLE_FORKS": str(max(5, forks)),
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_RETRY_FILES_ENABLED": "False", "ANSIBLE_DEPRECATION_WARNINGS": "False",
           "ANSIBLE_LOCALHOST_WARNING": "False", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False"}
    r = ansible_runner.run(private_data_dir=str(private_dir), playbook=playbook,
                           inventory=str(private_dir / "inventory" / "hosts.yml"), limit=limit,
                           envvars=env, quiet=True, event_handler=handler, ident=ident,
                           cancel_callback=(lambda: cancel.is_set()) if cancel else None,
                           settings={"suppress_ansible_output": True})
    result.status, result.rc = r.status, r.rc
    return result
