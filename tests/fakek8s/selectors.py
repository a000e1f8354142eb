"""Label and field selectors, resource quantities and metadata validation, as the API server does them."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation


class SelectorError(ValueError):
    pass


# ---------------------------------------------------------------- label selectors (query string)

def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


_SET_RE = re.compile(r"^([^\s!=()]+)\s+(in|notin)\s*\(([^)]*)\)$")
_CMP_RE = re.compile(r"^([^\s!=<>()]+)\s*(==|=|!=)\s*([^\s,()]*)$")
_NUM_RE = re.compile(r"^([^\s!=<>()]+)\s*(<|>)\s*(-?\d+)$")
_KEY_RE = re.compile(r"^(!?)\s*([^\s!=<>()]+)$")


def parse_label_selector(text: str | None) -> list[tuple[str, str, tuple[str, ...]]]:
    """`a=b,c!=d,e in (x,y),f notin (z),g,!h` -> [(key, op, values)], op in = != in notin exists !exists < >."""
    requirements = []
    for part in _split_top_level(text or ""):
        if m := _SET_RE.match(part):
            values = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            requirements.append((m.group(1), m.group(2), values))
        elif m := _CMP_RE.match(part):
            requirements.append((m.group(1), "!=" if m.group(2) == "!=" else "=", (m.group(3),)))
        elif m := _NUM_RE.match(part):
            requirements.append((m.group(1), m.group(2), (m.group(3),)))
        elif m := _KEY_RE.match(part):
            requirements.append((m.group(2), "!exists" if m.group(1) else "exists", ()))
        else:
            raise SelectorError(f"unable to parse requirement: {part!r}")
    return requirements


def labels_match(requirements, labels: dict | None) -> bool:
    labels = labels or {}
    for key, op, values in requirements:
        present, value = key in labels, labels.get(key)
        if op == "=":
            ok = present and value == values[0]
        elif op == "!=":
            ok = not present or value != values[0]
        elif op == "in":
            ok = present and value in values
        elif op == "notin":
            ok = not present or value not in values
        elif op == "exists":
            ok = present
        elif op == "!exists":
            ok = not present
        else:  # < and >
            try:
                ok = present and (int(value) < int(values[0]) if op == "<" else int(value) > int(values[0]))
            except ValueError:
                ok = False
        if not ok:
            return False
    return True


def label_selector_object_to_requirements(selector: dict | None):
    """A LabelSelector object ({matchLabels, matchExpressions}) -> requirements for labels_match."""
    selector = selector or {}
    reqs = [(k, "=", (v,)) for k, v in (selector.get("matchLabels") or {}).items()]
    op_map = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    for expr in selector.get("matchExpressions") or []:
        if not isinstance(expr, dict) or expr.get("operator") not in op_map or not expr.get("key"):
            raise SelectorError(f"invalid label selector requirement {expr!r}")
        reqs.append((expr["key"], op_map[expr["operator"]], tuple(expr.get("values") or ())))
    return reqs


def label_selector_object_to_string(selector: dict | None) -> str:
    parts = []
    for key, op, values in label_selector_object_to_requirements(selector):
        if op == "=":
            parts.append(f"{key}={values[0]}")
        elif op in ("in", "notin"):
            parts.append(f"{key} {op} ({','.join(values)})")
        else:
            parts.append(key if op == "exists" else f"!{key}")
    return ",".join(parts)


# ---------------------------------------------------------------- field selectors

def parse_field_selector(text: str | None) -> list[tuple[str, str, str]]:
    """`metadata.name=x,involvedObject.name!=y` -> [(path, op, value)]."""
    requirements = []
    for part in _split_top_level(text or ""):
        m = re.match(r"^([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)$", part)
        if not m:
            raise SelectorError(f"invalid field selector: {part!r}")
        requirements.append((m.group(1), "!=" if m.group(2) == "!=" else "=", m.group(3).strip()))
    return requirements


def _field_value(obj: dict, path: str) -> str:
    value = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def fields_match(requirements, obj: dict) -> bool:
    for path, op, value in requirements:
        actual = _field_value(obj, path)
        if (actual == value) != (op == "="):
            return False
    return True


# ---------------------------------------------------------------- quantities

_SUFFIXES = {"": 1, "m": Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
             "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def parse_quantity(value) -> Decimal:
    """'500m' -> 0.5, '64Gi' -> 68719476736, 8 -> 8. Raises ValueError on garbage."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Decimal(str(value))
    m = re.fullmatch(r"([+-]?[0-9.]+(?:[eE][+-]?\d+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?", str(value).strip())
    if not m:
        raise ValueError(f"quantities must match the regular expression "
                         f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {value!r}")
    try:
        return Decimal(m.group(1)) * Decimal(_SUFFIXES[m.group(2) or ""])
    except InvalidOperation:
        raise ValueError(f"invalid quantity {value!r}") from None


# ---------------------------------------------------------------- metadata validation

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
              "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
              "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                  "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                  "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
_QUALIFIED_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                  "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                  "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
              "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
              "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


def name_errors(name: str, style: str) -> list[str]:
    """style: 'label' (RFC 1123 label), 'dns1035' (services), 'subdomain' (everything else)."""
    if style == "label":
        if len(name) > 63:
            return ["must be no more than 63 characters"]
        return [] if DNS1123_LABEL.match(name) else [_LABEL_MSG]
    if style == "dns1035":
        if len(name) > 63:
            return ["must be no more than 63 characters"]
        return [] if DNS1035_LABEL.match(name) else [_DNS1035_MSG]
    if len(name) > 253:
        return ["must be no more than 253 characters"]
    return [] if DNS1123_SUBDOMAIN.match(name) else [_SUBDOMAIN_MSG]


def qualified_name_errors(key: str) -> list[str]:
    prefix, _, name = key.rpartition("/")
    errors = []
    if "/" in key and not prefix:
        errors.append("prefix part must be non-empty")
    elif prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)):
        errors.append("prefix part " + _SUBDOMAIN_MSG)
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    elif not _QUALIFIED_NAME.match(name):
        errors.append(_QUALIFIED_MSG)
    return errors


def label_value_errors(value) -> list[str]:
    if not isinstance(value, str):
        return ["must be a string"]
    if len(value) > 63:
        return ["must be no more than 63 characters"]
    return [] if value == "" or _QUALIFIED_NAME.match(value) else [_VALUE_MSG]
