"""`deployctl init`: the app writes the packaged samples (app/init.py); this prints what it wrote and what next."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def run_init(directory: Path, force: bool, output: str) -> None:
    from deployctl.app.init import init_samples

    res = init_samples(directory, force)
    sample = str(res.sample)
    nxt = f"deployctl plan -i {sample}"
    if output == "json":
        typer.echo(json.dumps({"directory": str(res.directory), "files": [str(f) for f in res.files],
                               "sample": sample, "next": nxt}, indent=2))
        return
    typer.echo(f"wrote {len(res.files)} files under {res.directory / 'inventories'}:")
    for f in res.files:
        typer.echo(f"  {f}")
    typer.echo(f"✓ {sample}: every key with a comment; examples/: one inventory per layout and engine; "
               "inventory.schema.json: for editors (the inventories' first line names it)")
    typer.echo(f"  next: {nxt}    (edit it for your servers, then: deployctl validate -i {sample})")
