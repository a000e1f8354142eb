"""Issue 11, security: no inventory value runs as a command or becomes a `docker run` option, even when it
got past validation. The rendered start.sh / start-ms.sh run under bash with a recording stand-in `docker`;
the env files are read the way `docker --env-file` reads them."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import EXAMPLES, ROOT, run_cli
from deployctl.app.inventory import read_inventory as load_and_validate
from deployctl.core.errors import RenderError

RECORDING_DOCKER = """#!/bin/sh
# records its argv (one JSON array per call); `inspect` says "no such container"; never runs anything
python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@" >> "$DOCKER_LOG"
case "$1" in container|inspect) exit 1;; esac
exit 0
"""


def test_every_template_value_in_a_script_is_quoted_or_comment_safe():
    core = ROOT / "deployctl" / "core"
    paths = sorted([*core.glob("engines/*/templates/*.sh.j2"), *core.glob("engine_spec/templates/*.sh.j2")])
    assert len(paths) >= 6, paths          # every engine's start scripts and the shared ones they extend
    for path in paths:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for expr in re.findall(r"\{\{(.*?)\}\}", line):
                last = expr.strip().rsplit("|", 1)
                assert len(last) == 2 and last[1].strip() in ("q", "c"), \
                    f"{path.name}:{n}: `{{{{{expr}}}}}` reaches the script unquoted"


def hostile(example: str, **engine_or_nodes):
    """The example's validated inventory, then hostile values put in behind validation's back."""
    inv = load_and_validate(EXAMPLES / example)
    eng = engine_or_nodes.pop("engine", {})
    node0 = engine_or_nodes.pop("node0", {})
    nodes = [inv.nodes[0].model_copy(update=node0)] + list(inv.nodes[1:])
    return inv.model_copy(update={"engine": inv.engine.model_copy(update=eng), "nodes": nodes})


def render_and_run(inv, tmp_path: Path) -> tuple[list[list[str]], Path]:
    from deployctl.core.sizing.planner import plan_layout
    from deployctl.core.render import render_artifacts

    out = tmp_path / "out"
    # checked=False: the quoting of the scripts must hold on its own, even for a value the engine's acceptance
    # checks (which refuse such an IP) would have stopped first
    for art in render_artifacts(plan_layout(inv, checked=False)):
        p = out / art.path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(art.content)
        p.chmod(art.mode)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(RECORDING_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    log = tmp_path / "docker.log"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "DOCKER_LOG": str(log), "HOME": str(tmp_path)}
    for script in sorted(out.glob("*/start*.sh")):
        subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    calls = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    return calls, out


PAYLOADS = ['";touch {m};"', "$(touch {m})", "`touch {m}`", "';touch {m};'"]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_shell_payload_in_an_ip_does_not_run_when_the_scripts_run(tmp_path, payload):
    marker = tmp_path / "pwned"
    inv = hostile("a3-pd-2p2d.yaml", node0={"container_ip": "fe80::1%" + payload.format(m=marker)})
    calls, out = render_and_run(inv, tmp_path)
    assert not marker.exists(), "an inventory value ran as a command"
    assert any(c[:1] == ["run"] for c in calls)          # the scripts did run to their docker calls
    assert (out / "p1" / "start-ms.sh").exists()


def test_a_newline_in_a_value_cannot_add_a_variable_to_the_env_file(tmp_path):
    inv = hostile("a2-2x8-tp-pp.yaml", node0={"container_ip": "fe80::1%\nLD_PRELOAD=/tmp/evil.so"})
    with pytest.raises(RenderError, match="control character"):
        render_and_run(inv, tmp_path)
    inv = hostile("a2-2x8-tp-pp.yaml", engine={"env": {"MINDIE_LOG_LEVEL": "info\nLD_PRELOAD=/tmp/evil.so"}})
    with pytest.raises(RenderError, match="MINDIE_LOG_LEVEL"):
        render_and_run(inv, tmp_path)


@pytest.mark.parametrize("image", ["--privileged", "-d", "--debug"])
def test_an_option_looking_image_never_reaches_docker_run(tmp_path, image):
    inv = hostile("a2-1x8-single.yaml", engine={"image": image})
    with pytest.raises(RenderError, match="would be read as an option"):
        render_and_run(inv, tmp_path)


def test_the_docker_run_argv_of_a_normal_render_has_only_the_templates_options(tmp_path):
    inv = load_and_validate(EXAMPLES / "a2-1x8-single.yaml")
    calls, _ = render_and_run(inv, tmp_path)
    (run,) = [c for c in calls if c[:1] == ["run"]]
    image = run.index(inv.engine.image)
    options = [a.split("=")[0] for a in run[1:image] if a.startswith("-")]
    assert set(options) == {"-d", "--name", "--net", "--ipc", "--shm-size", "--device", "-v", "--env-file", "-e"}


@pytest.mark.parametrize("field,value", [
    ("address", 'fe80::1%";touch /tmp/pwned-deployctl;"'),
    ("address", "fe80::1%\ntouch"),
    ("container_ip", "fe80::1%eth0"),
])
def test_validation_refuses_scope_ids(tmp_path, field, value):
    text = (EXAMPLES / "a2-1x8-single.yaml").read_text().replace(
        "address: 10.200.1.2", f"address: 10.200.1.2\n    {field}: {json.dumps(value)}" if field != "address"
        else f"address: {json.dumps(value)}")
    inv = tmp_path / "inv.yaml"
    inv.write_text(text)
    for cmd in (["validate"], ["render", "-o", str(tmp_path / "out")]):
        res = run_cli(*cmd, "-i", str(inv))
        assert res.returncode == 2, res.stdout + res.stderr
        assert f"nodes[0].{field}" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("image", ["--privileged", "-d", "UPPER/case", "a b", "repo:tag:tag"])
def test_validation_refuses_what_is_not_an_image_reference(tmp_path, image):
    text = (EXAMPLES / "a2-1x8-single.yaml").read_text()
    text = re.sub(r"image: .*", f"image: {json.dumps(image)}", text, count=1)
    inv = tmp_path / "inv.yaml"
    inv.write_text(text)
    res = run_cli("validate", "-i", str(inv))
    assert res.returncode == 2 and "engine.image" in res.stderr, res.stdout + res.stderr


def test_scripts_are_executable_and_only_by_their_owner_group(tmp_path):
    inv = load_and_validate(EXAMPLES / "a2-1x8-single.yaml")
    _, out = render_and_run(inv, tmp_path)
    mode = stat.S_IMODE(os.stat(out / "a2-node1" / "start.sh").st_mode)
    assert mode == 0o755
