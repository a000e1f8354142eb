"""An inventory's YAML text into plain data, remembering the line of every key (pure: the bytes come in; reading
the file is deployctl/io/inventory_file.py).

Hostile input is refused with a line (or byte offset) and a hint, never a traceback or a hang:
files that are not regular, larger than MAX_BYTES, not UTF-8 or holding control characters; YAML
tags; nesting deeper than MAX_DEPTH; more than MAX_VALUES values; aliases expanding to more than
ALIAS_RATIO times the values written (at least ALIAS_FLOOR, at most MAX_ALIAS_VALUES; "billion laughs").
"""

from __future__ import annotations

import gc
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from deployctl.core.errors import InventoryError, Problem

if TYPE_CHECKING:
    from yaml.nodes import Node, ScalarNode

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
    base_dir: Path | None      # None: an inventory built in memory
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


MAX_BYTES = 16 * 1024 * 1024   # refused before reading: an inventory is a few KB (1 MB for thousands of nodes)
MAX_DEPTH = 64                  # an inventory nests 5 levels; deeper nesting is a fuzzer or a broken generator
MAX_VALUES = 250_000            # values written in the file (a 1 MB inventory has about 80 000)
MAX_ALIAS_VALUES = 10_000       # values added by expanding *aliases ("billion laughs" files), and at most
ALIAS_RATIO = 1                 # as many as the file writes (at least ALIAS_FLOOR): aliases repeat a value
ALIAS_FLOOR = 200               # or a block; they do not turn a 500-byte file into a 50 kB plan. (go-yaml
                                # v2/v3 bound aliases by a ratio too, decode.go allowedAliasRatio, far more
                                # loosely: a general decoder; an inventory repeats little)
MAX_NODES = MAX_VALUES          # compatibility name

_YAML_TAG_PREFIX = "tag:yaml.org,2002:"
_NON_PRINTABLE = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_CONTROL_NAMES = {0: "NUL", 0x1b: "ESC", 0x7f: "DEL", 0x08: "backspace", 0x0c: "form feed", 0x0b: "vertical tab"}
_BOMS = (  # longest first: the UTF-32 LE BOM starts with the UTF-16 LE one
    (b"\xff\xfe\x00\x00", "UTF-32", "little-endian"), (b"\x00\x00\xfe\xff", "UTF-32", "big-endian"),
    (b"\xff\xfe", "UTF-16", "little-endian"), (b"\xfe\xff", "UTF-16", "big-endian"),
)


def _tag_name(tag: str) -> str:
    return "!!" + tag[len(_YAML_TAG_PREFIX):] if tag.startswith(_YAML_TAG_PREFIX) else tag


def _short(value: str, limit: int = 60) -> str:
    return value if len(value) <= limit else value[:limit] + "…"


def _char_name(ch: str) -> str:
    code = ord(ch)
    esc = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    name = _CONTROL_NAMES.get(code)
    return f"{esc} ({name})" if name else esc


def _composer_class() -> type:
    """A YAML loader: libyaml's parser when available (fast), Python's composer (depth, tags, counts)."""
    import yaml
    from yaml.composer import Composer
    from yaml.constructor import SafeConstructor
    from yaml.resolver import Resolver

    parser_first: tuple[Any, ...]
    try:
        from yaml._yaml import CParser   # what yaml.cyaml exports (its stub does not re-export it)

        parser_first = (Composer, CParser)
    except ImportError:   # PyYAML without libyaml: the pure Python reader, scanner and parser
        from yaml.reader import Reader
        from yaml.scanner import Scanner
        from yaml.parser import Parser

        parser_first = (Reader, Scanner, Parser, Composer)

    class Loader(*parser_first, SafeConstructor, Resolver):   # type: ignore[misc]  # bases chosen at run time
        def __init__(self, text: str, file: str):
            for base in parser_first:
                if base is not Composer:
                    base.__init__(self, text)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self.file = file
            self.depth = 0
            self.values = 0

        get_single_node = Composer.get_single_node
        compose_document = Composer.compose_document

        # index: typed as PyYAML's stub has it (the composer passes a mapping value's key node there too)
        def compose_node(self, parent: Node | None, index: int) -> Node | None:
            event = self.peek_event()
            line = event.start_mark.line + 1
            if not isinstance(event, yaml.AliasEvent):
                tag = event.tag
                if tag is not None:
                    raise InventoryError(f"{self.file} uses a YAML tag", problems=[Problem(
                        f"YAML tag '{_short(_tag_name(tag))}' is not allowed: inventories hold plain "
                        "strings, numbers, true/false, lists and mappings", "", self.file, line,
                        hint="remove the tag; quote the value if it must stay a string")])
                self.values += 1
                if self.values > MAX_VALUES:
                    raise InventoryError(f"{self.file} holds too many values", problems=[Problem(
                        f"more than {MAX_VALUES} values (this one is on line {line})", "", self.file, line,
                        hint="an inventory lists a few thousand values; split the cluster into inventories")])
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise InventoryError(f"{self.file} is nested too deeply", problems=[Problem(
                    f"values nested more than {MAX_DEPTH} levels deep", "", self.file, line,
                    hint="an inventory nests 5 levels (nodes[0].devices[3].ip); check the brackets "
                         "and indentation around this line")])
            try:
                return Composer.compose_node(self, parent, index)
            finally:
                self.depth -= 1

    return Loader


class _Builder:
    """Turns composed YAML nodes into plain data, recording the line of each key path."""

    def __init__(self, loader: Any, file: str, alias_budget: int = MAX_ALIAS_VALUES):
        import yaml

        self.yaml = yaml
        self.loader = loader
        self.file = file
        self.lines: dict[KeyPath, int] = {}
        self.problems: list[Problem] = []
        self.active: set[int] = set()          # ids of the collections being built (recursive aliases)
        self.seen: set[int] = set()            # ids of the nodes built once: seeing one again is an alias
        self.expanded = 0                      # values built again through aliases
        self.alias_budget = alias_budget

    def refuse(self, title: str, message: str, path: KeyPath, line: int, hint: str) -> NoReturn:
        raise InventoryError(title, problems=[Problem(message, format_path(path), self.file, line, hint=hint)])

    def build(self, node: Node, path: KeyPath, aliased: bool = False) -> Any:
        yaml = self.yaml
        line = node.start_mark.line + 1
        if id(node) in self.active:
            self.refuse(f"{self.file} is not a valid inventory", "a YAML alias refers to itself", path, line,
                        "remove the recursive *alias")
        if aliased or id(node) in self.seen:
            aliased = True
            self.expanded += 1
            if self.expanded > self.alias_budget:
                self.refuse(f"{self.file} is too large after expanding YAML aliases",
                            f"YAML aliases expand to more than {self.alias_budget} values (the file "
                            f"writes {self.loader.values})", path, line,
                            "an inventory repeats a few values through *aliases; check for aliases that "
                            "multiply (a list of aliases of lists of aliases ...)")
        else:
            self.seen.add(id(node))
        if len(path) > MAX_DEPTH:
            self.refuse(f"{self.file} is nested too deeply", f"values nested more than {MAX_DEPTH} levels deep "
                        "through aliases", path, line, "check for aliases inside the values they name")
        self.lines.setdefault(path, line)
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node, path, line)
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.build(item, path + (i,), aliased) for i, item in enumerate(node.value)]
            return self.mapping(node, path, aliased)
        finally:
            self.active.discard(id(node))

    def scalar(self, node: ScalarNode, path: KeyPath, line: int) -> Any:
        tag = node.tag
        if tag == _YAML_TAG_PREFIX + "str":
            return node.value
        if tag == _YAML_TAG_PREFIX + "value":      # a lone '=' (YAML 1.1 "value" key): just text
            return node.value
        if tag == _YAML_TAG_PREFIX + "merge":
            self.refuse(f"{self.file} uses a YAML merge key", "YAML merge keys ('<<') are not supported",
                        path, line, "write the keys out (an inventory repeats little)")
        try:
            return self.loader.construct_object(node, deep=True)
        except (ValueError, OverflowError, self.yaml.YAMLError) as exc:
            kind = _tag_name(tag)[2:] if tag.startswith(_YAML_TAG_PREFIX) else "value"
            reason = str(exc).splitlines()[0] if isinstance(exc, ValueError) else "unreadable"
            self.problems.append(Problem(
                f"'{_short(node.value)}' reads as a {kind} but is not a valid one ({_short(reason, 80)})",
                format_path(path), self.file, line, hint="quote it if it is text"))
            return node.value

    def mapping(self, node: Node, path: KeyPath, aliased: bool) -> dict[str, Any]:
        yaml = self.yaml
        out: dict = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                kind = "list" if isinstance(key_node, yaml.SequenceNode) else "mapping"
                self.problems.append(Problem(f"mapping key is a {kind}, not a string", format_path(path),
                                             self.file, key_line, hint="keys are plain names, e.g. address:"))
                continue
            if key_node.tag == _YAML_TAG_PREFIX + "merge":
                self.refuse(f"{self.file} uses a YAML merge key", "YAML merge keys ('<<') are not supported",
                            path, key_line, "write the keys out (an inventory repeats little)")
            key = self.scalar(key_node, path, key_line)
            if not isinstance(key, (str, int)):
                self.problems.append(Problem(f"mapping key {_short(repr(key))} is not a string",
                                             format_path(path), self.file, key_line,
                                             hint="keys are plain names, e.g. address:"))
                continue
            key = str(key)
            child = path + (key,)
            if key in out:
                self.problems.append(Problem(
                    f"key '{_short(key)}' appears twice (first on line {self.lines[child]})",
                    format_path(child), self.file, key_line,
                    hint="remove one of them: YAML keeps only the last, which hides mistakes"))
                continue
            self.lines[child] = key_line
            out[key] = self.build(value_node, child, aliased)
        return out


def _check_text(text: str, file: str) -> None:
    """Refuse characters YAML does not allow, naming the byte offset, line and column."""
    m = _NON_PRINTABLE.search(text)
    if m is None:
        return
    pos = m.start()
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    offset = len(text[:pos].encode("utf-8"))
    ch = m.group()
    hint = "remove it (YAML text holds no control characters); write \\t or \\x.. escapes inside double quotes"
    if ch == "\x00":
        nuls = text.count("\x00", 0, 4096)
        if nuls * 3 >= min(len(text), 4096):
            hint = "the file looks saved as UTF-16 without a byte-order mark: save it as UTF-8"
        else:
            hint = "remove it: YAML text holds no NUL bytes (is this the inventory file?)"
    raise InventoryError(f"{file} is not YAML text", problems=[Problem(
        f"control character {_char_name(ch)} at byte {offset} (line {line}, column {column})",
        "", file, line, hint=hint)])


def decode_inventory(data: bytes, file: str) -> str:
    """UTF-8 bytes -> text; other encodings are refused with the byte offset and line."""
    for bom, name, order in _BOMS:
        if data.startswith(bom):
            raise InventoryError(f"{file} is not UTF-8", problems=[Problem(
                f"saved as {name} ({order}, byte-order mark {bom.hex(' ')} at byte 0): save it as UTF-8",
                "", file, 1, hint=f"e.g. `iconv -f {name} -t UTF-8 {file}`")])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        pos = exc.start
        line = data.count(b"\n", 0, pos) + 1
        column = pos - (data.rfind(b"\n", 0, pos) + 1) + 1
        raise InventoryError(f"{file} is not UTF-8", problems=[Problem(
            f"not UTF-8 at byte {pos} (line {line}, column {column}): byte \\x{data[pos]:02x}, {exc.reason}",
            "", file, line,
            hint="save the file as UTF-8 (e.g. `iconv -f latin1 -t UTF-8` for Latin-1/Windows text)")]) from None


def parse_yaml(text: str, file: str, base_dir: Path) -> RawInventory:
    """Parse YAML text; raise InventoryError naming the line on syntax errors."""
    import yaml

    _check_text(text, file)
    loader = _composer_class()(text, file)
    # The cyclic GC rescans every live node on each full collection: with it on, parsing many
    # thousands of nodes grows faster than linearly (2.2 s instead of 1.0 s for 1 MB). Nodes are
    # bounded by MAX_VALUES and MAX_ALIAS_VALUES, so pausing it while parsing is safe.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        node = loader.get_single_node()
        if node is None:
            raise InventoryError(f"{file} is empty", hint="start from the commented sample `deployctl init` writes")
        builder = _Builder(loader, file, min(MAX_ALIAS_VALUES, max(ALIAS_FLOOR, ALIAS_RATIO * loader.values)))
        data = builder.build(node, ())
        lines, problems = builder.lines, builder.problems
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        what = " ".join(s for s in (exc.context, exc.problem) if s)
        raise InventoryError(f"{file} is not valid YAML", problems=[Problem(
            f"YAML syntax: {what}", "", file, line,
            hint="check indentation and quoting on this line and the one above")]) from None
    except yaml.YAMLError as exc:   # e.g. a reader error of libyaml: the checks above should catch it first
        raise InventoryError(f"{file} is not valid YAML", problems=[Problem(
            f"YAML: {_short(str(exc).splitlines()[0], 200)}", "", file, None,
            hint="save the file as plain UTF-8 YAML text")]) from None
    except RecursionError:          # MAX_DEPTH keeps well below the interpreter's limit
        raise InventoryError(f"{file} is nested too deeply", problems=[Problem(
            "values nested too deeply", "", file, None, hint="check the brackets and indentation")]) from None
    finally:
        loader.dispose()
        if gc_was_enabled:
            gc.enable()
    if problems:
        n = len(problems)
        raise InventoryError(f"{file}: {n} problem{'s' if n != 1 else ''}", problems=problems)
    if not isinstance(data, dict):
        raise InventoryError(f"{file} must be a YAML mapping with cluster/engine/model/layout/nodes",
                             problems=[Problem("top level is not a mapping", "", file, 1)],
                             hint="start from the commented sample `deployctl init` writes")
    return RawInventory(data=data, file=file, base_dir=base_dir, lines=lines)
