"""One inventory builder, with keyword overrides, for the three kinds of inventory the tests write:

* ``cluster_tail(...)`` / ``on_cluster(fc, path, ...)``: a simulated cluster's own cluster/ssh/nodes section
  (``fc.inventory_snippet()``) followed by engine/model/layout (the stand-in MindIE serving DeepSeek-R1 from
  the weights present on the fake nodes);
* ``synthetic(model, quant, nodes, preset, ...)``: an inventory of ``nodes`` made-up servers (n0, n1, ... with
  device IPs 29.k.i.1), for rendering and planning without hosts;
* ``from_example(name, fc=..., **sections)``: one of inventories/examples/ with sections replaced (and, given
  a cluster, its ssh and nodes pointed at the simulated hosts);
* ``example(name)``: an example inventory, validated in full (an ``Inventory``).
"""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "inventories" / "examples"
ROUTER = {"port": 8080, "admin_port": 8081, "check_interval_ms": 300}


def _flow(d: dict) -> str:
    return "{" + ", ".join(f"{k}: {_scalar(v)}" for k, v in d.items()) + "}"


def _scalar(v) -> str:
    if isinstance(v, dict):
        return _flow(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_scalar(x) for x in v) + "]"
    return str(v)


def cluster_tail(*, hardware: str = "a2", image: str | None = None, version: str | None = None,
                 level: str | None = None, env: dict | None = None, engine: dict | None = None,
                 quant: str = "w8a8", weights: str | None = None, max_batch_size: int = 32,
                 preset: str = "tp-pp", replicas: int | None = None, layout: dict | None = None,
                 router: bool | dict = False, extra: str = "") -> str:
    """engine/model/layout[/router] YAML for the stand-in MindIE on simulated hosts. ``level`` sets
    MINDIE_LOG_LEVEL (after the entries of ``env``); ``engine`` adds engine keys (secret_env, ...);
    ``layout`` adds layout keys after the preset (and replicas); ``extra`` is appended as written."""
    from fakecluster.spec import DEFAULT_IMAGES, DEFAULT_WEIGHTS_DIR

    out = ["engine:", f"  image: {image or DEFAULT_IMAGES[hardware]}"]
    if version:
        out.append(f'  version: "{version}"')
    env = {**(env or {}), **({"MINDIE_LOG_LEVEL": level} if level else {})}
    if env:
        out.append(f"  env: {_flow(env)}")
    out += [f"  {k}: {_scalar(v)}" for k, v in (engine or {}).items()]
    out += [f"model: {{name: deepseek-r1, quant: {quant}, weights_path: {weights or DEFAULT_WEIGHTS_DIR}, "
            "served_name: ds-r1,",
            f"        max_seq_len: 8192, max_input_len: 4096, max_batch_size: {max_batch_size}}}"]
    lay = {"preset": preset, **({"replicas": replicas} if replicas else {}), **(layout or {})}
    if len(lay) == 1 or all(not isinstance(v, dict) for v in lay.values()):
        out.append(f"layout: {_flow(lay)}")
    else:
        out += ["layout:"] + [f"  {k}: {_scalar(v)}" for k, v in lay.items()]
    if router:
        out.append(f"router: {_flow(ROUTER if router is True else router)}")
    return "\n".join(out) + "\n" + extra


def on_cluster(fc, path: Path | None = None, *, snippet: str | None = None, **tail) -> Path | str:
    """``snippet`` (default ``fc.inventory_snippet()``) + ``cluster_tail(**tail)`` (hardware: the cluster's);
    written to ``path`` (returned) or returned as text."""
    tail.setdefault("hardware", fc.specs[0].hardware)
    text = (fc.inventory_snippet() if snippet is None else snippet) + cluster_tail(**tail)
    if path is None:
        return text
    path.write_text(text)
    return path


def synthetic(model: str, quant: str, nodes: int, preset: str, *, hardware: str = "a2", kind: str | None = None,
              image: str = "mindie:test", version: str = "", config_path: str | Path | None = None,
              max_seq_len: int = 8192, env: dict | None = None, **layout) -> str:
    """``nodes`` made-up servers of ``hardware`` (8 or 16 NPUs each); ``kind`` sets engine.kind, ``env``
    engine.env; ``layout`` keys go under the preset."""
    per = 8 if hardware == "a2" else 16
    node_yaml = "\n".join(
        f"  - name: n{k}\n    address: 10.0.{k}.1\n    interface: eth0\n    devices: ["
        + ", ".join(f"{{id: {i}, ip: 29.{k}.{i}.1}}" for i in range(per)) + "]" for k in range(nodes))
    engine = ([f"kind: {kind}"] if kind else []) + [f"image: '{image}'"] + ([f"version: '{version}'"] if version
                                                                           else [])
    engine += [f"env: {_flow(env)}"] if env else []
    config = f", config_path: '{config_path}'" if config_path else ""
    extra = "".join(f"\n  {k}: {v}" for k, v in layout.items())
    return f"""
cluster: {{name: t, hardware: {hardware}}}
engine: {{{", ".join(engine)}}}
model: {{name: {model}, quant: {quant}, weights_path: /w, served_name: m{config},
        max_seq_len: {max_seq_len}, max_input_len: 4096, max_batch_size: 32}}
layout:
  preset: {preset}{extra}
nodes:
{node_yaml}
"""


def from_example(name: str, path: Path | None = None, *, fc=None, **sections) -> Path | dict:
    """inventories/examples/<name>.yaml as a dict, with ``sections`` replacing whole top-level sections
    (``cluster`` is merged key by key: ``cluster={"name": ...}`` renames); given ``fc``, ssh and nodes are
    the simulated cluster's (interface eth0). Written to ``path`` (returned) or returned as the dict."""
    doc = yaml.safe_load((EXAMPLES / f"{name.removesuffix('.yaml')}.yaml").read_text())
    if fc is not None:
        doc["ssh"] = {"user": "root", "key": str(fc.client_key), "known_hosts": str(fc.known_hosts)}
        doc["nodes"] = [{"name": n.name, "address": n.ip, "interface": "eth0"} for n in fc.nodes]
    for key, value in sections.items():
        if key in ("cluster", "engine") and isinstance(value, dict):
            doc[key] = {**doc.get(key, {}), **value}
        else:
            doc[key] = value
    if path is None:
        return doc
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def example(name: str = "a2-2x8-tp-pp"):
    """inventories/examples/<name>.yaml, validated in full (as `deployctl validate` reads it)."""
    from deployctl.app.inventory import read_inventory as load_and_validate

    return load_and_validate(EXAMPLES / f"{name.removesuffix('.yaml')}.yaml")
