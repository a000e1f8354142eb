"""vLLM-Ascend's flag and config catalog, per version: what `vllm serve` and vllm-ascend accept.

The tables in flags/ were extracted from each version's own argument parser and config reader by
scripts/vllm_flags/extract.py (commits and method inside each file; scripts/vllm_flags/README.md).
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from deployctl.core.packaged import packaged_text

from deployctl.core.engine_spec.protocol import TAG_VERSION

# vllm-ascend minor version -> (vllm-ascend release whose tables we ship, the vLLM release it pairs with:
# each tag's Dockerfile VLLM_TAG)
VERSIONS = {"0.11": ("0.11.0", "0.11.0"), "0.13": ("0.13.0", "0.13.0"), "0.18": ("0.18.0", "0.18.0"),
            "0.23": ("0.23.0", "0.23.0")}

def _load(name: str) -> dict:
    return json.loads(packaged_text(__package__, "flags", name))


@cache
def vllm_table(version: str) -> dict:
    """The `vllm serve` parser table of the vLLM release this vllm-ascend version pairs with."""
    return _load(f"vllm-{VERSIONS[version][1]}.json")


@cache
def ascend_table(version: str) -> dict:
    return _load(f"vllm-ascend-{VERSIONS[version][0]}.json")


def known(version: str | None) -> str:
    """The catalog version to check against: the version itself, or the newest one we have below it."""
    if version in VERSIONS:
        return version
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split("."))
    older = [v for v in VERSIONS if version and TAG_VERSION.match(version) and key(v) <= key(version)]
    return max(older, key=key) if older else min(VERSIONS, key=key)


def option(version: str, flag: str) -> str | None:
    """The canonical option a spelling names in this version (`-tp` -> --tensor-parallel-size), or None."""
    return vllm_table(version)["option_strings"].get(flag)


def takes_value(version: str, flag: str) -> bool:
    canon = option(version, flag)
    return bool(canon and vllm_table(version)["options"][canon]["takes_value"])


def suggest(version: str, flag: str) -> str:
    close = difflib.get_close_matches(flag, list(vllm_table(version)["option_strings"]), n=1)
    return f"did you mean {close[0]}?" if close else "see `vllm serve --help` of that version"


def ascend_env(version: str) -> set[str]:
    """Every VLLM_ASCEND_* (and other) variable vllm-ascend of this version reads (vllm_ascend/envs.py and the
    other reads the extraction found)."""
    env = ascend_table(version)["env_vars"]
    return set(env["declared"]) | set(env.get("read_elsewhere_in_vllm_ascend", {}))


def additional_keys(version: str) -> dict:
    """Every --additional-config key the version reads: ascend_config.py's, and those other modules read straight
    from the dict (``read_elsewhere``, e.g. 0.23's enable_dsa_cp at vllm_ascend/utils.py:1529)."""
    table = ascend_table(version)["additional_config"]
    return {**table.get("read_elsewhere", {}), **table["keys"]}
