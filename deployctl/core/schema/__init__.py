"""The inventory's JSON Schema, generated from its pydantic models (deployctl/core/models/inventory.py and every
engine's settings model), for editors: the YAML language server (VS Code's YAML extension, Neovim, Helix, ...)
completes keys, shows each key's description and marks typo'd keys and wrong types while an inventory is
written.

    deployctl schema -o inventory.schema.json         # this file, for inventories outside a checkout
    deployctl schema --markdown -o docs/inventory.md  # the generated reference (deployctl/core/schema/reference.py)

Draft 7, because the YAML language server validates instances with draft 7 (newer drafts' keywords are
ignored or reported as unsupported there); jsonschema/check-jsonschema read draft 7 too. The file shipped
as deployctl/schema/inventory.schema.json is this output: tests/core/schema/test_inventory_schema.py keeps it in step.

What the schema says is what the models check about one value or one block: keys (unknown keys are
refused: additionalProperties false), types (strict: "8" is not 8, true is not 1), enums, patterns, ranges,
required keys, defaults. Rules across keys or files (device counts, unique IPs, layout degrees, the catalog,
hccn.conf) stay with `deployctl validate`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
    from pydantic_core import core_schema

SCHEMA_FILE = Path(__file__).parents[2] / "schema" / "inventory.schema.json"   # editors' modelines name it
DRAFT = "http://json-schema.org/draft-07/schema#"
_FACTORY_DEFAULTS: dict[object, Callable[[], object]] = {dict: dict, list: list}


def _generator() -> type[GenerateJsonSchema]:
    from pydantic.json_schema import GenerateJsonSchema

    class Generate(GenerateJsonSchema):
        """Pydantic's generator, plus the defaults of `Field(default_factory=dict | list)` ({} and [])."""

        def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
            json_schema = super().default_schema(schema)
            factory = _FACTORY_DEFAULTS.get(schema.get("default_factory"))
            if factory is not None and "$ref" not in json_schema:
                json_schema["default"] = factory()
            return json_schema

    return Generate


def _def_name(name: str) -> str:
    """pydantic names colliding models by module (deployctl__core__models__engine_settings__mindie__Ports):
    MindiePorts."""
    if "__engine_settings__" not in name:
        return name
    kind = name.split("__engine_settings__", 1)[1].split("__", 1)[0]
    return "".join(part.capitalize() for part in kind.split("_")) + name.rsplit("__", 1)[1]


def _clean(node: Any, renames: dict[str, str]) -> Any:
    """Draft 7 and editor friendly: `#/definitions/` refs; a `$ref` with siblings wrapped in allOf (draft 7
    ignores a ref's siblings, so the description would be lost); no generated titles ("Hbm Gb" helps nobody);
    no OpenAPI `discriminator` (not JSON Schema: the engine block is rebuilt by _engine_schema)."""
    if isinstance(node, list):
        return [_clean(v, renames) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _clean(v, renames) for k, v in node.items()
           if not (k == "title" and isinstance(v, str)) and k != "discriminator"}
    if isinstance(out.get("$ref"), str):
        name = out["$ref"].rsplit("/", 1)[1]
        out["$ref"] = f"#/definitions/{renames.get(name, name)}"
        if len(out) > 1:
            ref = out.pop("$ref")
            out = {"allOf": [{"$ref": ref}], **out}
    return out


def _engine_schema(description: str) -> dict:
    """engine: `kind` picks the block as the loader does (left out: the default kind). if/then/else rather than
    oneOf: an error names the keys of the kind written, not "matches none of the alternatives"."""

    from deployctl.core.models.engine_settings import DEFAULT_KIND, SETTINGS

    models = dict(SETTINGS)
    chosen: dict = ({"$ref": f"#/definitions/{models[DEFAULT_KIND].__name__}"} if DEFAULT_KIND in models
                    else {"required": ["kind"]})
    for kind, model in reversed([(k, m) for k, m in models.items() if k != DEFAULT_KIND]):
        chosen = {"if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
                  "then": {"$ref": f"#/definitions/{model.__name__}"}, "else": chosen}
    return {
        "description": description,
        "type": "object",
        "properties": {"kind": {
            "description": f"Which engine renders and runs it (default: {DEFAULT_KIND}; "
                           "`deployctl engines` lists them).",
            "enum": list(models), "default": DEFAULT_KIND}},
        **chosen,
    }


def inventory_schema() -> dict:
    """The inventory's JSON Schema (draft 7) as a dict."""
    from deployctl.core.models.inventory import Inventory

    raw = Inventory.model_json_schema(ref_template="#/$defs/{model}", schema_generator=_generator())
    defs = raw.pop("$defs", {})
    renames = {name: _def_name(name) for name in defs}
    definitions = {renames[name]: _clean(body, renames) for name, body in sorted(defs.items())}
    body = _clean(raw, renames)
    body["properties"]["engine"] = _engine_schema(body["properties"]["engine"]["description"])
    return {"$schema": DRAFT, "title": "deployctl inventory", **body,
            "definitions": dict(sorted(definitions.items()))}


def schema_text() -> str:
    return json.dumps(inventory_schema(), indent=2, ensure_ascii=False) + "\n"


def shipped_text() -> str:
    """The schema file shipped in the package."""
    from deployctl.core.packaged import packaged_text

    return packaged_text("deployctl", "schema", "inventory.schema.json")


MODELINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)\s*$")
