"""The short Markdown report of a benchmark run (report.md in the run record, plots linked relatively)."""

from __future__ import annotations

from pathlib import Path


def fmt(v, digits: int = 1) -> str:
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def triple(d: dict | None, scale: float = 1.0, digits: int = 1) -> str:
    """'p50 / p90 / p99' of a distribution."""
    if not d or d.get("p50") is None:
        return "-"
    return " / ".join(fmt(d[k] * scale, digits) for k in ("p50", "p90", "p99"))


def ratio(r) -> str:
    return "-" if r is None else f"{r:.2f}x"


def load_text(p: dict) -> str:
    """A point's load when it is not the default closed loop over unrelated prompts, else ''."""
    parts = []
    if p.get("request_rate"):
        parts.append(f"{p['request_rate']:g} req/s {p.get('arrival') or 'poisson'} (at most {p['concurrency']} "
                     "in flight)")
    if p.get("shared_prefix"):
        parts.append(f"{p['shared_prefix']}-token shared prefix")
    return ", ".join(parts)


def _esc(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_report(path: Path, doc: dict) -> Path:
    """`doc`: the summary (run.py): target, tool, suite, points (summary + comparison), plots, notes."""
    t = doc["target"]
    lines = [f"# Benchmark: {_esc(t['model'])} at {_esc(t['url'])}", "",
             f"- run: `{doc['run_id']}` ({doc['started']} .. {doc['finished']}), status **{doc['status']}**",
             f"- deployment: {_esc(t.get('description') or '-')}",
             f"- tool: {doc['tool']['name']} {doc['tool']['version'] or '?'} (streaming chat completions, server "
             "token counts, ignore_eos so answers are as long as asked)" if doc["settings"]["ignore_eos"] else
             f"- tool: {doc['tool']['name']} {doc['tool']['version'] or '?'} (streaming chat completions, server "
             "token counts)",
             f"- suite: {_esc(doc['suite']['name'])} ({_esc(doc['suite']['source'])}), {len(doc['points'])} "
             f"point(s), {doc['settings']['warmup']} warm-up request(s) per point, at most "
             f"{doc['settings']['duration_limit']:g} s of measurement per point",
             "- input tokens: about one per word of the prompt plus the chat template's few (the measured "
             "`in` column is the server's count)", ""]
    lines += ["## Measured (p50 / p90 / p99)", "",
              "| point | concurrency | in / out tokens | ok / err | TTFT ms | TPOT ms | E2E s | out tok/s | "
              "tok/s/die |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in doc["points"]:
        measured_in = (p.get("input_tokens") or {}).get("p50")
        lines.append(
            f"| {_esc(p['point'])} | {p['concurrency']} | {p['input_len']} "
            f"({'-' if measured_in is None else f'{measured_in:.0f}'}) / "
            f"{p['output_len']} | {p['ok']} / {p['errors']} | {triple(p['ttft_ms'])} | {triple(p['tpot_ms'])} | "
            f"{triple(p['e2e_ms'], 0.001, 2)} | {fmt(p['output_tokens_per_s'])} | "
            f"{fmt(p['per_die_tokens_per_s'], 2)} |")
    loads = [(p["point"], load_text(p)) for p in doc["points"]]
    if any(text for _, text in loads):
        lines += ["", "Load (the estimate is made for the same load): "
                  + "; ".join(f"{_esc(name)}: {text or 'closed loop'}" for name, text in loads) + "."]
    lines += ["", "## Against the plan's estimate (measured / estimated)", "",
              "| point | TTFT p50 ms | est. | ratio | TPOT p50 ms | est. | ratio | out tok/s | est. | ratio |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in doc["points"]:
        c = p["comparison"]
        cells = []
        for k in ("ttft_ms", "tpot_ms", "output_tokens_per_s"):
            cells += [fmt(c[k]["measured"]), fmt(c[k]["estimated"]), ratio(c[k]["ratio"])]
        lines.append(f"| {_esc(p['point'])} | " + " | ".join(cells) + " |")
    if doc.get("estimate_note"):
        lines += ["", f"_{_esc(doc['estimate_note'])}_"]
    if doc["plots"]:
        lines += ["", "## Plots", ""]
        for rel in doc["plots"]:
            lines += [f"![{Path(rel).stem}]({rel})", ""]
    problems = [p for p in doc["points"] if p.get("failure") or p["errors"] or p.get("timed_out")]
    notes = list(doc.get("notes") or [])
    if problems or notes:
        lines += ["", "## Notes", ""]
        for p in problems:
            if p.get("failure"):
                lines.append(f"- {_esc(p['point'])}: **failed**: {_esc(p['failure'])}")
            if p["errors"]:
                kinds = "; ".join(f"{e['count']} x {_esc(e['error'])}" for e in p["error_kinds"])
                lines.append(f"- {_esc(p['point'])}: {p['errors']} request(s) failed: {kinds}")
            if p.get("timed_out"):
                lines.append(f"- {_esc(p['point'])}: the duration limit stopped it after {p['measured']} of "
                             f"{p['requests']} requests")
        lines += [f"- {_esc(n)}" for n in notes]
    lines += ["", "Raw per-request data: `requests.jsonl` (and each point's AIPerf records under "
              "`points/<point>/aiperf/`); numbers: `summary.json`.", ""]
    path.write_text("\n".join(lines))
    return path
