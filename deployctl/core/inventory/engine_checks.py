"""Checks of the model and engine blocks every engine shares (limits, mounts, env, image) and of kubernetes.values;
the engine spec checks its own keys (engines/<kind>/validate.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import difflib
import re

from deployctl.core.errors import InventoryError, Problem
from deployctl.core.input.envcheck import (HCCL_RANGES, ROLE_ENV, env_range_problems, env_sources, role_only_problems,
                                         secret_env_problems)
from deployctl.core.input.hostile import check_image
from deployctl.core.input.local_files import LocalFiles
from deployctl.core.input.raw import KeyPath, RawInventory
from deployctl.core.input.roles import ROLES, role_block, role_problems

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SERVED_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,254}[A-Za-z0-9])?$")

# a bind mount on these (or, for the first group, anywhere below them) hides the image's own files
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/lib", "/lib64", "/proc", "/run", "/sbin", "/sys", "/usr",
                "/var/lib/docker")
SYSTEM_DIRS = ("/", "/etc", "/home", "/root", "/tmp", "/var")
BIND_UNSAFE = re.compile(r"[:,\s]")


def describe_checkpoint(inv: Inventory, raw: RawInventory, local: LocalFiles) -> tuple:
    """(the inventory carrying the model described from model.config_path's files read into ``local``, the problems
    when they cannot be read); the inventory unchanged without config_path."""
    m = inv.model
    if m.config_path is None:
        return inv, []
    from deployctl.core.checkpoint.adopt import describe_model

    info, found = describe_model(local.checkpoint if local.checkpoint is not None else
                                 InventoryError(f"{m.config_path} was not read before validation"), m.name)
    if found:
        key = ("model", "config_path")
        cp = str(m.config_path)
        base = raw.base_dir or Path(".")
        directory = Path(base, local.home + cp[1:] if cp[:2] == "~/" and local.home else cp)   # as io read it
        here = [p for p in found if Path(p.file or "") == directory]
        if here:      # the directory itself (missing, not a directory): said at the key that names it
            return inv, [raw.problem(key, f"{m.config_path} {p.message}", p.hint) for p in here]
        return inv, [raw.problem(key, f"the checkpoint in {m.config_path} cannot be sized",
                                 f"fix the problems of its files (each names the file, under {m.config_path}), "
                                 "or point model.config_path elsewhere"), *found]
    return inv.with_checkpoint(info), []


def check_model(inv: Inventory, raw: RawInventory) -> list[Problem]:
    from deployctl.core import catalog
    from deployctl.core.docs_url import doc

    out = []
    m = inv.model
    if m.config_path is not None and inv.checkpoint_model is None:
        return []       # describe_checkpoint reported why
    models = catalog.models()
    info = catalog.model_of(inv)
    if info is None:
        close = [k for k in models if k.startswith(m.name)] or difflib.get_close_matches(m.name, list(models), n=1)
        out.append(raw.problem(("model", "name"), f"model '{m.name}' is not in the catalog",
                               (f"did you mean '{close[0]}'? " if close else "") +
                               f"known: {', '.join(models)}; or set model.config_path to a directory with the "
                               f"checkpoint's config.json ({doc('models.md')})"))
    elif m.quant not in info.quants:
        out.append(raw.problem(("model", "quant"), f"{info.display} does not ship in '{m.quant}'",
                               f"use one of {', '.join(info.quants)}"))
    # equal is allowed: MindIE range-checks maxInputTokenLen only (model_deploy_config.cpp L448) and caps an input
    # at maxSeqLen - 1 (llm_manager_impl.cpp L416); published configs run 6000/6000. vLLM takes max_model_len.
    if m.max_input_len > m.max_seq_len:
        out.append(raw.problem(("model", "max_input_len"), f"max_input_len {m.max_input_len} is more than "
                               f"max_seq_len {m.max_seq_len}",
                               "max_seq_len counts input plus output tokens: raise it, or lower max_input_len"))
    # an engine that runs a prompt longer than its prefill batch (EngineSpec.runs_prompt_over_prefill_budget: vLLM
    # chunks it, SGLang chunks it or prefills it alone) takes a smaller prefill batch, the role's too

    limits = [(("model",), m.max_prefill_tokens)] + [
        (("layout", r, "model"), getattr(getattr(inv.layout, r, None), "model", None)) for r in ("prefill", "decode")]
    for path, value in limits:
        value = getattr(value, "max_prefill_tokens", value)
        if value is not None and value < m.max_input_len and not inv.engine_spec.runs_prompt_over_prefill_budget(inv):
            out.append(raw.problem(path + ("max_prefill_tokens",), f"max_prefill_tokens {value} is less than "
                                   f"max_input_len {m.max_input_len}", f"{inv.engine_spec.display} "
                                   "prefills the longest input in one batch (max_prefill_tokens >= max_input_len)"))
    out += _check_mount_path(raw, ("model", "weights_path"), m.weights_path, "the weights directory")
    spec = m.speculative
    if spec is not None and spec.method == "mtp" and info is not None and not info.mtp_layers:
        out.append(raw.problem(("model", "speculative", "method"), f"{info.display} has no MTP layers "
                               "(its config.json has no num_nextn_predict_layers)",
                               "use eagle/eagle3/dflash with draft_weights_path, or remove model.speculative"))
    for role in ROLES:
        own = getattr(role_block(inv, role), "model", None)
        if own is not None and own.speculative_tokens is not None and spec is None:
            out.append(raw.problem(("layout", role, "model", "speculative_tokens"), "speculative_tokens without "
                                   "model.speculative", "set model.speculative (method, draft) first; this key "
                                   "changes only the role's drafted tokens"))
    if spec is not None and spec.draft_weights_path is not None:
        out += _check_mount_path(raw, ("model", "speculative", "draft_weights_path"), spec.draft_weights_path,
                                 "the draft model's weights")
    if not SERVED_NAME.match(m.served_name):
        out.append(raw.problem(("model", "served_name"), f"'{m.served_name}' is not a valid served model name",
                               "use letters, digits, '-', '.', '_' (not at the start or end), at most 256"))
    return out


def _check_mount_path(raw: RawInventory, key: KeyPath, path: str, what: str) -> list[Problem]:
    """A path that becomes a docker bind mount: absolute, no ':' ',' or spaces, not a system dir."""
    name = key[-1]
    if not path.startswith("/"):
        return [raw.problem(key, f"{name} '{path}' is not absolute",
                            f"give the absolute path of {what} on every host")]
    if BIND_UNSAFE.search(path):
        return [raw.problem(key, f"{name} '{path}' contains ':', ',' or whitespace",
                            "docker -v cannot mount such a path: rename or symlink the directory")]
    clean = "/" + path.strip("/")
    if clean in SYSTEM_DIRS or any(clean == d or clean.startswith(d + "/") for d in SYSTEM_TREES):
        return [raw.problem(key, f"{name} '{path}' is a system directory",
                            "mounting it would hide the image's own files: use a directory of its own "
                            "(e.g. /data/models/<name>)")]
    return []


def _check_container_path(raw: RawInventory, key: KeyPath, path: str) -> list[Problem]:
    """engine.mounts[].container: absolute, plain, and not a whole system tree (a package directory under
    /usr/local is what patched operator packages replace, so subdirectories are fine)."""
    if not path.startswith("/") or BIND_UNSAFE.search(path):
        return [raw.problem(key, f"container path '{path}' must be absolute, without ':', ',' or whitespace",
                            "give the path inside the container, e.g. /usr/local/Ascend/atb-models")]
    clean = "/" + path.strip("/")
    if clean in SYSTEM_DIRS or clean in SYSTEM_TREES or clean in ("/usr/local", "/proc", "/sys", "/dev"):
        return [raw.problem(key, f"container path '{path}' is a system directory",
                            "mounting over it would hide the image's own files: mount a directory below it")]
    return []


def check_engine(inv: Inventory, raw: RawInventory) -> list[Problem]:
    """The keys every engine has; the engine spec checks its own (engines/<kind>/validate.py)."""
    e = inv.engine
    out = env_range_problems(e.env, raw, HCCL_RANGES)
    out += _check_mount_path(raw, ("engine", "work_dir"), e.work_dir, "the directory for rendered files")
    out += _check_mount_path(raw, ("engine", "deploy_dir"), e.deploy_dir, "the directory for deployed files")
    out += check_image(raw, e.image)
    out += role_only_problems(inv, raw, {k: v for k, v in HCCL_RANGES.items() if k not in ROLE_ENV})
    out += role_problems(inv, raw)
    for path, env in env_sources(inv)[1:]:
        out += env_range_problems(env, raw, {k: HCCL_RANGES[k] for k in ROLE_ENV}, path)
    out += secret_env_problems(inv, raw)
    for path, env in env_sources(inv):
        for key, value in env.items():
            if not ENV_NAME.match(key):
                out.append(raw.problem(path + (key,), f"'{key}' is not a valid environment variable name",
                                       "use letters, digits and '_', not starting with a digit"))
            if isinstance(value, str) and ("\n" in value or "\r" in value):
                out.append(raw.problem(path + (key,), "value contains a newline",
                                       "docker --env-file takes one line per variable"))
    targets: dict[str, int] = {}
    for i, m in enumerate(e.mounts):
        key = ("engine", "mounts", i)
        out += _check_mount_path(raw, key + ("host",), m.host, "the host directory or file to mount")
        out += _check_container_path(raw, key + ("container",), m.container)
        inside = "/" + m.container.strip("/")
        if inside in targets:
            out.append(raw.problem(key + ("container",), f"'{m.container}' is mounted twice (also "
                                   f"engine.mounts[{targets[inside]}])", "each container path takes one mount"))
        if inside == "/" + e.work_dir.strip("/") or inside == "/" + inv.model.weights_path.strip("/"):
            out.append(raw.problem(key + ("container",), f"'{m.container}' is where deployctl mounts the "
                                   "rendered files or the weights", "mount it somewhere else"))
        targets.setdefault(inside, i)

    return out + inv.engine_spec.validate(inv, raw)


def check_kubernetes(inv: Inventory, raw: RawInventory) -> list[Problem]:
    """kubernetes.values must be chart values (values.schema.json) and leave deployctl's keys alone."""
    values = inv.kubernetes.values
    base = ("kubernetes", "values")
    dashed = [(k, getattr(inv.kubernetes, k)) for k in ("kubeconfig", "context")]
    out = [raw.problem(("kubernetes", k), f"{k} {v!r} starts with '-'",
                       "helm and kubectl would read it as an option: give the file's path (./-name) or the "
                       "context's name") for k, v in dashed if v is not None and v.startswith("-")]
    if values:
        out += _check_chart_values(inv, raw, values, base)
    seen: set[str] = set()
    for i, node in enumerate(inv.nodes):
        if node.k8s_node and node.k8s_node in seen:
            out.append(raw.problem(("nodes", i, "k8s_node"), f"k8s_node '{node.k8s_node}' is used twice",
                                   "each server is a different Kubernetes Node"))
        seen.add(node.k8s_node or node.name)
    return out


def _check_chart_values(inv: Inventory, raw: RawInventory, values: dict, base: tuple) -> list[Problem]:
    """kubernetes.values against the chart's schema (charts/values.py), leaving the plan's keys alone."""
    from pydantic import ValidationError

    from deployctl.core.render.chart_values import CHART_NAME, owned_values, values_model
    from deployctl.core.input.merge import deep_merge

    def has(tree: Any, dotted: str) -> bool:
        for part in dotted.split("."):
            if not isinstance(tree, dict) or part not in tree:
                return False
            tree = tree[part]
        return True

    owned = [raw.problem(base + tuple(key.split(".")), f"kubernetes.values.{key} is rendered by deployctl from "
                         "the plan", "change the inventory's engine/nodes/layout/model instead")
             for key in owned_values(inv.engine_spec.chart) if has(values, key)]
    if owned:
        return owned
    model = values_model(inv.charts)
    out = []
    try:
        model.model_validate(deep_merge(model(engine=inv.engine.kind).model_dump(), values))
    except ValidationError as exc:
        for err in exc.errors():
            loc = base + tuple(err["loc"])
            hint = (f"every key of the {CHART_NAME} chart and its meaning: its values.yaml, in the chart "
                    "`deployctl render --target k8s -o DIR` writes (DIR/chart/values.yaml)")
            if err["type"] == "extra_forbidden":
                out.append(raw.problem(loc, f"unknown chart value '{err['loc'][-1]}'", hint))
            else:
                out.append(raw.problem(loc, err["msg"], hint))
    return out
