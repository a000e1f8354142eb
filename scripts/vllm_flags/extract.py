#!/usr/bin/env python3
"""Extract `vllm serve` flag tables and vLLM-Ascend config keys, once per version.

This script is run by hand (see README.md beside it); its JSON output is committed
under deployctl/core/engines/vllm_ascend/flags/ so that tests can check rendered argv
against vLLM's own argument parser without installing torch.

Two sub-commands:

  vllm         Build the real `vllm serve` argparse parser of one vllm release and
               dump every option string.  vllm's Python sources are imported from
               a wheel (or an unpacked wheel / source tree) with lightweight
               `sys.modules` stubs for torch & co, so no GPU stack is needed.
               If that import fails, an AST walk of the sources is used instead
               (and "method" in the JSON says so).

  vllm-ascend  Read one vllm-ascend git tag (from a local git directory) and
               record the `--additional-config` keys that `vllm_ascend` reads
               (ascend_config.py and the rest of the package) and the
               `VLLM_ASCEND_*` environment variables (vllm_ascend/envs.py).

Only the standard library is needed for the `vllm-ascend` sub-command and for
the AST fallback.  The `stub` method needs vllm's pure-Python dependencies that
the parser modules import at module level (pydantic, transformers, fastapi, ...);
anything missing is stubbed automatically and listed in the JSON under
"stubbed_modules".
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# scripts/stub_import.py: the stub machinery shared with scripts/sglang_flags/extract.py (its folder is on sys.path
# for this import only: the engine's own imports see the same sys.path as before)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from stub_import import Stubs, customize_torch  # noqa: E402

del sys.path[0]

SCHEMA_VERSION = 1

# Modules that are always replaced by stubs, even if installed: the GPU stack and
# vllm's compiled extensions.  Everything else is imported for real when it is
# importable and stubbed only when it is missing.
ALWAYS_STUB = (
    "torch",
    "torchvision",
    "torchaudio",
    "triton",
    "xformers",
    "flashinfer",
    "flash_attn",
    "vllm._C",
    "vllm._moe_C",
    "vllm._rocm_C",
    "vllm.cumem_allocator",
    "vllm.vllm_flash_attn",
    "vllm._flashmla_C",
    "vllm._flashmla_extension_C",
    "deep_gemm",
    "deep_ep",
    "pplx_kernels",
    "ray",
    "intel_extension_for_pytorch",
    "habana_frameworks",
    "torch_npu",
    "numba",
    "cupy",
    "pynvml",
    "amdsmi",
)

# Options deployctl cares about; a missing one is reported in the JSON.
OPTIONS_OF_INTEREST = (
    "--headless",
    "--api-server-count",
    "--data-parallel-size",
    "--data-parallel-size-local",
    "--data-parallel-start-rank",
    "--data-parallel-rank",
    "--data-parallel-address",
    "--data-parallel-rpc-port",
    "--data-parallel-backend",
    "--data-parallel-hybrid-lb",
    "--data-parallel-external-lb",
    "--nnodes",
    "--node-rank",
    "--master-addr",
    "--master-port",
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "--enable-expert-parallel",
    "--distributed-executor-backend",
    "--kv-transfer-config",
    "--additional-config",
    "--compilation-config",
    "--speculative-config",
    "--quantization",
    "--enforce-eager",
    "--enable-prefix-caching",
    "--max-model-len",
    "--max-num-seqs",
    "--max-num-batched-tokens",
    "--gpu-memory-utilization",
    "--served-model-name",
    "--trust-remote-code",
    "--host",
    "--port",
)


# --------------------------------------------------------------------------
# torch & co stubs (scripts/stub_import.py)
# --------------------------------------------------------------------------

def _customize_stub(module, stubs) -> None:
    """The few torch values that vllm evaluates at import time."""
    if module.__name__ == "torch":
        customize_torch(module, "2.9.0")
    elif module.__name__ == "torch.library":
        # vllm >= 0.23 (vllm/ir/op.py) checks at import time that each provider
        # implementation of an IR op has the native one's schema, and parses the
        # return part of that schema.  Stub instances never compare equal, so
        # give a comparable string: parameter names and defaults, then the return
        # annotation with module prefixes and quotes dropped ("(Tensor, Tensor)"
        # style counts of Tensor outputs survive).
        def infer_schema(fn, *args, **kwargs):
            try:
                sig = inspect.signature(fn)
            except (TypeError, ValueError):
                return "(...) -> stub"
            params = ", ".join(
                p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
                for p in sig.parameters.values()
            )
            ret = sig.return_annotation
            ret = "stub" if ret is inspect.Signature.empty else (
                ret if isinstance(ret, str) else inspect.formatannotation(ret))
            ret = re.sub(r"\b[A-Za-z_][\w.]*\.(?=[A-Za-z_])", "", ret).replace("'", "").replace('"', "")
            return f"({params}) -> {ret}"

        module.infer_schema = infer_schema


STUBS = Stubs(own_packages=("vllm",), always_stub=ALWAYS_STUB, version="2.9.0", customize=_customize_stub)


# --------------------------------------------------------------------------
# vllm: sources, version, commit
# --------------------------------------------------------------------------

def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _prepare_vllm_tree(src: Path, workdir: Path) -> tuple[Path, dict]:
    """Return (directory that contains the `vllm` package, provenance)."""
    prov: dict = {}
    if src.is_file() and src.suffix == ".whl":
        prov["wheel"] = src.name
        prov["wheel_sha256"] = _sha256(src)
        with zipfile.ZipFile(src) as zf:
            for name in zf.namelist():
                if name.startswith("vllm/") and name.endswith((".py", ".json", ".jinja", ".txt")):
                    zf.extract(name, workdir)
        return workdir, prov
    if (src / "vllm" / "__init__.py").exists():
        return src, prov
    raise SystemExit(f"{src}: neither a .whl nor a directory containing vllm/__init__.py")


def _read_version(tree: Path) -> tuple[str, str | None]:
    text = (tree / "vllm" / "_version.py").read_text()
    ver = re.search(r"__version__\s*=\s*version\s*=\s*['\"]([^'\"]+)['\"]", text)
    commit = re.search(r"commit_id\s*=\s*['\"]([^'\"]+)['\"]", text)
    c = commit.group(1) if commit else None
    if c and c.startswith("g") and re.fullmatch(r"g[0-9a-f]{7,40}", c):
        c = c[1:]  # setuptools-scm prefixes the abbreviated hash with "g"
    return ver.group(1) if ver else "unknown", c


# --------------------------------------------------------------------------
# vllm: stub method (the real parser)
# --------------------------------------------------------------------------

def _action_kind(action) -> str:
    name = type(action).__name__
    return {
        "_StoreAction": "store",
        "_StoreTrueAction": "store_true",
        "_StoreFalseAction": "store_false",
        "_StoreConstAction": "store_const",
        "_AppendAction": "append",
        "_AppendConstAction": "append_const",
        "_CountAction": "count",
        "_HelpAction": "help",
        "_VersionAction": "version",
        "BooleanOptionalAction": "boolean_optional",
    }.get(name, name)


def _nargs(action):
    n = action.nargs
    if n is None:
        return None
    return str(n)


def _choices(action):
    if action.choices is None:
        return None
    out = []
    for c in action.choices:
        out.append(c if isinstance(c, (str, int, float, bool)) or c is None else str(c))
    return sorted(out, key=lambda x: (str(type(x)), str(x)))


def _dump_parser(parser) -> tuple[dict, list]:
    options: dict = {}
    positionals: list = []
    for action in parser._actions:
        if not action.option_strings:
            positionals.append({
                "dest": action.dest,
                "nargs": _nargs(action),
            })
            continue
        kind = _action_kind(action)
        strings = list(action.option_strings)
        longs = [s for s in strings if s.startswith("--")]
        negations: list[str] = []
        if kind == "boolean_optional":
            negations = [s for s in longs if s.startswith("--no-")]
            longs = [s for s in longs if not s.startswith("--no-")]
        primary = longs[0] if longs else strings[0]
        aliases = sorted(s for s in strings if s != primary and s not in negations)
        takes_value = action.nargs != 0
        is_bool = kind in ("store_true", "store_false", "boolean_optional")
        entry = {
            "action": kind,
            "aliases": aliases,
            "boolean": is_bool,
            "choices": _choices(action),
            "dest": action.dest,
            "metavar": action.metavar if isinstance(action.metavar, str) else None,
            "nargs": _nargs(action),
            "negations": sorted(negations),
            "takes_value": takes_value,
        }
        if primary in options:
            raise SystemExit(f"duplicate option {primary}")
        options[primary] = entry
    return options, positionals


def _build_parser_with_stubs(tree: Path) -> tuple[object, str, dict]:
    forced: set[str] = set()
    auto: set[str] = set()
    os.environ.setdefault("VLLM_TARGET_DEVICE", "empty")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("VLLM_PLUGINS", "")  # load no installed plugin
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    sys.path.insert(0, str(tree))
    STUBS.install(forced, auto)

    import vllm  # noqa: F401  (the real package from `tree`)

    if not str(Path(vllm.__file__).resolve()).startswith(str(tree.resolve())):
        raise SystemExit(f"imported vllm from {vllm.__file__}, not from {tree}")

    # No real platform is detectable here (torch is a stub); install a stand-in
    # out-of-tree platform shaped like vllm_ascend's NPUPlatform.  It only
    # influences parser *defaults*, never which option strings exist.
    import vllm.platforms as _platforms
    from vllm.platforms.interface import Platform, PlatformEnum

    class _StandInNPUPlatform(Platform):
        _enum = PlatformEnum.OOT
        device_name = "npu"
        device_type = "npu"
        dispatch_key = "PrivateUse1"
        ray_device_key = "NPU"
        device_control_env_var = "ASCEND_RT_VISIBLE_DEVICES"
        simple_compile_backend = "eager"
        supported_quantization: list = []

    _platforms._current_platform = _StandInNPUPlatform()

    entry = None
    try:
        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError:
            from vllm.utils import FlexibleArgumentParser
        from vllm.entrypoints.cli.serve import ServeSubcommand

        top = FlexibleArgumentParser(description="vLLM CLI")
        subparsers = top.add_subparsers(required=False, dest="subparser")
        parser = ServeSubcommand().subparser_init(subparsers)
        entry = "vllm.entrypoints.cli.serve.ServeSubcommand.subparser_init"
    except Exception as exc:  # fall back to the helper that subparser_init wraps
        print(f"warning: ServeSubcommand path failed ({exc!r}); using make_arg_parser", file=sys.stderr)
        if os.environ.get("VLLM_FLAGS_DEBUG"):
            import traceback

            traceback.print_exc()
        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError:
            from vllm.utils import FlexibleArgumentParser
        from vllm.entrypoints.openai.cli_args import make_arg_parser

        parser = make_arg_parser(FlexibleArgumentParser())
        entry = "vllm.entrypoints.openai.cli_args.make_arg_parser"

    quant = {}
    try:
        from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

        quant["QUANTIZATION_METHODS"] = list(QUANTIZATION_METHODS)
    except Exception as exc:  # pragma: no cover - informative only
        quant["QUANTIZATION_METHODS_error"] = repr(exc)
    info = {
        "entry_point": entry,
        "parser_class": f"{type(parser).__module__}.{type(parser).__name__}",
        "current_platform": "stand-in OOT platform (device_type 'npu'); affects defaults only",
        "stubbed_modules_forced": sorted(
            {m.split(".")[0] for m in forced if not m.startswith("vllm.")}
            | {".".join(m.split(".")[:2]) for m in forced if m.startswith("vllm.")}
        ),
        "stubbed_modules_missing": sorted(auto),
        "quant": quant,
    }
    return parser, entry, info


# --------------------------------------------------------------------------
# vllm: AST fallback
# --------------------------------------------------------------------------

def _ast_option_strings(tree: Path) -> dict:
    """Best-effort: literal `add_argument("--x", ...)` calls plus config fields.

    Newer vllm derives most flags from config dataclass fields (`get_kwargs`),
    turning `field_name` into `--field-name`; booleans get a `--no-` form.
    This fallback cannot know types for derived flags reliably, so takes_value
    is only filled for literal add_argument calls.
    """
    files = [
        tree / "vllm" / "engine" / "arg_utils.py",
        tree / "vllm" / "entrypoints" / "openai" / "cli_args.py",
        tree / "vllm" / "entrypoints" / "cli" / "serve.py",
    ]
    options: dict = {}
    for f in files:
        if not f.exists():
            continue
        mod = ast.parse(f.read_text())
        for node in ast.walk(mod):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                strs = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                if not strs or not strs[0].startswith("-"):
                    continue
                action = None
                for kw in node.keywords:
                    if kw.arg == "action":
                        action = ast.unparse(kw.value)
                longs = [s for s in strs if s.startswith("--")]
                primary = longs[0] if longs else strs[0]
                options[primary] = {
                    "action": action,
                    "aliases": sorted(s for s in strs if s != primary),
                    "boolean": None,
                    "choices": None,
                    "dest": None,
                    "metavar": None,
                    "nargs": None,
                    "negations": [],
                    "takes_value": None if action and "kwargs" in action else (action not in ("'store_true'", "'store_false'", "argparse.BooleanOptionalAction")),
                }
    return options


# --------------------------------------------------------------------------
# vllm sub-command
# --------------------------------------------------------------------------

PARSER_NOTES = [
    "vllm's FlexibleArgumentParser rewrites '--foo_bar' to '--foo-bar' before parsing, "
    "so underscore spellings are accepted too; deployctl should render the dashed form.",
    "argparse allow_abbrev is on, so unique prefixes are accepted; deployctl must still "
    "render full option names (a prefix may become ambiguous in a later version).",
    "For dataclass-derived JSON options (e.g. --compilation-config) newer vllm also accepts "
    "dotted sub-keys ('--compilation-config.level 3'); those are not listed here.",
]

QUANT_NOTE = (
    "'--quantization' has no argparse choices in any version extracted here, so any string "
    "parses. vllm 0.11 types ModelConfig.quantization as SkipValidation[Optional[QuantizationMethods]] "
    "and get_kwargs derives no choices through SkipValidation; vllm >= 0.13 types it "
    "'QuantizationMethods | str | None', and get_kwargs then uses metavar instead of choices. "
    "The value is checked after parsing, in ModelConfig, against "
    "current_platform.supported_quantization: vllm-ascend's NPUPlatform lists 'ascend' there, and "
    "vllm_ascend registers its config class with register_quantization_config('ascend'), which "
    "appends to QUANTIZATION_METHODS when the plugin is imported. That happens after the parser is "
    "built, so 'ascend' is never in upstream_quantization_methods below. Per-tag registration "
    "sites are in vllm-ascend-<version>.json under 'quantization'."
)


def cmd_vllm(args) -> int:
    src = Path(args.src).resolve()
    with tempfile.TemporaryDirectory(prefix="vllm-src-") as td:
        tree, prov = _prepare_vllm_tree(src, Path(td))
        version, commit = _read_version(tree)
        method = args.method
        info: dict = {}
        positionals: list = []
        options: dict = {}
        if method in ("auto", "stub"):
            try:
                parser, _, info = _build_parser_with_stubs(tree)
                options, positionals = _dump_parser(parser)
                method = "stub-import"
            except BaseException as exc:  # noqa: BLE001 - we want the fallback
                if args.method == "stub":
                    raise
                print(f"warning: stub import failed ({exc!r}); falling back to AST", file=sys.stderr)
                method = "ast"
        if method == "ast":
            options = _ast_option_strings(tree)
            info = {"entry_point": None, "note": "AST walk; dataclass-derived flags are NOT covered"}

    all_strings: dict = {}
    for primary, e in options.items():
        for s in [primary] + e["aliases"] + e["negations"]:
            all_strings[s] = primary
    missing = sorted(o for o in OPTIONS_OF_INTEREST if o not in all_strings)
    quant = info.pop("quant", {}) if isinstance(info, dict) else {}
    doc = {
        "schema_version": SCHEMA_VERSION,
        "vllm_version": version,
        "vllm_tag": f"v{version}",
        "vllm_commit": commit,
        "vllm_commit_note": "abbreviated hash from vllm/_version.py (setuptools-scm) inside the PyPI wheel",
        "source": prov,
        "vllm_ascend_versions": sorted(set(args.vllm_ascend_versions or [])),
        "method": method,
        "method_details": info,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "parser_notes": PARSER_NOTES,
        "positionals": positionals,
        "options": options,
        "option_strings": all_strings,
        "options_of_interest_missing": missing,
        "quantization": {
            "upstream_quantization_methods": quant.get("QUANTIZATION_METHODS"),
            "ascend_in_upstream_methods": (
                "ascend" in quant["QUANTIZATION_METHODS"] if "QUANTIZATION_METHODS" in quant else None
            ),
            "parser_choices": options.get("--quantization", {}).get("choices"),
            "note": QUANT_NOTE,
        },
        "generated_by": "scripts/vllm_flags/extract.py vllm",
    }
    _write_json(Path(args.out), doc)
    print(f"{args.out}: vllm {version} ({commit}), {len(options)} options, method={method}, missing={missing}")
    return 0


# --------------------------------------------------------------------------
# vllm-ascend sub-command
# --------------------------------------------------------------------------

def _git(repo: Path, *a: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True, text=True).stdout


def _lit(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_top(node) -> bool:
    """An expression that denotes the whole --additional-config dict."""
    if node is None:
        return False
    s = ast.unparse(node)
    return bool(re.fullmatch(r"(self\.)?(vllm_config\.|config\.|self\.vllm_config\.)?additional_config", s)) or s in (
        "vllm_config.additional_config",
    )


def _key_access(node):
    """If node is X.get('k', ...) or X['k'] or X.pop('k'), return (X, 'k', default_src)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop", "setdefault"):
        if node.args and _lit(node.args[0]) is not None:
            default = ast.unparse(node.args[1]) if len(node.args) > 1 else None
            return node.func.value, _lit(node.args[0]), default
    if isinstance(node, ast.Subscript) and _lit(node.slice) is not None:
        return node.value, _lit(node.slice), None
    return None


def _strip_guard(node):
    # `a if a is not None else {}` -> a ; `(x or {})` -> x
    if isinstance(node, ast.IfExp):
        return _strip_guard(node.body)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return _strip_guard(node.values[0])
    return node


def _ascend_config_keys(files: dict[str, str]) -> dict:
    """files: path -> source.  Returns {key: {...}} for top-level and nested keys."""
    top: dict = {}
    nested_cls: dict = {}  # class name -> (top key, mode, positional index)

    def add(key, path, line, default, parent=None):
        tgt = top.setdefault(key, {"read_in": [], "nested": {}}) if parent is None else top.setdefault(
            parent, {"read_in": [], "nested": {}})["nested"].setdefault(key, {"read_in": []})
        ref = f"{path}:{line}"
        if ref not in tgt["read_in"]:
            tgt["read_in"].append(ref)
        if default is not None and "default" not in tgt:
            tgt["default"] = default

    trees = {p: ast.parse(s) for p, s in files.items()}
    classes: dict = {}
    methods: dict = {}  # method name -> (path, FunctionDef) for self.<method>(sub_dict)
    nested_fn: dict = {}  # method name -> (top key, positional index)
    for p, t in trees.items():
        for node in ast.walk(t):
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, (p, node))
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name != "__init__":
                        methods.setdefault(item.name, (p, item))

    # Pass 1: top-level keys, variables bound to a top-level key, nested chains.
    for p, t in trees.items():
        for fn in [n for n in ast.walk(t) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module))]:
            var_key: dict = {}
            top_aliases = {"additional_config"}
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    val = _strip_guard(node.value)
                    if _is_top(val):
                        top_aliases.add(node.targets[0].id)
                    acc = _key_access(val)
                    if acc and (_is_top(acc[0]) or ast.unparse(acc[0]) in top_aliases):
                        var_key[node.targets[0].id] = acc[1]
            for node in ast.walk(fn):
                acc = _key_access(node)
                if not acc:
                    continue
                recv, key, default = acc
                rs = ast.unparse(recv)
                if _is_top(recv) or rs in top_aliases:
                    if rs == "additional_config" or _is_top(recv) or rs in top_aliases:
                        add(key, p, node.lineno, default)
                elif rs in var_key:
                    add(key, p, node.lineno, default, parent=var_key[rs])
                else:
                    inner = _key_access(_strip_guard(recv))
                    if inner and (_is_top(inner[0]) or ast.unparse(inner[0]) in top_aliases):
                        add(key, p, node.lineno, default, parent=inner[1])
            # Constructor calls that receive a top-level sub-dict.
            for node in ast.walk(fn):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"
                        and node.func.attr in methods):
                    for i, a in enumerate(node.args):
                        if isinstance(a, ast.Name) and a.id in var_key:
                            nested_fn[node.func.attr] = (var_key[a.id], i)
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in classes:
                    for i, a in enumerate(node.args):
                        if isinstance(a, ast.Name) and a.id in var_key:
                            nested_cls[node.func.id] = (var_key[a.id], "positional", i)
                    for kw in node.keywords:
                        if kw.arg is None and isinstance(kw.value, ast.Name) and kw.value.id in var_key:
                            nested_cls[node.func.id] = (var_key[kw.value.id], "kwargs", None)

    # Pass 2a: keys read inside methods that receive a sub-dict.
    for mname, (parent, idx) in sorted(nested_fn.items()):
        p, fdef = methods[mname]
        params = [a.arg for a in fdef.args.args][1:]
        if idx >= len(params):
            continue
        top.setdefault(parent, {"read_in": [], "nested": {}})
        top[parent]["parsed_by"] = mname
        for node in ast.walk(fdef):
            acc = _key_access(node)
            if acc and ast.unparse(acc[0]) == params[idx]:
                add(acc[1], p, node.lineno, acc[2], parent=parent)

    # Pass 2b: keys read inside the classes that receive a sub-dict.
    for cname, (parent, mode, idx) in sorted(nested_cls.items()):
        p, cls = classes[cname]
        top.setdefault(parent, {"read_in": [], "nested": {}})
        top[parent]["parsed_by"] = cname
        init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is None:
            continue
        params = [a.arg for a in init.args.args][1:]
        names: set = set()
        if mode == "positional" and idx is not None and idx < len(params):
            names.add(params[idx])
        if mode == "kwargs":
            defaults = init.args.defaults
            offset = len(params) - len(defaults)
            for i, prm in enumerate(params):
                d = ast.unparse(defaults[i - offset]) if i >= offset else None
                add(prm, p, init.lineno, d, parent=parent)
            if init.args.kwarg:
                names.add(init.args.kwarg.arg)
                top[parent]["accepts_unknown_keys"] = True
        # self.<attr> = <param> aliases
        for node in ast.walk(init):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                t0 = node.targets[0]
                if isinstance(t0, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names:
                    names.add(ast.unparse(t0))
        # Class-level defaults dict (e.g. EplbConfig._defaults): the accepted key set.
        for node in cls.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and any(
                isinstance(t, ast.Name) and "default" in t.id.lower() for t in node.targets
            ):
                for k, v in zip(node.value.keys, node.value.values):
                    if _lit(k) is not None:
                        add(_lit(k), p, node.lineno, ast.unparse(v), parent=parent)
                if "has no attribute" in ast.unparse(cls):
                    top[parent]["accepts_unknown_keys"] = False
                    top[parent]["strict_note"] = f"{cname} raises ValueError for keys outside its defaults"
        for node in ast.walk(cls):
            acc = _key_access(node)
            if acc and ast.unparse(acc[0]) in names:
                add(acc[1], p, node.lineno, acc[2], parent=parent)
            if (isinstance(node, ast.For) and isinstance(node.iter, ast.Call)
                    and ast.unparse(node.iter.func) in {f"{n}.items" for n in names}
                    and "setattr" in ast.unparse(node)
                    and top[parent].get("accepts_unknown_keys") is None):
                top[parent]["accepts_unknown_keys"] = True
                top[parent]["strict_note"] = f"{cname} copies every given key onto itself (setattr)"

    for v in top.values():
        v["read_in"].sort()
        for n in v["nested"].values():
            n["read_in"].sort()
    return dict(sorted(top.items()))


def _env_vars(files: dict[str, str], envs_path: str) -> tuple[dict, dict]:
    declared: dict = {}
    if envs_path in files:
        t = ast.parse(files[envs_path])
        for node in ast.walk(t):
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    name = _lit(k)
                    if name and re.fullmatch(r"[A-Z][A-Z0-9_]+", name):
                        default = None
                        for sub in ast.walk(v):
                            if isinstance(sub, ast.Call) and ast.unparse(sub.func) in ("os.getenv", "os.environ.get") and len(sub.args) > 1:
                                default = ast.unparse(sub.args[1])
                                break
                        declared[name] = {"default": default, "line": node.lineno if k is None else k.lineno,
                                          "parse": ast.unparse(v)[:200]}
    other: dict = {}
    for p, s in files.items():
        if p == envs_path:
            continue
        t = ast.parse(s)
        for node in ast.walk(t):
            name = None
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.getenv", "os.environ.get", "getenv"):
                name = _lit(node.args[0]) if node.args else None
            elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
                name = _lit(node.slice)
            if name and name not in declared:
                other.setdefault(name, [])
                ref = f"{p}:{node.lineno}"
                if ref not in other[name]:
                    other[name].append(ref)
    return dict(sorted(declared.items())), {k: sorted(v) for k, v in sorted(other.items())}


def cmd_vllm_ascend(args) -> int:
    repo = Path(args.repo)
    tag = args.tag
    commit = _git(repo, "rev-parse", f"{tag}^{{commit}}").strip()
    date = _git(repo, "log", "-1", "--format=%cI", commit).strip()
    paths = [p for p in _git(repo, "ls-tree", "-r", "--name-only", commit, "vllm_ascend").splitlines() if p.endswith(".py")]
    files = {p: _git(repo, "show", f"{commit}:{p}").lstrip("\ufeff") for p in paths}
    conf = files.get("vllm_ascend/ascend_config.py", "")
    keys_cfg = _ascend_config_keys({"vllm_ascend/ascend_config.py": conf})
    keys_all = _ascend_config_keys(files)
    # Keys read outside ascend_config.py only.
    elsewhere = {k: v for k, v in keys_all.items() if k not in keys_cfg}
    env_declared, env_other = _env_vars(files, "vllm_ascend/envs.py")

    def _show(path):
        try:
            return _git(repo, "show", f"{commit}:{path}")
        except subprocess.CalledProcessError:
            return ""

    dockerfile = _show("Dockerfile")
    vllm_tag = re.search(r"ARG VLLM_TAG=(\S+)", dockerfile)
    conf_py = _show("docs/source/conf.py")
    subs = {k: v for k, v in re.findall(r"['\"](\w*vllm\w*_version)['\"]\s*:\s*['\"]([^'\"]+)['\"]", conf_py)}
    # Keys migrated from env vars (v0.23+): self._get_config_value(additional_config,
    # "<key>", "<ENV_VAR>", envs.<ENV_VAR>); the env var is the fallback when the key
    # is absent.  Any env var name counts (MSMONITOR_USE_DAEMON has no VLLM_ASCEND_ prefix).
    migrated = []
    for node in ast.walk(ast.parse(conf)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "_get_config_value" and len(node.args) >= 3
                and _lit(node.args[1]) is not None and _lit(node.args[2]) is not None):
            migrated.append((_lit(node.args[1]), _lit(node.args[2])))
            entry = keys_cfg.setdefault(_lit(node.args[1]), {"read_in": [], "nested": {}})
            ref = f"vllm_ascend/ascend_config.py:{node.args[1].lineno}"
            if ref not in entry["read_in"]:
                entry["read_in"] = sorted(entry["read_in"] + [ref])
            entry["env_fallback"] = _lit(node.args[2])
    quant_sites = sorted(
        f"{p}:{i + 1}"
        for p, src in files.items()
        for i, line in enumerate(src.splitlines())
        if line.lstrip().startswith("@register_quantization_config(")
    )
    plat = files.get("vllm_ascend/platform.py", "")
    m = re.search(r"supported_quantization[^=]*=\s*\[([^\]]*)\]", plat)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "quantization": {
            "platform_supported_quantization_src": " ".join(m.group(1).split()) if m else None,
            "register_quantization_config_sites": quant_sites,
            "note": "vllm_ascend registers these names with vllm's register_quantization_config when "
                    "the plugin is imported; '--quantization ascend' passes vllm's parser because that "
                    "option has no choices (see vllm-<ver>.json 'quantization').",
        },
        "vllm_ascend_version": tag.lstrip("v"),
        "vllm_ascend_tag": tag,
        "vllm_ascend_commit": commit,
        "vllm_ascend_commit_date": date,
        "pairs_with_vllm": {
            "Dockerfile_VLLM_TAG": vllm_tag.group(1) if vllm_tag else None,
            "docs_conf_py": dict(sorted(subs.items())),
        },
        "additional_config": {
            "source": "vllm_ascend/ascend_config.py",
            "keys": keys_cfg,
            "read_elsewhere": elsewhere,
            "env_var_fallbacks": dict(sorted(migrated)),
            "note": (
                "Keys found by an AST walk: additional_config.get('k') / ['k'] and the sub-dicts "
                "handed to config classes. 'accepts_unknown_keys' false means an unknown nested key "
                "raises at startup; elsewhere unknown keys are silently ignored."
            ),
        },
        "env_vars": {
            "source": "vllm_ascend/envs.py",
            "declared": env_declared,
            "read_elsewhere_in_vllm_ascend": env_other,
        },
        "generated_by": "scripts/vllm_flags/extract.py vllm-ascend",
    }
    _write_json(Path(args.out), doc)
    print(f"{args.out}: {tag} {commit[:10]} keys={len(keys_cfg)} (+{len(elsewhere)} elsewhere) envs={len(env_declared)}")
    return 0


def _write_json(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("vllm", help="dump the `vllm serve` parser of one vllm release")
    v.add_argument("--src", required=True, help="vllm wheel (.whl) or a directory that contains vllm/")
    v.add_argument("--out", required=True)
    v.add_argument("--vllm-ascend-versions", nargs="*", default=[])
    v.add_argument("--method", choices=("auto", "stub", "ast"), default="auto")
    v.set_defaults(func=cmd_vllm)
    a = sub.add_parser("vllm-ascend", help="dump additional-config keys and env vars of one vllm-ascend tag")
    a.add_argument("--repo", required=True, help="git directory of vllm-project/vllm-ascend")
    a.add_argument("--tag", required=True)
    a.add_argument("--out", required=True)
    a.set_defaults(func=cmd_vllm_ascend)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
