"""MindIE's own load-time checks that refused what deployctl rendered (issue 22, items 1, 3, 5).

Each expected value below is MindIE's or a published deployment's, with its source; none is read from
deployctl's renderer.
"""

from __future__ import annotations

import json
import subprocess

import yaml

from conftest import EXAMPLES, run_cli

MINDIE_MULTI_SERVER = ["a2-2x8-tp-pp.yaml", "a2-4x8-dp-ep.yaml", "a2-2x8-v32-dp-ep.yaml", "a3-2x16-superpod.yaml"]


def _render(tmp_path, example: str, edit=None):
    doc = yaml.safe_load((EXAMPLES / example).read_text())
    if edit:
        edit(doc)
    tmp_path.mkdir(parents=True, exist_ok=True)
    inv = tmp_path / example
    inv.write_text(yaml.safe_dump(doc))
    (tmp_path / "hccn").symlink_to(EXAMPLES / "hccn")
    r = run_cli("render", "-i", str(inv), "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    return doc, tmp_path / "out"


def test_world_size_is_each_servers_own_npu_count(tmp_path):
    """BackendConfig refuses a config whose npuDeviceIds subset size differs from worldSize ("The size of
    npuDeviceIds (subset) does not equal to worldSize": MindIE-LLM src/config_manager/backend_config.cpp@v3.0.0
    L156-165), at load, before the rank table is read (config_manager_impl.cpp L117-118, rank table L134).
    Published two-server configs: worldSize 8 with npuDeviceIds [[0..7]] on each A2 server
    (MindIE-LLM src/server/scripts/A2_double_machine.md)."""
    for i, example in enumerate(MINDIE_MULTI_SERVER):
        doc, out = _render(tmp_path / str(i), example)
        for node in doc["nodes"]:
            cfg = json.loads((out / node["name"] / "config.json").read_text())
            mc = cfg["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
            ids = cfg["BackendConfig"]["npuDeviceIds"]
            assert all(len(group) == mc["worldSize"] for group in ids), (example, node["name"], mc["worldSize"], ids)
            assert mc["worldSize"] == len(node.get("devices") or range(16 if doc["cluster"]["hardware"] == "a3"
                                                                       else 8))


def test_max_input_len_may_equal_max_seq_len(tmp_path):
    """MindIE range-checks maxInputTokenLen only (model_deploy_config.cpp L448) and caps input at maxSeqLen - 1
    (llm_manager_impl.cpp L416); published configs run maxSeqLen 6000 / maxInputTokenLen 6000. maxIterTimes must
    stay in [1, maxSeqLen] (schedule_config range check)."""
    def edit(doc):
        doc["model"].update(max_seq_len=6000, max_input_len=6000)
        doc["model"].pop("max_prefill_tokens", None)

    doc, out = _render(tmp_path, "a2-2x8-tp-pp.yaml", edit)
    cfg = json.loads((out / doc["nodes"][0]["name"] / "config.json").read_text())
    mdc = cfg["BackendConfig"]["ModelDeployConfig"]
    assert (mdc["maxSeqLen"], mdc["maxInputTokenLen"]) == (6000, 6000)
    assert 1 <= cfg["BackendConfig"]["ScheduleConfig"]["maxIterTimes"] <= 6000


def test_deployctl_env_wins_over_the_images_set_env_scripts(tmp_path):
    """nnal/atb/set_env.sh exports ATB_WORKSPACE_MEM_ALLOC_ALG_TYPE=1 (hicann/ascend-transformer-boost
    scripts/set_env.sh L54-71); MindIE-Motor's boot.sh sources set_env first (L71) and exports its own values
    after (L130, L152). The launcher of both engines, run by a real bash with such a script, keeps deployctl's 3."""
    from deployctl.core.engine_spec.container import source_set_env

    script = tmp_path / "set_env.sh"
    script.write_text("export ATB_WORKSPACE_MEM_ALLOC_ALG_TYPE=1\nexport ATB_HOME_PATH=/opt/atb\n"
                      "export LD_LIBRARY_PATH=/opt/atb/lib:${LD_LIBRARY_PATH:-}\n")
    launcher = source_set_env((str(script), str(tmp_path / "absent.sh"))) + \
        'echo "$ATB_WORKSPACE_MEM_ALLOC_ALG_TYPE|$ATB_HOME_PATH|$LD_LIBRARY_PATH|$ODD"'
    env = {"PATH": "/usr/bin:/bin", "ATB_WORKSPACE_MEM_ALLOC_ALG_TYPE": "3", "LD_LIBRARY_PATH": "/x",
           "ODD": "a b $(touch x) 'q\"", "DEPLOYCTL_ENV_KEYS": "ATB_WORKSPACE_MEM_ALLOC_ALG_TYPE ODD"}
    out = subprocess.run(["bash", "-c", launcher], env=env, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout == "3|/opt/atb|/opt/atb/lib:/x|a b $(touch x) 'q\"\n"
    assert not (tmp_path / "x").exists()
    for example in ("a2-2x8-tp-pp.yaml", "vllm-a3-1p1d-qwen3.yaml"):
        doc, out_dir = _render(tmp_path / example, example)
        env_text = (out_dir / doc["nodes"][0]["name"] / "env").read_text()
        keys = [line.split("=", 1)[0] for line in env_text.splitlines() if line and not line.startswith("#")]
        listed = dict(line.split("=", 1) for line in env_text.splitlines() if "=" in line and line[0] != "#")
        assert listed["DEPLOYCTL_ENV_KEYS"].split() == [k for k in keys if k != "DEPLOYCTL_ENV_KEYS"]
        start = (out_dir / doc["nodes"][0]["name"] / "start.sh").read_text()
        assert "DEPLOYCTL_ENV_KEYS" in start and start.index("_keep+=") < start.index("set_env.sh")
