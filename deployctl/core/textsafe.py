"""Terminal safety for text that came from a host (issue 21, deliverable 8).

A host decides what its history user, lock holder, smoke answer, task output, probe output and logs say. Printed
as they are, escape sequences in them retitle the operator's terminal (``ESC ] 0 ; ... BEL``), clear it
(``ESC [ 2 J``), hide text, fake a prompt or, on some terminals, write files. ``clean`` removes them:

* every escape sequence (CSI ``ESC [`` / 8-bit ``0x9b``; OSC, DCS, SOS, PM and APC strings up to BEL or ST;
  the short ``ESC x`` forms), whole, so no half of one is left to print;
* every other C0 control (``\\n`` and ``\\t`` stay where text is multi-line), DEL and the C1 controls;
* the Unicode bidirectional overrides/isolates (text that displays in another order than it reads) and the line
  and paragraph separators; lone surrogates (they cannot be written to stdout) become U+FFFD.

``clean_data`` applies it to every string (keys too) of a JSON-able document, so ``--output json`` carries the
same text as the terminal. Rich markup (``[red]``, ``[link=...]``) in host text is the printer's concern:
``deployctl.cli._output.esc`` cleans and escapes it.
"""

from __future__ import annotations

import re
from typing import Any

# ESC-introduced and 8-bit sequences, matched whole. A string command (OSC, DCS, SOS, PM, APC) runs to BEL or ST
# (one left open ends at the next ESC or line end, as a terminal's parser aborts it).
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"                       # CSI: parameters, intermediates, final byte
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x9c\x1b\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"                                       # nF / Fp / Fe / Fs escapes (ESC 7, ESC ( B ...)
)
_CONTROL_MULTI = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_CONTROL_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_QUICK = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def clean(text: Any, *, multiline: bool = True) -> str:
    """``text`` (anything: it is ``str()``-ed) without escape sequences and control characters.

    ``multiline=False`` also turns newlines and tabs into spaces (one table cell, one log line).
    """
    s = text if isinstance(text, str) else str(text)
    if _QUICK.search(s) is None and (multiline or ("\n" not in s and "\t" not in s)):
        return s
    s = _SEQUENCE.sub("", s)
    s = s.replace("\r\n", "\n")
    if not multiline:
        s = s.replace("\n", " ").replace("\t", " ")
    s = (_CONTROL_MULTI if multiline else _CONTROL_LINE).sub("", s)
    return _SURROGATE.sub("\ufffd", s)


def clean_data(doc: Any, _depth: int = 0) -> Any:
    """``doc`` with every string (dict keys included) cleaned; other values as they are.

    Tuples and sets become lists (what JSON makes of them anyway); nesting deeper than 200 is cut (a host does
    not get to recurse the printer).
    """
    if isinstance(doc, str):
        return clean(doc)
    if _depth > 200:
        return None
    if isinstance(doc, dict):
        return {(clean(k) if isinstance(k, str) else k): clean_data(v, _depth + 1) for k, v in doc.items()}
    if isinstance(doc, (list, tuple, set, frozenset)):
        return [clean_data(v, _depth + 1) for v in doc]
    return doc


def first_line(text: str, limit: int = 80) -> str:
    """The first non-blank line of ``text``, cut to ``limit`` and quoted (``repr``), or "empty output": how a
    parser names what it got instead of what it expected."""
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return repr(first[:limit]) if first else "empty output"
