"""Hostile input in an inventory (issue 11): what would run as a command, become an option, split a line
of an env file or break a serializer is refused here, before any model, message or file sees it.

* every string (keys too, at any depth): no control character, line separator, bidirectional override or
  lone surrogate; no non-finite number and no non-JSON value (YAML dates, ...);
* IP addresses: no IPv6 zone id (`fe80::1%";touch x;"` is a valid Python IPv6Address);
* values in an argument position: the image is a Docker image reference, ssh paths do not start with '-'
  and hold no Ansible template.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import TYPE_CHECKING, Any

from deployctl.core.errors import Problem
from deployctl.core.input.raw import KeyPath, RawInventory, format_path

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory

INT64 = (-(2 ** 63), 2 ** 63 - 1)

# A Docker image reference, transcribed from the grammar of github.com/distribution/reference (regexp.go,
# the package docker and containerd parse references with):
#   reference := name [ ":" tag ] [ "@" digest ];  name := [domain "/"] remote-name
#   domain := host [":" port];  host := domain-name | "[" ipv6 "]";  remote-name := path-component ("/" ...)*
#   path-component := alphanumeric (separator alphanumeric)*;  alphanumeric := [a-z0-9]+;  separator := [_.]|__|[-]+
#   tag := [\w][\w.-]{0,127};  digest := algorithm ":" hex (32 hex digits or more)
# Being anchored on an alphanumeric, it also keeps the image from ever being read as a `docker run` option.
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[_.]|__|[-]+)[a-z0-9]+)*"
IMAGE_REFERENCE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$", re.ASCII)
IMAGE_NAME_MAX = 255   # distribution/reference NameTotalLengthMax (the name before ':' tag and '@' digest)
# nodes[].address: an IP, or a host name (RFC 1123 labels; '_' tolerated as /etc/hosts does). Anchored on an
# alphanumeric so that ssh and ansible never read it as an option (`-oProxyCommand=...`).
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?"
HOST_NAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*\.?$", re.ASCII)
# What nodes[].address accepts besides an IP: anything ssh could resolve (an ssh_config alias too), as long as
# it starts with a letter or digit (never an option) and holds no whitespace and nothing Ansible templates.
# HOST_NAME is the strict RFC 1123 grammar, kept for reference: `host[/]`-style aliases are accepted today.
HOST_TARGET = re.compile(r"^[A-Za-z0-9][^\s%]*$")
# what Ansible would evaluate as a template when it reads the value from its inventory
JINJA = re.compile(r"\{\{|\{%|\{#")

# C0 controls (tab, newline and carriage return included), DEL, C1 controls, the Unicode line and paragraph
# separators, and lone UTF-16 surrogates ("\uD800" in a double-quoted YAML string), which no UTF-8 output
# (rank table, env file, JSON, terminal) can encode.
# C0/C1 controls, line separators, lone surrogates, and the bidirectional overrides/isolates that make
# text display differently from what it is ("Trojan Source", CVE-2021-42574)
_BAD_CHAR = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_YAML_TYPES = {"date": "a YAML date", "datetime": "a YAML timestamp", "bytes": "YAML !!binary data",
               "set": "a YAML !!set", "tuple": "a YAML !!pairs/!!omap entry"}


def _escape(text: str) -> str:
    """``text`` with every character _BAD_CHAR refuses written as \\uXXXX (safe to print anywhere)."""
    return _BAD_CHAR.sub(lambda m: f"\\u{ord(m.group()):04X}", text)


def bad_char(text: str) -> str | None:
    """'a control character (U+000A at position 3)' for the first refused character (1-based), else None."""
    m = _BAD_CHAR.search(text)
    if m is None:
        return None
    code = ord(m.group())
    what = ("a lone surrogate" if 0xD800 <= code <= 0xDFFF else
            "a line separator" if code in (0x2028, 0x2029) else
            "a bidirectional override" if 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069 else
            "a control character")
    return f"{what} (U+{code:04X} at position {m.start() + 1})"


def _hostile_problem(raw: RawInventory, path: KeyPath, message: str, hint: str) -> Problem:
    shown = format_path(tuple(_escape(p) if isinstance(p, str) else p for p in path))
    return Problem(message=message, path=shown, file=raw.file, line=raw.line_of(path), hint=hint)


def hostile_problems(raw: RawInventory) -> list[Problem]:
    """Problems of any key or value at any depth that no output of deployctl may carry.

    * control characters and lone surrogates in keys and strings: they end up in shell scripts, env files,
      JSON and terminals (a newline in an env value is a second variable; a surrogate cannot be encoded);
    * values JSON cannot hold: `.inf`/`.nan` (json.dumps writes `Infinity`, which MindIE cannot parse),
      YAML dates, timestamps, !!binary, !!set, !!pairs, and integers outside 64 bits.

    One walk over the parsed data (iterative: no recursion limit), linear in its size.
    """
    out: list[Problem] = []
    # containers only on the stack (a path is made per list and mapping, not per value: a large fleet has
    # hundreds of thousands of values); a value is judged where its container is read
    stack: list[tuple[KeyPath, Any]] = [((), raw.data)]
    search = _BAD_CHAR.search
    while stack:
        path, container = stack.pop()
        if isinstance(container, dict):
            items: Any = container.items()
        elif isinstance(container, list):
            items = enumerate(container)
        else:                                   # the top level is a scalar
            items = [(None, container)]
        for key, value in items:
            if isinstance(key, str) and search(key):
                bad = bad_char(key)
                out.append(_hostile_problem(raw, path + (key,), f"key contains {bad}", char_hint(str(bad))))
                continue
            if isinstance(value, str):
                if search(value):
                    bad = bad_char(value)
                    out.append(_hostile_problem(raw, _child(path, key), f"value contains {bad}",
                                                char_hint(str(bad))))
            elif isinstance(value, (dict, list)):
                stack.append((_child(path, key), value))
            elif value is not None and not isinstance(value, bool) and not (isinstance(value, int) and
                                                                               INT64[0] <= value <= INT64[1]):
                out += _value_problem(raw, _child(path, key), value)
    return out


def _child(path: KeyPath, key: Any) -> KeyPath:
    return path if key is None else path + (key,)


def _value_problem(raw: RawInventory, path: KeyPath, value: Any) -> list[Problem]:
    """A scalar that is not a string, a boolean, null or a 64-bit integer: fine when a finite float."""
    if isinstance(value, int):
        return [_hostile_problem(raw, path, "integer is outside the 64-bit range",
                                 "the engines, HCCL and Kubernetes read 64-bit integers: use a smaller "
                                 "number, or quote it if it is meant as text")]
    if isinstance(value, float):
        if math.isfinite(value):
            return []
        text = ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
        return [_hostile_problem(raw, path, f"{text} is not a finite number",
                                 "JSON has no Infinity or NaN (engines cannot parse them): write a "
                                 "number, or quote it if it is meant as text")]
    kind = _YAML_TYPES.get(type(value).__name__, f"a YAML {type(value).__name__}")
    dated = type(value).__name__ in ("date", "datetime")
    example = f" ('{value}')" if dated else ""
    return [_hostile_problem(raw, path, f"{value} is {kind}, not a JSON value" if dated else
                             f"{kind} is not a JSON value",
                             f"quote it{example} if it is meant as text: the inventory feeds JSON, "
                             "YAML and env files, which take strings, numbers, booleans, lists and "
                             "mappings only")]


def char_hint(bad: str) -> str:
    """'a control character (U+000A at position 3)' -> 'remove the control character (U+000A at position 3)'."""
    what, where = bad.split(" (", 1)
    what = what.split(" ", 1)[1]
    if "surrogate" in what:
        return f"remove the {what} ({where}: a \\uD800-\\uDFFF escape is half of a character, not text"
    return f"remove the {what} ({where}"


# --------------------------------------------------------------------------- semantic checks
_OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
_IPV4 = re.compile(r"\.".join([_OCTET] * 4))


def ipv4_text(value: str) -> bool:
    """Whether ``value`` is a dotted-quad IPv4 address as ipaddress reads them (see ipv4_packed)."""
    return _IPV4.fullmatch(value) is not None


def ipv4_packed(value: str) -> bytes | None:
    """The 4 bytes of a dotted-quad IPv4 address (decimal octets 0-255 without leading zeros, as ipaddress reads
    them), else None: the fast path for the hundreds of thousands of device IPs of a large fleet; callers fall
    back to ipaddress for None, so an address is never refused here that ipaddress accepts."""
    m = _IPV4.fullmatch(value)
    return bytes(int(octet) for octet in m.groups()) if m else None


def ip_address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address, or None; an IPv6 zone id (``fe80::1%eth0``) is no IP here (see ``_zone_problem``)."""
    if "%" in value:    # ipaddress accepts any text after '%' as a scope id, quotes and `;` included
        return None
    packed = ipv4_packed(value) if value.count(".") == 3 else None
    if packed is not None:
        return ipaddress.IPv4Address(packed)
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def ip_kind(value: str) -> tuple[int, bool] | None:
    """(IP version, whether it is a placeholder: unspecified or loopback) of an address, None if it is none
    (as ``ip_address``); IPv4 read from its bytes, without building an address object."""
    m = _IPV4.fullmatch(value)
    if m is not None:                    # a dotted quad: all-zero has one spelling, loopback is 127/8
        return 4, value == "0.0.0.0" or m.group(1) == "127"
    addr = ip_address(value)
    return None if addr is None else (addr.version, addr.is_unspecified or addr.is_loopback)


ZONE_HINT = ("remove the '%' and what follows: a zone (scope) id only means something to the host that "
             "names the interface, never in a rank table, an env file or an ssh target")


def zone_problem(raw: RawInventory, key: KeyPath, value: str) -> Problem | None:
    """An IPv6 address with a zone id: refused wherever an IP is accepted."""
    if "%" not in value:
        return None
    return raw.problem(key, f"{value!r} has an IPv6 zone id ({value[value.index('%'):]!r})", ZONE_HINT)


def check_image(raw: RawInventory, image: str, key: tuple = ("engine", "image")) -> list[Problem]:
    """engine.image (or another image key) is one Docker image reference (and so never a `docker run` option)."""
    hint = "give one image reference: [REGISTRY[:PORT]/]NAME[:TAG][@DIGEST], e.g. " \
        "registry.example.com/team/engine:1.0"
    if image.startswith("-"):
        return [raw.problem(key, f"image {image!r} starts with '-'",
                            "`docker run` would read it as an option: " + hint[0].lower() + hint[1:])]
    name = image.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    first = image.split("/", 1)[0] if "/" in image else ""
    # docker's normalisation (distribution/reference normalize.go, splitDockerDomain): the first component is
    # a registry only when it has a '.' or ':' or is "localhost"; otherwise it is part of the (lower-case) path
    not_a_domain = first and not ("." in first or ":" in first or first == "localhost") and first != first.lower()
    if len(image) > 1024 or not IMAGE_REFERENCE.match(image) or not_a_domain:
        why = " (repository names are lower case)" if IMAGE_REFERENCE.match(image.lower()) else ""
        return [raw.problem(key, f"image {image!r} is not a valid image reference{why}", hint)]
    if len(name) > IMAGE_NAME_MAX:
        return [raw.problem(key, f"image name is {len(name)} characters long (at most {IMAGE_NAME_MAX})", hint)]
    return []


def check_ssh(inv: Inventory, raw: RawInventory) -> list[Problem]:
    """ssh users and key paths reach ssh's and ansible's command lines and Ansible's templating."""
    out = []
    blocks = [(("ssh",), inv.ssh)] + [(("nodes", i, "ssh"), n.ssh) for i, n in enumerate(inv.nodes) if n.ssh]
    for base, block in blocks:
        for field in ("key", "known_hosts"):
            value = getattr(block, field)
            if value is None:
                continue
            if value.startswith("-"):
                out.append(raw.problem(base + (field,), f"{field} {value!r} starts with '-'",
                                       "ssh would read it as an option: give the file's path (./-name if it "
                                       "really starts with '-')"))
            elif JINJA.search(value):
                out.append(raw.problem(base + (field,), f"{field} {value!r} contains a template ('{{{{', "
                                       "'{%' or '{#')", "Ansible would evaluate it on this machine: rename the "
                                       "file or use a symlink"))
            elif not value.strip():
                out.append(raw.problem(base + (field,), f"{field} is empty", "give the file's path"))
    return out
