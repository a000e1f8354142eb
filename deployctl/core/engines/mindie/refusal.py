"""The hint every refusal engine.assume can lift carries (assume.py applies the assumptions; the support matrix and
the acceptance checks name their refusal ids with it)."""

from __future__ import annotations


def hint(refusal: str) -> str:
    return (f"if your image runs it anyway (a custom or patched build), say so: engine.assume: "
            f"[{{refusal: {refusal}, reason: <what the image runs>}}]")
