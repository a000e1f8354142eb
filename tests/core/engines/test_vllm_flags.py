"""Every rendered `vllm serve` argv against the real parser of its vLLM release, rebuilt from the committed parser
tables (deployctl/core/engines/vllm_ascend/flags/vllm-<ver>.json: every option string, nargs, choices, boolean negations;
positional model_tag; allow_abbrev=False), and the inventory checks of engine.args / engine.additional_config.

The parser is built by tests/core/engines/vllm_model.py (no deployctl code): an argv it rejects is an argv `vllm serve`
of that version would reject.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import vllm_model as vm  # noqa: E402

EXAMPLES = vm.ROOT / "inventories" / "examples"
VLLM_EXAMPLES = sorted(p.name for p in EXAMPLES.glob("vllm-*.yaml"))
# keys every shipped vllm-ascend table reads at the top level (checked in test_additional_keys_common_to_all)
COMMON_ADDITIONAL = {"multistream_overlap_shared_expert": True, "enable_shared_expert_dp": False}


def _render(inv: dict, tmp: Path, name: str = "inv"):
    src = vm.write(inv, tmp / f"{name}.yaml")
    out = tmp / f"{name}-out"
    return vm.cli("render", "-i", src, "-o", out), out


def _check_all_args(out: Path, version: str) -> int:
    """Parse every serve-*.args under out with the version's parser; --additional-config keys against the
    vllm-ascend table. Returns the number of argv parsed."""
    files = sorted(out.glob("*/serve-*.args"))
    assert files, f"no serve-*.args rendered under {out}"
    for f in files:
        argv = vm.read_args(f)
        try:
            ns = vm.parse(version, argv)
        except vm.ArgvRejected as err:
            pytest.fail(f"vllm serve {version} rejects {f.relative_to(out)}: {err}\nargv: {argv}")
        assert ns.model_tag, f"{f}: no model positional"
        assert not [a for a in argv if re.match(r"^--[a-z0-9-]*_", a)], f"{f}: underscore spelling of a flag"
        if ns.additional_config:
            bad = vm.unknown_additional_keys(version, json.loads(ns.additional_config))
            assert not bad, f"{f}: --additional-config keys vllm-ascend {version} does not read: {bad}"
    return len(files)


@pytest.mark.parametrize("version", vm.VERSIONS)
@pytest.mark.parametrize("example", VLLM_EXAMPLES)
def test_example_argv_parses_with_real_parser(example, version, tmp_path):
    inv = yaml.safe_load((EXAMPLES / example).read_text())
    inv["engine"]["version"] = version
    r, out = _render(inv, tmp_path)
    if r.returncode != 0:
        assert version == "0.11", f"{example} on {version} refused (exit {r.returncode}):\n{r.stdout}{r.stderr}"
        assert r.returncode == 2, r.stdout + r.stderr
        text = r.stdout + r.stderr
        bullets = [line for line in text.splitlines() if line.strip().startswith("•")]
        assert bullets, text
        for b in bullets:
            assert "[source: " in b and "[source: ]" not in b, f"refusal without a source: {b}"
        return      # refused on 0.11 by the support matrix, with its source: nothing rendered to parse
    assert _check_all_args(out, version) >= 1


@pytest.mark.parametrize("version", ["0.13", "0.18", "0.23"])
@pytest.mark.parametrize("example", VLLM_EXAMPLES)
def test_example_with_user_args_and_additional_config_parses(example, version, tmp_path):
    """engine.args of the guides and additional_config keys every version reads: still one valid argv."""
    inv = yaml.safe_load((EXAMPLES / example).read_text())
    inv["engine"]["version"] = version
    inv["engine"]["args"] = ["--no-enable-prefix-caching", "--compilation-config",
                             '{"cudagraph_mode":"FULL_DECODE_ONLY"}']
    inv["engine"]["additional_config"] = dict(COMMON_ADDITIONAL)
    r, out = _render(inv, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    _check_all_args(out, version)
    for f in out.glob("*/serve-*.args"):
        ns = vm.parse(version, vm.read_args(f))
        assert ns.enable_prefix_caching is False, f
        # engine.additional_config, under a pd-split role's own keys (layout.<role>.engine.additional_config)
        assert COMMON_ADDITIONAL.items() <= json.loads(ns.additional_config).items(), f


def test_additional_keys_common_to_all():
    for v in vm.VERSIONS:
        assert not vm.unknown_additional_keys(v, COMMON_ADDITIONAL), v


@pytest.mark.parametrize("version", vm.VERSIONS)
def test_table_parser_is_strict(version):
    """The check can fail: unknown flags, abbreviations, underscore spellings and bad choices are rejected."""
    base = ["/m", "--tensor-parallel-size", "8"]
    vm.parse(version, base)
    for bad in (["--no-such-flag"], ["--max-num-seq", "8"], ["--max_num_seqs", "8"], ["--dtype", "int3"],
                ["--tensor-parallel-size"], ["--headless", "yes"]):
        with pytest.raises(vm.ArgvRejected):
            vm.parse(version, base + bad)
    with pytest.raises(vm.ArgvRejected):
        vm.parse(version, base + ["--kv-transfer-config", "{not json"])
    ns = vm.parse(version, base + ["--no-enable-prefix-caching", "-tp", "4"])
    assert ns.enable_prefix_caching is False and ns.tensor_parallel_size == "4"


def test_table_parser_rejects_flag_absent_from_version():
    argv = ["/m", "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1", "--headless"]
    with pytest.raises(vm.ArgvRejected, match="--nnodes"):
        vm.parse("0.11", argv)
    assert vm.parse("0.13", argv).nnodes == "2"
    assert vm.parse("0.18", argv).node_rank == "1"
    assert vm.parse("0.23", argv).master_addr == "10.0.0.1"


# ------------------------------------------------------------------------------- deployctl validate

def _validate(tmp_path: Path, version: str = "0.13", **engine):
    inv = vm.inventory(hardware="a2", nodes=2, model="qwen3-235b-a22b", version=version, engine=engine)
    return vm.cli("validate", "-i", vm.write(inv, tmp_path / f"v{version}.yaml"))


def test_validate_misspelt_flag_did_you_mean(tmp_path):
    r = _validate(tmp_path, args=["--max-num-seq", "8"])
    text = r.stdout + r.stderr
    assert r.returncode == 2, text
    line = next((ln for ln in text.splitlines() if "engine.args[0]" in ln), None)
    assert line and "--max-num-seq" in line, text
    assert re.search(r"did you mean:? '?--max-num-seqs\b", text), text


def test_validate_owned_flag_refused(tmp_path):
    r = _validate(tmp_path, args=["--port", "9000"])
    text = r.stdout + r.stderr
    assert r.returncode == 2, text
    assert "engine.args[0]" in text and "--port" in text, text


def test_validate_unknown_additional_config_key_did_you_mean(tmp_path):
    r = _validate(tmp_path, additional_config={"multistream_overlap_shared_expt": True})
    text = r.stdout + r.stderr
    assert r.returncode == 2, text
    assert "engine.additional_config.multistream_overlap_shared_expt" in text, text
    assert re.search(r"did you mean:? '?multistream_overlap_shared_expert", text), text


def test_validate_known_additional_config_key_accepted(tmp_path):
    r = _validate(tmp_path, additional_config=dict(COMMON_ADDITIONAL))
    assert r.returncode == 0, r.stdout + r.stderr


def test_flag_new_in_013_accepted_on_013_refused_on_011(tmp_path):
    flag = "--stream-interval"
    assert flag in vm.vllm_table("0.13")["options"] and flag not in vm.vllm_table("0.11")["option_strings"]
    args = [flag, "2"]
    ok = _validate(tmp_path, "0.13", args=args)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = _validate(tmp_path, "0.11", args=args)
    text = bad.stdout + bad.stderr
    assert bad.returncode == 2, text
    assert "engine.args[0]" in text and flag in text, text
    # and the rendered argv carries it, accepted by 0.13's parser
    inv = vm.inventory(hardware="a2", nodes=2, version="0.13", engine={"args": args})
    r, out = _render(inv, tmp_path, "new13")
    assert r.returncode == 0, r.stdout + r.stderr
    _check_all_args(out, "0.13")
    for f in out.glob("*/serve-*.args"):
        assert vm.parse("0.13", vm.read_args(f)).stream_interval == "2"


def test_validate_unknown_ascend_env_variable_did_you_mean(tmp_path):
    """vllm-ascend ignores VLLM_ASCEND_* variables it does not read: deployctl refuses them, per version."""
    r = _validate(tmp_path, env={"VLLM_ASCEND_ENABLE_MLAPOO": 1})
    text = r.stdout + r.stderr
    assert r.returncode == 2, text
    assert "engine.env.VLLM_ASCEND_ENABLE_MLAPOO" in text and "did you mean VLLM_ASCEND_ENABLE_MLAPO?" in text, text
    ok = _validate(tmp_path, env={"VLLM_ASCEND_ENABLE_MLAPO": 1})
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_feature_env_moved_into_additional_config_in_023_warns_with_the_key(tmp_path):
    """PR #9064 (v0.23.0): VLLM_ASCEND_ENABLE_MLAPO is read only while --additional-config has no enable_mlapo
    (ascend_config.py@v0.23.0 L187, L354-365): plan warns and names the key; 0.18 reads the env var alone."""
    inv = vm.inventory(hardware="a2", nodes=2, model="qwen3-235b-a22b", version="0.23",
                       engine={"env": {"VLLM_ASCEND_ENABLE_MLAPO": 1}})
    r = vm.cli("plan", "-i", vm.write(inv, tmp_path / "v023.yaml"), "--output", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    warnings = json.loads(r.stdout)["engine"]["warnings"]
    assert any("VLLM_ASCEND_ENABLE_MLAPO" in w and "enable_mlapo" in w for w in warnings), warnings
    inv["engine"]["version"] = "0.18"
    r = vm.cli("plan", "-i", vm.write(inv, tmp_path / "v018.yaml"), "--output", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not any("VLLM_ASCEND_ENABLE_MLAPO" in w for w in json.loads(r.stdout)["engine"]["warnings"])


def test_env_removed_in_023_is_refused_with_its_replacement(tmp_path):
    r = _validate(tmp_path, "0.23", env={"VLLM_ASCEND_ENABLE_CONTEXT_PARALLEL": 1})
    text = r.stdout + r.stderr
    assert r.returncode == 2, text
    assert "engine.env.VLLM_ASCEND_ENABLE_CONTEXT_PARALLEL" in text and "--prefill-context-parallel-size" in text
    ok = _validate(tmp_path, "0.18", env={"VLLM_ASCEND_ENABLE_CONTEXT_PARALLEL": 1})
    assert ok.returncode == 0, ok.stdout + ok.stderr
