"""SGLang's flag tables, per release: what `python -m sglang.launch_server` and `python -m sglang_router.launch_router`
accept.

The tables in flags/ were extracted from each release's own argument parser (the PyPI wheel's sources imported
with torch stubbed) by scripts/sglang_flags/extract.py (method, wheel and hash inside each file; README there).
Both parsers are plain argparse with allow_abbrev on, so a unique prefix of an option parses as that option
(`--tp` for --tp-size, `--moe-dense-tp` for --moe-dense-tp-size, as SGLang's own Ascend guides write them).
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from typing import Callable

from deployctl.core.engine_spec.protocol import TAG_VERSION
from deployctl.core.packaged import packaged_text

# the releases whose tables are shipped (engine.version or the image tag picks the newest at or below it)
RELEASES = ("0.5.16", "0.5.18", "0.5.20", "0.5.22", "0.5.23")
ROUTER = "0.3.2"   # sglang-router's last release (2026-01-15): every Ascend image installs it (scripts/sglang_flags)


def _key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split(".") if x.isdigit())


def known(version: str | None) -> str:
    """The shipped release to check against: the version itself, the newest one below it, else the oldest."""
    if version in RELEASES:
        return version
    if version and TAG_VERSION.match(version):
        older = [r for r in RELEASES if _key(r) <= _key(version)]
        if older:
            return max(older, key=_key)
    return RELEASES[0]


@cache
def table(release: str) -> dict:
    return json.loads(packaged_text(__package__, "flags", f"sglang-{release}.json"))


@cache
def router_table() -> dict:
    return json.loads(packaged_text(__package__, "flags", f"sglang-router-{ROUTER}.json"))


def _option(tab: dict, flag: str) -> str | None:
    exact = tab["option_strings"].get(flag)
    if exact is not None or not flag.startswith("--"):
        return exact
    prefixed = {canon for spelling, canon in tab["option_strings"].items() if spelling.startswith(flag)}
    return prefixed.pop() if len(prefixed) == 1 else None      # argparse: a unique prefix, else an error


def option(release: str, flag: str) -> str | None:
    """The canonical option a spelling names in this release (`--tp` -> --tp-size), or None."""
    return _option(table(release), flag)


def router_option(flag: str) -> str | None:
    return _option(router_table(), flag)


def spec(release: str, canon: str) -> dict:
    return table(release)["options"][canon]


def takes_value(release: str, flag: str) -> bool:
    canon = option(release, flag)
    return bool(canon and table(release)["options"][canon]["takes_value"])


def nargs(tab: dict, canon: str) -> str | None:
    return tab["options"][canon].get("nargs")


def deprecated(release: str, flag: str) -> str | None:
    """What replaces a deprecated option of this release (its Deprecated*Action names it), None when current."""
    canon = option(release, flag)
    o = table(release)["options"].get(canon or "", {})
    return (o.get("deprecated_new_flag") or "a newer flag") if o.get("deprecated") else None


def suggest(tab: dict, flag: str, what: str) -> str:
    close = difflib.get_close_matches(flag, list(tab["option_strings"]), n=1)
    return f"did you mean {close[0]}?" if close else f"see `{what} --help` of that release"


def groups(release: str, args: list[str]) -> list[tuple[str | None, list[str]]]:
    """engine.args as (canonical option, [flag, values...]) groups, read as the release's parser reads them."""
    return parse_groups(table(release), lambda f: option(release, f), args)


def parse_groups(tab: dict, option_of: Callable[[str], str | None],
                 args: list[str]) -> list[tuple[str | None, list[str]]]:
    """args as (canonical option, [flag, values...]) groups, read as the parser of ``tab`` reads them: a flag with
    nargs + or * takes the words up to the next flag, one that takes a value takes one word (even "-1"); a word
    that is no known flag is a group of its own with option None."""
    out: list[tuple[str | None, list[str]]] = []
    i = 0
    while i < len(args):
        flag, eq, _ = args[i].partition("=")
        canon = option_of(flag) if flag.startswith("-") else None
        n = 1
        if canon is not None and not eq and tab["options"][canon]["takes_value"]:
            if tab["options"][canon].get("nargs") in ("+", "*"):
                while i + n < len(args) and not (args[i + n].startswith("--") or
                                                 (args[i + n].startswith("-") and args[i + n][1:2].isalpha())):
                    n += 1
            else:
                n = 2
        out.append((canon, args[i:i + n]))
        i += n
    return out
