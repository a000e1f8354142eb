"""Invariants of the committed SGLang flag tables (deployctl/core/engines/sglang/flags/).

The tables are dumps of SGLang's real argparse parsers (scripts/sglang_flags/extract.py): `sglang-<ver>.json` is the
parser of `python -m sglang.launch_server` / `sglang serve` of that release, `sglang-router-<ver>.json` the parser of
`python -m sglang_router.launch_router`. These tests check that every flag deployctl renders exists in every supported
version, that the Ascend values deployctl relies on are accepted, and pin the renames/removals between the versions so
that a regenerated table that changes them fails here first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
FLAGS = ROOT / "deployctl" / "core" / "engines" / "sglang" / "flags"


def _version_key(v: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in v.replace("post", ".").split("."))


def _load(prefix: str) -> dict[str, dict]:
    out = {}
    for p in FLAGS.glob(f"{prefix}-*.json"):
        ver = p.name[len(prefix) + 1 : -len(".json")]
        if not ver[:1].isdigit():
            continue  # sglang-router-* when loading sglang-*
        out[ver] = json.loads(p.read_text())
    return dict(sorted(out.items(), key=lambda kv: _version_key(kv[0])))


SGLANG = _load("sglang")
ROUTER = _load("sglang-router")

# Flags the SGLang engine renders for every launch (aggregated or PD, single or multi node).
LAUNCH_FLAGS = (
    "--model-path",
    "--tp-size",
    "--dp-size",
    "--nnodes",
    "--node-rank",
    "--dist-init-addr",
    "--device",
    "--attention-backend",
    "--disaggregation-mode",
    "--disaggregation-transfer-backend",
    "--mem-fraction-static",
    "--host",
    "--port",
)
ROUTER_FLAGS = ("--pd-disaggregation", "--prefill", "--decode", "--host", "--port")

# Flags deployctl may render whose presence differs between the supported versions: flag -> versions that accept it.
# A regenerated table that moves one of these fails test_version_dependent_flags; update deployctl's rendering first.
VERSION_DEPENDENT = {
    # 0.5.20 dropped the deprecated aliases; use --cuda-graph-max-bs-decode / --cuda-graph-bs-decode (all versions).
    "--cuda-graph-max-bs": {"0.5.16", "0.5.18"},
    "--cuda-graph-bs": {"0.5.16", "0.5.18"},
    "--disable-piecewise-cuda-graph": {"0.5.16", "0.5.18"},
    "--enforce-piecewise-cuda-graph": {"0.5.16", "0.5.18"},
    "--stream-output": {"0.5.16", "0.5.18"},
    "--enable-expert-distribution-metrics": {"0.5.16", "0.5.18"},
    # The NSA names are deprecated aliases of the DSA ones (already in 0.5.16) and are gone from 0.5.20.
    "--nsa-prefill-backend": {"0.5.16", "0.5.18"},
    "--nsa-decode-backend": {"0.5.16", "0.5.18"},
    "--enable-nsa-prefill-context-parallel": {"0.5.16", "0.5.18"},
    # 0.5.22 added the attention-DP size; --enable-dp-attention is deprecated there (still parses).
    "--attn-dp-size": {"0.5.22", "0.5.23"},
    "--attention-data-parallel-size": {"0.5.22", "0.5.23"},
    "--speculative-skip-dp-mlp-sync": {"0.5.16", "0.5.18", "0.5.20", "0.5.22"},
    # 0.5.16 (the version of SGLang's Ascend tutorials) -> 0.5.18: one removal, and flags added in 0.5.18 that
    # deployctl must not render for a 0.5.16 image.
    "--torchao-config": {"0.5.16"},
    "--c128-page-size": {"0.5.18", "0.5.20", "0.5.22", "0.5.23"},  # NPU DeepSeek-V4 C128 KV-cache page size
    "--dcp-comm-backend": {"0.5.18", "0.5.20", "0.5.22", "0.5.23"},
    "--enable-tp-lm-head-all-to-all": {"0.5.18", "0.5.20", "0.5.22", "0.5.23"},
    "--dwdp-size": {"0.5.18", "0.5.20", "0.5.22", "0.5.23"},
    "--disaggregation-decode-retraction-backup": {"0.5.18", "0.5.20", "0.5.22", "0.5.23"},
    "--startup-weight-load-mode": {"0.5.18", "0.5.20", "0.5.22", "0.5.23"},
    "--language-model-only": {"0.5.18", "0.5.20", "0.5.22", "0.5.23"},
    "--enable-linear-replayssm-spec": {"0.5.18", "0.5.20", "0.5.22", "0.5.23"},
}
# Deprecated (parses, warns) -> replacement named by SGLang, per version.
DEPRECATED_IN = {
    "--enable-dp-attention": {"0.5.22", "0.5.23"},
    "--cuda-graph-max-bs": {"0.5.16", "0.5.18"},
    "--cuda-graph-bs": {"0.5.16", "0.5.18"},
    "--nsa-prefill-backend": {"0.5.16", "0.5.18"},
    "--enable-expert-distribution-metrics": {"0.5.18"},
    "--enable-gdn-replayssm-spec": {"0.5.18"},  # renamed --enable-linear-replayssm-spec in 0.5.18
}


def test_tables_present():
    assert {"0.5.16", "0.5.18", "0.5.20", "0.5.22", "0.5.23"} <= set(SGLANG)
    assert ROUTER, "no sglang-router table"


def test_ascend_tutorial_version():
    """SGLang's Ascend tutorials were validated on 0.5.16 (quay.io/ascend/sglang:cann9.0.0-{a3,910b}-v0.5.16)."""
    d = SGLANG["0.5.16"]
    assert d["method"] == "stub-import" and d["release_date"] == "2026-07-25"
    assert set(d["ascend_images"]) == {
        "quay.io/ascend/sglang:cann9.0.0-a3-v0.5.16",
        "quay.io/ascend/sglang:cann9.0.0-910b-v0.5.16",
    }
    # The stub import needed no stub value as an attribute name (extract.py's triton-ascend driver stub).
    assert "stub_values_used_as_attribute_names" not in d["method_details"]


@pytest.mark.parametrize("ver", list(SGLANG))
def test_sglang_table_shape(ver):
    d = SGLANG[ver]
    assert d["version"] == ver and d["package"] == "sglang"
    assert d["method"] == "stub-import", "the AST fallback misses dataclass-derived flags"
    assert d["source"]["wheel"].startswith(f"sglang-{ver}-")
    assert len(d["source"]["wheel_sha256"]) == 64
    opts, strings = d["options"], d["option_strings"]
    assert len(opts) > 400
    for s, primary in strings.items():
        assert primary in opts, (s, primary)
        e = opts[primary]
        assert s == primary or s in e["aliases"] or s in e["negations"]
    for primary, e in opts.items():
        assert e["takes_value"] == (e["nargs"] != "0"), primary
        assert e["choices"] is None or isinstance(e["choices"], list)
        assert e["help"] is None or len(e["help"]) <= 200
    sc = d["self_check"]
    assert sc["unknown_flag_rejected"] and sc["option_string_actions_match"]
    assert sc["parsed"]["attention_backend"] == "ascend" and sc["parsed"]["device"] == "npu"


@pytest.mark.parametrize("ver", list(SGLANG))
@pytest.mark.parametrize("flag", LAUNCH_FLAGS)
def test_launch_flags_exist(ver, flag):
    strings = SGLANG[ver]["option_strings"]
    assert flag in strings, f"sglang {ver} has no {flag}"
    e = SGLANG[ver]["options"][strings[flag]]
    assert not e["deprecated"], f"{flag} is deprecated in {ver}: {e['deprecated_new_flag']}"
    assert e["takes_value"], flag


@pytest.mark.parametrize("ver", list(SGLANG))
def test_ascend_values_accepted(ver):
    opts = SGLANG[ver]["options"]
    assert "ascend" in opts["--attention-backend"]["choices"]
    assert "ascend" in opts["--disaggregation-transfer-backend"]["choices"]
    assert {"null", "prefill", "decode"} <= set(opts["--disaggregation-mode"]["choices"])
    assert {"none", "deepep", "ascend_fuseep"} <= set(opts["--moe-a2a-backend"]["choices"])
    assert {"auto", "normal", "low_latency"} <= set(opts["--deepep-mode"]["choices"])
    # --device is free text; its help names npu.
    assert opts["--device"]["choices"] is None and "npu" in opts["--device"]["help"]
    # --speculative-algorithm is free text too; the enum behind it is recorded.
    enum = SGLANG[ver]["notes"]["speculative_algorithm_enum"]
    assert isinstance(enum, list) and "EAGLE" in enum
    assert opts["--mem-fraction-static"]["type"] == "float"
    assert opts["--tp-size"]["type"] == "int" and "--tensor-parallel-size" in opts["--tp-size"]["aliases"]
    assert opts["--enable-metrics"]["boolean"]


def test_version_dependent_flags():
    """Pins which versions accept each renamed/removed flag, and prints the full diff between neighbours."""
    for flag, expected in VERSION_DEPENDENT.items():
        have = {v for v, d in SGLANG.items() if flag in d["option_strings"]}
        assert have == expected, f"{flag}: accepted by {sorted(have)}, table expects {sorted(expected)}"
    for flag, expected in DEPRECATED_IN.items():
        have = {
            v for v, d in SGLANG.items()
            if flag in d["option_strings"] and d["options"][d["option_strings"][flag]]["deprecated"]
        }
        assert have == expected, (flag, sorted(have))
    vers = list(SGLANG)
    for a, b in zip(vers, vers[1:]):
        sa, sb = set(SGLANG[a]["option_strings"]), set(SGLANG[b]["option_strings"])
        print(f"sglang {a} -> {b}: removed {sorted(sa - sb)}; added {len(sb - sa)}")


def test_render_flags_differ_nowhere():
    """The launch flags deployctl renders are identical (dest, type, action) in every version."""
    for flag in LAUNCH_FLAGS:
        shapes = {
            v: tuple(d["options"][d["option_strings"][flag]][k] for k in ("dest", "type", "action", "nargs"))
            for v, d in SGLANG.items()
        }
        assert len(set(shapes.values())) == 1, (flag, shapes)


@pytest.mark.parametrize("ver", list(ROUTER))
def test_router_table(ver):
    d = ROUTER[ver]
    assert d["package"] == "sglang-router" and d["version"] == ver
    strings, opts = d["option_strings"], d["options"]
    for flag in ROUTER_FLAGS:
        assert flag in strings, f"sglang-router {ver} has no {flag}"
    assert opts["--pd-disaggregation"]["boolean"]
    assert opts["--prefill"]["action"] == "append" and opts["--prefill"]["nargs"] == "+"
    assert opts["--decode"]["action"] == "append"
    sc = d["self_check"]
    assert sc["pd_disaggregation"] is True
    assert sc["prefill_urls"] == [["http://10.0.0.1:30000", 8998]]
    assert sc["decode_urls"] == ["http://10.0.0.2:30000"]
    assert "cache_aware" in opts["--policy"]["choices"]
