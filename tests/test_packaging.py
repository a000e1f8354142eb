"""The package as users install it: sdist -> wheel -> a fresh virtualenv outside the checkout.

Every test of the suite runs on the editable install, which imports straight from the checkout and so cannot
notice a module, template, table or chart file that the built wheel leaves out (issue 23: `deployctl.fleet`
was missing from the wheel). Here the sdist and the wheel are built with `python -m build` (the wheel from the
sdist, so the sdist is proven complete too), `twine check`ed, the wheel installed into a new virtualenv, and
every command and every example inventory run from a directory outside the checkout.

The new virtualenv gets the wheel alone (`--no-deps`); its dependencies come from the test virtualenv's
site-packages through a path entry, which does not process that site's .pth files, so the editable install of
the checkout stays invisible (the test asserts where `deployctl` is imported from).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import EXAMPLES, HELM, ROOT

pytestmark = pytest.mark.e2e

COMMANDS = ["validate", "plan", "recommend", "render", "preflight", "up", "rollback", "history", "down",
            "status", "logs", "diff", "watch", "scale", "bench", "calibrate", "engines", "schema", "init", "weights",
            "observe"]
BENCH_EXTRA = ("aiperf", "matplotlib", "tokenizers")
GROUPS = {"weights": ["check", "sync"], "observe": ["render"]}


def _listed(help_text: str) -> list[str]:
    """The command names of a --help page's "Commands:" section."""
    section = help_text.split("Commands:", 1)[1] if "Commands:" in help_text else ""
    return [line.split()[0] for line in section.splitlines() if line.startswith("  ") and line.split()]
CHART_EXAMPLES = ROOT / "charts" / "examples"


def _run(cmd: list[str], cwd: Path, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={"PATH": "/usr/bin:/bin", "COLUMNS": "120", "NO_COLOR": "1", "HOME": str(cwd),
                               "DEPLOYCTL_HELM": HELM, **(env or {})})


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The `deployctl` console script of a wheel installed into a fresh virtualenv; returns its bin dir."""
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    built = _run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], cwd=work)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    files = sorted(p.name for p in dist.iterdir())
    assert any(f.endswith(".whl") for f in files) and any(f.endswith(".tar.gz") for f in files), files
    twine = _run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.iterdir())], cwd=work)
    assert twine.returncode == 0, twine.stdout + twine.stderr
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    wheel = next(dist.glob("*.whl"))
    pip = _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                "--no-index", "--no-deps", str(wheel)], cwd=work)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    site = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (venv / "wheel").symlink_to(wheel)
    return venv / "bin"


def test_the_core_install_leaves_the_bench_packages_to_the_extra(installed):
    """`pip install deployctl` does not bring AIPerf, matplotlib or tokenizers: `deployctl[bench]` does."""
    import zipfile

    with zipfile.ZipFile((installed.parent / "wheel").resolve()) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    requires = [ln.split(":", 1)[1].strip() for ln in meta.splitlines() if ln.startswith("Requires-Dist:")]
    core = [r for r in requires if "extra ==" not in r]
    assert core and not [r for r in core if r.startswith(BENCH_EXTRA)], core
    for name in BENCH_EXTRA:
        assert any(r.startswith(name) and "extra == 'bench'" in r.replace('"', "'") for r in requires), requires
    assert "Provides-Extra: bench" in meta and "Project-URL: Repository, https://github.com/deployctl/deployctl" \
        in meta


NO_NETWORK = """
import socket


def _refuse(*args, **kwargs):
    raise OSError("the test runs deployctl without a network")


socket.socket.connect = socket.socket.connect_ex = socket.create_connection = socket.getaddrinfo = _refuse
"""


def test_init_then_plan_from_the_wheel_in_an_empty_directory_without_network(installed, tmp_path):
    """The wheel alone is enough to start: `deployctl init` writes the sample and the examples from the package,
    `plan` plans them, in an empty directory, without the repository (not in the working directory, the
    environment or the module path) and without a network (its own network namespace where `unshare` can make
    one, and sockets refused in the process)."""
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(NO_NETWORK)
    work = tmp_path / "empty"
    work.mkdir()
    isolate = ["unshare", "--net"] if subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode \
        == 0 else []
    env = {"PYTHONPATH": str(guard), "DEPLOYCTL_HELM": ""}
    exe = str(installed / "deployctl")
    init = _run([*isolate, exe, "init"], cwd=work, env=env)
    assert init.returncode == 0, init.stdout + init.stderr
    assert "next: deployctl plan -i inventories/sample.yaml" in init.stdout
    assert (work / "inventories" / "examples" / "hccn" / "a2-2x8-node1.conf").is_file()
    for inventory in ("inventories/sample.yaml", "inventories/examples/a2-2x8-tp-pp.yaml"):
        plan = _run([*isolate, exe, "plan", "-i", inventory], cwd=work, env=env)
        assert plan.returncode == 0, f"{inventory}: {plan.stdout[-1500:]}{plan.stderr[-1500:]}"
        assert str(ROOT) not in plan.stdout + plan.stderr
    again = _run([exe, "init"], cwd=work, env=env)
    assert again.returncode == 2 and "exists already" in again.stderr and "Traceback" not in again.stderr


def test_deployctl_is_imported_from_the_wheel(installed, tmp_path):
    where = _run([str(installed / "python"), "-c", "import deployctl, sys; print(deployctl.__file__)"],
                 cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    assert str(installed.parent) in where.stdout and str(ROOT) not in where.stdout, where.stdout


def test_the_wheel_ships_every_module_and_data_file_of_the_package(installed):
    """Every file git tracks under deployctl/ is in the installed package (nothing listed by hand)."""
    tracked = subprocess.run(["git", "ls-files", "deployctl"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    where = subprocess.run([str(installed / "python"), "-c", "import deployctl, os; print(os.path.dirname("
                            "os.path.dirname(deployctl.__file__)))"], capture_output=True, text=True, check=True,
                           cwd="/")
    site = Path(where.stdout.strip())
    missing = [f for f in tracked if not (site / f).is_file()]
    assert not missing, f"the wheel lacks {len(missing)} file(s): {missing[:20]}"


def test_every_command_answers_help_from_the_wheel(installed, tmp_path):
    top = _run([str(installed / "deployctl"), "--help"], cwd=tmp_path)
    assert top.returncode == 0, top.stderr
    listed = _listed(top.stdout)
    assert listed == COMMANDS, f"commands in --help: {listed}"
    for command in listed:
        r = _run([str(installed / "deployctl"), command, "--help"], cwd=tmp_path)
        assert r.returncode == 0 and "Usage:" in r.stdout, f"{command} --help: {r.stdout[-500:]}{r.stderr[-1500:]}"
        assert _listed(r.stdout) == GROUPS.get(command, []), f"{command}'s subcommands: {_listed(r.stdout)}"
        for sub in GROUPS.get(command, []):
            r = _run([str(installed / "deployctl"), command, sub, "--help"], cwd=tmp_path)
            assert r.returncode == 0 and "Usage:" in r.stdout, f"{command} {sub} --help: {r.stderr[-1500:]}"
    engines = _run([str(installed / "deployctl"), "engines"], cwd=tmp_path)
    assert engines.returncode == 0 and "mindie" in engines.stdout and "vllm" in engines.stdout, engines.stderr
    schema = _run([str(installed / "deployctl"), "schema", "-o", "inventory.schema.json"], cwd=tmp_path)
    assert schema.returncode == 0, schema.stderr    # the shipped schema file, as the checkout holds it
    assert (tmp_path / "inventory.schema.json").read_bytes() == \
        (ROOT / "deployctl" / "schema" / "inventory.schema.json").read_bytes()


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_example_validates_plans_and_renders_from_the_wheel(installed, tmp_path, example):
    """validate / plan / render (hosts and k8s) from another directory, with the copied inventory: the
    installed package alone must carry the engines' tables, templates and the chart."""
    inventory = tmp_path / example
    inventory.write_text((EXAMPLES / example).read_text())
    hccn = EXAMPLES / "hccn"
    if hccn.is_dir():                                   # examples may point at hccn.conf files next to them
        os.symlink(hccn, tmp_path / "hccn")
    exe = str(installed / "deployctl")
    for args in (["validate"], ["plan"], ["render", "-o", str(tmp_path / "out")]):
        r = _run([exe, *args, "-i", str(inventory)], cwd=tmp_path)
        assert r.returncode == 0, f"{args[0]} {example}: {r.stdout[-1500:]}{r.stderr[-1500:]}"
    assert (tmp_path / "out" / "plan.json").is_file()
    k8s = _run([exe, "render", "--target", "k8s", "-i", str(inventory), "-o", str(tmp_path / "k8s")], cwd=tmp_path)
    if (CHART_EXAMPLES / f"values-{inventory.stem}.yaml").exists():
        assert k8s.returncode == 0, f"render --target k8s {example}: {k8s.stdout[-1500:]}{k8s.stderr[-1500:]}"
        chart = tmp_path / "k8s" / "chart"
        assert (chart / "Chart.yaml").is_file() and (chart / "templates").is_dir()
    else:   # refused on Kubernetes: a clear refusal (exit 2), not a crash
        assert k8s.returncode == 2 and "Traceback" not in k8s.stderr and "deployctl bug" not in k8s.stderr, \
            k8s.stderr[-1500:]
