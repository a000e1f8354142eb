"""`deployctl plan` and `deployctl recommend` as users run them: the estimate in plan's text and JSON, the SKU from
the inventory, recommend's exit codes and durations."""

from __future__ import annotations

import json

import yaml

from conftest import EXAMPLES, run_cli


def test_plan_json_carries_every_term_of_the_estimate():
    res = run_cli("plan", "-i", str(EXAMPLES / "a3-pd-2p2d.yaml"), "--output", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    est = doc["estimate"]
    assert est["label"] == "estimated"
    assert 0 < est["tpot_floor_ms"] <= est["tpot_ms"]
    assert {i["instance"] for i in est["instances"]} == {i["name"] for i in doc["instances"]}
    assert all(i["decode"] or i["prefill"] for i in est["instances"])
    assert est["binding"] and est["assumptions"]


def test_plan_text_shows_the_estimate_for_the_given_workload():
    res = run_cli("plan", "-i", str(EXAMPLES / "a2-4x8-dp-ep.yaml"), "--input-len", "3500", "--output-len", "1500",
                  "--concurrency", "32")
    assert res.returncode == 0, res.stderr
    assert "Performance (estimated)" in res.stdout and "3500 in / 1500 out at concurrency 32" in res.stdout


def test_a_longer_context_costs_more_per_token():
    def tpot(n: int) -> float:
        res = run_cli("plan", "-i", str(EXAMPLES / "a2-4x8-dp-ep.yaml"), "--output", "json", "--input-len", str(n),
                      "--output-len", "256", "--concurrency", "16")
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)["estimate"]["tpot_ms"]

    assert tpot(1024) < tpot(8000)


def test_cluster_sku_is_checked_and_used(tmp_path):
    doc = yaml.safe_load((EXAMPLES / "a2-1x8-single.yaml").read_text())
    doc["cluster"]["sku"] = "910B9"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    res = run_cli("validate", "-i", str(bad))
    assert res.returncode == 2 and "cluster.sku" in res.stderr and "Traceback" not in res.stderr, res.stderr
    doc["cluster"]["sku"] = "910B4"
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(doc))
    res = run_cli("plan", "-i", str(good), "--output", "json")
    assert res.returncode == 0, res.stderr
    est = json.loads(res.stdout)["estimate"]
    assert est["sku"] == "910B4" and "cluster.sku" in est["sku_source"]


def test_recommend_with_slo_durations_and_apply(tmp_path):
    target = tmp_path / "best.yaml"
    res = run_cli("recommend", "-i", str(EXAMPLES / "a2-4x8-dp-ep.yaml"), "--input", "3500", "--output-len", "1500",
                  "--slo-tpot", "100ms", "--slo-ttft", "10s", "--apply", str(target))
    assert res.returncode == 0, res.stdout + res.stderr
    assert yaml.safe_load(target.read_text())["layout"]["preset"] == "dp-ep"
    assert run_cli("plan", "-i", str(target)).returncode == 0
    res = run_cli("recommend", "-i", str(EXAMPLES / "a2-4x8-dp-ep.yaml"), "--slo-tpot", "fast")
    assert res.returncode == 2 and "--slo-tpot" in res.stderr and "Traceback" not in res.stderr


def test_cluster_sku_defaults_to_the_chip_name_npu_smi_reports():
    """With preflight facts, the SKU is the chip name every host's npu-smi shows (910B4: the 32 GB A2 part), unless
    the inventory names one; mixed or unknown names leave the hardware's default."""
    from types import SimpleNamespace as NS

    from deployctl.io.inventory_file import load_inventory
    from deployctl.app.inventory import validate_inventory
    from deployctl.core.inventory.validate import apply_facts

    inv = validate_inventory(load_inventory(EXAMPLES / "a2-2x8-tp-pp.yaml"))

    def facts(*names):
        return NS(hosts={n.name: NS(reachable=True, addresses={}, devices={},
                                    npu=NS(chips=(NS(name=name),)))
                         for n, name in zip(inv.nodes, names)})

    assert apply_facts(inv, facts("910B4", "910B4")).cluster.sku == "910B4"
    assert apply_facts(inv, facts("910B4", "910B3")).cluster.sku is None
    assert apply_facts(inv, facts("Ascend950", "Ascend950")).cluster.sku is None
    named = inv.model_copy(update={"cluster": inv.cluster.model_copy(update={"sku": "910B1"})})
    assert apply_facts(named, facts("910B4", "910B4")).cluster.sku == "910B1"
