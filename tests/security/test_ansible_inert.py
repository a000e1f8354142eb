"""Issue 21 (observation 1, deliverable 2): nothing deployctl hands to Ansible is ever templated.

Ansible templates the strings of an inventory on the controller, so a revision id read from a host (or any
inventory value) holding ``{{ lookup('pipe', ...) }}`` would run a command there, with the keys of every
server at hand. deployctl writes every string value ``!unsafe``.

* ``test_every_inventory_variable_is_unsafe_*``: every variable of every hosts.yml written for real plans (each
  example inventory; up, a failed up's undo, rollback, down) read back with Ansible's own inventory loader is
  data Ansible will not template, at any depth; a new variable written as a plain string fails here.
* ``test_*_inert_on_the_controller``: real ansible-runner runs (deployctl's run_playbook) against a simulated host
  where every variable holds ``{{ lookup('pipe', 'touch MARKER') }}`` or a ``{% %}`` form: no marker appears on
  the controller, and the host receives the text verbatim.
* ``test_a_hostile_current_link_*``: the issue's reproduction from the host's side.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest

from conftest import EXAMPLES, run_cli


from support.fakefleet import FakeFleet  # noqa: E402
from support.inventory import on_cluster  # noqa: E402


def _inert(value) -> bool:
    """Ansible will never template this string (2.19+: not trusted as a template; before: AnsibleUnsafe)."""
    try:
        from ansible.template import is_trusted_as_template
    except ImportError:                                    # ansible-core < 2.19
        from ansible.utils.unsafe_proxy import AnsibleUnsafe

        return isinstance(value, AnsibleUnsafe)
    return not is_trusted_as_template(value)


def _leaves(value, where: str):
    """(where, string) for every string in ``value``, dict keys included."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(k, f"{where} key")
            yield from _leaves(v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{where}[{i}]")


def ansible_vars(path: Path) -> dict[str, dict]:
    """Every variable the file gives, as Ansible's inventory loader reads it: {host or group: {name: value}}."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    inv = InventoryManager(loader=DataLoader(), sources=[str(path)])
    found = {f"group {name}": dict(g.vars) for name, g in inv.groups.items()}
    found.update({f"host {name}": dict(h.vars) for name, h in inv.hosts.items()})
    return found


def not_inert(path: Path) -> list[str]:
    bad = []
    for owner, variables in ansible_vars(path).items():
        for name, value in variables.items():
            if name in ("inventory_file", "inventory_dir"):          # set by Ansible itself, not read
                continue
            bad += [f"{owner}: {w} = {v!r}" for w, v in _leaves(value, name) if not _inert(v)]
    return bad


# -- (a) every variable of every inventory deployctl writes --------------------------------------------------
class Fleet(FakeFleet):
    """The fake fleet, also answering the vLLM driver's readiness count (the log shows no ready line)."""

    def _script(self, h, script, args):
        if script.startswith('docker logs "$1"'):
            return 0, "0"
        return super()._script(h, script, args)


class Capture:
    """The fake fleet as playbook runner, keeping a copy of each hosts.yml deployctl wrote."""

    def __init__(self, fleet: Fleet, keep: Path):
        self.fleet, self.keep, self.files = fleet, keep, []

    def __call__(self, private: Path, playbook: str, **kw):
        copy = self.keep / f"{len(self.files)}-{playbook.removesuffix('.yml')}.yml"
        copy.write_text((Path(private) / "inventory" / "hosts.yml").read_text())
        self.files.append(copy)
        return self.fleet(private, playbook, **kw)


def _run_all(example: Path, tmp_path: Path) -> list[Path]:
    from deployctl.app.inventory import read_inventory as load_and_validate
    from deployctl.backends.hosts.remote import container_names
    from deployctl.backends.hosts.revision import cluster_dir
    from deployctl.backends.hosts.up import UpOptions, run_hosts_operation
    from deployctl.core.errors import UsageError
    from deployctl.core.sizing.planner import plan_layout
    from recording import RecordingReporter

    inv = load_and_validate(example)
    plan = plan_layout(inv)
    fleet = Fleet([n.name for n in plan.nodes], cluster_dir(plan), container_names(plan)[0])
    keep = tmp_path / "inventories"
    keep.mkdir(parents=True)
    cap = Capture(fleet, keep)

    def op(operation, level=None, **kw):
        use = inv
        if level:
            use = inv.model_copy(update={"engine": inv.engine.model_copy(
                update={"env": {**inv.engine.env, "DEPLOYCTL_TEST_LEVEL": level}})})
        opts = UpOptions(yes=True, skip_preflight=True, run_root=tmp_path / "runs", inventory_dir=example.parent,
                         **kw)
        return run_hosts_operation(operation, use, opts, RecordingReporter(), lambda c: True, executor=fleet,
                                   runner=cap)

    op("up")
    op("up", level="a")
    fleet.faults["fail_on"] = plan.nodes[-1].name
    op("up", level="b")                                   # fails: the undo runs rollback.yml
    fleet.faults.pop("fail_on")
    try:
        op("rollback", to=1)
    except UsageError:          # the fake fleet runs no router nor vLLM: there, no up succeeded to go back to
        assert example.stem not in ("a2-1x8-single", "a2-2x8-tp-pp"), "the rollback path must be covered"
    op("down")
    return cap.files


EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=[p.stem for p in EXAMPLE_FILES])
def test_every_inventory_variable_is_unsafe_for_every_example_and_operation(example, tmp_path):
    import yaml

    files = _run_all(example, tmp_path)
    playbooks = {f.stem.split("-", 1)[1] for f in files}
    assert {"up", "rollback", "down"} <= playbooks, files
    names = set()
    for f in files:
        assert not_inert(f) == [], f"{f.name}: Ansible would template these values"
        found = ansible_vars(f)
        names |= {n for variables in found.values() for n in variables}

        class Raw(yaml.SafeLoader):
            pass

        Raw.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))
        raw = yaml.load(f.read_text(), Loader=Raw)["all"]
        written = set(raw["vars"]) | {n for hv in raw["hosts"].values() for n in hv}
        assert written <= {n for variables in found.values() for n in variables}   # Ansible saw them all
    # the host-read values of the issue are among them (the up, undo and rollback paths ran)
    assert {"deployctl_rev", "deployctl_restore_rev", "deployctl_restore_prev", "deployctl_archive",
            "deployctl_dir", "deployctl_engine", "ansible_host", "ansible_user",
            "ansible_ssh_common_args"} <= names


def test_write_inventory_marks_nested_values_and_keeps_numbers(tmp_path):
    from deployctl.io.ansible import write_inventory
    from deployctl.io.executor import HostTarget

    evil = "{{ lookup('pipe', 'id') }}"
    path = write_inventory(tmp_path / "hosts.yml", [HostTarget("node1", evil, evil, 22, evil, evil)],
                           {"node1": {"a": [evil, {evil: [evil]}], "n": 3, "b": True, "z": None}},
                           {"push": ["node1"]}, {"c": "{% raw %}x"})
    assert not_inert(path) == []
    got = ansible_vars(path)["host node1"]
    assert got["a"] == [evil, {evil: [evil]}] and got["n"] == 3 and got["b"] is True and got["z"] is None
    assert ansible_vars(path)["group all"]["c"] == "{% raw %}x"
    assert "!unsafe" in path.read_text()              # readable: tags on plain scalars, nothing encoded


# -- (b), (c): real ansible-runner runs on the controller against a simulated host --------------------------


def one_node_inventory(fc, path: Path, level: str = "info") -> Path:
    return on_cluster(fc, path, level=level, quant="w4a8", weights=WEIGHTS, max_batch_size=16, preset="single")


class Markers:
    """Unique marker names; ``found()`` lists every one that exists where a pipe lookup could have made it
    (absolute ones under /tmp, relative ones in the playbook dir: anywhere below ``roots``, or the cwd)."""

    def __init__(self, *roots: Path):
        self.tag = f"deployctl-inert-{uuid.uuid4().hex[:12]}"
        self.roots = [*roots, Path.cwd()]

    def payload(self, name: str, form: int, absolute: bool = True) -> str:
        target = f"/tmp/{self.tag}-{name}" if absolute else f"{self.tag}-{name}"
        return (f"{{{{ lookup('pipe', 'touch {target}') }}}}" if form % 2 == 0 else
                f"{{% set x = lookup('pipe', 'touch {target}') %}}{{{{ x }}}}")

    def found(self) -> list[str]:
        hits = [str(p) for p in Path("/tmp").glob(f"{self.tag}*")]
        for root in self.roots:
            hits += [str(p) for p in root.rglob(f"{self.tag}*")] if root.is_dir() and root != Path("/") else []
        return sorted(set(hits))


def hostile_vars(markers: Markers, tmp_path: Path) -> tuple[dict, dict]:
    """(host vars, common vars): every variable deployctl writes for a plan with a router (up, undo, rollback,
    down), each string (at any depth) and each number or flag replaced by a template that touches a marker."""
    import yaml

    class Raw(yaml.SafeLoader):
        pass

    Raw.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))
    host, common = {}, {}
    for f in _run_all(EXAMPLES / "a3-pd-2p1d.yaml", tmp_path):
        doc = yaml.load(f.read_text(), Loader=Raw)["all"]
        common.update({k: v for k, v in doc["vars"].items() if not k.startswith("ansible_")})
        for hv in doc["hosts"].values():
            host.update({k: v for k, v in hv.items() if not k.startswith("ansible_")})
    counter = iter(range(1000))

    def evil(name, value):
        if isinstance(value, list):
            return [evil(f"{name}-{i}", v) for i, v in enumerate(value or [""])]
        return markers.payload(name, next(counter))

    return {k: evil(k, v) for k, v in host.items()}, {k: evil(k, v) for k, v in common.items()}


def probe_playbook(names: list[str]) -> str:
    """One task on the host printing every variable as JSON, one per line (templates each of them)."""
    args = ", ".join(f'"{{{{ {n} | to_json }}}}"' for n in names)
    return ("- name: Every variable as the host receives it\n  hosts: all\n  gather_facts: false\n  tasks:\n"
            f"    - name: print\n      ansible.builtin.command:\n        argv: [printf, '%s\\n', {args}]\n")


def fc_target(fc, name: str = "node1"):
    from deployctl.io.executor import HostTarget

    return HostTarget(name, fc.node(name).ip, "root", 22, str(fc.client_key), str(fc.known_hosts))


def test_every_variable_holding_a_template_is_inert_on_the_controller(fake_cluster_factory, tmp_path):
    from deployctl.io.ansible import prepare, run_playbook, write_inventory

    fc = fake_cluster_factory(default_one())
    markers = Markers(tmp_path)
    host, common = hostile_vars(markers, tmp_path / "plan")
    assert {"deployctl_rev", "deployctl_restore_rev", "deployctl_restore_prev", "deployctl_router_start",
            "deployctl_dir", "deployctl_engine", "deployctl_image", "deployctl_smoke_url"} <= set(host) | set(common)
    private = tmp_path / "ansible"
    project = prepare(private)
    names = sorted(set(host) | set(common))
    (project / "probe.yml").write_text(probe_playbook(names))
    groups = {g: ["node1"] for g in ("push", "start_masters", "start_workers", "start_ms", "smoke", "rollback")}
    write_inventory(private / "inventory" / "hosts.yml", [fc_target(fc)], {"node1": host}, groups, common)

    printed = []

    def on_event(event):
        data = event.get("event_data", {})
        if event.get("event") == "runner_on_ok" and data.get("task") == "print":
            printed.append(data["res"]["stdout"])

    result = run_playbook(private, "probe.yml", forks=1, on_event=on_event)
    assert result.ok, result.failures
    assert markers.found() == []
    # the host got every value verbatim: the text, not what a template of it would give
    got = dict(zip(names, (json.loads(line) for line in printed[0].splitlines())))
    assert got == {**common, **host}
    # the shipped playbooks (each stops at its first failing task: the values are no names docker knows)
    for playbook in ("up.yml", "rollback.yml", "down.yml"):
        run_playbook(private, playbook, forks=1)
        assert markers.found() == [], playbook


def test_connection_variables_holding_a_template_are_inert_on_the_controller(fake_cluster_factory, tmp_path):
    from deployctl.io.ansible import prepare, run_playbook, write_inventory
    from deployctl.io.executor import HostTarget

    markers = Markers(tmp_path)
    evil = HostTarget("node1", markers.payload("address", 0), markers.payload("user", 1), 22,
                      markers.payload("key", 0), markers.payload("known_hosts", 1))
    private = tmp_path / "ansible"
    prepare(private)
    for playbook in ("down.yml", "rollback.yml"):
        groups = {"rollback": ["node1"]}
        write_inventory(private / "inventory" / "hosts.yml", [evil], {}, groups,
                        {"deployctl_dir": "/nowhere", "deployctl_engine": "x", "deployctl_ms_containers": [],
                         "deployctl_purge": False}, trust_new_hosts=True)
        result = run_playbook(private, playbook, forks=1)
        assert markers.found() == [], playbook
        assert not result.ok and result.failures[0].unreachable, result.failures   # the text is the address


WEIGHTS = "/data/models/DeepSeek-R1-W4A8"      # one A2 server: R1 in 4 bits (inventories/examples/a2-1x8-single)


def default_one():
    from fakecluster import default_cluster

    return default_cluster(1, weights_dir=WEIGHTS)


def _backend(fc, tmp_path):
    from deployctl.app.inventory import read_inventory as load_and_validate
    from deployctl.backends.hosts.hosts import HostsBackend, UpOptions, host_targets_abs
    from deployctl.io.records import RunRecord
    from deployctl.io.ansible import run_playbook
    from deployctl.core.sizing.planner import plan_layout
    from recording import RecordingReporter

    inv = load_and_validate(one_node_inventory(fc, tmp_path / "inv.yaml"))
    opts = UpOptions(yes=True, skip_preflight=True, run_root=tmp_path / "runs", inventory_dir=tmp_path)
    return HostsBackend("up", inv, plan_layout(inv), host_targets_abs(inv, tmp_path), None, run_playbook,
                        RunRecord.create(opts.run_root, "up"), opts, RecordingReporter())


def test_a_hostile_revision_read_from_a_host_is_inert_in_the_undo(fake_cluster_factory, tmp_path):
    """The Ansible layer on its own (whatever the state reader lets through): the undo of a failed up with
    the revisions a host named as its current and previous ones."""
    from deployctl.backends.hosts.ansible_run import run_restore
    from deployctl.core.models.deploy import ContainerState, DeployedState

    fc = fake_cluster_factory(default_one())
    b = _backend(fc, tmp_path)
    markers = Markers(tmp_path)
    rev, prev = markers.payload("current", 0), markers.payload("previous", 1)
    fc.ssh("node1", f"mkdir -p {b.cdir}", check=True)
    b.state.moved = ["node1"]
    observed = {"node1": DeployedState(node="node1", current_rev=rev, previous_rev=prev,
                                       containers={b.engine: ContainerState(name=b.engine, status="running")})}
    # fails at its start.sh: there is no such revision
    run_restore(b.playbooks, b.state.moved, observed, b.engine, rolling=False, answers=b.state.smoke)
    assert markers.found() == []
    # the links were set back to the text the host gave, untouched
    assert fc.ssh("node1", f"readlink {b.cdir}/current").stdout.strip() == f"revisions/{rev}"
    assert fc.ssh("node1", f"readlink {b.cdir}/previous").stdout.strip() == f"revisions/{prev}"


def test_a_hostile_current_link_runs_nothing_on_the_controller_in_a_failed_ups_undo(fake_cluster_factory,
                                                                                      tmp_path):
    """The issue's reproduction: `current` points at revisions/{{ lookup("pipe", "touch MARKER") }} on a host,
    an ordinary `up` fails there and its undo restores what the host said ran before."""
    import shlex

    fc = fake_cluster_factory(default_one())
    runs = tmp_path / "runs"
    inv = one_node_inventory(fc, tmp_path / "inv.yaml")
    first = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "60",
                    "--skip-preflight")
    assert first.returncode == 0, first.stdout + first.stderr
    from deployctl.app.inventory import read_inventory as load_and_validate
    from deployctl.backends.hosts.revision import cluster_dir
    from deployctl.core.sizing.planner import plan_layout

    cdir = cluster_dir(plan_layout(load_and_validate(inv)))
    markers = Markers(tmp_path, runs)
    # no slash in it: the revision id is the link's last path component
    evil = f'{{{{ lookup("pipe", "touch {markers.tag}") }}}}'
    fc.ssh("node1", f"cd {cdir} && ln -sfn {shlex.quote('revisions/' + evil)} current", check=True)
    fc.update_node("node1", engine_crash_on="MINDIE_LOG_LEVEL=debug")
    res = run_cli("up", "-i", str(one_node_inventory(fc, inv, level="debug")), "-y", "--run-dir", str(runs),
                  "--ready-timeout", "60", "--skip-preflight")
    assert res.returncode != 0, res.stdout + res.stderr
    assert markers.found() == [], res.stdout + res.stderr


def test_the_shipped_playbooks_never_template_text_themselves():
    """A value stays data only while nothing renders its text again: no lookups, template lookups or
    modules, vars files or hostvars indirection in the playbooks (the values are only referenced)."""
    import re
    from importlib import resources

    for f in resources.files("deployctl.playbooks").iterdir():
        if f.name.endswith(".yml"):
            text = "\n".join(line for line in f.read_text().splitlines() if not line.lstrip().startswith("#"))
            bad = re.findall(r"lookup\s*\(|query\s*\(|\bq\s*\(|template|include_vars|hostvars|vars_files", text)
            assert bad == [], f"{f.name}: {bad}"
