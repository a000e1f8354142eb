"""MindIE's support matrix (support.yaml) as rows and as the README's "Supported combinations" tables.

``support_rows()`` gives one row per model and MindIE version; ``feature_rows()`` one row per parallel
feature; ``markdown_table()`` both as Markdown. Pure functions of support.yaml (and the model catalog's
display names): the same data always gives the same text.
"""

from __future__ import annotations

from typing import Any

from deployctl.core.engines.mindie.support import matrix

DIES_PER_SERVER = {"a2": 8, "a3": 16}   # 8 x 910B; A3: 8 NPUs x 2 dies (inventory devices_per_node)
MARK = {"yes": "✓", "no": "✗", "unverified": "?"}
RUNTIMES = ("atb", "torch")
FEATURES: tuple[tuple[str, str, dict[str, list[tuple[str, str]]]], ...] = (   # (support.yaml features key, label, {runtime: [(constraint key, what it adds to the cell)]})
    ("pp", "pp (pipeline parallel)", {"atb": [("pp_with_dp", "not with dp > 1")]}),
    ("cp", "cp (context parallel)", {"atb": [("cp_with_dp", "not with dp > 1")],
                                     "torch": [("cp_with_dp", "not with dp > 1")]}),
    ("local_tp", "local TP (o_proj_tp, lm_head_tp)", {}),
)


def _display(model: str) -> str:
    from deployctl.core.catalog import models

    info = models().get(model)
    return info.display if info else model


def _short(source: str) -> str:
    """The first reference of a source: up to its first `;` or ` (`."""
    return source.split(";", 1)[0].split(" (", 1)[0].strip()


def _resolve(models: dict, key: str) -> tuple[dict, list[str]]:
    entry = models[key]
    if "same_as" in entry:
        return models[entry["same_as"]], [entry["note"]] if entry.get("note") else []
    return entry, []


def _per_version(entry: dict | None, version: str) -> tuple[str, str]:
    v = (entry or {}).get(version)
    return (v["value"], v.get("source", "")) if v else ("unverified", "")


def _validated(entry: dict) -> dict:
    valid = entry.get("validated_world", {})
    out = {hw: {"world_size": valid[hw], "servers": -(-valid[hw] // DIES_PER_SERVER[hw]),
                "at_least": valid.get("at_least") == "yes"} for hw in DIES_PER_SERVER if hw in valid}
    return {"hardware": out, "source": valid.get("source", "")}


def support_rows() -> list[dict]:
    """One row per model (support.yaml order) x MindIE version (support.yaml order)."""
    data = matrix()
    rows = []
    for key in data["models"]:
        entry, notes = _resolve(data["models"], key)
        runtime = entry["backend"]["value"]
        quants = {q: v["value"] for q, v in entry.get("quants", {}).items()}
        for version, ver in data["versions"].items():
            supported, source = _per_version(entry.get("versions"), version)
            row_notes = list(notes)
            rt_ok, rt_source = _per_version(data["backends"].get(runtime), version)
            if rt_ok == "no" and supported != "no":
                supported, source = "no", rt_source
                row_notes.append(f"MindIE {version} has no {runtime} runtime")
            if supported == "unverified":
                source = source or f"MindIE {version}: {ver['sources']}"
            rows.append({
                "engine": "mindie", "model": key, "display": _display(key), "version": version,
                "runtime": runtime, "runtime_source": entry["backend"].get("source", ""),
                "supported": supported, "quantizations": quants, "validated": _validated(entry),
                "source": source, "notes": row_notes,
            })
    return rows


def _pd_cell(data: dict, runtime: str) -> tuple[str, str]:
    pd = data["pd_split"]
    names = [_display(m) for m in pd["models"]["value"]
             if _resolve(data["models"], m)[0]["backend"]["value"] == runtime]
    cell = f"yes ({', '.join(dict.fromkeys(names))})" if names else "unverified"
    return cell, pd["models"]["source"]


def feature_rows() -> list[dict]:
    """Parallel features by runtime: {feature, atb, torch, sources: {runtime: source}}."""
    data = matrix()
    feats = data["features"]
    rows = []
    for key, label, extra in FEATURES:
        row: dict[str, Any] = {"feature": label, "key": key, "sources": {}}
        for rt in RUNTIMES:
            v = feats.get(key, {}).get(rt)
            if v is None:
                row[rt] = "unverified"
                continue
            cell = [f"max {v['max']}"] if "max" in v else []
            for ckey, words in extra.get(rt, []):
                if feats.get(ckey, {}).get(rt, {}).get("value") == "no":
                    cell.append(words)
            row[rt] = v["value"] + (f" ({', '.join(cell)})" if cell else "")
            row["sources"][rt] = v.get("source", "")
        rows.append(row)
    pd: dict[str, Any] = {"feature": "pd-split (distributed decode)", "key": "pd_split", "sources": {}}
    for rt in RUNTIMES:
        pd[rt], pd["sources"][rt] = _pd_cell(data, rt)
    pd["sources"] = {"all": pd["sources"]["atb"]}
    rows.append(pd)
    return rows


def _quant_cell(row: dict) -> str:
    if row["supported"] == "no":
        return "—"
    return ", ".join(f"{q} {MARK.get(v, v)}" for q, v in row["quantizations"].items()) or "unverified"


def _validated_cell(row: dict) -> str:
    hw = row["validated"]["hardware"]
    parts = []
    for name, v in hw.items():
        more = "≥ " if v["at_least"] else ""
        servers = f"{more}{v['servers']} server{'s' if v['servers'] > 1 else ''}"
        parts.append(f"{name.upper()}: {servers} (world {v['world_size']})")
    return ", ".join(parts) or "—"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md(header: tuple[str, ...], rows: list[tuple]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return out


def markdown_table() -> str:
    """The README's "Supported combinations" block (support.yaml's versions, models and features)."""
    rows = support_rows()
    lines = ["Supported combinations (quantizations: ✓ yes, ✗ no, ? unverified):", ""]
    lines += _md(("model", "MindIE version", "runtime", "supported", "quantizations", "validated servers",
                  "source"),
                 [(r["display"], r["version"], r["runtime"], r["supported"], _quant_cell(r), _validated_cell(r),
                   _short(r["source"])) for r in rows])
    notes = list(dict.fromkeys(n for r in rows for n in r["notes"]))
    if notes:
        lines += ["", "Notes:", ""] + [f"* {n}" for n in notes]
    lines += ["", "**Parallel features by runtime**", ""]
    feats = feature_rows()
    lines += _md(("feature", "atb", "torch", "source"),
                 [(f["feature"], f["atb"], f["torch"],
                   "; ".join(f"{rt}: {_short(s)}" if rt != "all" else _short(s) for rt, s in f["sources"].items()))
                  for f in feats])
    lines += ["", "Sources by version: " + "; ".join(f"MindIE {v}: {d['sources']}"
                                                    for v, d in matrix()["versions"].items()) + "."]
    return "\n".join(lines)
