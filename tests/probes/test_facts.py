"""Every fact against its fixtures, without a host: tests/probes/fixtures/<fact name>/<case>/ holds the command the
fact issues (``command``, as deployctl.io.batch quotes it), a real answer (``output``), the value read from that
answer by hand (``parsed.json``), where the answer comes from (``source``) and, when the fact takes any, its
arguments (``args.json``: ``command`` for the command, ``parse`` for the parser). See fixtures/README.md."""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from pathlib import Path

import pytest
from pydantic import BaseModel

from deployctl.probes.catalog import ALL, FACTS

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CASES = sorted(p for p in FIXTURES.glob("*/*") if p.is_dir())
# facts with no real answer to pin yet: listed, so that a fact losing its fixtures is noticed
NO_FIXTURE = {"docker-image", "deployed-manifests", "deployed-history"}


def plain(value):
    """A parsed value as JSON sees it: models as their fields, tuples as lists, sets sorted, times in ISO 8601."""
    if isinstance(value, BaseModel):
        return plain(value.model_dump())
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _args(case: Path) -> dict:
    path = case / "args.json"
    return json.loads(path.read_text()) if path.exists() else {}


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_fact_issues_the_command_and_reads_the_answer(case):
    fact, args = FACTS[case.parent.name], _args(case)
    assert shlex.join(fact.command(*args.get("command", []))) + "\n" == (case / "command").read_text()
    parsed = plain(fact.parse((case / "output").read_text(), *args.get("parse", [])))
    expected = json.loads((case / "parsed.json").read_text())
    # compared as JSON text too: 1 is not True, 0 is not 0.0
    assert parsed == expected
    assert json.dumps(parsed, sort_keys=True) == json.dumps(expected, sort_keys=True)


def test_every_fixture_folder_is_a_fact_and_every_fact_has_one():
    assert len(ALL) == len(FACTS), "two facts share a name"
    folders = {p.name for p in FIXTURES.iterdir() if p.is_dir()}
    assert folders <= set(FACTS), f"fixtures of no fact: {sorted(folders - set(FACTS))}"
    assert set(FACTS) - folders == NO_FIXTURE


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_case_says_where_its_answer_comes_from(case):
    names = {p.name for p in case.iterdir()}
    assert {"command", "output", "parsed.json", "source"} <= names <= {"command", "output", "parsed.json", "source",
                                                                      "args.json"}
    assert (case / "source").read_text().strip()
