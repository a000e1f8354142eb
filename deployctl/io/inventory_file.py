"""Read an inventory file: a regular file of at most MAX_BYTES, decoded and parsed by the core
(deployctl/core/input/raw.py), which remembers the line of every key."""

from __future__ import annotations

import os
from pathlib import Path

from deployctl.io.localfile import NotRegular, TooLarge, read_regular
from deployctl.core.errors import InventoryError
from deployctl.core.input.local_files import LocalFiles
from deployctl.core.input.raw import MAX_BYTES, RawInventory, decode_inventory, parse_yaml


def read_inventory_bytes(path: str | Path) -> bytes:
    """The bytes of a regular file of at most MAX_BYTES (FIFOs, devices and directories are refused)."""
    too_large = "an inventory is a few KB: is this the right file?"
    try:
        return read_regular(path, MAX_BYTES, follow=True)
    except FileNotFoundError:
        raise InventoryError(f"inventory file {path} does not exist",
                             hint="pass -i with the path to your inventory YAML (`deployctl init` writes "
                                  "a commented sample to start from)") from None
    except NotRegular as exc:
        raise InventoryError(f"cannot read inventory {path}: it is {exc.kind}",
                             hint="pass -i with the path of the inventory YAML file itself") from None
    except TooLarge as exc:
        if exc.size is None:      # it grew while being read
            raise InventoryError(f"inventory {path} is too large: more than {MAX_BYTES // 2**20} MiB",
                                 hint=too_large) from None
        raise InventoryError(f"inventory {path} is too large: {exc.size} bytes ({exc.size / 2**20:.1f} MiB; "
                             f"the limit is {MAX_BYTES // 2**20} MiB)", hint=too_large) from None
    except OSError as exc:
        raise InventoryError(f"cannot read inventory {path}: {exc.strerror or exc}") from None


def load_inventory(path: str | Path) -> RawInventory:
    """Read an inventory file from disk (no network, no other side effects)."""
    p = Path(path)
    text = decode_inventory(read_inventory_bytes(p), str(path))
    return parse_yaml(text, str(path), p.parent)


def with_workload(raw: RawInventory, workload: str) -> RawInventory:
    """``raw`` with kubernetes.workload set (`--target lws`: the operator's choice over the file's); a kubernetes
    key that is not a mapping is left for validation to report."""
    data = raw.data if isinstance(raw.data, dict) else None
    if data is not None:
        k = data.setdefault("kubernetes", {})
        if k is None:
            k = data["kubernetes"] = {}
        if isinstance(k, dict):
            k["workload"] = workload
    return raw


def read_local_files(raw: RawInventory, read_text=None) -> LocalFiles:
    """The files the inventory names on this machine, read before validation (the core never opens them):
    every nodes[].hccn_conf copy (relative to the inventory file) and model.config_path's checkpoint.
    ``read_text``: how an hccn.conf copy is read (default: read_hccn_conf, bounded, regular files only)."""
    from deployctl.io.hccn_file import read_hccn_conf

    read_text = read_text or read_hccn_conf
    data = raw.data if isinstance(raw.data, dict) else {}
    hccn: dict[str, str | Exception] = {}
    nodes = data.get("nodes")
    for node in nodes if isinstance(nodes, list) else []:
        name = node.get("hccn_conf") if isinstance(node, dict) else None
        if isinstance(name, str) and name and name not in hccn:
            try:
                hccn[name] = read_text(raw.base_dir / name)
            except Exception as exc:          # reported by validation, naming the node's key
                hccn[name] = exc
    model = data.get("model")
    config_path = model.get("config_path") if isinstance(model, dict) else None
    checkpoint = None
    if isinstance(config_path, str) and config_path:
        from deployctl.io.checkpoint_files import read_checkpoint

        try:   # relative to the inventory file; ~ is the user's home; absolute stays as given
            checkpoint = read_checkpoint(raw.base_dir / Path(config_path).expanduser())
        except InventoryError as exc:
            checkpoint = exc
    return LocalFiles(hccn=hccn, checkpoint=checkpoint, home=os.path.expanduser("~"))
