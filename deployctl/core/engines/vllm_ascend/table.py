"""vLLM-Ascend's support matrix (support.yaml) as rows (`deployctl engines`) and as Markdown."""

from __future__ import annotations

from deployctl.core.engines.vllm_ascend.support import matrix


def _display(model: str) -> str:
    from deployctl.core.catalog import models

    info = models().get(model)
    return info.display if info else model


def support_rows() -> list[dict]:
    """One row per model x vllm-ascend version (support.yaml order)."""
    data = matrix()
    rows = []
    for key, entry in data["models"].items():
        notes = [entry["note"]] if entry.get("note") else []
        if "same_as" in entry:
            entry = data["models"][entry["same_as"]]
        for version, ver in data["versions"].items():
            v = entry.get("versions", {}).get(version)
            supported, source = (v["value"], v.get("source", "")) if v else ("unverified", f"vLLM-Ascend {version}: "
                                                                              f"{ver['sources']}")
            rows.append({"engine": "vllm-ascend", "model": key, "display": _display(key), "version": version,
                         "runtime": "vllm", "supported": supported,
                         "quantizations": {q: "yes" for q in entry.get("quants", {})},
                         "validated": {"hardware": {}, "source": ""}, "source": source, "notes": notes})
    return rows


def markdown_table() -> str:
    lines = ["vLLM-Ascend (engine.kind: vllm-ascend; quantizations: ✓ yes):", "",
             "| model | vLLM-Ascend version | supported | quantizations | source |", "|---|---|---|---|---|"]
    for r in support_rows():
        quants = ", ".join(f"{q} ✓" for q in r["quantizations"]) if r["supported"] != "no" else "-"
        lines.append(f"| {r['display']} | {r['version']} | {r['supported']} | {quants} | {r['source']} |")
    lines += ["", "| feature | " + " | ".join(matrix()["versions"]) + " |",
              "|---|" + "---|" * len(matrix()["versions"])]
    for key, per in matrix()["features"].items():
        cells = [per.get(v, {}).get("value", "unverified") for v in matrix()["versions"]]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    drafts = {v: matrix()["speculative_methods"].get(v, {}).get("methods", []) for v in matrix()["versions"]}
    lines.append("| model.speculative methods | " + " | ".join(
        ", ".join(m for m in ("mtp", "eagle", "eagle3", "dflash") if m in drafts[v]) for v in drafts) + " |")
    return "\n".join(lines) + "\n"
