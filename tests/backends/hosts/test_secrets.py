"""Issue 21 observation 7: secret env values (names that look secret, and engine.secret_env) are written in
clear only to the env files a host reads (0600); plan.json, `plan --output json`, run records and their
archives show *** (the end-to-end check on simulated hosts is in test_secrets_cluster.py)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import yaml

from conftest import ROOT, run_cli

SAMPLE = ROOT / "inventories/sample.yaml"
TOKEN = "hf_Sup3rS3cretValue"          # looks secret by name (HF_TOKEN)
OPAQUE = "opaque-credential-42"        # secret only because engine.secret_env lists it


def secret_inventory(tmp_path: Path, secret_env=("MODEL_REPO_AUTH",)) -> Path:
    doc = yaml.safe_load(SAMPLE.read_text())
    doc["engine"]["env"] = {"HF_TOKEN": TOKEN, "MODEL_REPO_AUTH": OPAQUE, "MINDIE_LOG_LEVEL": "info"}
    doc["engine"]["secret_env"] = list(secret_env)
    for node in doc["nodes"]:      # paths in the sample are relative to it
        if "hccn_conf" in node:
            node["hccn_conf"] = str(SAMPLE.parent / node["hccn_conf"])
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_one_definition_of_secret_names():
    from deployctl.core import filediff
    from deployctl.backends.k8s import diff as k8s_diff
    from deployctl.core.input import secrets

    assert filediff.is_secret is secrets.is_secret and filediff.MASK == secrets.MASK
    assert "is_secret" not in filediff.__dict__ or filediff.is_secret.__module__ == "deployctl.core.input.secrets"
    assert k8s_diff._show("x", True) == secrets.MASK


def test_render_masks_plan_json_and_keeps_the_real_value_only_in_private_env_files(tmp_path):
    inv = secret_inventory(tmp_path)
    out = tmp_path / "out"
    res = run_cli("render", "-i", str(inv), "-o", str(out))
    assert res.returncode == 0, res.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["inventory"]["engine"]["env"] == {"HF_TOKEN": "***", "MODEL_REPO_AUTH": "***",
                                                  "MINDIE_LOG_LEVEL": "info"}
    assert TOKEN not in (out / "plan.json").read_text() and OPAQUE not in (out / "plan.json").read_text()
    env = (out / "node1" / "env").read_text()
    assert f"HF_TOKEN={TOKEN}\n" in env and f"MODEL_REPO_AUTH={OPAQUE}\n" in env   # the host needs them
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)   # noqa: E731
    assert mode(out / "node1" / "env") == 0o600 and mode(out / "plan.json") == 0o600
    assert mode(out) == 0o700 and mode(out / "node1") == 0o700
    # nothing else in the tree holds them
    for path in out.rglob("*"):
        if path.is_file() and path.name != "env":
            text = path.read_bytes()
            assert TOKEN.encode() not in text and OPAQUE.encode() not in text, path


def test_plan_json_output_masks_secret_env(tmp_path):
    res = run_cli("plan", "-i", str(secret_inventory(tmp_path)), "--output", "json")
    assert res.returncode == 0, res.stderr
    assert TOKEN not in res.stdout and OPAQUE not in res.stdout
    assert json.loads(res.stdout)["inventory"]["engine"]["env"]["HF_TOKEN"] == "***"


def test_secret_env_names_are_validated(tmp_path):
    res = run_cli("validate", "-i", str(secret_inventory(tmp_path, ["BAD-NAME", "NOT_SET_ANYWHERE"])))
    assert res.returncode != 0
    assert "engine.secret_env" in res.stdout + res.stderr
    assert "'BAD-NAME' is not a valid environment variable name" in res.stdout + res.stderr
    assert "NOT_SET_ANYWHERE is not set in engine.env" in res.stdout + res.stderr


def test_diff_masks_names_listed_in_secret_env():
    from deployctl.core.filediff import file_changes

    old, new = b"MODEL_REPO_AUTH=a\nHF_TOKEN=x\n", b"MODEL_REPO_AUTH=b\nHF_TOKEN=y\n"
    shown = [str(c) for c in file_changes("env", old, new, secret_names=frozenset({"MODEL_REPO_AUTH"}))]
    assert shown == ["env HF_TOKEN: *** → ***", "env MODEL_REPO_AUTH: *** → ***"]


def test_run_record_files_are_private(tmp_path):
    from deployctl.io.records import RunRecord

    rec = RunRecord.create(tmp_path, "up")
    p = rec.write("rendered/node1/x.json", "{}")
    assert stat.S_IMODE(rec.path.stat().st_mode) == 0o700
    assert stat.S_IMODE(p.stat().st_mode) == 0o600 and stat.S_IMODE(p.parent.stat().st_mode) == 0o700
