"""The common case of raw.py's builder, without its per-value calls: a single document of mappings, lists and plain
or quoted scalars of the basic types (text, integers, floats, booleans, null), with no anchor, alias, tag,
duplicate key, non-text key or unreadable value. Anything else (or nesting near MAX_DEPTH) makes it give up
(None) at that event, and raw.py builds the file again with the builder that reports it: the data and key lines
are the same either way (tests/core/input/test_raw_fast.py compares them on every inventory of the tests and on
generated ones). An 8,192-server inventory (877,000 events) is built in 2/3 of the time.
"""

from __future__ import annotations

from typing import Any

KeyPath = tuple[str | int, ...]

_P = "tag:yaml.org,2002:"
_STR = _P + "str"
_BASIC = frozenset(_P + t for t in ("int", "float", "bool", "null"))
# PyYAML's implicit resolvers (resolver.py) tell digits apart only as 0, 1, 2-5, 6-7 and 8-9 ([0-1], [0-7],
# [1-9], [0-5], [0-9], hex) and look resolvers up by the first character, the same list for every digit: a plain
# scalar resolves as its "shape" with each digit replaced by its class's first does (tests/core/input/
# test_raw_fast.py checks it against the resolver), so 8,192 device IPs resolve once, not 131,072 times
_SHAPE = str.maketrans("0123456789", "0122226688")


def fast_document(loader: Any, max_depth: int, memo: int) -> tuple[dict, dict[KeyPath, int]] | None:
    """(data, lines) of the document ``loader`` parses (a fresh one: its events are consumed), or None where the
    full builder must say more (``max_depth``: raw.py's bound, given up on a little before it; ``memo``: how many
    distinct scalars' types to remember). Syntax errors are the parser's, raised at the same event as the full
    builder's."""
    import yaml

    get = loader.get_event
    resolve, constructors = loader.resolve, loader.yaml_constructors
    scalar_node = yaml.ScalarNode
    scalar_event, alias_event = yaml.ScalarEvent, yaml.AliasEvent
    map_start, map_end = yaml.MappingStartEvent, yaml.MappingEndEvent
    seq_start, seq_end = yaml.SequenceStartEvent, yaml.SequenceEndEvent
    tags: dict[str, str] = {}                           # shape -> tag
    basic: dict[str, Any] = {}                          # text -> its int, float, bool or None
    lines: dict[KeyPath, int] = {}

    def value(event: Any) -> Any:
        if event.tag is not None or event.anchor is not None:
            raise _GiveUp
        text = event.value
        if not event.implicit[0]:                       # quoted: text
            return text
        tag = tags.get(text)                            # a value seen before (keys, ids) ...
        if tag is None:
            shape = text.translate(_SHAPE)              # ... or one of the same shape (addresses, names)
            tag = tags.get(shape)
            if tag is None:
                tag = resolve(scalar_node, shape, event.implicit)
                if len(tags) < memo:
                    tags[shape] = tag
        if tag == _STR:
            return text
        if text in basic:
            return basic[text]
        if tag not in _BASIC:
            raise _GiveUp
        try:
            made = constructors[tag](loader, scalar_node(tag, text, event.start_mark, event.end_mark, event.style))
        except Exception:        # the full builder names the value and the line
            raise _GiveUp from None
        if len(basic) < memo:
            basic[text] = made
        return made

    try:
        get()                                            # StreamStart
        if not isinstance(get(), yaml.DocumentStartEvent):
            return None
        event: Any = get()
        top_line = event.start_mark.line + 1
        if type(event) is not map_start or event.tag is not None or event.anchor is not None:
            return None
        root: dict = {}
        lines[()] = top_line
        # (container, its key path, the line its children compare with, is a mapping)
        stack: list[tuple[Any, KeyPath, int, bool]] = [(root, (), lines[()], True)]
        while stack:
            container, path, line, is_map = stack[-1]
            event = get()
            kind = type(event)
            if is_map:
                if kind is map_end:
                    stack.pop()
                    continue
                if kind is not scalar_event:
                    return None
                key = value(event)
                if type(key) is int:
                    key = str(key)
                if type(key) is not str or key in container:
                    return None
                child = path + (key,)
                child_line = event.start_mark.line + 1
                lines[child] = child_line
                event = get()
                kind = type(event)
            else:
                if kind is seq_end:
                    stack.pop()
                    continue
                child = path + (len(container),)
                child_line = event.start_mark.line + 1
                if child_line != line:
                    lines.setdefault(child, child_line)
            if kind is scalar_event:
                item = value(event)
            elif kind is map_start or kind is seq_start:
                if event.tag is not None or event.anchor is not None or len(stack) >= max_depth - 4:
                    return None
                item = {} if kind is map_start else []
                stack.append((item, child, child_line, kind is map_start))
            else:                                        # an alias
                return None
            if is_map:
                container[key] = item
            else:
                container.append(item)
        if not isinstance(get(), yaml.DocumentEndEvent) or not isinstance(get(), yaml.StreamEndEvent):
            return None
        return root, lines
    except _GiveUp:
        return None


class _GiveUp(Exception):
    """A value only the full builder reads (a tag, an anchor, a type beyond the basic ones, an unreadable one)."""
