"""Property tests across MindIE's support matrix: model x quant x engine version (2.2/2.3/3.0) x hardware
(a2/a3) x 1-4 nodes x preset (single/tp-pp/dp-ep/pd-split), plus run_as_uid / mounts / device_logs / DP port base.

Each generated inventory dict goes through the real loader and validator (parse_yaml -> validate_inventory),
then plan_layout and render_artifacts. Asserted:
- every accepted combination renders files that satisfy every rule of mindie-upstream-rules.md §1-2, checked by
  the independent functions of mindie_upstream.py (start scripts executed with a recording docker and stand-in
  MindIE binaries);
- every combination the support matrix refuses names its source (`[source: ...]`) in each problem;
- combinations refused for memory fit are discarded (hypothesis.assume).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from tiers import examples

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mindie_upstream as up  # noqa: E402

from deployctl.core.errors import InventoryError, LayoutError  # noqa: E402

MODELS = ["deepseek-r1", "deepseek-v3", "deepseek-v3.2", "qwen3-235b-a22b"]
VERSIONS = ["2.2", "2.3", "3.0"]
PRESETS_FOR = {1: ["single", "dp-ep"], 2: ["tp-pp", "dp-ep", "pd-split"], 3: ["tp-pp", "dp-ep", "pd-split"],
               4: ["tp-pp", "dp-ep", "pd-split"]}
COUNTER = {"n": 0}


@st.composite
def combos(draw):
    model = draw(st.sampled_from(MODELS))
    quant = draw(st.sampled_from(sorted(up.CATALOG[model]["quants"]) if "quants" in up.CATALOG[model]
                                 else ["w8a8", "bf16"]))
    # V3.2 runs on 3.0 only: draw it more often there so accepted V3.2 plans are generated at all
    version = draw(st.sampled_from(["3.0", "3.0"] + VERSIONS if "v3.2" in model else VERSIONS))
    hardware = draw(st.sampled_from(["a2", "a3"]))
    nodes = draw(st.integers(1, 4))
    preset = draw(st.sampled_from(PRESETS_FOR[nodes]))
    prefill = draw(st.integers(1, nodes - 1)) if preset == "pd-split" else None
    engine = {}
    if draw(st.booleans()):
        engine["run_as_uid"] = draw(st.sampled_from([0, 1001]))
    if draw(st.booleans()):
        engine["device_logs"] = draw(st.booleans())
    if draw(st.booleans()):
        engine["mounts"] = [{"host": "/data/patches", "container": "/opt/patches", "rw": draw(st.booleans())}]
    if draw(st.booleans()):
        engine["ports"] = {"dist_base": draw(st.sampled_from([10000, 12000, 20000]))}
    return dict(model=model, quant=quant, version=version, hardware=hardware, nodes=nodes, preset=preset,
                prefill_nodes=prefill, engine=engine)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mindie-props")


@settings(max_examples=examples(60), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@pytest.mark.slow
@given(combo=combos())
def test_matrix_accepted_renders_upstream_rules_refused_name_source(combo, workspace):
    COUNTER["n"] += 1
    case = workspace / f"case{COUNTER['n']}"
    sandbox = case / "sandbox"
    sandbox.mkdir(parents=True)
    engine = dict(combo["engine"], **up.sandbox_engine(sandbox))
    inv = up.inventory(**{k: v for k, v in combo.items() if k != "engine"}, engine=engine)
    try:
        r = up.render(inv)
    except InventoryError:
        # degrees that do not add up (e.g. moe_ep 24 on 256 experts): the validator's, not the support matrix
        event("refused: inventory (layout arithmetic)")
        return
    except LayoutError as err:
        text = str(err)
        if "memory" in text.lower():
            event("refused: memory")
            assume(False)
        if "does not run this combination" in text:
            event("refused: support matrix")
            for p in err.problems:
                assert "[source: " in p.message and not p.message.rstrip().endswith("[source: ]"), \
                    f"support-matrix refusal without a source: {p.path}: {p.message}"
            return
        event("refused: layout arithmetic")
        return
    event(f"accepted: {combo['preset']}")
    tree = up.prepare_tree(r, case / "tree")
    up.check_everything(r, tree, sandbox)
