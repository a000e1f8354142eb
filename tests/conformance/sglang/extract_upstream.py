"""Print the `upstream_facts` fragments of a guide's script, each value with its line: the exports/unsets of a line
range, and the argv of the command starting at a line (tokens after `-m sglang.launch_server` or
`-m sglang_router.launch_router`, up to the line that does not end in a backslash).

    python extract_upstream.py <raw copy of the guide> env <first line> <last line>
    python extract_upstream.py <raw copy of the guide> argv <line of `python3 -m ...`>

Inventories, placeholders and differences are written by hand; the raw copies are byte-identical to the stored
upstream file (SGLang's docs at the commit each config names).
"""

from __future__ import annotations

import json
import re
import shlex
import sys


def env(lines: list[str], first: int, last: int) -> None:
    for n in range(first, last + 1):
        s = lines[n - 1].strip()
        if re.match(r"(export|unset)\s", s):
            print(f"  - {json.dumps(s)}   # L{n}")


def argv(lines: list[str], start: int) -> None:
    n = start
    started = False
    while True:
        raw = lines[n - 1].rstrip("\n")
        cont = raw.rstrip().endswith("\\")
        body = raw.rstrip().rstrip("\\")
        # a guide's <placeholder with spaces> is one word (it stands for one value), and so is $((a + $i))
        held = re.findall(r"<[^<>]*>|\$\(\([^()]*\)\)", body)
        for k, h in enumerate(held):
            body = body.replace(h, f"\x00{k}\x00", 1)
        words = [re.sub("\x00([0-9]+)\x00", lambda m: held[int(m.group(1))], w)
                 for w in shlex.split(body, posix=True, comments=False)]
        if not started:
            k = next(j for j, w in enumerate(words) if w in ("sglang.launch_server", "sglang_router.launch_router"))
            words, started = words[k + 1:], True
        for w in words:
            print(f"  - {json.dumps(w)}   # L{n}")
        if not cont:
            break
        n += 1


if __name__ == "__main__":
    path, what, *nums = sys.argv[1:]
    text = open(path, encoding="utf-8").read().split("\n")
    if what == "env":
        env(text, int(nums[0]), int(nums[1]))
    else:
        argv(text, int(nums[0]))
