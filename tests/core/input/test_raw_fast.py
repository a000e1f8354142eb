"""The one-loop builder of plain inventories (core/input/raw_fast.py) gives exactly what the full builder gives
(core/input/raw.py _Builder: data, key lines), and gives up on everything it does not read itself."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from deployctl.core.errors import InventoryError
from deployctl.core.input import raw_fast
from deployctl.core.input.raw import MAX_DEPTH, TAG_MEMO, _loader_class, parse_yaml
from deployctl.core.input.raw_fast import _SHAPE, fast_document

ROOT = Path(__file__).resolve().parents[3]


def _full(text: str, monkeypatch) -> tuple:
    """parse_yaml with the full builder only: (data, lines) or the refusal's problems."""
    with monkeypatch.context() as m:
        m.setattr(raw_fast, "fast_document", lambda loader, depth, memo: None)
        try:
            raw = parse_yaml(text, "inv.yaml", None)
        except InventoryError as exc:
            return ("refused", exc.message, [(p.message, p.line, p.path) for p in exc.problems])
        return raw.data, raw.lines


def _fast(text: str) -> tuple | None:
    loader = _loader_class()(text)
    try:
        return fast_document(loader, MAX_DEPTH, TAG_MEMO)
    finally:
        loader.dispose()


def _yaml_files() -> list[Path]:
    found = [p for d in ("inventories", "tests", "docs", "deployctl") for p in (ROOT / d).rglob("*.yaml")]
    return sorted(p for p in found if p.stat().st_size < 2_000_000)


def test_every_yaml_file_of_the_project_reads_the_same(monkeypatch):
    """Inventories, fixtures, support data: where the loop builds a file, it builds what the full builder does;
    where the full builder refuses one (a syntax error aside), the loop gave up."""
    files = _yaml_files()
    assert len(files) > 100
    built = 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            fast = _fast(text)
        except yaml.YAMLError:          # the parser's own error: the full builder raises it at the same event
            assert _full(text, monkeypatch)[0] == "refused", path
            continue
        full = _full(text, monkeypatch)
        if fast is None:
            continue
        built += 1
        assert fast == full, path
    assert built > 100


@pytest.mark.parametrize("text", [
    "a: !!str 1\n",                   # a tag
    "a: &x 1\nb: *x\n",               # an anchor, an alias
    "a: 1\na: 2\n",                   # a duplicate key
    "'1': a\n1: b\n",                 # the same key, once text and once a number
    "yes: 1\n",                       # a key that reads as a boolean
    "1.5: x\n",                       # a float key
    "a: 2026-11-30\n",                # a date
    "a: 0o12x\nb: [1, 2]\n",          # text, fine, but then...
    "<<: {a: 1}\n",                   # a merge key
    "? [a]\n: 1\n",                   # a list as a key
    "- 1\n- 2\n",                     # a list at the top
    "a: 1\n---\nb: 2\n",              # two documents
    "",                               # nothing
])
def test_gives_up_on_what_it_does_not_read(text, monkeypatch):
    fast = _fast(text)
    if text == "a: 0o12x\nb: [1, 2]\n":              # YAML 1.1 has no 0o: this one is plain text, built here
        assert fast == _full(text, monkeypatch)
        return
    assert fast is None


def test_gives_up_near_the_nesting_bound(monkeypatch):
    deep = "a: " + "[" * 70 + "]" * 70 + "\n"
    assert _fast(deep) is None
    assert _full(deep, monkeypatch)[0] == "refused"


def test_generated_documents_read_the_same(monkeypatch):
    rng = random.Random(7)
    words = ["id", "ip", "name", "n1", "yes", "No", "null", "~", "0x1f", "017", "1_000", "1:20", "3.5e+3", ".inf",
             "-.5", "29.0.0.1", "a b", "true", "on", "0b101", "08", "", " x", "é", "1e5", "+12", "- x", "#c"]

    def value(depth: int):
        kind = rng.random()
        if depth > 4 or kind < 0.5:
            return rng.choice([rng.choice(words), rng.randint(-5, 70000), rng.random(), True, None, "x" * 3])
        if kind < 0.75:
            return [value(depth + 1) for _ in range(rng.randint(0, 5))]
        return {str(rng.choice(words)) + str(i): value(depth + 1) for i in range(rng.randint(0, 5))}

    for i in range(400):
        doc = {f"k{j}": value(0) for j in range(rng.randint(1, 6))}
        text = yaml.safe_dump(doc, default_flow_style=rng.choice([None, True, False]), width=rng.choice([20, 80, 1000]))
        fast = _fast(text)
        assert fast is not None, text
        assert fast == _full(text, monkeypatch), text


def test_a_value_resolves_as_its_shape():
    """The shape trick (digits by their resolver class) gives the tag PyYAML's resolver gives the value itself."""
    loader = _loader_class()("a: 1\n")
    rng = random.Random(3)
    alphabet = "0123456789" * 4 + "._-+:eExXbBoaAfF~ nNiItTyYlLsS"
    values = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(100_000)]
    values += [f"{a}{b}" for a in "0123456789-+." for b in ["", "0", "8", "9", "_", ":59", ":60", ".5", "x1f", "b1"]]
    values += ["2026-11-30", "2026-1-3 4:05:06.5 +8", "1:05:59.5", "12:6", "0b012", "0777", "0778", ".nan"]
    for value in values:
        expected = loader.resolve(yaml.ScalarNode, value, (True, False))
        assert loader.resolve(yaml.ScalarNode, value.translate(_SHAPE), (True, False)) == expected, value
    loader.dispose()
