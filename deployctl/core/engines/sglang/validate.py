"""Inventory checks only SGLang needs: engine.args (and each role's) against the release's own launch_server parser
table, engine.router_args against the router's, and the flags and variables deployctl derives."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable, cast

from deployctl.core.errors import Problem
from deployctl.core.models.engine_settings.sglang import SglangSettings

if TYPE_CHECKING:
    from deployctl.core.input.raw import KeyPath, RawInventory
    from deployctl.core.models.inventory import Inventory

# flags deployctl renders from the inventory and the plan; engine.args may not set them (launch.DEFAULTED ones may)
OWNED_FLAGS = ("--model-path", "--served-model-name", "--host", "--port", "--tp-size", "--dp-size",
               "--attn-dp-size", "--nnodes", "--node-rank", "--dist-init-addr",
               "--mem-fraction-static", "--context-length", "--max-running-requests", "--max-prefill-tokens",
               "--quantization", "--disaggregation-mode", "--disaggregation-transfer-backend",
               "--disaggregation-bootstrap-port", "--speculative-algorithm", "--speculative-num-steps",
               "--speculative-eagle-topk", "--speculative-num-draft-tokens", "--speculative-draft-model-path",
               "--enable-metrics", "--trust-remote-code", "--pp-size", "--attn-cp-size")
ROUTER_OWNED = ("--pd-disaggregation", "--prefill", "--decode", "--host", "--port", "--prometheus-port",
                "--worker-urls")
OWNED_ENV = ("HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "ASCEND_MF_STORE_URL", "ASCEND_RT_VISIBLE_DEVICES")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
HINTS = {"--speculative-algorithm": "set it through model.speculative",
         "--mem-fraction-static": "set engine.mem_fraction_static (or layout.<role>.engine.mem_fraction_static)",
         # the attention TP deployctl sizes weights and KV cache by is --tp-size / attention DP / --attn-cp-size
         "--attn-cp-size": "set layout.prefill.cp (and tp: the attention TP inside each CP group)"}


def _check(args: list[str], path: KeyPath, raw: RawInventory, tab: dict, what: str, owned: tuple[str, ...],
           option: Callable[[str], str | None]) -> list[Problem]:
    """Each flag of ``args`` as the parser of ``tab`` reads it (catalog.parse_groups): known, not one deployctl
    sets, with the values it takes."""
    from deployctl.core.engines.sglang.catalog import parse_groups, suggest

    out = []
    i = 0
    for canon, words in parse_groups(tab, option, args):
        key, word = path + (i,), words[0]
        i += len(words)
        flag, eq, _ = word.partition("=")
        if not flag.startswith("-"):
            out.append(raw.problem(key, f"{word!r} is not a flag", "give flags and their values as separate "
                                   "items, e.g. [\"--deepep-mode\", \"auto\"]"))
            continue
        if canon is None:
            out.append(raw.problem(key, f"{what} has no flag {flag}", suggest(tab, flag, what)))
            continue
        spec = tab["options"][canon]
        if canon in owned:
            out.append(raw.problem(key, f"{flag} is set by deployctl from the inventory",
                                   HINTS.get(canon, "set it through the model, layout or engine.ports keys")))
        if spec["takes_value"] and not eq and len(words) == 1:
            if spec.get("nargs") == "+":
                out.append(raw.problem(key, f"{flag} needs at least one value", f"add values after {flag}"))
            elif spec.get("nargs") != "*":
                out.append(raw.problem(key, f"{flag} needs a value", f"add the value after {flag}"))
    return out


def engine_problems(inv: Inventory, raw: RawInventory) -> list[Problem]:
    from deployctl.core.engine_spec.protocol import version_from
    from deployctl.core.engines.sglang.catalog import ROUTER, known, option, router_option, router_table, table
    from deployctl.core.input.envcheck import ENV_KEY, env_sources
    from deployctl.core.input.roles import ROLES, role_block

    release = known(version_from(inv.engine).version)
    e = cast(SglangSettings, inv.engine)
    what = f"sglang.launch_server {release}"
    out = _check(e.args, ("engine", "args"), raw, table(release), what, OWNED_FLAGS, lambda f: option(release, f))
    out += _check(e.router_args, ("engine", "router_args"), raw, router_table(), f"sglang_router.launch_router "
                  f"{ROUTER}", ROUTER_OWNED, router_option)
    for role in ROLES:
        block = role_block(inv, role)
        own = block.engine if block is not None else {}
        if isinstance(own.get("args"), list):
            out += _check(own["args"], ("layout", role, "engine", "args"), raw, table(release), what, OWNED_FLAGS,
                          lambda f: option(release, f))
    for key, value in e.router_env.items():
        if not ENV_KEY.match(key):
            out.append(raw.problem(("engine", "router_env", key), f"'{key}' is not a valid environment variable name",
                                   "use letters, digits and '_', not starting with a digit"))
        elif CONTROL.search(str(value)):
            out.append(raw.problem(("engine", "router_env", key), f"the value of {key} holds a control character",
                                   "give a value on one line"))
    for path, env in env_sources(inv):
        for key in OWNED_ENV:
            if key in env:
                out.append(raw.problem(path + (key,), f"{key} is computed per node by deployctl",
                                       "remove it: set nodes[].interface (or let preflight find it) and engine.ports"))
    return out
