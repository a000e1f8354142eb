"""SGLang's support matrix (support.yaml) as rows (`deployctl engines`) and as Markdown: per model (catalog) or
checkpoint family, the releases a published Ascend deployment validated, and the other shipped releases as
unverified."""

from __future__ import annotations

from deployctl.core.engines.sglang.support import matrix


def _display(name: str, kind: str) -> str:
    from deployctl.core.catalog import models

    if kind == "family":
        return f"{name} (family)"
    info = models().get(name)
    return info.display if info else name


def support_rows() -> list[dict]:
    data = matrix()
    rows = []
    for kind, entries in (("model", data["models"]), ("family", data["families"])):
        for name, entry in entries.items():
            notes = [entry["note"]] if entry.get("note") else []
            target = entry
            while "same_as" in target:
                target = data["models"][target["same_as"]]
            validated = target.get("validated", {})
            quants = {q: "yes" for q in target.get("quants", [])}
            base = {"engine": "sglang", "model": name, "display": _display(name, kind),
                    "runtime": "sglang.launch_server", "quantizations": quants,
                    "validated": {"hardware": {}, "source": ""}, "notes": notes}
            for version, source in validated.items():
                rows.append({**base, "version": version, "supported": "yes", "source": source})
            others = [v for v in data["versions"] if v not in validated]
            if others:
                rows.append({**base, "version": ", ".join(others), "supported": "unverified",
                             "source": "no published Ascend deployment validates these releases"})
    return rows


def markdown_table() -> str:
    lines = ["SGLang (engine.kind: sglang; quantizations: ✓ yes):", "",
             "| model | SGLang version | supported | quantizations | source |", "|---|---|---|---|---|"]
    for r in support_rows():
        quants = ", ".join(f"{q} ✓" for q in r["quantizations"])
        lines.append(f"| {r['display']} | {r['version']} | {r['supported']} | {quants} | {r['source']} |")
    spec = matrix()["speculative"]
    lines += ["", "model.speculative methods: " + ", ".join(f"{k} (--speculative-algorithm {v})"
                                                              for k, v in spec.items())]
    return "\n".join(lines) + "\n"
