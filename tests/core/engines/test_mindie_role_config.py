"""Per-role MindIE config.json (issue 22): layout.<role>.engine.config and layout.<role>.model render into that
role's config.json only, are checked at their own line and by MindIE's encoded acceptance checks, and
NPU_MEMORY_FRACTION may differ per role (each role's memory fit reads its own)."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import ROOT, run_cli

EXAMPLE = ROOT / "inventories" / "examples" / "a3-pd-2p1d.yaml"


def write(tmp_path, prefill: dict, decode: dict, engine: dict | None = None):
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["layout"]["prefill"].update(prefill)
    doc["layout"]["decode"].update(decode)
    doc["engine"].update(engine or {})
    path = tmp_path / "pd.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def render(tmp_path, prefill: dict, decode: dict, engine: dict | None = None) -> dict[str, dict]:
    out = tmp_path / "out"
    r = run_cli("render", "-i", str(write(tmp_path, prefill, decode, engine)), "-o", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    return {"p": json.loads((out / "p1" / "config.json").read_text()),
            "d": json.loads((out / "d1" / "config1.json").read_text()),
            "p_env": (out / "p1" / "env").read_text(), "d_env": (out / "d1" / "env").read_text()}


def test_each_role_renders_its_own_config_sections_limits_and_model_options(tmp_path):
    got = render(tmp_path,
                 {"engine": {"config": {"ServerConfig": {"maxLinkNum": 4096},
                                        "BackendConfig": {"ScheduleConfig": {"maxPrefillBatchSize": 16,
                                                                             "dpScheduling": True}}}},
                  "model": {"max_prefill_tokens": 32768}, "env": {"NPU_MEMORY_FRACTION": 0.9}},
                 {"engine": {"config": {"ServerConfig": {"maxLinkNum": 256}, "BackendConfig": {"ModelDeployConfig": {
                     "ModelConfig": [{"models": {"deepseekv2": {"ep_level": 2}}}]}}}},
                  "model": {"max_batch_size": 32}},
                 {"config": {"ServerConfig": {"tokenTimeout": 60}}})
    p, d = got["p"], got["d"]
    assert (p["ServerConfig"]["maxLinkNum"], d["ServerConfig"]["maxLinkNum"]) == (4096, 256)
    assert p["ServerConfig"]["tokenTimeout"] == d["ServerConfig"]["tokenTimeout"] == 60     # engine.config: both
    ps, ds = p["BackendConfig"]["ScheduleConfig"], d["BackendConfig"]["ScheduleConfig"]
    assert ps["maxPrefillBatchSize"] == 16 and ps["dpScheduling"] is True and "dpScheduling" not in ds
    assert ps["maxPrefillTokens"] == 32768 and ds["maxPrefillTokens"] != 32768
    assert ds["maxBatchSize"] == 32 and ps["maxBatchSize"] == 64 and ds["maxPrefillBatchSize"] == 32
    dm = d["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
    assert dm["models"]["deepseekv2"]["ep_level"] == 2 and dm["modelName"] == "ds-v3.2"   # merged by position
    assert "models" not in p["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0] or \
        "ep_level" not in p["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["models"].get("deepseekv2", {})
    assert "NPU_MEMORY_FRACTION=0.9\n" in got["p_env"] and "NPU_MEMORY_FRACTION=0.9\n" not in got["d_env"]


def test_a_role_cannot_set_keys_deployctl_owns_and_its_fraction_is_range_checked(tmp_path):
    path = write(tmp_path, {"engine": {"config": {"ServerConfig": {"port": 2000}}}},
                 {"env": {"NPU_MEMORY_FRACTION": 1.5}})
    r = run_cli("validate", "-i", str(path))
    assert r.returncode == 2
    assert "layout.prefill.engine.config.ServerConfig.port" in r.stdout + r.stderr
    assert "layout.decode.env.NPU_MEMORY_FRACTION" in r.stdout + r.stderr


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_mindie_refusal_of_a_role_value_names_the_role_key(tmp_path, role):
    """maxLinkNum in [1, 4096] (server_config.cpp@LLM30 L385-386): the finding points at the role's line."""
    blocks = {"prefill": {}, "decode": {}}
    blocks[role] = {"engine": {"config": {"ServerConfig": {"maxLinkNum": 5000}}}}
    r = run_cli("validate", "-i", str(write(tmp_path, blocks["prefill"], blocks["decode"])))
    text = r.stdout + r.stderr
    assert r.returncode == 2, text
    assert f"layout.{role}.engine.config.ServerConfig.maxLinkNum" in text and "server_config.cpp" in text
    other = "decode" if role == "prefill" else "prefill"
    assert f"layout.{other}.engine.config" not in text
