"""The inventory's JSON Schema (deployctl/core/schema/inventory.schema.json) and its reference (docs/inventory.md):
generated from the models and kept in step with them; every example and the sample are valid against it;
it refuses what the models refuse about one value or block (typo'd keys, wrong types, enums, patterns, ranges)
and accepts what they accept; and an editor running the YAML language server completes keys and marks a
typo'd key in an inventory that carries the modeline.

Regenerate both files with
    deployctl schema -o deployctl/schema/inventory.schema.json
    deployctl schema --markdown -o docs/inventory.md
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st
from tiers import examples
from pydantic import ValidationError

from conftest import ROOT, run_cli
from deployctl.core.errors import InventoryError
from deployctl.io.inventory_file import load_inventory
from deployctl.core.models.inventory import Inventory
from deployctl.core.schema import MODELINE, SCHEMA_FILE, inventory_schema, schema_text, shipped_text
from deployctl.core.schema.reference import reference_markdown

EXAMPLES = sorted((ROOT / "inventories" / "examples").glob("*.yaml"))
SAMPLE = ROOT / "inventories" / "sample.yaml"
INVENTORIES = [SAMPLE, *EXAMPLES]
ERRORS = sorted(p for p in (ROOT / "tests" / "errors").iterdir() if (p / "inventory.yaml").is_file())
REFERENCE = ROOT / "docs" / "inventory.md"
VALIDATOR = jsonschema.Draft7Validator(json.loads(shipped_text()))


def _data(path: Path):
    return load_inventory(path).data


def _schema_ok(data) -> bool:
    return VALIDATOR.is_valid(data)


def _models_ok(data) -> bool:
    try:
        Inventory.model_validate(data)
    except ValidationError:
        return False
    return True


# ------------------------------------------------------------------ in step with the models


def test_shipped_schema_is_generated_from_the_models():
    assert shipped_text() == schema_text(), \
        "the models changed: regenerate with `deployctl schema -o deployctl/schema/inventory.schema.json`"


def test_reference_is_generated_from_the_models():
    assert REFERENCE.read_text(encoding="utf-8") == reference_markdown(), \
        "the models changed: regenerate with `deployctl schema --markdown -o docs/inventory.md`"


def test_schema_is_draft_7_and_every_key_is_described():
    schema = inventory_schema()
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)
    undescribed = []

    def walk(node, path):
        if isinstance(node, dict):
            for key, prop in node.get("properties", {}).items():
                ref = prop.get("$ref", "").rsplit("/", 1)[-1]    # a lone ref: its block's description
                if not (prop.get("description") or schema["definitions"].get(ref, {}).get("description")):
                    undescribed.append(f"{path}.{key}")
            for key, value in node.items():
                walk(value, f"{path}.{key}" if key not in ("properties", "definitions") else path)
        elif isinstance(node, list):
            for value in node:
                walk(value, path)

    walk(schema, "")
    assert not [p for p in undescribed if ".if" not in p], f"keys without a description: {undescribed}"
    for name, body in schema["definitions"].items():   # a typo'd key is refused in every block
        if body.get("type") == "object" and "properties" in body:
            assert body.get("additionalProperties") is False, name


def test_every_model_key_is_in_the_reference():
    text = REFERENCE.read_text(encoding="utf-8")
    for key in ("cluster.hardware", "nodes[].devices[].ip", "layout.prefill.instances", "engine.ports.dist_base",
                "engine.gpu_memory_utilization", "kubernetes.rank_table", "deploy.keep_revisions",
                "nodes[].ssh.port", "router.check_interval_ms", "engine.mounts[].rw"):
        assert f"| `{key}` |" in text, key


def test_schema_command_writes_the_schema_and_the_reference(tmp_path):
    result = run_cli("schema", "-o", str(tmp_path / "inventory.schema.json"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "inventory.schema.json").read_text(encoding="utf-8") == shipped_text()
    result = run_cli("schema", "--markdown")
    assert result.returncode == 0 and result.stdout == REFERENCE.read_text(encoding="utf-8"), result.stderr
    result = run_cli("schema", "-o", str(tmp_path / "missing" / "x.json"))
    assert result.returncode == 2 and "cannot write" in result.stderr and "Traceback" not in result.stderr


# ------------------------------------------------------------------ the examples, the sample and broken copies


@pytest.mark.parametrize("path", INVENTORIES, ids=lambda p: p.name)
def test_inventory_carries_the_modeline_and_is_schema_valid(path):
    first = path.read_text(encoding="utf-8").splitlines()[0]
    m = MODELINE.match(first)
    assert m, f"{path.name}: start with `# yaml-language-server: $schema=<relative path to the schema>`"
    assert (path.parent / m.group(1)).resolve() == SCHEMA_FILE.resolve()
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(_data(path))]
    assert not errors
    result = run_cli("validate", "-i", str(path.relative_to(ROOT)))
    assert result.returncode == 0, result.stderr


BROKEN = {
    "typo'd top-level key": lambda d: d.__setitem__("enigne", d.pop("engine")),
    "typo'd node key": lambda d: d["nodes"][0].__setitem__("adress", d["nodes"][0].pop("address")),
    "typo'd engine key": lambda d: d["engine"].__setitem__("imgae", d["engine"].pop("image")),
    "typo'd device key": lambda d: d["nodes"][0]["devices"][0].__setitem__("ipaddr", "29.0.0.1"),
    "another engine's key": lambda d: d["engine"].__setitem__("gpu_memory_utilization", 0.9),
    "number as a string": lambda d: d["model"].__setitem__("max_seq_len", "8192"),
    "bool as a number": lambda d: d["cluster"].__setitem__("super_pod", 1),
    "unknown hardware": lambda d: d["cluster"].__setitem__("hardware", "a4"),
    "unknown engine kind": lambda d: d["engine"].__setitem__("kind", "sglang"),
    "bad cluster name": lambda d: d["cluster"].__setitem__("name", "DS_prod"),
    "port out of range": lambda d: d["ssh"].__setitem__("port", 70000),
    "missing model": lambda d: d.pop("model"),
    "no nodes": lambda d: d.__setitem__("nodes", []),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_copy_of_the_sample_is_refused_by_schema_and_models(case):
    data = copy.deepcopy(_data(SAMPLE))
    BROKEN[case](data)
    assert not _schema_ok(data), case
    assert not _models_ok(data), case


def _parsed_error_cases() -> list[Path]:
    """The cases whose YAML reads (not the yaml-* ones: encodings, tags, aliases, depth, duplicate keys)."""
    out = []
    for case in ERRORS:
        try:
            load_inventory(case / "inventory.yaml")
        except InventoryError:
            continue
        out.append(case)
    return out


PARSED_ERRORS = _parsed_error_cases()


def test_enough_error_cases_parse():
    assert len(PARSED_ERRORS) >= 50


@pytest.mark.parametrize("case", PARSED_ERRORS, ids=lambda p: p.name)
def test_schema_agrees_with_the_models_on_every_error_case(case):
    """tests/errors: the mistakes of one key (unknown keys, types, names, ranges) are the schema's refusals too;
    the mistakes only `validate` sees across keys (duplicate IPs, degrees, hccn.conf) pass the schema."""
    data = load_inventory(case / "inventory.yaml").data
    assert _schema_ok(data) == _models_ok(data), [e.message for e in VALIDATOR.iter_errors(data)]


# ------------------------------------------------------------------ property: schema verdict == models' verdict

_KEYS = re.compile(r"^[a-z_]+$")
_VALUES = [None, "x", "8", 7, 0, -1, 0.5, True, [], {}, ["a"], {"a": 1}]


def _paths(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield path + (key,)
            yield from _paths(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield path + (i,)
            yield from _paths(value, path + (i,))


def _parent(data, path):
    for part in path[:-1]:
        data = data[part]
    return data


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(example=st.sampled_from(INVENTORIES), pick=st.integers(min_value=0), mutation=st.sampled_from(
    ["typo", "drop", "value"]), value=st.sampled_from(_VALUES), where=st.integers(min_value=0, max_value=3))
def test_schema_and_models_agree_on_mutated_inventories(example, pick, mutation, value, where):
    """Each example with one key typo'd, dropped or given another value: the schema accepts exactly what the
    models accept (typo'd keys inside free-form mappings such as engine.config stay valid for both)."""
    data = copy.deepcopy(_data(example))
    paths = list(_paths(data))
    path = paths[pick % len(paths)]
    parent = _parent(data, path)
    key = path[-1]
    if mutation == "typo" and isinstance(key, str):
        typo = key[:where] + key[where + 1:] if len(key) > where else key + "s"
        if typo in parent:
            return
        parent[typo] = parent.pop(key)
    elif mutation == "drop" and isinstance(parent, dict):
        parent.pop(key)
    else:
        parent[key] = copy.deepcopy(value)
    assert _schema_ok(data) == _models_ok(data), (path, mutation, value,
                                                  [e.message for e in VALIDATOR.iter_errors(data)][:3])


# ------------------------------------------------------------------ an editor: the YAML language server


@pytest.mark.slow
def test_yaml_language_server_completes_keys_and_marks_a_typo(tmp_path):
    """What a VS Code / Neovim user sees: an example copied into a checkout-like tree (the modeline's relative
    path), a typo'd key and a wrong type marked on their lines, the keys of the engine kind written offered."""
    import yamlls

    missing = yamlls.available()
    assert missing is None, missing
    tree = tmp_path / "checkout"
    (tree / "deployctl" / "schema").mkdir(parents=True)
    (tree / "deployctl" / "schema" / "inventory.schema.json").write_text(shipped_text(), encoding="utf-8")
    (tree / "inventories" / "examples").mkdir(parents=True)
    text = (ROOT / "inventories" / "examples" / "vllm-a3-1p1d-qwen3.yaml").read_text(encoding="utf-8")
    lines = text.splitlines()
    engine = lines.index("engine:")
    lines[engine + 1:engine + 1] = ["  gpu_memory_utilisation: 0.9", "  "]    # a typo, and a line to complete on
    address = next(i for i, line in enumerate(lines) if line.strip().startswith("address:"))
    lines[address] = lines[address].replace("address:", "adress:")
    seq = next(i for i, line in enumerate(lines) if line.strip().startswith("max_seq_len:"))
    lines[seq] = lines[seq].split(":")[0] + ': "8192"'
    broken = tree / "inventories" / "examples" / "broken.yaml"
    broken.write_text("\n".join(lines) + "\n", encoding="utf-8")
    good = tree / "inventories" / "examples" / "good.yaml"
    good.write_text(text, encoding="utf-8")

    with yamlls.YamlLanguageServer(tree) as server:
        assert server.open(good, text) == []
        diagnostics = server.open(broken, broken.read_text(encoding="utf-8"))
        completions = server.completions(broken, engine + 3, 2)
        hover = server.hover(broken, seq + 1, 4)
    by_line = {line: message for line, message in diagnostics}
    assert "gpu_memory_utilisation" in by_line.get(engine + 2, ""), diagnostics
    assert "adress" in by_line.get(address + 1, ""), diagnostics
    assert "string" in by_line.get(seq + 1, "").lower() or "integer" in by_line.get(seq + 1, "").lower(), \
        diagnostics
    assert "gpu_memory_utilization" in completions and "connector" in completions, completions
    assert "config" not in completions and "tls" not in completions, completions   # MindIE's keys: not offered
    assert "output tokens per request (maxSeqLen)" in hover, hover
