"""An inventory's YAML text into plain data, remembering the line of every key (pure: the bytes come in; reading
the file is deployctl/io/inventory_file.py).

Hostile input is refused with a line (or byte offset) and a hint, never a traceback or a hang:
files that are not regular, larger than MAX_BYTES, not UTF-8 or holding control characters; YAML
tags; nesting deeper than MAX_DEPTH; aliases expanding to more than ALIAS_RATIO times the values written (at
least ALIAS_FLOOR, at most MAX_ALIAS_VALUES; "billion laughs"). These bound what a file's author controls; the
number of values is not limited: the data is built from the parser's events (no YAML node tree), so memory
follows the bytes (docs/dev/benchmarks.md: the worst 16 MB file), and an honest inventory of 8,192 servers with
their device IPs (4 MB, ~730,000 values) loads.
"""

from __future__ import annotations

import gc
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NoReturn

from deployctl.core.errors import InventoryError, Problem

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
MAX_ALIAS_VALUES = 10_000       # values added by expanding *aliases ("billion laughs" files), and at most
ALIAS_RATIO = 1                 # as many as the file writes (at least ALIAS_FLOOR): aliases repeat a value
ALIAS_FLOOR = 200               # or a block; they do not turn a 500-byte file into a 50 kB plan. (go-yaml
                                # v2/v3 bound aliases by a ratio too, decode.go allowedAliasRatio, far more
                                # loosely: a general decoder; an inventory repeats little)
TAG_MEMO = 4096                 # distinct plain scalars whose implicit type is remembered while parsing

_YAML_TAG_PREFIX = "tag:yaml.org,2002:"
_STR = _YAML_TAG_PREFIX + "str"
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


def _loader_class() -> type:
    """A YAML event source: libyaml's parser when available (fast; it refuses more than 1,000 nested levels
    itself), else PyYAML's pure Python one; with PyYAML's resolver (plain scalars' implicit types) and safe
    constructors (ints, floats, booleans, null, dates)."""
    from yaml.constructor import SafeConstructor
    from yaml.resolver import Resolver

    parser_first: tuple[Any, ...]
    try:
        from yaml._yaml import CParser   # what yaml.cyaml exports (its stub does not re-export it)

        parser_first = (CParser,)
    except ImportError:   # PyYAML without libyaml: the pure Python reader, scanner and parser
        from yaml.reader import Reader
        from yaml.scanner import Scanner
        from yaml.parser import Parser

        parser_first = (Reader, Scanner, Parser)

    class Loader(*parser_first, SafeConstructor, Resolver):   # type: ignore[misc]  # bases chosen at run time
        def __init__(self, text: str):
            for base in parser_first:
                base.__init__(self, text)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    return Loader


def _count_values(text: str) -> int:
    """Values (scalars, keys included, lists, mappings; not aliases) the text writes: the alias budget's measure (one pass of the
    parser, only for files that name anchors)."""
    import yaml

    loader = _loader_class()(text)
    count = 0
    try:
        while loader.check_event():
            if isinstance(loader.get_event(), (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                count += 1
    finally:
        loader.dispose()
    return count


class _Builder:
    """Builds plain data straight from the parser's events (no node tree: its memory is the data's and the key
    lines'), recording the line of each key path. An alias replays the events its anchor recorded, at its own
    path, each value counted against the alias budget."""

    def __init__(self, loader: Any, file: str, written: int, alias_budget: int, anchored: bool = True):
        import yaml

        self.yaml = yaml
        self.loader = loader
        self.file = file
        self.written = written                   # values the file writes (counted only when it names anchors)
        self.alias_budget = alias_budget
        self.lines: dict[KeyPath, int] = {}
        self.problems: list[Problem] = []
        self.anchors: dict[str, list] = {}       # anchor -> the events of its value
        self.recording: list[tuple[str, list]] = []    # anchors whose values are being read (innermost last)
        self.replay: list[Any] = []              # iterators over anchored events being expanded
        self.expanded = 0                        # values built again through aliases
        self.depth = 0
        self.tags: dict[str, str] = {}           # plain scalar -> its implicit tag (bounded: TAG_MEMO)
        self.resolve_tag = loader.resolve        # PyYAML's Resolver (implicit types of plain scalars)
        # no anchor, so nothing to record or replay: the parser's own events (a call less per value)
        self.next_event: Callable[[], Any] = self.events if anchored else loader.get_event

    def refuse(self, title: str, message: str, path: KeyPath, line: int, hint: str) -> NoReturn:
        raise InventoryError(title, problems=[Problem(message, format_path(path), self.file, line, hint=hint)])

    def events(self) -> Any:
        """The next event: of the alias being expanded, else of the file (recorded for the open anchors: an alias
        inside an anchored value is recorded as the alias, expanded again when the anchor is)."""
        while self.replay:
            event = next(self.replay[-1], None)
            if event is not None:
                return event
            self.replay.pop()
        event = self.loader.get_event()
        if self.recording:
            for _, events in self.recording:
                events.append(event)
        return event

    def implicit_tag(self, event: Any) -> str:
        """PyYAML's Resolver.resolve for a scalar event, remembered for the values a file repeats (ids, keys)."""
        if not event.implicit[0]:                # quoted: a string
            return _STR
        tag = self.tags.get(event.value)
        if tag is None:
            tag = self.resolve_tag(self.yaml.ScalarNode, event.value, event.implicit)
            if len(self.tags) < TAG_MEMO:
                self.tags[event.value] = tag
        return tag

    def document(self) -> tuple[bool, Any]:
        """(False, None) for an empty stream, else (True, the data of its single document)."""
        yaml = self.yaml
        self.loader.get_event()                                    # StreamStart
        if self.loader.check_event(yaml.StreamEndEvent):
            return False, None
        self.loader.get_event()                                    # DocumentStart
        data = self.build(self.next_event(), ())
        self.loader.get_event()                                    # DocumentEnd
        if not self.loader.check_event(yaml.StreamEndEvent):
            event = self.loader.get_event()
            raise yaml.composer.ComposerError("expected a single document in the stream", None,
                                              "but found another document", event.start_mark)
        return True, data

    def build(self, event: Any, path: KeyPath, parent_line: int = 0) -> Any:
        yaml = self.yaml
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent):
            return self.alias(event, path, line, parent_line)
        if event.tag is not None and not self.replay:
            raise InventoryError(f"{self.file} uses a YAML tag", problems=[Problem(
                f"YAML tag '{_short(_tag_name(event.tag))}' is not allowed: inventories hold plain "
                "strings, numbers, true/false, lists and mappings", "", self.file, line,
                hint="remove the tag; quote the value if it must stay a string")])
        if self.replay:
            self.expanded += 1
            if self.expanded > self.alias_budget:
                self.refuse(f"{self.file} is too large after expanding YAML aliases",
                            f"YAML aliases expand to more than {self.alias_budget} values (the file "
                            f"writes {self.written})", path, line,
                            "an inventory repeats a few values through *aliases; check for aliases that "
                            "multiply (a list of aliases of lists of aliases ...)")
        self.depth += 1
        if self.depth > MAX_DEPTH:
            if self.replay:
                self.refuse(f"{self.file} is nested too deeply", f"values nested more than {MAX_DEPTH} levels "
                            "deep through aliases", path, line, "check for aliases inside the values they name")
            raise InventoryError(f"{self.file} is nested too deeply", problems=[Problem(
                f"values nested more than {MAX_DEPTH} levels deep", "", self.file, line,
                hint="an inventory nests 5 levels (nodes[0].devices[3].ip); check the brackets "
                     "and indentation around this line")])
        # a value on its parent's line needs no entry (line_of finds the parent's); a key's line wins over its
        # value's (set by mapping): what this value's children compare with is the line recorded for it
        own = self.lines.setdefault(path, line) if line != parent_line else line
        anchor = event.anchor if not self.replay else None
        if anchor is not None:
            self.recording.append((anchor, [event]))
        try:
            if isinstance(event, yaml.ScalarEvent):
                return self.scalar(event, path, line)
            if isinstance(event, yaml.SequenceStartEvent):
                out, i = [], 0
                while not isinstance(item := self.next_event(), yaml.SequenceEndEvent):
                    out.append(self.build(item, path + (i,), own))
                    i += 1
                return out
            return self.mapping(path, own)
        finally:
            self.depth -= 1
            if anchor is not None:
                name, events = self.recording.pop()
                self.anchors[name] = events

    def alias(self, event: Any, path: KeyPath, line: int, parent_line: int) -> Any:
        name = event.anchor
        if any(name == open_name for open_name, _ in self.recording):
            self.refuse(f"{self.file} is not a valid inventory", "a YAML alias refers to itself", path, line,
                        "remove the recursive *alias")
        if name not in self.anchors:
            raise self.yaml.composer.ComposerError(None, None, f"found undefined alias {name!r}", event.start_mark)
        self.replay.append(iter(self.anchors[name]))
        depth = len(self.replay)
        first = self.next_event()
        value = self.build(first, path, parent_line)
        while len(self.replay) >= depth:         # a scalar anchor: its one event is read, drop the iterator
            if next(self.replay[-1], None) is None:
                self.replay.pop()
        return value

    def scalar(self, event: Any, path: KeyPath, line: int) -> Any:
        yaml = self.yaml
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.implicit_tag(event)
        if tag == _STR:
            return event.value
        if tag == _YAML_TAG_PREFIX + "value":      # a lone '=' (YAML 1.1 "value" key): just text
            return event.value
        if tag == _YAML_TAG_PREFIX + "merge":
            self.refuse(f"{self.file} uses a YAML merge key", "YAML merge keys ('<<') are not supported",
                        path, line, "write the keys out (an inventory repeats little)")
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            return self.loader.yaml_constructors[tag](self.loader, node)
        except (ValueError, OverflowError, yaml.YAMLError) as exc:
            kind = _tag_name(tag)[2:] if tag.startswith(_YAML_TAG_PREFIX) else "value"
            reason = str(exc).splitlines()[0] if isinstance(exc, ValueError) else "unreadable"
            self.problems.append(Problem(
                f"'{_short(event.value)}' reads as a {kind} but is not a valid one ({_short(reason, 80)})",
                format_path(path), self.file, line, hint="quote it if it is text"))
            return event.value

    def discard(self, event: Any, path: KeyPath) -> None:
        """Read a value that is not kept (a duplicate key's, a refused key's): its anchors still count."""
        problems = len(self.problems)
        self.build(event, path)
        del self.problems[problems:]

    def mapping(self, path: KeyPath, line: int) -> dict[str, Any]:
        yaml = self.yaml
        out: dict = {}
        while not isinstance(key_event := self.next_event(), yaml.MappingEndEvent):
            key_line = key_event.start_mark.line + 1
            if isinstance(key_event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                kind = "list" if isinstance(key_event, yaml.SequenceStartEvent) else "mapping"
                self.problems.append(Problem(f"mapping key is a {kind}, not a string", format_path(path), self.file,
                                             key_line, hint="keys are plain names, e.g. address:"))
                self.discard(key_event, path + ("?",))
                self.discard(self.next_event(), path + ("?",))
                continue
            if isinstance(key_event, yaml.ScalarEvent) and key_event.anchor is None and key_event.tag is None:
                key = self.scalar(key_event, path, key_line)
            else:                       # a tag (refused), an anchor (recorded) or an alias (expanded) on a key
                key = self.build(key_event, path + ("?",), line)
            if isinstance(key, (list, dict)):
                self.problems.append(Problem(f"mapping key is a {'list' if isinstance(key, list) else 'mapping'}, "
                                             "not a string", format_path(path), self.file, key_line,
                                             hint="keys are plain names, e.g. address:"))
                self.discard(self.next_event(), path + ("?",))
                continue
            if not isinstance(key, (str, int)):
                self.problems.append(Problem(f"mapping key {_short(repr(key))} is not a string",
                                             format_path(path), self.file, key_line,
                                             hint="keys are plain names, e.g. address:"))
                self.discard(self.next_event(), path + ("?",))
                continue
            key = str(key)
            child = path + (key,)
            if key in out:
                self.problems.append(Problem(
                    f"key '{_short(key)}' appears twice (first on line {self.lines.get(child, line)})",
                    format_path(child), self.file, key_line,
                    hint="remove one of them: YAML keeps only the last, which hides mistakes"))
                self.discard(self.next_event(), child + ("?",))
                continue
            self.lines[child] = key_line
            out[key] = self.build(self.next_event(), child, key_line)
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

    from deployctl.core.input.raw_fast import fast_document

    _check_text(text, file)
    loaders: list[Any] = []

    def fresh() -> Any:
        loaders.append(_loader_class()(text))
        return loaders[-1]

    # The cyclic GC rescans every live container on each full collection: with it on, building the data of
    # many thousands of values grows faster than linearly. The values are bounded by MAX_BYTES and the alias
    # budget, so pausing it while parsing is safe.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        # plain keys and values (every honest inventory) are built in one loop; anything else by _Builder
        fast = None if "&" in text else fast_document(fresh(), MAX_DEPTH, TAG_MEMO)
        if fast is not None:
            (data, lines), problems = fast, []
        else:
            # only a file that names anchors can expand aliases: its budget needs the values it writes (a second
            # pass)
            written = _count_values(text) if "&" in text else 0
            builder = _Builder(fresh(), file, written,
                               min(MAX_ALIAS_VALUES, max(ALIAS_FLOOR, ALIAS_RATIO * written)), anchored="&" in text)
            found, data = builder.document()
            if not found:
                raise InventoryError(f"{file} is empty",
                                     hint="start from the commented sample `deployctl init` writes")
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
        for loader in loaders:
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
