"""The CLI as users run it: exit codes (spec §2), JSON output, safe writes, fast start."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT, run_cli

SAMPLE = "inventories/sample.yaml"


def test_help_teaches_the_workflow():
    res = run_cli("--help")
    assert res.returncode == 0
    for word in ("validate", "plan", "render", "--debug", "--install-completion"):
        assert word in res.stdout


@pytest.mark.parametrize("cmd", ["validate", "plan", "render"])
def test_each_command_has_help(cmd):
    res = run_cli(cmd, "--help")
    assert res.returncode == 0 and "--inventory" in res.stdout


def test_version():
    res = run_cli("--version")
    assert res.returncode == 0 and res.stdout.startswith("deployctl ")


def test_help_does_not_import_the_heavy_libraries():
    code = ("import sys; sys.argv=['deployctl','--help']\n"
            "from deployctl.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('pydantic', 'yaml', 'jinja2', 'paramiko', 'ansible_runner', 'kubernetes')"
            " if m in sys.modules]\n"
            "print('HEAVY=' + ','.join(heavy))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert "HEAVY=\n" in res.stdout or res.stdout.rstrip().endswith("HEAVY="), res.stdout


def test_validate_ok():
    res = run_cli("validate", "-i", SAMPLE)
    assert res.returncode == 0, res.stderr
    assert "is valid" in res.stdout


def test_validate_json():
    res = run_cli("validate", "-i", SAMPLE, "--output", "json")
    assert res.returncode == 0
    assert json.loads(res.stdout)["valid"] is True


def test_plan_json_is_the_plan():
    res = run_cli("plan", "-i", SAMPLE, "--output", "json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    inst = plan["instances"][0]
    assert inst["world_size"] == 16
    assert [r["rank"] for r in inst["ranks"]] == list(range(16))
    assert plan["nodes"][0]["is_master"] is True
    assert inst["memory"]["fits"] is True


def test_plan_text_shows_the_memory_table():
    res = run_cli("plan", "-i", SAMPLE)
    assert res.returncode == 0, res.stderr
    for word in ("KV budget", "weights resident", "max sequences", "node1", "0-7", "8-15"):
        assert word in res.stdout


def test_missing_inventory_exits_2_without_traceback():
    res = run_cli("plan", "-i", "nope.yaml")
    assert res.returncode == 2
    assert "nope.yaml" in res.stderr and "Traceback" not in res.stderr


def test_bad_flag_exits_2():
    res = run_cli("plan", "-i", SAMPLE, "--output", "xml")
    assert res.returncode == 2


def test_render_prints_where_the_files_went(tmp_path):
    out = tmp_path / "rendered"
    res = run_cli("render", "-i", SAMPLE, "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert str(out) in res.stdout
    assert (out / "node1" / "ranktable.json").stat().st_mode & 0o777 == 0o640
    assert (out / "node2" / "start.sh").stat().st_mode & 0o111


def test_render_refuses_a_foreign_directory(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    res = run_cli("render", "-i", SAMPLE, "-o", str(tmp_path))
    assert res.returncode == 2
    assert "--force" in res.stderr and "Traceback" not in res.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me"
    assert not (tmp_path / "plan.json").exists()


def test_render_force_replaces_a_foreign_directory(tmp_path):
    (tmp_path / "old.txt").write_text("x")
    res = run_cli("render", "-i", SAMPLE, "-o", str(tmp_path), "--force")
    assert res.returncode == 0, res.stderr
    assert not (tmp_path / "old.txt").exists() and (tmp_path / "plan.json").exists()


def test_rerender_replaces_the_whole_tree(tmp_path):
    out = tmp_path / "r"
    assert run_cli("render", "-i", "inventories/examples/a3-pd-2p2d.yaml", "-o", str(out)).returncode == 0
    assert (out / "p1" / "global_ranktable.json").exists()
    assert run_cli("render", "-i", SAMPLE, "-o", str(out)).returncode == 0
    assert not (out / "p1").exists(), "files of the previous render must not linger"
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["node1", "node2"]


def test_failed_render_leaves_the_previous_tree(tmp_path):
    out = tmp_path / "r"
    assert run_cli("render", "-i", SAMPLE, "-o", str(out)).returncode == 0
    before = (out / "plan.json").read_bytes()
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / SAMPLE).read_text().replace("quant: w8a8", "quant: w9a9"))
    res = run_cli("render", "-i", str(bad), "-o", str(out))
    assert res.returncode == 2
    assert (out / "plan.json").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_infeasible_layout_exits_2_with_numbers(tmp_path):
    inv = tmp_path / "one.yaml"
    text = (ROOT / "inventories/examples/a2-1x8-single.yaml").read_text().replace("quant: w4a8", "quant: w8a8")
    inv.write_text(text)
    res = run_cli("plan", "-i", str(inv))
    assert res.returncode == 2
    assert "GB per die" in res.stderr and "usable" in res.stderr and "Traceback" not in res.stderr


def test_render_never_replaces_the_directory_holding_the_inventory(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text((ROOT / SAMPLE).read_text())
    res = run_cli("render", "-i", str(inv), "-o", str(tmp_path), "--force")
    assert res.returncode == 2 and "holds the inventory" in res.stderr
    assert inv.exists()


def test_names_with_brackets_are_printed_literally(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text((ROOT / SAMPLE).read_text().replace("address: 10.200.2.2", "address: host[/]\n"
                                                        "    container_ip: 10.200.2.2"))
    res = run_cli("plan", "-i", str(inv))
    assert res.returncode == 0, res.stderr
    assert "host[/]" in res.stdout
    out = tmp_path / "o[/]"
    res = run_cli("render", "-i", str(inv), "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "o[/]" in res.stdout
