"""Per-role settings (layout.<role>.engine / model / env): what a pd-split role may set over the engine and model
blocks, how it merges, and that the role's own instances are planned with it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from deployctl.core.errors import InventoryError
from deployctl.core.input.raw import parse_yaml
from deployctl.core.input.roles import for_role
from deployctl.app.inventory import validate_inventory
from deployctl.core.sizing.planner import plan_layout

EXAMPLE = Path(__file__).parents[3] / "inventories" / "examples" / "vllm-a3-1p1d-qwen3.yaml"


def inventory(prefill: dict, decode: dict, engine: dict | None = None):
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["layout"]["prefill"].update(prefill)
    doc["layout"]["decode"].update(decode)
    doc["engine"].update(engine or {})
    return validate_inventory(parse_yaml(yaml.safe_dump(doc, sort_keys=False), "pd.yaml", EXAMPLE.parent))


def problems(prefill: dict, decode: dict) -> list[str]:
    with pytest.raises(InventoryError) as exc:
        inventory(prefill, decode)
    return [f"{p.path}: {p.message}" for p in exc.value.problems]


def test_a_role_merges_its_engine_keys_limits_and_env_over_the_blocks():
    inv = inventory({"engine": {"args": ["--enforce-eager"], "additional_config": {"recompute_scheduler_enable": True}},
                     "model": {"max_batch_size": 16}, "env": {"HCCL_BUFFSIZE": 256}},
                    {"engine": {"gpu_memory_utilization": 0.92}},
                    {"args": ["--block-size", "128"], "additional_config": {"enable_cpu_binding": True},
                     "env": {"HCCL_BUFFSIZE": 1024}})
    p = for_role(inv, "prefill")
    assert p.engine.args == ["--block-size", "128", "--enforce-eager"]   # appended: the role's flag comes last
    assert p.engine.additional_config == {"enable_cpu_binding": True, "recompute_scheduler_enable": True}
    assert p.engine.env["HCCL_BUFFSIZE"] == 256 and p.model.max_batch_size == 16
    d = for_role(inv, "decode")
    assert d.engine.gpu_memory_utilization == 0.92 and d.engine.args == ["--block-size", "128"]
    assert d.engine.env["HCCL_BUFFSIZE"] == 1024 and d.model.max_batch_size == inv.model.max_batch_size
    assert for_role(inv, "mixed") is inv


def test_each_role_is_planned_with_its_own_memory_share_and_hccl_buffer():
    inv = inventory({"engine": {"gpu_memory_utilization": 0.8}, "env": {"HCCL_BUFFSIZE": 256}},
                    {"engine": {"gpu_memory_utilization": 0.92}, "env": {"HCCL_BUFFSIZE": 1024}})
    plan = plan_layout(inv)
    p, d = plan.role("prefill")[0].memory, plan.role("decode")[0].memory
    assert p.memory_fraction == 0.8 and d.memory_fraction == 0.92
    assert p.comm_buffers_gb < d.comm_buffers_gb


def test_keys_that_cannot_differ_per_role_are_refused_at_their_line():
    found = problems({"engine": {"image": "other:1"}}, {"engine": {"gpu_memory_utilization": 1.5}})
    assert any(f.startswith("layout.prefill.engine.image: engine.image cannot differ per role") for f in found)
    assert any(f.startswith("layout.decode.engine.gpu_memory_utilization") and "0.99" in f for f in found)


def test_role_env_hccl_buffer_is_range_checked_and_other_hccl_settings_stay_global():
    found = problems({"env": {"HCCL_BUFFSIZE": "lots"}}, {"env": {"HCCL_CONNECT_TIMEOUT": 600}})
    assert any(f.startswith("layout.prefill.env.HCCL_BUFFSIZE") and "not an integer" in f for f in found)
    assert any(f.startswith("layout.decode.env.HCCL_CONNECT_TIMEOUT") for f in found)


def argv_of(inv, role: str) -> list[str]:
    from deployctl.core.engines.vllm_ascend.launch import launches

    plan = plan_layout(inv)
    node = plan.role(role)[0].master
    return list(launches(plan)[node].serves[0].argv)


def value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_each_role_launches_with_its_own_flags_limits_and_memory_share():
    inv = inventory({"engine": {"args": ["--enforce-eager", "--seed", "7"]},
                     "model": {"max_batch_size": 16, "max_prefill_tokens": 16384}},
                    {"engine": {"args": ["--compilation-config", '{"cudagraph_mode":"FULL_DECODE_ONLY"}'],
                                "gpu_memory_utilization": 0.92,
                                "additional_config": {"recompute_scheduler_enable": True}},
                     "model": {"max_batch_size": 14, "max_prefill_tokens": 42}},
                    {"args": ["--seed", "1024", "--no-enable-prefix-caching"]})
    p, d = argv_of(inv, "prefill"), argv_of(inv, "decode")
    assert (value(p, "--max-num-seqs"), value(p, "--max-num-batched-tokens")) == ("16", "16384")
    assert (value(d, "--max-num-seqs"), value(d, "--max-num-batched-tokens")) == ("14", "42")
    assert "--enforce-eager" in p and "--enforce-eager" not in d and "--compilation-config" not in p
    assert value(d, "--gpu-memory-utilization") == "0.92" and value(p, "--gpu-memory-utilization") == "0.9"
    assert value(d, "--additional-config") == '{"recompute_scheduler_enable":true}' and "--additional-config" not in p
    # a flag set by both engine.args and the role is passed once, with the role's value
    assert p.count("--seed") == 1 and value(p, "--seed") == "7" and value(d, "--seed") == "1024"
    assert "--no-enable-prefix-caching" in p and "--no-enable-prefix-caching" in d


def test_role_args_and_additional_config_are_checked_against_the_version_at_their_line():
    found = problems({"engine": {"args": ["--enforce-eagre"]}},
                     {"engine": {"args": ["--max-num-seqs", "8"], "additional_config": {"recompute_sched": True}}})
    assert any(f.startswith("layout.prefill.engine.args[0]: vllm serve 0.13 has no flag --enforce-eagre")
               for f in found), found
    assert any(f.startswith("layout.decode.engine.args[0]: --max-num-seqs is set by deployctl") for f in found)
    assert any(f.startswith("layout.decode.engine.additional_config.recompute_sched") for f in found)


def test_compilation_config_and_async_scheduling_are_in_every_version_parser_table():
    from deployctl.core.engines.vllm_ascend.catalog import VERSIONS, option

    for version in VERSIONS:
        assert option(version, "--compilation-config") == "--compilation-config"
        assert option(version, "--async-scheduling") == "--async-scheduling"


def test_vllm_chunks_long_prompts_so_the_prefill_batch_may_be_below_the_longest_input():
    doc_model = {"max_seq_len": 40960, "max_input_len": 32768, "max_prefill_tokens": 2048}
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["model"].update(doc_model)
    inv = validate_inventory(parse_yaml(yaml.safe_dump(doc), "pd.yaml", EXAMPLE.parent))
    assert value(argv_of(inv, "prefill"), "--max-num-batched-tokens") == "2048"
    assert value(argv_of(inv, "prefill"), "--max-model-len") == "40960"
    chunks_prefill = lambda inv: inv.engine_spec.chunked_prefill(inv)  # noqa: E731

    def with_sched(sched):      # 0.11's Ascend scheduler does not chunk unless told to
        return inv.model_copy(update={"engine": inv.engine.model_copy(
            update={"additional_config": {"ascend_scheduler_config": sched}})})
    assert chunks_prefill(inv) and not chunks_prefill(with_sched({"enabled": True}))
    assert chunks_prefill(with_sched({"enabled": True, "enable_chunked_prefill": True}))
    doc["engine"]["args"] = ["--no-enable-chunked-prefill"]      # without chunking the refusal stays
    with pytest.raises(InventoryError) as exc:
        validate_inventory(parse_yaml(yaml.safe_dump(doc), "pd.yaml", EXAMPLE.parent))
    assert any(p.path == "model.max_prefill_tokens" for p in exc.value.problems)


def test_a_published_128k_decode_layout_fits_once_decode_is_sized_for_decode_steps():
    """vllm-ascend DeepSeek-V3_2-W8A8-EP.yaml @182b75ea (tests/conformance/vllm/configs/c08.yaml): 133000-token
    context, prefill chunk 8192 (L49), decode DP8 x TP4 with --max-num-seqs 14 and --max-num-batched-tokens 42
    (= 14 x (1 + 2 MTP), L138/L141). Its decode workspace sized for a whole 128K prefill left no room for one
    sequence's KV cache."""
    doc = yaml.safe_load((Path(__file__).parents[2] / "conformance" / "vllm" / "configs" / "c08.yaml").read_text())
    doc = doc["inventory"]
    doc["model"].update(max_input_len=131072)
    del doc["model"]["max_prefill_tokens"]
    doc["layout"]["prefill"]["model"] = {"max_prefill_tokens": 8192}
    doc["layout"]["decode"]["model"] = {"max_batch_size": 14}
    inv = validate_inventory(parse_yaml(yaml.safe_dump(doc), "c08.yaml", EXAMPLE.parent))
    plan = plan_layout(inv)
    decode = plan.role("decode")[0]
    assert decode.memory.fits and decode.memory.max_tokens >= 133000
    assert value(argv_of(inv, "decode"), "--max-num-batched-tokens") == "42"
    doc["layout"]["decode"]["model"]["max_prefill_tokens"] = 131072     # a whole max-length prefill: refused
    whole = validate_inventory(parse_yaml(yaml.safe_dump(doc), "c08.yaml", EXAMPLE.parent))
    assert not plan_layout(whole, checked=False).role("decode")[0].memory.fits


def test_a_role_change_touches_only_that_roles_files_so_diff_and_up_restart_only_it():
    from deployctl.core.filediff import file_changes
    from deployctl.core.render import render_artifacts

    def files(decode: dict) -> dict[str, bytes]:
        return {a.path: a.content for a in render_artifacts(plan_layout(inventory({}, decode)))}

    before = files({"env": {"HCCL_BUFFSIZE": 512}})
    after = files({"env": {"HCCL_BUFFSIZE": 1024}, "engine": {"args": ["--async-scheduling"]}})
    changed = sorted(p for p in after if before.get(p) != after[p] and p != "plan.json")
    assert changed and all(p.startswith("d1/") for p in changed), changed
    env = file_changes("env", before["d1/env"], after["d1/env"])
    assert [(c.key, c.old, c.new) for c in env] == [("env HCCL_BUFFSIZE", "512", "1024")]
    args = file_changes("serve-0.args", before["d1/serve-0.args"], after["d1/serve-0.args"])
    assert [c.new for c in args] == ["--async-scheduling"]


def test_an_engine_that_does_not_chunk_refuses_a_roles_prefill_batch_below_the_longest_input():
    example = EXAMPLE.parent / "a3-pd-2p1d.yaml"
    doc = yaml.safe_load(example.read_text())
    doc["layout"]["prefill"]["model"] = {"max_prefill_tokens": doc["model"]["max_input_len"] - 1}
    with pytest.raises(InventoryError) as exc:
        validate_inventory(parse_yaml(yaml.safe_dump(doc, sort_keys=False), "pd.yaml", example.parent))
    (p,) = [p for p in exc.value.problems if "max_prefill_tokens" in p.path]
    assert p.path == "layout.prefill.model.max_prefill_tokens" and "MindIE prefills the longest input" in p.hint
