"""Engine JSON files (rank tables, config.json) are written by pydantic-core for speed (core/input/merge.py
to_json); their bytes are json.dumps(indent=4, ensure_ascii=False)'s, floats below 1e-4 included."""

from __future__ import annotations

import json
import random

import pytest

from deployctl.core.input.merge import to_json


def _python(doc: object) -> bytes:
    return (json.dumps(doc, indent=4, ensure_ascii=False) + "\n").encode()


@pytest.mark.parametrize("doc", [
    {"a": 1e-5, "b": [0.0, {"x": 2.5e-7}]}, [1e-9], [[3e-5]], -1e-5, 1e-5, {"x": -4e-6}, {"k": ("t", 1)},
    {"1": None, "ü": "é\x01\u2028\"\\"}, {"s": "a: 0.00001", "t": "1e-5", "n1e-": "x0.00001"}, {}, [], {"e": [{}]},
    {"big": 1e16, "huge": 1.7976931348623157e308, "int": 2**70, "neg": -0.0, "ok": 0.96},
])
def test_the_same_bytes_as_json_dumps(doc):
    assert to_json(doc) == _python(doc)


def test_the_same_bytes_on_random_documents():
    rng = random.Random(11)

    def value(depth: int):
        r = rng.random()
        if depth > 3 or r < 0.6:
            return rng.choice([rng.random() * 10 ** rng.randint(-9, 20) * rng.choice((1, -1)), rng.randint(-9, 9**9),
                               "29.0.0.1", "e-5", "0.00001", None, True, "ключ"])
        if r < 0.8:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {f"k{i}": value(depth + 1) for i in range(rng.randint(0, 4))}

    for _ in range(3000):
        doc = value(0)
        assert to_json(doc) == _python(doc), doc
