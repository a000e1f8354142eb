"""values.schema.json of the chart, generated from its values model (core/render/chart_values.py + every engine's
block, from the engine registry).

    python -m deployctl.app.chart_schema deployctl/charts/ascend-llm/values.schema.json

Helm validates values against it on install, upgrade, template and lint (JSON Schema draft 7:
pydantic's `$defs` become `definitions`). A test keeps the committed file equal to this output.
"""

from __future__ import annotations

import json
import sys


def _rewrite_refs(node):
    """draft 7 refs (#/definitions/X) and no generated titles ("Nameoverride" helps nobody)."""
    if isinstance(node, dict):
        return {k: (v.replace("#/$defs/", "#/definitions/") if k == "$ref" else _rewrite_refs(v))
                for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [_rewrite_refs(v) for v in node]
    return node


def values_schema() -> dict:
    from deployctl.app.engines import charts
    from deployctl.core.render.chart_values import values_model

    schema = _rewrite_refs(values_model(charts()).model_json_schema())
    defs = schema.pop("$defs", {})
    return {"$schema": "http://json-schema.org/draft-07/schema#", **schema, "definitions": defs}


def schema_text() -> str:
    return json.dumps(values_schema(), indent=2, sort_keys=False) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m deployctl.app.chart_schema OUT.json", file=sys.stderr)
        return 2
    with open(argv[0], "w", encoding="utf-8") as fh:
        fh.write(schema_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
