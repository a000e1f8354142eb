"""The hardware catalog (hardware.yaml) and the architecture extras (arch.yaml), every value with its source.

`sku_for(hardware, name)` picks the SKU: an explicit catalog key or alias ("910B3", "800I-A3"), an `npu-smi` chip
name ("910B3", "Ascend 910B4", "Ascend910_9391"), or, when ``name`` is None or says nothing (A3 servers show
"Ascend910" for every die), the hardware's default SKU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from deployctl.core.packaged import packaged_yaml
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from deployctl.core.models.model_info import ModelInfo


@dataclass(frozen=True)
class Sku:
    key: str
    hardware: str             # a2 | a3
    product: str
    hbm_gb: float
    hbm_gbps: float           # peak HBM bandwidth per die
    bf16_tflops: float        # dense peak per die
    int8_tops: float
    sources: tuple[tuple[str, str], ...]   # (field, source)

    def peak(self, int8: bool) -> float:
        """FLOP/s of the cube units for INT8 or BF16 operands."""
        return (self.int8_tops if int8 else self.bf16_tflops) * 1e12

    @property
    def bw(self) -> float:
        return self.hbm_gbps * 1e9


@dataclass(frozen=True)
class Link:
    key: str
    what: str
    gbps: float               # per die, per direction
    latency_us: float


def _read(name: str) -> Any:
    return packaged_yaml(__package__, name)


@cache
def catalog() -> dict:
    return _read("hardware.yaml")


@cache
def arch_catalog() -> dict:
    return _read("arch.yaml")


def _value(entry: dict[str, Any]) -> float:
    return float(entry["value"])


@cache
def skus() -> dict[str, Sku]:
    out = {}
    for key, e in catalog()["skus"].items():
        fields = ("hbm_gb", "hbm_gbps", "bf16_tflops", "int8_tops")
        out[key] = Sku(key=key, hardware=e["hardware"], product=e["product"],
                       **{f: _value(e[f]) for f in fields},
                       sources=tuple((f, e[f]["source"]) for f in fields))
    return out


@cache
def _aliases() -> dict[str, str]:
    out = {}
    for key, e in catalog()["skus"].items():
        for name in (key, *e.get("aliases", ())):
            out[_norm(name)] = key
    return out


def _norm(name: str) -> str:
    """'Ascend 910B4' / 'ascend910b4' / '910B4' -> '910B4'; 'Ascend910_9391' -> '910_9391'."""
    s = re.sub(r"\s+", "", name.strip()).upper()
    s = re.sub(r"^(HUAWEI)?ASCEND", "", s)
    return s


def default_sku(hardware: str) -> Sku:
    return skus()[catalog()["defaults"][hardware]["sku"]]


def default_reason(hardware: str) -> str:
    """Why the hardware's default SKU is what it is, with its public sources (the catalog's text on one line)."""
    return " ".join(catalog()["defaults"][hardware]["why"].split())


def sku_for(hardware: str, name: str | None = None) -> Sku:
    """The SKU of a cluster of ``hardware`` (a2 | a3).

    ``name`` is a catalog key or alias, or an npu-smi chip name; None, "" and the generic A3 name "910" /
    "Ascend910" give the hardware's default. Raises ValueError for an unknown name or one of the other hardware
    (a chip name alone does not tell A2 from A3: MindCluster tells an A3 by its board ID, Ascend/mind-cluster@22bb3d98
    component/ascend-common/devmanager/common/constants.go L227-275; so the inventory's hardware decides).
    """
    if hardware not in catalog()["defaults"]:
        raise ValueError(f"unknown hardware {hardware!r} (known: {', '.join(catalog()['defaults'])})")
    if not name or _norm(name) == "910":
        return default_sku(hardware)
    key = _aliases().get(_norm(name))
    if key is None and re.fullmatch(r"910B\d(-\d)?C?", _norm(name)):
        key = _aliases().get(_norm(name)[:5])
    if key is None:
        known = ", ".join(sorted(k for k, s in skus().items() if s.hardware == hardware))
        raise ValueError(f"unknown {hardware.upper()} SKU or chip name {name!r} (known: {known})")
    sku = skus()[key]
    if sku.hardware != hardware:
        raise ValueError(f"{name!r} is an {sku.hardware.upper()} SKU, but the cluster hardware is {hardware}")
    return sku


@cache
def links() -> dict[str, Link]:
    return {k: Link(key=k, what=e["what"], gbps=_value(e["gbps"]), latency_us=_value(e["latency_us"]))
            for k, e in catalog()["links"].items()}


@cache
def efficiency() -> dict[str, float]:
    return {k: _value(e) for k, e in catalog()["efficiency"].items()}


def _curve(points: list[dict]) -> tuple[tuple[float, float], ...]:
    return tuple(sorted((float(p["ep"]), float(p["value"])) for p in points))


@cache
def ep_comm() -> dict:
    e = catalog()["ep_comm"]
    out = {k: _value(v) for k, v in e.items() if isinstance(v, dict)}
    out.update({k: _curve(v) for k, v in e.items() if isinstance(v, list)})
    return out


def interp_log(curve: tuple[tuple[float, float], ...], ep: float) -> float:
    """Value at EP size ``ep``, linear in log2(EP) between the measured sizes, flat outside them."""
    import math

    if ep <= curve[0][0]:
        return curve[0][1]
    if ep >= curve[-1][0]:
        return curve[-1][1]
    for (x0, y0), (x1, y1) in zip(curve, curve[1:]):
        if x0 <= ep <= x1:
            f = (math.log2(ep) - math.log2(x0)) / (math.log2(x1) - math.log2(x0))
            return y0 + f * (y1 - y0)
    return curve[-1][1]


def arch(model: str) -> dict[str, Any]:
    """arch.yaml entry of a catalog model, `same_as` resolved, values without their sources."""
    return _arch(model)


def arch_of(info: ModelInfo) -> dict[str, Any]:
    """arch.yaml's entry of a catalog ModelInfo; for a model described from its checkpoint (model.config_path) and
    not in arch.yaml, its own MLA/DSA dimensions ({} when it has none)."""
    if info.arch is not None and info.key not in arch_catalog():
        return dict(info.arch)
    return _arch(info.key)


@cache
def _arch(model: str) -> dict[str, Any]:
    data = arch_catalog()
    entry = data.get(model)
    if entry is None:
        return {}
    merged: dict = {}
    if "same_as" in entry:
        merged.update(_arch(entry["same_as"]))
    for k, v in entry.items():
        if k == "same_as":
            continue
        if isinstance(v, dict) and "value" in v:
            merged[k] = float(v["value"])
        elif isinstance(v, dict):
            merged[k] = {kk: float(vv["value"]) for kk, vv in v.items()}
    return merged


def sourced_values() -> Iterator[tuple[str, Any, str]]:
    """(key path, value, source) of every number in hardware.yaml and arch.yaml (the tests check each source)."""
    def walk(node: Any, path: str) -> Iterator[tuple[str, Any, str]]:
        if isinstance(node, dict):
            if "value" in node:
                yield path, node["value"], node.get("source", "")
                return
            for k, v in node.items():
                yield from walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from walk(v, f"{path}[{i}]")
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            yield path, node, ""     # a bare number: no source (the test refuses it)

    yield from walk(catalog(), "hardware")
    yield from walk(arch_catalog(), "arch")
