"""recommend: only layouts the engine accepts, a DP+EP choice for 4 x A2 R1 W8A8 at a 100 ms TPOT SLO, layouts
written back as valid inventories, and fast enough for 64 servers."""

from __future__ import annotations

import time

import pytest
import yaml
from perflib import EXAMPLE_NAMES, EXAMPLES, inventory

from deployctl.core.input.raw import parse_yaml
from deployctl.app.inventory import validate_inventory
from deployctl.core.sizing.recommend import Objective, apply_layout, layouts, recommend, recommend_report
from deployctl.core.sizing.planner import plan_layout


def test_four_a2_servers_r1_w8a8_at_100ms_pick_dp_ep():
    inv = inventory("a2-4x8-dp-ep")
    assert (inv.cluster.hardware, len(inv.nodes), inv.model.name, inv.model.quant) == ("a2", 4, "deepseek-r1", "w8a8")
    limits = (inv.model.max_input_len, inv.model.max_seq_len - inv.model.max_input_len)
    for workload in ((3500, 1500), (1024, 512), limits):
        best = recommend(inv, Objective(input_len=workload[0], output_len=workload[1], slo_tpot_ms=100))[0]
        assert best.preset == "dp-ep" and best.layout["preset"] == "dp-ep", workload
        assert best.meets_slo and best.tpot_ms <= 100


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_every_candidate_plans_and_passes_the_engine(name):
    inv = inventory(name)
    text = (EXAMPLES / f"{name}.yaml").read_text(encoding="utf-8")
    cands = recommend(inv, Objective(input_len=2048, output_len=512, slo_tpot_ms=50, slo_ttft_ms=3000))
    assert cands, name
    assert [c.rank for c in cands] == list(range(1, len(cands) + 1))
    met = [c.meets_slo for c in cands]
    assert met == sorted(met, reverse=True)             # every layout meeting the SLO ranks first
    for c in cands:
        new = apply_layout(text, c.layout)
        cand = validate_inventory(parse_yaml(new, f"{name}.yaml", EXAMPLES))   # the written file validates
        plan = plan_layout(cand)                                               # plans (memory fits)
        assert not [f for f in cand.engine_spec.check(plan) if f.level == "error"]
        assert plan.preset == c.preset
        assert 0 < c.tpot_floor_ms <= c.tpot_ms and c.per_die_tokens_per_s > 0 and c.binding


def test_no_slo_met_ranks_by_closeness_and_says_so():
    rec = recommend_report(inventory("a2-2x8-tp-pp"), Objective(input_len=4096, output_len=512, slo_tpot_ms=0.5))
    assert rec.candidates and not any(c.meets_slo for c in rec.candidates)
    ratios = [c.slo_ratio for c in rec.candidates]
    assert ratios == sorted(ratios) and ratios[0] > 1
    assert any("no layout meets the SLO" in n for n in rec.notes)


def test_layouts_cover_presets_and_splits():
    shapes = layouts(inventory("a3-pd-2p2d"))
    assert {lay["preset"] for lay in shapes} == {"tp-pp", "dp-ep", "pd-split"}
    splits = {len(lay["prefill"]["nodes"]) for lay in shapes if lay["preset"] == "pd-split"}
    assert splits == {1, 2, 3}
    assert {lay["preset"] for lay in layouts(inventory("a2-1x8-single"))} == {"single", "dp-ep"}


SAMPLE = """\
# my cluster
cluster:
  name: x   # inline
  hardware: a2

layout:
  preset: tp-pp          # was this
  tp: 8
  # trailing comment in the block

# the nodes
nodes:
  - name: n1
"""


def test_apply_layout_replaces_only_the_layout_block():
    out = apply_layout(SAMPLE, {"preset": "dp-ep", "tp": 2}, comment="chosen")
    assert out.startswith("# my cluster\ncluster:\n  name: x   # inline\n")
    assert "\n\n# the nodes\nnodes:\n  - name: n1\n" in out
    assert "was this" not in out and "# chosen" in out
    assert yaml.safe_load(out)["layout"] == {"preset": "dp-ep", "tp": 2}
    pd = {"preset": "pd-split", "prefill": {"nodes": ["n1"]}, "decode": {"nodes": ["no", "123"], "tp": 1}}
    assert yaml.safe_load(apply_layout(SAMPLE, pd))["layout"] == pd        # names YAML would retype are quoted
    flow = SAMPLE.replace("layout:\n  preset: tp-pp          # was this\n  tp: 8\n", "layout: {preset: tp-pp}\n")
    assert yaml.safe_load(apply_layout(flow, {"preset": "single"}))["layout"] == {"preset": "single"}
    block = "layout:\n  preset: tp-pp          # was this\n  tp: 8\n  # trailing comment in the block\n"
    none = SAMPLE.replace(block, "")
    assert none != SAMPLE
    added = yaml.safe_load(apply_layout(none, {"preset": "single"}))
    assert added["layout"] == {"preset": "single"} and added["nodes"] == [{"name": "n1"}]


def test_sixty_four_servers_in_under_two_seconds():
    inv = inventory("a2-4x8-dp-ep")
    per = inv.devices_per_node
    from deployctl.core.models.inventory import Device, Layout, Node

    nodes = [Node(name=f"n{i}", address=f"10.9.{i // 250}.{i % 250 + 2}",
                  devices=[Device(id=d, ip=f"29.{i // 100}.{i % 100}.{d + 2}") for d in range(per)]) for i in range(64)]
    big = inv.model_copy(update={"nodes": nodes, "layout": Layout(preset="tp-pp")})
    start = time.process_time()
    rec = recommend_report(big, Objective(input_len=3500, output_len=1500, slo_tpot_ms=50, slo_ttft_ms=2000))
    assert time.process_time() - start < 2.0
    assert rec.considered > 300 and rec.candidates
