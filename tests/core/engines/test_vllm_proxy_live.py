"""The P/D proxy's argv without the instances that are down (docs/dev/router.md): what deployctl restarts the proxy
with where the proxy cannot take a server out while it runs (vLLM-Ascend 0.11, 0.13)."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES

from deployctl.core.engines.vllm_ascend.launch import launches, proxy_argv
from deployctl.core.errors import ExecutionError
from deployctl.core.input.raw import parse_yaml
from deployctl.app.inventory import validate_inventory
from deployctl.core.sizing.planner import plan_layout


def _lists(argv: tuple[str, ...]) -> dict[str, list[str]]:
    out, key = {}, None
    for a in argv:
        if a.startswith("--"):
            key = a
            out[key] = []
        else:
            out[key].append(a)
    return out


def _ends(argv, role: str) -> list[str]:
    o = _lists(argv)
    return [f"{h}:{p}" for h, p in zip(o[f"--{role}-hosts"], o[f"--{role}-ports"], strict=True)]


def test_the_live_list_leaves_out_exactly_the_dead_instance():
    path = EXAMPLES / "vllm-a3-2p1d-qwen3.yaml"
    plan = plan_layout(validate_inventory(parse_yaml(path.read_text(), path.name, EXAMPLES)))
    every = launches(plan)
    full = next(lv.proxy for lv in every.values() if lv.proxy is not None)
    assert proxy_argv(plan, every) == full                      # the rendered proxy.args, unchanged
    own = {i.name: [f"{h}:{p}" for n in i.nodes for h, p in every[n].endpoints] for i in plan.instances}
    live = proxy_argv(plan, every, {"prefill-1"})
    assert _ends(live, "prefiller") == own["prefill-0"]
    assert _ends(live, "decoder") == _ends(full, "decoder") == own["decode"]
    assert _lists(live)["--host"] == _lists(full)["--host"] and _lists(live)["--port"] == _lists(full)["--port"]
    with pytest.raises(ExecutionError, match="without a decode instance"):
        proxy_argv(plan, every, {"decode"})                     # the proxy cannot start without a D
    with pytest.raises(ValueError, match="prefill-7"):
        proxy_argv(plan, every, {"prefill-7"})
