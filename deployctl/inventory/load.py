"""Read an inventory YAML file into plain data, remembering the line of every key."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deployctl.errors import InventoryError, Problem

KeyPath = tuple[str | int, ...]


def format_path(path: KeyPath) -> str:
    """('nodes', 1, 'devices', 3, 'ip') -> 'nodes[1].devices[3].ip'."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass(frozen=True)
class RawInventory:
    """The inventory as parsed YAML, plus where each key came from."""

    data: Any
    file: str
    base_dir: Path
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line_of(self, path: KeyPath) -> int | None:
        """Line of the deepest known prefix of ``path`` (a missing key points at its parent)."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:end]))
            if line:
                return line
        return None

    def problem(self, path: KeyPath, message: str, hint: str = "") -> Problem:
        return Problem(message=message, path=format_path(path), file=self.file,
                       line=self.line_of(path), hint=hint)


MAX_NODES = 200_000  # YAML aliases can multiply a small file ("billion laughs"); inventories are small


def _build(loader, node, path: KeyPath, lines: dict, problems: list, file: str, stack: tuple = ()):
    import yaml

    if id(node) in stack:
        raise InventoryError(f"{file} is not a valid inventory", problems=[Problem(
            "a YAML alias refers to itself", format_path(path), file, node.start_mark.line + 1,
            hint="remove the recursive *alias")])
    if len(lines) > MAX_NODES:
        raise InventoryError(f"{file} is too large after expanding YAML aliases", problems=[Problem(
            f"more than {MAX_NODES} values", "", file, node.start_mark.line + 1,
            hint="an inventory lists a few hundred values; check for aliases that multiply")])
    stack = stack + (id(node),)
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int)):
                problems.append(Problem(f"mapping key {key!r} is not a string", format_path(path),
                                        file, key_node.start_mark.line + 1))
                continue
            key = str(key)
            child = path + (key,)
            if key in out:
                problems.append(Problem(
                    f"key '{key}' appears twice (first on line {lines[child]})",
                    format_path(child), file, key_node.start_mark.line + 1,
                    hint="remove one of them: YAML keeps only the last, which hides mistakes"))
                continue
            lines[child] = key_node.start_mark.line + 1
            out[key] = _build(loader, value_node, child, lines, problems, file, stack)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(loader, item, path + (i,), lines, problems, file, stack)
                for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


def parse_yaml(text: str, file: str, base_dir: Path) -> RawInventory:
    """Parse YAML text; raise InventoryError naming the line on syntax errors."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise InventoryError(f"{file} is empty", hint="start from inventories/sample.yaml")
        lines: dict[KeyPath, int] = {}
        problems: list[Problem] = []
        data = _build(loader, node, (), lines, problems, file)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        what = " ".join(s for s in (exc.context, exc.problem) if s)
        raise InventoryError(f"{file} is not valid YAML", problems=[Problem(
            f"YAML syntax: {what}", "", file, line,
            hint="check indentation and quoting on this line and the one above")]) from None
    finally:
        loader.dispose()
    if problems:
        n = len(problems)
        raise InventoryError(f"{file}: {n} problem{'s' if n != 1 else ''}", problems=problems)
    if not isinstance(data, dict):
        raise InventoryError(f"{file} must be a YAML mapping with cluster/engine/model/layout/nodes",
                             problems=[Problem("top level is not a mapping", "", file, 1)],
                             hint="start from inventories/sample.yaml")
    return RawInventory(data=data, file=file, base_dir=base_dir, lines=lines)


def load_inventory(path: str | Path) -> RawInventory:
    """Read an inventory file from disk (no network, no other side effects)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InventoryError(f"inventory file {path} does not exist",
                             hint="pass -i with the path to your inventory YAML "
                                  "(see inventories/sample.yaml)") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise InventoryError(f"cannot read inventory {path}: {exc}") from None
    return parse_yaml(text, str(path), p.parent)
