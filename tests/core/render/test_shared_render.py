"""What a large fleet's render shares between the nodes of an instance, and that sharing changes no byte: the
plan's memo (core/models/plan.py Plan.memo) and start scripts rendered as a per-node head and a shared body
(core/render/start.py)."""

from __future__ import annotations

import pytest

from conftest import EXAMPLES
from deployctl.app.inventory import read_inventory
from deployctl.core.engines.mindie import start as mindie_start
from deployctl.core.engines.vllm_ascend import render as vllm_render
from deployctl.core.render import _jinja, render_artifacts
from deployctl.core.sizing.planner import plan_layout


def test_memo_builds_once_per_plan_and_afresh_for_a_copy():
    plan = plan_layout(read_inventory(EXAMPLES / "a2-4x8-dp-ep.yaml"))
    built = []
    assert plan.memo(("k",), lambda: built.append(1) or "a") == "a"
    assert plan.memo(("k",), lambda: built.append(1) or "b") == "a"
    assert built == [1]
    changed = plan.model_copy(update={"joined": frozenset({"x"})})
    assert changed.memo(("k",), lambda: "c") == "c"                   # a copy with other fields starts afresh
    assert plan.memo(("k",), lambda: "d") == "a"                      # and leaves the original's alone
    assert plan.model_copy().memo(("k",), lambda: "e") == "e"


def test_a_copy_of_a_copy_never_sees_a_freed_plans_memo():
    """A chain of copies whose first plan is gone (the planner copies its plan to add the engine's warnings): each
    copy starts afresh, whatever address it gets (a memo tagged by the id of a freed plan once leaked into a copy
    allocated at that address: a netloader render without its peers)."""
    import copy
    import gc

    base = plan_layout(read_inventory(EXAMPLES / "a2-4x8-dp-ep.yaml"))
    for i in range(200):
        first = base.model_copy(update={"joined": frozenset({f"a{i}"})})
        first.memo(("k",), lambda: "stale")
        second = first.model_copy(update={"joined": frozenset({f"b{i}"})})
        del first
        gc.collect()
        third = second.model_copy(update={"joined": frozenset({f"c{i}"})})
        assert third.memo(("k",), lambda: "fresh") == "fresh"
        assert copy.copy(second).memo(("k",), lambda: "fresh") == "fresh"
        assert copy.deepcopy(second).memo(("k",), lambda: "fresh") == "fresh"


@pytest.mark.parametrize(("example", "module"), [
    ("a2-fleet-4x2x8-dp-ep.yaml", mindie_start), ("a3-pd-2p2d.yaml", mindie_start),
    ("vllm-a3-2p1d-qwen3.yaml", vllm_render), ("vllm-a3-pd-roles-qwen3.yaml", vllm_render)])
def test_a_start_script_is_its_template_rendered_whole(example, module, monkeypatch):
    """Each node's start.sh is its engine's template rendered whole (no part) with the head's and the body's values
    together; bodies are rendered once per distinct body (at most once per instance), heads once per node."""
    plan = plan_layout(read_inventory(EXAMPLES / example))
    made: list[tuple[str, dict, dict, str]] = []
    parts: list[str] = []
    real_start, real_render = module.engine_start, _jinja.render_template

    def start(plan_, template, head, body):
        text = real_start(plan_, template, head, body)
        made.append((template, dict(head), dict(body), text))
        return text

    def render(name, **context):
        parts.append(context.get("part", "whole"))
        return real_render(name, **context)

    monkeypatch.setattr(module, "engine_start", start)
    monkeypatch.setattr(_jinja, "render_template", render)
    starts = {a.path.split("/")[0]: a.content.decode() for a in render_artifacts(plan) if a.path.endswith("/start.sh")}
    assert len(made) == len(plan.nodes) == len(starts)
    for template, head, body, text in made:
        assert set(head) & set(body) <= {"owned", "dp_servers"}, "a value given to both parts must be the same"
        assert text == real_render(template, **{**body, **head}) == starts[head["node"]]
    assert parts.count("head") == len(plan.nodes)
    assert parts.count("body") <= len(plan.instances)


@pytest.mark.parametrize("secret", [False, True])
@pytest.mark.parametrize("example", ["a3-pd-2p2d.yaml", "vllm-a3-2p1d-qwen3.yaml", "sglang-a2-1x8-qwen3-235b.yaml"])
def test_plan_json_is_the_masked_plan_doc(example, secret):
    """plan.json from the model in one pass (no secret to mask) is the text of the masked document."""
    import json

    from pydantic_core import to_json

    from deployctl.core.input.secrets import MASK, plan_doc, plan_json

    inv = read_inventory(EXAMPLES / example)
    if secret:
        inv = inv.model_copy(update={"engine": inv.engine.model_copy(update={"env": {**inv.engine.env,
                                                                                    "HF_TOKEN": "hf_abc"}})})
    plan = plan_layout(inv)
    text = plan_json(plan)
    assert text == to_json(plan_doc(plan), indent=2)
    assert (b"hf_abc" in text) is False
    assert (json.loads(text)["inventory"]["engine"]["env"].get("HF_TOKEN") == MASK) is secret


@pytest.mark.parametrize("secret", [False, True])
@pytest.mark.parametrize("example", ["a2-fleet-4x2x8-dp-ep.yaml", "vllm-a3-pd-roles-qwen3.yaml"])
def test_plan_output_json_is_the_masked_plan_doc_with_its_estimate(example, secret):
    """`plan --output json` (plan_json with the estimate and notes after the plan's keys) is the text of the masked
    plan document with those keys added."""
    from pydantic_core import to_json

    from deployctl.core.input.secrets import plan_doc, plan_json
    from deployctl.core.sizing.estimate import default_workload, estimate_plan

    inv = read_inventory(EXAMPLES / example)
    if secret:
        inv = inv.model_copy(update={"engine": inv.engine.model_copy(update={"env": {"API_KEY": "k-123"}})})
    plan = plan_layout(inv)
    est = estimate_plan(plan, default_workload(plan))
    notes = {"facts": None, "needs_preflight": ["device ips"]}
    doc = plan_doc(plan)
    doc["estimate"] = est.model_dump(mode="json")
    doc.update(notes)
    assert plan_json(plan, {"estimate": est, **notes}) == to_json(doc, indent=2)
