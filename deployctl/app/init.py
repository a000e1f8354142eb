"""`deployctl init`: the commented sample inventory and the examples, from the installed package, into a
directory of the user's (the wheel carries them: deployctl/samples/), with the JSON Schema editors read.

Every inventory's first line names the schema for the YAML language server; in the package it is the
checkout's path (../deployctl/schema/inventory.schema.json), which a user does not have, so the written files
name the inventory.schema.json written beside them instead (`deployctl schema` output).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path

TOP = "inventories"
SCHEMA = f"{TOP}/inventory.schema.json"
SAMPLE = f"{TOP}/sample.yaml"
MODELINE = b"# yaml-language-server: $schema="


@dataclass(frozen=True)
class InitResult:
    directory: Path
    files: list[Path]          # every file written, the sample first
    sample: Path               # DIR/inventories/sample.yaml


def _point_at_schema(rel: str, data: bytes) -> bytes:
    """The file with its schema modeline (if it has one) naming SCHEMA relative to the file."""
    if not data.startswith(MODELINE):
        return data
    first, nl, rest = data.partition(b"\n")
    target = posixpath.relpath(SCHEMA, posixpath.dirname(rel))
    return MODELINE + target.encode() + nl + rest


def init_samples(directory: Path, force: bool = False) -> InitResult:
    """Write the packaged inventories/ tree and inventories/inventory.schema.json under ``directory``; refuse
    (exit 2) files that exist unless ``force``."""
    from deployctl.core.schema import schema_text
    from deployctl.io.samples import packaged_samples, write_new_files

    files = {rel: _point_at_schema(rel, data) for rel, data in packaged_samples().items()}
    files = {SAMPLE: files.pop(SAMPLE), **files, SCHEMA: schema_text().encode("utf-8")}
    written = write_new_files(directory, files, force)
    return InitResult(directory, written, directory.joinpath(*SAMPLE.split("/")))
