"""Mutators for the inventory fuzzer (issue 11): hypothesis strategies that turn an example inventory
into hostile bytes.

Two levels:

* tree mutations on the parsed YAML (delete/rename keys, type swaps, boundary numbers, unicode, control
  characters, shell payloads in one or in every string, deep nesting, huge strings), dumped back to YAML
  with PyYAML (block style, so lines stay meaningful; lone surrogates and control characters come out as
  double-quoted escapes such as "\\uD800" and "\\x1b");
* text mutations on the dumped YAML (tags, alias bombs, recursive aliases, non-UTF-8 bytes, raw control
  bytes, CRLF, BOM).

Every shell payload names ``marker``, a path unique per case: if any rendered script ever executes a
payload, that file appears.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "inventories" / "examples").glob("*.yaml")) + [ROOT / "inventories" / "sample.yaml"]
MARKER_TOKEN = "@MARKER@"     # replaced by the case's marker path when the case is written

# ---------------------------------------------------------------------------------------------- payloads

SHELL_PAYLOADS = [
    f"$(touch {MARKER_TOKEN})",
    f";touch {MARKER_TOKEN};",
    f"`touch {MARKER_TOKEN}`",
    f"x' ; touch {MARKER_TOKEN} ; '",
    f'x" ; touch {MARKER_TOKEN} ; "',
    f"|touch {MARKER_TOKEN}",
    f"&& touch {MARKER_TOKEN}",
    f"fe80::1%\";touch {MARKER_TOKEN};\"",
    f"fe80::1%$(touch {MARKER_TOKEN})",
    f"${{IFS}}$(touch${{IFS}}{MARKER_TOKEN})",
    f"x\ntouch {MARKER_TOKEN}\n",
    f"x\r\ntouch {MARKER_TOKEN}",
]
OPTION_PAYLOADS = ["--privileged", "-d", "--net=host", "-v/:/host", "--entrypoint=sh", "-", "--"]
ENV_SPLIT_PAYLOADS = ["x\nLD_PRELOAD=/tmp/evil", "x\rLD_PRELOAD=/tmp/evil", "x\x0bLD_PRELOAD=/tmp/evil",
                      "x\x0cLD_PRELOAD=/tmp/evil", "x\x85LD_PRELOAD=/tmp/evil", "x\u2028LD_PRELOAD=/tmp/evil",
                      "x\u2029LD_PRELOAD=/tmp/evil", "x\x00LD_PRELOAD=/tmp/evil"]
UNICODE = ["\u202e", "\u200f", "\u05d0\u05d1", "\u0627\u0644", "e\u0301", "\u0300", "\U0001F600", "\U0001F1FA\U0001F1F3",
           "\ud800", "\udfff", "\ufeff", "\u200b", "\uffff", "\u00a0", "Ｆｕｌｌ", "\u0131", "ß", "\U000e0001",
           "\u2028", "\u2029", "\x85"]
CONTROL = ["\x00", "\x1b", "\x1b[31m", "\n", "\r", "\t", "\x07", "\x08", "\x7f", "\x9b", "\x0b", "\x0c"]
BOUNDARY = [0, -1, 1, 2**31, 2**31 - 1, 2**63, -2**63 - 1, 2**64, 10**30, 1e308, -1e308, 5e-324, 0.5, -0.0,
            math.inf, -math.inf, math.nan, 65535, 65536, 1024, 1023]
TYPE_SAMPLES = ["", "x", "0", "1", "true", "null", "~", "-1", "1e3", "0x10", "010", "1_000", 0, 1, -1, 7.5, True,
                False, None, [], [1], ["a", "b"], {}, {"a": 1}, {"": None}]
YAML_TAGS = ["!!int", "!!str", "!!float", "!!bool", "!!null", "!!binary", "!!timestamp", "!!set", "!!omap",
             "!!python/object:os.system", "!!python/object/apply:os.system", "!!python/name:os.system",
             "!!python/tuple", "!foo", "!", "!<tag:yaml.org,2002:int>", "!!map", "!!seq"]
BAD_BYTES = [b"\xff", b"\xfe", b"\xc3\x28", b"\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf",
             b"\x00", b"\x1b", b"\x85", b"\xef\xbb\xbf"]


def substitute_marker(value, marker: str):
    """Replace MARKER_TOKEN everywhere in a tree (strings and keys)."""
    if isinstance(value, str):
        return value.replace(MARKER_TOKEN, marker)
    if isinstance(value, list):
        return [substitute_marker(v, marker) for v in value]
    if isinstance(value, dict):
        return {substitute_marker(k, marker): substitute_marker(v, marker) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------------------------- the tree

def load_example(path: Path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def all_paths(tree, prefix=()) -> list[tuple]:
    """Every path into the tree (the root excluded), parents before children."""
    out = []
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.append(prefix + (k,))
            out += all_paths(v, prefix + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out.append(prefix + (i,))
            out += all_paths(v, prefix + (i,))
    return out


def string_paths(tree) -> list[tuple]:
    return [p for p in all_paths(tree) if isinstance(get(tree, p), str)]


def get(tree, path):
    for part in path:
        tree = tree[part]
    return tree


def put(tree, path, value):
    get(tree, path[:-1])[path[-1]] = value


@dataclass
class Case:
    """One fuzz case: which example, what was done, and the bytes written as the inventory."""

    example: str
    ops: list[str] = field(default_factory=list)
    tree: object = None
    text_ops: list = field(default_factory=list)   # (kind, args) applied to the dumped text
    injected: set = field(default_factory=set)     # strings placed by mutators (with MARKER_TOKEN)

    def describe(self) -> str:
        return f"{self.example}: " + "; ".join(self.ops + [f"{k}{a!r}" for k, a in self.text_ops])


# ---------------------------------------------------------------------------------------------- tree ops

def _mutate_string(draw, s: str, case: Case) -> str:
    kind = draw(st.sampled_from(["shell", "option", "envsplit", "unicode", "control", "huge"]))
    if kind == "shell":
        payload = draw(st.sampled_from(SHELL_PAYLOADS))
    elif kind == "option":
        payload = draw(st.sampled_from(OPTION_PAYLOADS))
    elif kind == "envsplit":
        payload = draw(st.sampled_from(ENV_SPLIT_PAYLOADS))
    elif kind == "unicode":
        payload = draw(st.sampled_from(UNICODE))
    elif kind == "control":
        payload = draw(st.sampled_from(CONTROL))
    else:
        payload = "A" * draw(st.sampled_from([4097, 65536, 1 << 20]))
    where = draw(st.sampled_from(["replace", "prefix", "suffix", "middle"]))
    if kind == "option":
        where = draw(st.sampled_from(["replace", "prefix"]))
    out = {"replace": payload, "prefix": payload + s, "suffix": s + payload,
           "middle": s[: len(s) // 2] + payload + s[len(s) // 2:]}[where]
    case.injected.add(payload if kind != "huge" else "A" * 16)
    return out


@st.composite
def tree_mutation(draw, tree, case: Case):
    paths = all_paths(tree)
    op = draw(st.sampled_from(["delete", "rename", "swap", "boundary", "string", "every_string", "nest",
                               "add_key", "target", "target", "target", "target"]))
    if op == "every_string":
        spaths = string_paths(tree)
        mode = draw(st.sampled_from(["shell", "option", "envsplit", "mixed"]))
        for p in spaths:
            s = get(tree, p)
            if mode == "mixed":
                put(tree, p, _mutate_string(draw, s, case))
                continue
            payload = draw(st.sampled_from({"shell": SHELL_PAYLOADS, "option": OPTION_PAYLOADS,
                                            "envsplit": ENV_SPLIT_PAYLOADS}[mode]))
            case.injected.add(payload)
            put(tree, p, payload if mode == "option" else s + payload)
        case.ops.append(f"every string += {mode} payload")
        return
    if op == "add_key":
        # keys deployctl passes through: env variables, config sections, kubernetes values
        where = draw(st.sampled_from([("engine", "env"), ("engine", "config"), ("engine",), ("nodes", 0),
                                      ("layout",), ()]))
        key = draw(st.sampled_from(["LD_PRELOAD", "A\nB", "1X", "", "X Y", "PATH", "X=Y", "MIES_CONTAINER_IP",
                                    "ServerConfig", "BackendConfig", "privileged", "container_name", "shm_size",
                                    "work_dir", "daemon", "mounts", "devices", "x" * 300, "\u202eX"]))
        value = draw(st.sampled_from(SHELL_PAYLOADS + OPTION_PAYLOADS + ENV_SPLIT_PAYLOADS + [True, 0, None, []]))
        try:
            parent = get(tree, where)
        except (KeyError, IndexError, TypeError):
            parent = None
        if parent is None and where and where[-1] in ("env", "config"):
            try:
                grand = get(tree, where[:-1])
            except (KeyError, IndexError, TypeError):
                grand = None
            if isinstance(grand, dict):
                grand[where[-1]] = parent = {}
        if isinstance(parent, dict):
            parent[key] = value
            if isinstance(value, str):
                case.injected.add(value)
            case.ops.append(f"add {list(where) + [key]} = {value!r}")
        return
    if op == "target":
        draw(targeted(tree, case))
        return
    if not paths:
        return
    path = draw(st.sampled_from(paths))
    if op == "delete":
        parent = get(tree, path[:-1])
        del parent[path[-1]]
        case.ops.append(f"delete {list(path)}")
    elif op == "rename":
        if not isinstance(path[-1], str):
            return
        parent = get(tree, path[:-1])
        new = draw(st.sampled_from([path[-1][:-1], path[-1] + "s", path[-1].upper(), path[-1] + "\u200b",
                                    " " + path[-1], "", "x" * 200, "-" + path[-1], 1, "\ud800"]))
        if new in parent:
            return
        parent[new] = parent.pop(path[-1])
        case.ops.append(f"rename {list(path)} -> {new!r}")
    elif op == "swap":
        value = copy.deepcopy(draw(st.sampled_from(TYPE_SAMPLES)))
        put(tree, path, value)
        case.ops.append(f"set {list(path)} = {value!r}")
    elif op == "boundary":
        value = draw(st.sampled_from(BOUNDARY))
        put(tree, path, value)
        case.ops.append(f"set {list(path)} = {value!r}")
    elif op == "string":
        spaths = string_paths(tree)
        if not spaths:
            return
        path = draw(st.sampled_from(spaths))
        new = _mutate_string(draw, get(tree, path), case)
        put(tree, path, new)
        case.ops.append(f"set {list(path)} = {new[:120]!r}{'...' if len(new) > 120 else ''}")
    elif op == "nest":
        depth = draw(st.sampled_from([20, 200, 2000]))
        shape = draw(st.sampled_from(["list", "dict"]))
        # written as flow text after the dump (PyYAML's representer recurses)
        put(tree, path, f"@NEST:{shape}:{depth}@")
        case.ops.append(f"set {list(path)} = {shape} nested {depth} deep")


# values that pass through validation into scripts, env files, config.json, values.yaml
TARGETS = [("engine", "image"), ("engine", "container_name"), ("engine", "shm_size"), ("engine", "work_dir"),
           ("engine", "deploy_dir"), ("engine", "daemon"), ("engine", "ms_home"), ("engine", "kind"),
           ("engine", "env", "MINDIE_LOG_LEVEL"), ("engine", "env", "FOO"), ("engine", "env", "HCCL_BUFFSIZE"),
           ("engine", "env", "NPU_MEMORY_FRACTION"), ("engine", "env", "HCCL_CONNECT_TIMEOUT"),
           ("engine", "config", "ServerConfig", "x"), ("engine", "config", "LogConfig", "logLevel"),
           ("engine", "config", "BackendConfig", "ModelDeployConfig", "x"), ("engine", "privileged"),
           ("model", "weights_path"), ("model", "served_name"), ("model", "name"), ("model", "quant"),
           ("cluster", "name"), ("cluster", "super_pod"), ("nodes", 0, "name"), ("nodes", 0, "address"),
           ("nodes", -1, "address"), ("nodes", 0, "container_ip"), ("nodes", 0, "super_pod_id"),
           ("nodes", 0, "k8s_node"), ("nodes", 0, "hccn_conf"), ("ssh", "key"), ("ssh", "user"),
           ("ssh", "known_hosts"), ("kubernetes", "namespace"), ("kubernetes", "release"),
           ("kubernetes", "values", "x"), ("kubernetes", "values", "image"), ("kubernetes", "scheduler_name"),
           ("kubernetes", "context"), ("nodes", 0, "devices", 0, "ip")]
ADDRESS_PAYLOADS = [f"fe80::1%\";touch {MARKER_TOKEN};\"", "fe80::1%eth0", "::ffff:10.0.0.1", "10.0.0.1 ",
                    "10.0.0.01", "0x0a000001", "10.0.0.1/24", "[::1]", "::", "0.0.0.0", "255.255.255.255",
                    f"10.0.0.1;touch {MARKER_TOKEN}", "fe80::1%-d", "fe80::1%--privileged", "1.2.3.4\n"]


@st.composite
def targeted(draw, tree, case: Case):
    """A payload into one of the values that reach the rendered files (suffix keeps it mostly valid)."""
    path = draw(st.sampled_from(TARGETS))
    if not isinstance(tree, dict):
        return
    parent = tree
    for i, part in enumerate(path[:-1]):
        if isinstance(parent, list):
            if not isinstance(part, int) or not -len(parent) <= part < len(parent):
                return              # an earlier mutation made this a list of another shape (e.g. nodes[0] = [1])
            parent = parent[part]
            continue
        if not isinstance(parent, dict):
            return
        if part not in parent or parent[part] is None:
            parent[part] = {} if not isinstance(path[i + 1], int) else []
        parent = parent[part]
    if not isinstance(parent, (dict, list)) or (isinstance(parent, list) and not parent):
        return
    key = path[-1]
    if isinstance(parent, list) and (not isinstance(key, int) or not -len(parent) <= key < len(parent)):
        return
    old = parent.get(key) if isinstance(parent, dict) else parent[key]
    kind = draw(st.sampled_from(["shell", "option", "envsplit", "unicode", "control", "address", "number"]))
    if kind == "number":
        new = draw(st.sampled_from(BOUNDARY + [True, False, None, "0", "-1", "1e308", "nan", "inf"]))
    else:
        payload = draw(st.sampled_from({"shell": SHELL_PAYLOADS, "option": OPTION_PAYLOADS,
                                        "envsplit": ENV_SPLIT_PAYLOADS, "unicode": UNICODE, "control": CONTROL,
                                        "address": ADDRESS_PAYLOADS}[kind]))
        case.injected.add(payload)
        base = old if isinstance(old, str) else ""
        where = draw(st.sampled_from(["replace", "suffix", "prefix"]))
        new = {"replace": payload, "suffix": base + payload, "prefix": payload + base}[where]
    parent[key] = new
    case.ops.append(f"set {list(path)} = {new!r}")


# ---------------------------------------------------------------------------------------------- text ops

_SCALAR_LINE = re.compile(rb"^(\s*(?:- )?[^\s#:][^:#\n]*: )(\S[^\n]*)$", re.M)


def alias_bomb(width: int, depth: int) -> str:
    lines = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
    for i in range(1, depth):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "{" + ", ".join(lines) + "}"


@st.composite
def text_mutation(draw, case: Case):
    kind = draw(st.sampled_from(["tag", "bomb", "recursive", "bad_bytes", "raw_control", "crlf", "bom",
                                 "literal", "duplicate_key", "merge_key"]))
    if kind == "tag":
        case.text_ops.append(("tag", (draw(st.integers(0, 200)), draw(st.sampled_from(YAML_TAGS)))))
    elif kind == "bomb":
        width = draw(st.integers(2, 10))
        depth = draw(st.integers(2, 7))
        where = draw(st.sampled_from(["engine.config", "engine.env", "kubernetes.values", "model.name",
                                      "top"]))
        case.text_ops.append(("bomb", (where, width, depth)))
    elif kind == "recursive":
        case.text_ops.append(("recursive", (draw(st.integers(0, 200)),)))
    elif kind == "bad_bytes":
        case.text_ops.append(("bad_bytes", (draw(st.integers(0, 4000)), draw(st.sampled_from(BAD_BYTES)))))
    elif kind == "raw_control":
        case.text_ops.append(("raw_control", (draw(st.integers(0, 200)),
                                              draw(st.sampled_from([b"\x00", b"\x1b", b"\x07", b"\x7f"])))))
    elif kind == "literal":
        # YAML spellings of special numbers and nulls, straight into a scalar position
        case.text_ops.append(("literal", (draw(st.integers(0, 200)),
                                          draw(st.sampled_from([".inf", "-.inf", ".nan", ".NaN", "1e308", "1e309",
                                                                "9223372036854775808", "0x7fffffffffffffff",
                                                                "0o777", "1:20", "2001-01-01", "~", "null",
                                                                "yes", "off", "0b101", "'\\uD800'",
                                                                '"\\uD800"', '"\\udfff\\ud800"', '"\\x00"',
                                                                '"\\e[31m"', '"a\\nLD_PRELOAD=/tmp/evil"',
                                                                "<<", "=", "*undefined"])))))
    elif kind == "duplicate_key":
        case.text_ops.append(("duplicate_key", (draw(st.integers(0, 200)),)))
    elif kind == "merge_key":
        case.text_ops.append(("merge_key", (draw(st.integers(0, 200)),)))
    else:
        case.text_ops.append((kind, ()))


def _pick_line(text: bytes, index: int):
    found = list(_SCALAR_LINE.finditer(text))
    if not found:
        return None
    return found[index % len(found)]


def apply_text_op(text: bytes, kind: str, args: tuple) -> bytes:
    if kind == "tag":
        index, tag = args
        m = _pick_line(text, index)
        if m:
            text = text[:m.start(2)] + tag.encode() + b" " + text[m.start(2):]
    elif kind == "bomb":
        where, width, depth = args
        bomb = alias_bomb(width, depth).encode()
        if where == "top":
            text = b"bomb: " + bomb + b"\n" + text
        else:
            section, key = where.split(".")
            block = re.search(rb"^" + section.encode() + rb":[^\n]*\n", text, re.M)
            if block:
                text = text[:block.end()] + b"  " + key.encode() + b": " + bomb + b"\n" + text[block.end():]
            else:
                text += b"\n" + section.encode() + b":\n  " + key.encode() + b": " + bomb + b"\n"
    elif kind == "recursive":
        m = _pick_line(text, args[0])
        if m:
            text = text[:m.start(2)] + b"&r [*r]" + text[m.end(2):]
    elif kind == "bad_bytes":
        pos, raw = args
        pos = pos % (len(text) + 1)
        text = text[:pos] + raw + text[pos:]
    elif kind == "raw_control":
        index, raw = args
        m = _pick_line(text, index)
        if m:
            text = text[:m.end(2)] + raw + b"x" + text[m.end(2):]
    elif kind == "literal":
        index, literal = args
        m = _pick_line(text, index)
        if m:
            text = text[:m.start(2)] + literal.encode() + text[m.end(2):]
    elif kind == "duplicate_key":
        m = _pick_line(text, args[0])
        if m:
            line = text[m.start():m.end()]
            text = text[:m.end()] + b"\n" + line.replace(b"- ", b"  ", 1) + text[m.end():]
    elif kind == "merge_key":
        m = _pick_line(text, args[0])
        if m:
            indent = re.match(rb"\s*(?:- )?", text[m.start():m.end()]).end()
            pad = b" " * indent
            text = text[:m.end()] + b"\n" + pad + b"<<: {privileged: true, image: --privileged}" + text[m.end():]
    elif kind == "crlf":
        text = text.replace(b"\n", b"\r\n")
    elif kind == "bom":
        text = b"\xef\xbb\xbf" + text
    return text


def dump(tree, allow_unicode: bool) -> bytes:
    try:
        return yaml.safe_dump(tree, allow_unicode=allow_unicode, sort_keys=False, width=10**6).encode("utf-8")
    except (UnicodeEncodeError, yaml.YAMLError, RecursionError, ValueError):
        # lone surrogates cannot be UTF-8: write them escaped ("\uD800"); deep nests in flow style
        try:
            return yaml.safe_dump(tree, allow_unicode=False, sort_keys=False, width=10**6).encode("ascii")
        except RecursionError:
            import json

            return json.dumps(tree, ensure_ascii=True).encode("ascii")


@st.composite
def cases(draw):
    """A Case plus how to write it: (case, allow_unicode)."""
    example = draw(st.sampled_from(EXAMPLES))
    case = Case(example=str(example.relative_to(ROOT)))
    case.tree = load_example(example)
    n_tree = draw(st.sampled_from([1, 1, 1, 2, 2, 3, 0]))
    for _ in range(n_tree):
        draw(tree_mutation(case.tree, case))
    n_text = draw(st.integers(0, 2)) if n_tree else draw(st.integers(1, 2))
    for _ in range(n_text):
        draw(text_mutation(case))
    return case, draw(st.booleans())


def write_case(case: Case, allow_unicode: bool, marker: str) -> bytes:
    tree = substitute_marker(case.tree, marker)
    text = dump(tree, allow_unicode)
    for kind, args in case.text_ops:
        text = apply_text_op(text, kind, args)
    text = re.sub(rb"'?@NEST:(list|dict):(\d+)@'?", _nest, text)
    return text.replace(MARKER_TOKEN.encode(), marker.encode())


def _nest(m) -> bytes:
    depth = int(m.group(2))
    if m.group(1) == b"list":
        return b"[" * depth + b"x" + b"]" * depth
    return b"{a: " * depth + b"x" + b"}" * depth
