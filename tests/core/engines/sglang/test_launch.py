"""SGLang's launch rendering, as SGLang's Ascend guides run it (sgl-project/sglang@40946a20 docs/docs/
hardware-platforms/ascend-npus/model-deployment/best-practices/deepseek_r1.mdx, "BP"): the expected values are the
guide's, written here, not read back from the renderer. The full published deployments are the conformance corpus
(tests/conformance/sglang/)."""

from __future__ import annotations

import pytest

from deployctl.core.engines.sglang.catalog import groups
from deployctl.core.engines.sglang.launch import launches
from deployctl.core.errors import InventoryError, LayoutError
from tests.core.checkpoint.test_plan import plan_of

NODES = "\n".join(f"  - {{name: n{k}, address: 10.0.0.{k + 1}, interface: eth0}}" for k in range(4))


def pd(image: str = "quay.io/ascend/sglang:cann9.0.0-a3-v0.5.16", engine: str = "", prefill: str = "",
       decode: str = "") -> str:
    return f"""
cluster: {{name: t, hardware: a3}}
engine: {{kind: sglang, image: '{image}'{engine}}}
model: {{name: deepseek-r1, quant: w8a8, weights_path: /w, served_name: r1, max_seq_len: 8192,
        max_input_len: 3500, max_batch_size: 32, speculative: {{method: mtp, tokens: 3}}}}
layout:
  preset: pd-split
  prefill: {{instances: [{{nodes: [n0]}}, {{nodes: [n1]}}], tp: 8, dp: 2, moe_ep: 16{prefill}}}
  decode: {{nodes: [n2, n3], tp: 2, dp: 16, moe_ep: 32{decode}}}
nodes:
{NODES}
"""


def argv(plan, node: str) -> list[str]:
    return list(launches(plan)[node].server.argv)


def value(args: list[str], flag: str) -> str | list[str] | bool:
    for canon, group in groups("0.5.23", args):
        if canon == flag:
            return group[1] if len(group) == 2 else group[1:] if len(group) > 2 else True
    return False


def test_a_decode_server_over_two_nodes_is_one_tp_world_with_attention_dp_and_deepep():
    """BP L466-481: --tp-size 32 --dp-size 16 --enable-dp-attention, --nnodes 2 --node-rank i, --dist-init-addr
    <first decode node>:5000, --moe-a2a-backend deepep --deepep-mode low_latency."""
    plan = plan_of(pd())
    for rank, node in enumerate(("n2", "n3")):
        a = argv(plan, node)
        assert value(a, "--tp-size") == "32" and value(a, "--dp-size") == "16"
        assert value(a, "--enable-dp-attention") is True
        assert value(a, "--nnodes") == "2" and value(a, "--node-rank") == str(rank)
        assert value(a, "--dist-init-addr") == "10.0.0.3:5000"
        assert value(a, "--moe-a2a-backend") == "deepep" and value(a, "--deepep-mode") == "low_latency"
        assert value(a, "--disaggregation-mode") == "decode"
        assert value(a, "--disaggregation-transfer-backend") == "ascend"
        assert value(a, "--speculative-algorithm") == "NEXTN" and value(a, "--speculative-num-draft-tokens") == "4"
        # model.max_batch_size 32 a DP group: the server's --max-running-requests is each scheduler's share times
        # the groups (sglang 0.5.23 kv_cache_configurator.py L3119-3129)
        assert value(a, "--max-running-requests") == str(32 * 16)
    assert launches(plan)["n3"].server.port is None        # node rank 1 serves no HTTP


def test_prefill_servers_take_consecutive_bootstrap_ports_and_the_router_names_each():
    """BP L419 `--disaggregation-bootstrap-port $((8998 + $i))`, router L514-523 `--prefill URL 8998 --prefill URL
    8999 --decode URL`."""
    plan = plan_of(pd())
    assert value(argv(plan, "n0"), "--disaggregation-bootstrap-port") == "8998"
    assert value(argv(plan, "n1"), "--disaggregation-bootstrap-port") == "8999"
    assert value(argv(plan, "n0"), "--deepep-mode") == "normal"
    assert value(argv(plan, "n0"), "--nnodes") is False      # a one-node server: SGLang's defaults
    router = launches(plan)["n0"].router
    assert router is not None
    text = " ".join(router)
    assert "--pd-disaggregation" in router
    assert "--prefill http://10.0.0.1:30000 8998 --prefill http://10.0.0.2:30000 8999" in text
    assert "--decode http://10.0.0.3:30000" in text and "http://10.0.0.4" not in text


def test_releases_that_deprecate_dp_attention_get_attn_dp_size():
    """sglang 0.5.22+: "Use --attn-dp-size <dp-size> instead of --dp-size <dp-size> --enable-dp-attention"
    (0.5.23 server_args.py L417-424); 0.5.16's parser has no --attn-dp-size."""
    new = plan_of(pd(image="lmsysorg/sglang:v0.5.23-cann9.0.0-a3"))
    a = argv(new, "n2")
    assert value(a, "--attn-dp-size") == "16" and value(a, "--enable-dp-attention") is False
    assert value(a, "--dp-size") is False


def test_a_roles_flag_replaces_the_engine_blocks_and_args_may_replace_a_defaulted_flag():
    plan = plan_of(pd(engine=", args: [--watchdog-timeout, '600', --moe-a2a-backend, ascend_fuseep]",
                      decode=", engine: {args: [--watchdog-timeout, '9000'], mem_fraction_static: 0.75}"))
    d = argv(plan, "n2")
    assert value(d, "--watchdog-timeout") == "9000" and d.count("--watchdog-timeout") == 1
    assert value(d, "--moe-a2a-backend") == "ascend_fuseep" and d.count("--moe-a2a-backend") == 1
    assert value(d, "--mem-fraction-static") == "0.75"
    assert value(argv(plan, "n0"), "--watchdog-timeout") == "600"


def test_nargs_plus_flags_keep_their_words_and_a_negative_value_stays_a_value():
    args = ["--cuda-graph-bs-decode", "2", "4", "6", "--chunked-prefill-size", "-1", "--disable-radix-cache"]
    assert groups("0.5.16", args) == [("--cuda-graph-bs-decode", ["--cuda-graph-bs-decode", "2", "4", "6"]),
                                      ("--chunked-prefill-size", ["--chunked-prefill-size", "-1"]),
                                      ("--disable-radix-cache", ["--disable-radix-cache"])]


def test_unique_prefixes_parse_as_argparse_reads_them():
    """The V3.2 guide writes `--tp 32 --dp 8 --ep 32 --moe-dense-tp 1` (argparse allow_abbrev)."""
    from deployctl.core.engines.sglang.catalog import option

    assert option("0.5.16", "--tp") == "--tp-size"
    assert option("0.5.16", "--moe-dense-tp") == "--moe-dense-tp-size"
    assert option("0.5.16", "--enable") is None          # ambiguous


def test_version_from_either_tag_order():
    from deployctl.app.engines import resolve

    spec = resolve("sglang")
    for image, version in (("quay.io/ascend/sglang:cann9.0.0-a3-v0.5.16", "0.5.16"),
                           ("lmsysorg/sglang:v0.5.18-cann9.0.0-a3", "0.5.18")):
        inv = plan_of(pd(image=image)).inventory
        assert spec.version(inv).version == version


@pytest.mark.parametrize("args, message", [
    ("[--tp-size, '16']", "--tp-size is set by deployctl"),
    ("[--no-such-flag]", "has no flag --no-such-flag"),
    ("[--mem-fraction-static, '0.8']", "engine.mem_fraction_static"),
    ("[--deepep-mode]", "--deepep-mode needs a value"),
    ("[--cuda-graph-bs]", "--cuda-graph-bs needs at least one value"),
    ("[deepep-mode, auto]", "'deepep-mode' is not a flag"),
    # the third item, after a flag and its value: the error names that item
    ("[--deepep-mode, auto, --no-such-flag]", "engine.args[2]"),
    # a list flag takes the words up to the next flag: the one after them is checked again
    ("[--cuda-graph-bs, '1', '2', --tp-size, '4']", "engine.args[3]"),
])
def test_engine_args_are_checked_against_the_releases_parser(args, message):
    with pytest.raises(InventoryError) as exc:
        plan_of(pd(engine=f", args: {args}"))
    assert message in exc.value.render()


def test_moe_ep_must_span_the_server():
    """With DeepEP, SGLang sets the expert parallel size to --tp-size (0.5.23 arg_groups/overrides.py
    L1611-1620): experts split both ways is not something it runs."""
    with pytest.raises(LayoutError) as exc:
        plan_of(pd(decode=", moe_tp: 2").replace("moe_ep: 32", "moe_ep: 16"))
    assert "DeepEP spans every rank" in exc.value.render()


def test_the_memory_share_is_of_the_free_memory_and_leaves_the_workspace_outside():
    plan = plan_of(pd(prefill=", engine: {mem_fraction_static: 0.81}"))
    fit = plan.role("prefill")[0].memory
    assert fit.fraction_name == "--mem-fraction-static" and fit.memory_fraction == 0.81
    assert abs(fit.kv_budget_gb - (fit.usable_gb - fit.weights_gb)) < 0.02


def test_a_deprecated_flag_is_a_warning_naming_its_replacement():
    from deployctl.core.engines.sglang.support import deprecated_findings

    plan = plan_of(pd(image="lmsysorg/sglang:v0.5.18-cann9.0.0-a3", engine=", args: [--cuda-graph-max-bs, '8']"))
    (f,) = deprecated_findings(plan)
    assert f.level == "warning" and "--cuda-graph-max-bs" in f.message and "--cuda-graph-max-bs-decode" in f.hint


def test_roles_take_their_own_http_port_and_the_router_follows():
    """The P/D guides serve prefill on 8000 and decode on 8001 (BP L418, L470; router L514-523)."""
    plan = plan_of(pd(prefill=", engine: {ports: {api: 8000}}", decode=", engine: {ports: {api: 8001}}"))
    assert value(argv(plan, "n0"), "--port") == "8000" and value(argv(plan, "n2"), "--port") == "8001"
    router = " ".join(launches(plan)["n0"].router or ())
    assert "--prefill http://10.0.0.1:8000 8998" in router and "--decode http://10.0.0.3:8001" in router


def test_the_router_gets_its_own_environment():
    from deployctl.core.engines.sglang.render import render

    plan = plan_of(pd(engine=", router_env: {SGLANG_DP_ROUND_ROBIN: 1}"))
    files = {a.path: a.content.decode() for a in render(plan)}
    assert "SGLANG_DP_ROUND_ROBIN=1" in files["n0/router.env"]
    assert "SGLANG_DP_ROUND_ROBIN" not in files["n0/env"]
    assert '--env-file "$HERE/router.env"' in files["n0/start-router.sh"]


def test_a_context_above_what_sglang_derives_from_config_json_is_refused_unless_allowed():
    """sglang 0.5.23 srt/configs/model_config.py L1291-1318: GLM-5.2's config.json (tests/fixtures/checkpoints/
    glm-5.2) gives 1,048,576 positions; 2,000,000 is refused, with SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN it runs."""
    from tests.core.checkpoint.quoted import FIXTURES

    text = f"""
cluster: {{name: t, hardware: a3}}
engine: {{kind: sglang, image: 'quay.io/ascend/sglang:cann9.0.0-a3-v0.5.16'{{env}}}}
model: {{name: my-glm, config_path: '{FIXTURES / "glm-5.2"}', quant: w8a8, weights_path: /w, served_name: g,
        max_seq_len: 2000000, max_input_len: 4096, max_batch_size: 1}}
layout: {{preset: dp-ep, tp: 16, dp: 2, moe_ep: 32}}
nodes:
  - {{name: n0, address: 10.0.0.1, interface: eth0}}
  - {{name: n1, address: 10.0.0.2, interface: eth0}}
"""
    with pytest.raises(LayoutError) as exc:
        plan_of(text.replace("{env}", ""))
    assert "2,000,000" in exc.value.render() and "1,048,576" in exc.value.render()
    assert "model_config.py L1291-1318" in exc.value.render()
    plan = plan_of(text.replace("{env}", ", env: {SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN: '1'}"))
    assert plan.instances


def test_a_role_given_only_its_nodes_is_one_plain_tp_server_over_them():
    """P/D roles with nodes and no degrees: SGLang's own shapes, not another engine's. A one-node server: one
    --tp-size over its dies, no attention DP (OLD ascend_npu.md@0b1520f0 L186-225 gives each role --tp-size only);
    a server over two nodes: attention DP, a group a node (as BP L466-481 runs one over nodes)."""
    text = pd().replace("instances: [{nodes: [n0]}, {nodes: [n1]}], tp: 8, dp: 2, moe_ep: 16",
                        "instances: [{nodes: [n0]}, {nodes: [n1]}]") \
        .replace("nodes: [n2, n3], tp: 2, dp: 16, moe_ep: 32", "nodes: [n2, n3]")
    plan = plan_of(text)
    a, d = argv(plan, "n0"), argv(plan, "n2")
    assert value(a, "--tp-size") == "16" and value(a, "--dp-size") is False
    assert value(a, "--enable-dp-attention") is False
    assert value(d, "--tp-size") == "32" and value(d, "--nnodes") == "2"
    assert value(d, "--dp-size") == "2" and value(d, "--enable-dp-attention") is True


# DeepSeek-V3.2 W8A8 1P1D on 4 x A3 (sgl-project/sglang@042de61bf6848a6c9a3b7437b999586fbc06b998 docs/docs/
# hardware-platforms/ascend-npus/model-deployment/best-practices/deepseek_v3_2.mdx L101-134, "V32" below): one prefill
# server over 2 nodes, `--nnodes 2 --tp 32 --enable-prefill-cp --cp-strategy zigzag --attn-cp-size 32
# --max-prefill-tokens 68000 --chunked-prefill-size -1` for 128K prompts (the benchmark's --random-input-len 131072,
# L220); one decode server over 2 nodes, `--tp 32 --attn-dp-size 8 --ep 32`.
def v32(prefill: str = ", tp: 1, dp: 1, cp: 32", prefill_args: str = "--enable-prefill-cp, --cp-strategy, zigzag",
        version: str = "0.5.22") -> str:
    return f"""
cluster: {{name: t, hardware: a3}}
engine: {{kind: sglang, image: 'quay.io/ascend/sglang:cann9.0.0-a3-v0.5.16', version: '{version}',
         args: [--chunked-prefill-size, '-1', --moe-dense-tp-size, '1']}}
model: {{name: deepseek-v3.2, quant: w8a8, weights_path: /w, served_name: v32, max_seq_len: 163840,
        max_input_len: 131072, max_batch_size: 4, speculative: {{method: mtp, tokens: 3}}}}
layout:
  preset: pd-split
  prefill: {{nodes: [n0, n1]{prefill}, model: {{max_batch_size: 1, max_prefill_tokens: 68000}},
            engine: {{args: [{prefill_args}]}}}}
  decode: {{nodes: [n2, n3], tp: 4, dp: 8, model: {{max_prefill_tokens: 68000}}}}
nodes:
{NODES}
"""


def test_sglang_takes_a_prefill_budget_below_the_longest_prompt():
    """V32 L114-115 + L220: --max-prefill-tokens 68000 with --chunked-prefill-size -1 for 131,072-token prompts.
    Without chunked prefill SGLang always admits the first request of a prefill batch, whatever its length; the
    budget only bounds the requests added after it (sglang 0.5.16 srt/managers/schedule_policy.py L1064-1071,
    L1105-1113: "if the can_run_list is empty, always accept the first prefill request")."""
    plan = plan_of(v32())
    assert value(argv(plan, "n0"), "--max-prefill-tokens") == "68000"
    assert value(argv(plan, "n0"), "--chunked-prefill-size") == "-1"


def test_a_prefill_server_with_context_parallel_over_two_nodes():
    """V32 L106-125: `--tp 32` is the server's world, `--attn-cp-size 32` its attention context parallel: SGLang's
    attention TP is tp_size / attention DP / attn_cp_size ("The tp_size is the world size, not the real tensor
    parallel size", sglang 0.5.16 srt/server_args.py L5554-5561, L4635-4638), so layout.prefill {tp: 1, cp: 32}."""
    plan = plan_of(v32())
    (pre,) = plan.role("prefill")
    assert (pre.degrees.tp, pre.degrees.dp, pre.degrees.cp, pre.degrees.moe_ep) == (1, 1, 32, 32)
    for rank, node in enumerate(("n0", "n1")):
        a = argv(plan, node)
        assert value(a, "--tp-size") == "32" and value(a, "--attn-cp-size") == "32"
        assert value(a, "--dp-size") is False and value(a, "--attn-dp-size") is False
        assert value(a, "--nnodes") == "2" and value(a, "--node-rank") == str(rank)
        assert value(a, "--dist-init-addr") == "10.0.0.1:5000"
        assert value(a, "--moe-a2a-backend") == "deepep" and value(a, "--deepep-mode") == "normal"
        assert value(a, "--enable-prefill-cp") is True and value(a, "--cp-strategy") == "zigzag"
    d = argv(plan, "n2")
    assert value(d, "--tp-size") == "32" and value(d, "--attn-dp-size") == "8"
    assert value(d, "--attn-cp-size") is False


def test_sglang_context_parallel_without_its_strategy_is_a_warning():
    """SGLang binds a CP strategy only with --enable-prefill-cp (sglang 0.5.16 srt/layers/cp/base.py L213-224);
    the strategy is the user's (V32 L123-124: --enable-prefill-cp --cp-strategy zigzag)."""
    plan = plan_of(v32(prefill_args="--cp-strategy, zigzag"))
    assert any("--enable-prefill-cp" in w for w in plan.engine.warnings), plan.engine.warnings
    assert not any("--enable-prefill-cp" in w for w in plan_of(v32()).engine.warnings)


def test_attn_cp_size_comes_from_the_layout_not_from_args():
    """deployctl sizes attention and weights by the layout's tp and cp; --attn-cp-size in args would split the
    attention behind its back (tp 16 in the layout, attention TP 1 in SGLang): refused where it is written."""
    with pytest.raises(InventoryError) as exc:
        plan_of(v32(prefill=", tp: 16, dp: 2", prefill_args="--enable-prefill-cp, --cp-strategy, zigzag, "
                                                             "--attn-cp-size, '16'"))
    text = exc.value.render()
    assert "layout.prefill.cp" in text and "layout.prefill.engine.args[3]" in text


def test_sglang_context_parallel_is_a_prefill_servers():
    with pytest.raises(LayoutError) as exc:
        plan_of(v32().replace("decode: {nodes: [n2, n3], tp: 4, dp: 8", "decode: {nodes: [n2, n3], tp: 4, dp: 4, "
                                                                         "cp: 2"))
    assert "layout.decode.cp" in exc.value.render()
