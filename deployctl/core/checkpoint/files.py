"""A checkpoint's small files, parsed: the one boundary where untrusted checkpoint files become typed values.

The bytes come from a FileSource (io/checkpoint_files.py reads a directory on disk, bounded); every file is
size-capped, must be a JSON object, and is parsed into typed models; a problem is an `InventoryError` (exit 2)
naming the file, the key and what to do.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import Field, ValidationError

from deployctl.core.errors import InventoryError, Problem
from deployctl.core.models.base import Frozen

CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
QUANT_GLOB = "quant_model_description*.json"
MAX_CONFIG_BYTES = 1 << 20          # a config.json is a few KB
MAX_INDEX_BYTES = 64 << 20          # DeepSeek-V3's index is about 9 MB (91k tensor names)
MAX_TENSORS = 2_000_000
MAX_NAME = 512


def problem(file: Path | str, message: str, key: str = "", hint: str = "") -> InventoryError:
    return InventoryError(f"cannot read the checkpoint file {file}",
                          problems=[Problem(message=message, path=key, file=str(file), hint=hint)])


def too_large(file: Path | str, limit: int) -> InventoryError:
    return problem(file, f"is more than the {limit:,} bytes such a file can be",
                   hint="point model.config_path at the checkpoint's own small files")


def parse_json(raw: bytes, path: Path | str, limit: int) -> dict:
    """The JSON object in ``raw`` (read from ``path``, at most ``limit`` + 1 bytes), or a problem naming it."""
    if len(raw) > limit:
        raise too_large(path, limit)
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise problem(path, f"is not valid JSON: {str(exc)[:200]}") from None
    except RecursionError:
        raise problem(path, "nests too deeply to be a checkpoint file") from None
    if not isinstance(data, dict):
        raise problem(path, f"holds a JSON {type(data).__name__}, not an object")
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def typed(model: type[Frozen], data: dict, path: Path | str, hint: str = "") -> Any:
    """`data` parsed into `model`; every validation error a problem naming the key."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [Problem(message=f"{e['msg']} (got {str(e.get('input'))[:80]!r})",
                            path=".".join(str(p) for p in e["loc"]), file=str(path), hint=hint)
                    for e in exc.errors()[:20]]
        raise InventoryError(f"the checkpoint file {path} does not say what deployctl needs",
                             problems=problems) from None


class IndexMetadata(Frozen):
    model_config = {"frozen": True, "extra": "ignore", "strict": True}
    total_size: int | None = Field(None, ge=0, le=1 << 50)


class IndexFile(Frozen):
    """model.safetensors.index.json: which shard holds each tensor, and the bytes of all tensors."""

    model_config = {"frozen": True, "extra": "ignore", "strict": True}
    metadata: IndexMetadata = IndexMetadata()
    weight_map: dict[str, str] = Field(max_length=MAX_TENSORS)


@dataclass(frozen=True)
class CheckpointFiles:
    directory: Path
    config: dict
    index: IndexFile | None = None
    quant_description: dict[str, str] = field(default_factory=dict)
    quant_file: str = ""


class FileSource(Protocol):
    """Where a checkpoint's small files come from: its directory on the controller's disk (io/checkpoint_files.py)
    or a checkpoint shipped in the package (core/packaged.py)."""

    def read(self, name: str, limit: int) -> bytes | None: ...   # at most limit + 1 bytes; None: no such file

    def names(self) -> list[str]: ...                            # the file names in the directory


def checkpoint_files(directory: Path | str, source: FileSource) -> CheckpointFiles:
    """config.json (required), the safetensors index and the msmodelslim description (when present), parsed."""
    directory = Path(directory)
    config_raw = source.read(CONFIG, MAX_CONFIG_BYTES)
    if config_raw is None:
        raise problem(directory / CONFIG, "cannot be read: No such file or directory", hint="give the directory that "
                      "holds the checkpoint's config.json (model.config_path)")
    config = parse_json(config_raw, directory / CONFIG, MAX_CONFIG_BYTES)
    index = None
    index_raw = source.read(INDEX, MAX_INDEX_BYTES)
    if index_raw is not None:
        index = typed(IndexFile, parse_json(index_raw, directory / INDEX, MAX_INDEX_BYTES), directory / INDEX)
        long = next((n for n in index.weight_map if len(n) > MAX_NAME), None)
        if long is not None:
            raise problem(directory / INDEX, f"names a tensor of {len(long)} characters", "weight_map")
    quant, quant_file = {}, ""
    found = sorted(n for n in source.names() if fnmatch.fnmatchcase(n, QUANT_GLOB))
    if found:
        raw = parse_json(source.read(found[0], MAX_INDEX_BYTES) or b"", directory / found[0], MAX_INDEX_BYTES)
        bad = next((k for k, v in raw.items() if not isinstance(v, str) or len(k) > MAX_NAME), None)
        if bad is not None:
            raise problem(directory / found[0], "maps a tensor to something other than a quantization type name",
                          bad[:80])
        quant, quant_file = raw, found[0]
    return CheckpointFiles(directory=directory, config=config, index=index, quant_description=quant,
                           quant_file=quant_file)


_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def classify(name: str, layers: int) -> str:
    """The weight class of one tensor name (model.layers.N.…; layers at N >= `layers` are MTP layers)."""
    m = _LAYER.search(name)
    if name.startswith("mtp.") or (m and int(m.group(1)) >= layers):
        return "mtp"
    if "embed_tokens" in name:
        return "embedding"
    if name.startswith("lm_head"):
        return "lm_head"
    if m is None:
        return "norms" if "norm" in name else "other"
    if ".indexer." in name:
        return "indexer"
    if "shared_expert" in name:       # shared_experts (DeepSeek, GLM) and shared_expert(_gate) (Qwen3-Next)
        return "shared_experts"
    if ".experts." in name:
        return "routed_experts"
    if name.endswith(("mlp.gate.weight", "block_sparse_moe.gate.weight")) or "e_score_correction_bias" in name:
        return "router"
    if ".o_proj." in name:
        return "o_proj"
    if ".self_attn." in name or ".linear_attn." in name:
        return "attention"
    if ".mlp." in name:
        return "dense_ffn"
    return "norms" if "norm" in name else "other"


def tensors_per_class(index: IndexFile, layers: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in index.weight_map:
        c = classify(name, layers)
        out[c] = out.get(c, 0) + 1
    return out
