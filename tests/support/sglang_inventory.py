"""SGLang inventories for the simulated hosts (tests of engine.kind: sglang on tests/fakecluster's SGLang images:
the stand-in `sglang.launch_server`, fake_bin/sglang_fake.py, and the real sglang-router 0.3.2)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

IMAGE = "lmsysorg/sglang:v0.5.18-cann9.0.0-a3"
WEIGHTS = "/data/models/Qwen3-235B-A22B-W8A8"
MODEL = {"name": "qwen3-235b-a22b", "quant": "w8a8", "weights_path": WEIGHTS, "served_name": "qwen3",
         "max_seq_len": 8192, "max_input_len": 4096, "max_batch_size": 16}
# one prefill server on p1 (TP16, DeepEP over its 16 dies), one decode server over d1 + d2 (TP32 with attention DP2)
PD_LAYOUT = {"preset": "pd-split", "prefill": {"nodes": ["p1"], "tp": 16, "dp": 1, "moe_ep": 16, "cp": 1},
             "decode": {"nodes": ["d1", "d2"], "tp": 16, "dp": 2, "moe_ep": 32}}
PD_NODES = ("p1", "d1", "d2")


def require_router() -> None:
    """The fake SGLang images run the real sglang-router (the test extra); fail, never skip, without it."""
    if importlib.util.find_spec("sglang_router") is None:
        raise AssertionError("sglang-router is not installed: pip install -e '.[test]' (sglang-router==0.3.2, the "
                             "router the fake SGLang images run)")


def sglang_inventory(fc, path: Path, *, name: str, layout: dict, image: str = IMAGE, deploy: dict | None = None,
                     interface: bool = True) -> Path:
    doc = {"cluster": {"name": name, "hardware": fc.nodes[0].spec.hardware},
           "engine": {"kind": "sglang", "image": image}, "model": dict(MODEL), "layout": layout,
           "ssh": {"user": "root", "key": str(fc.client_key), "known_hosts": str(fc.known_hosts)},
           "nodes": [{"name": n.name, "address": n.ip, **({"interface": "eth0"} if interface else {})}
                     for n in fc.nodes]}
    if deploy:
        doc["deploy"] = deploy
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
