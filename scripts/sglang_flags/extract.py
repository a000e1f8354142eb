#!/usr/bin/env python3
"""Extract SGLang flag tables from SGLang's real argument parsers, once per release.

Run by hand (see README.md beside it). The JSON output is committed under
deployctl/core/engines/sglang/flags/ so that tests can check rendered argv against
SGLang's own parser without installing torch.

Two sub-commands:

  sglang  Build the parser that `python -m sglang.launch_server` (and `sglang serve`)
          uses -- `argparse.ArgumentParser(prog="sglang serve")` filled by
          `sglang.srt.server_args.ServerArgs.add_cli_args`, exactly as
          `prepare_server_args` in server_args.py does -- from one sglang wheel and
          dump every option. The wheel's pure-Python sources are imported with
          `sys.modules` stubs for torch, triton & co; compiled `.so` files are not
          extracted. If that import fails, an AST walk of server_args.py is used
          instead and "method" says so.

  router  Build the parser of `python -m sglang_router.launch_router` from one
          sglang-router wheel: `parse_router_args` there makes an
          `argparse.ArgumentParser` and calls
          `RouterArgs.add_cli_args(parser, use_router_prefix=False)`. The Rust
          extension (`sglang_router.sglang_router_rs`) is a stub.

The stub method needs a few pure-Python packages (requirements.txt); anything else
that an sglang module imports and that is missing is stubbed and listed in the JSON
under method_details.stubbed_modules_missing.
"""

from __future__ import annotations

import argparse
import ast
import enum
import hashlib
import json
import os
import re
import sys
import tempfile
import types
import zipfile
from pathlib import Path

# scripts/stub_import.py: the stub machinery shared with scripts/vllm_flags/extract.py (its folder is on sys.path
# for this import only: the engine's own imports see the same sys.path as before)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from stub_import import Stubs, customize_torch  # noqa: E402

del sys.path[0]

SCHEMA_VERSION = 1

# Replaced by stubs even when installed: the accelerator stack and compiled code.
ALWAYS_STUB = (
    "torch",
    "torchvision",
    "torchaudio",
    "torch_npu",
    "torch_memory_saver",
    "triton",
    "triton_ascend",
    "flashinfer",
    "flash_attn",
    "flash_attn_4",
    "sgl_kernel",
    "sgl_kernel_npu",
    "sglang_kernel",
    "deep_gemm",
    "deep_ep",
    "tilelang",
    "tvm_ffi",
    "cuda",
    "cutlass",
    "quack",
    "humming",
    "tokenspeed_mla",
    "numba",
    "cupy",
    "pynvml",
    "amdsmi",
    "ray",
    "vllm",
    "mooncake",
    "memfabric_hybrid",
    "nixl",
    "xgrammar",
    "llguidance",
    "outlines",
    "transformers",
    "sglang.srt.rust_extensions._grpc",
    "sglang.srt.rust_extensions._multimodal",
    "sglang.srt.rust_extensions._server",
    "sglang_router.sglang_router_rs",
)

# Options deployctl renders; a missing one is listed in the JSON.
SGLANG_OPTIONS_OF_INTEREST = (
    "--model-path",
    "--served-model-name",
    "--tp-size",
    "--dp-size",
    "--ep-size",
    "--pp-size",
    "--nnodes",
    "--node-rank",
    "--dist-init-addr",
    "--device",
    "--attention-backend",
    "--prefill-attention-backend",
    "--decode-attention-backend",
    "--enable-dp-attention",
    "--moe-a2a-backend",
    "--deepep-mode",
    "--disaggregation-mode",
    "--disaggregation-transfer-backend",
    "--disaggregation-bootstrap-port",
    "--disaggregation-ib-device",
    "--speculative-algorithm",
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
    "--mem-fraction-static",
    "--chunked-prefill-size",
    "--max-running-requests",
    "--max-prefill-tokens",
    "--context-length",
    "--cuda-graph-max-bs",
    "--cuda-graph-bs",
    "--disable-cuda-graph",
    "--enable-metrics",
    "--quantization",
    "--trust-remote-code",
    "--host",
    "--port",
    "--log-level",
)

ROUTER_OPTIONS_OF_INTEREST = (
    "--pd-disaggregation",
    "--prefill",
    "--decode",
    "--worker-urls",
    "--policy",
    "--prefill-policy",
    "--decode-policy",
    "--host",
    "--port",
    "--prometheus-port",
    "--prometheus-host",
    "--health-check-endpoint",
    "--request-timeout-secs",
)

# Option values whose choices are recorded in "notes" (Ascend deployments care).
NOTE_OPTIONS = (
    "--device",
    "--attention-backend",
    "--prefill-attention-backend",
    "--decode-attention-backend",
    "--mm-attention-backend",
    "--sampling-backend",
    "--disaggregation-transfer-backend",
    "--disaggregation-mode",
    "--moe-a2a-backend",
    "--moe-runner-backend",
    "--deepep-mode",
    "--speculative-algorithm",
    "--quantization",
    "--load-format",
    "--grammar-backend",
    "--lora-backend",
    "--hicache-storage-backend",
)

NPU_RE = re.compile(r"(?<![a-z])npu(?![a-z])|ascend", re.I)  # not "input"

# Attributes that must NOT exist on a stub module (hasattr() probes).
HIDDEN_ATTRS = {"torch": ("hpu", "musa", "mlu")}


def _strict_validate(self):  # what huggingface_hub's `@strict` adds as `validate`
    return None


_strict_validate.__is_defined_by_strict_decorator__ = True

# Class attributes given to particular stub classes, by (top-level package, class name).
# transformers >= 5 configs are `@strict` dataclasses: sglang 0.5.16's
# configs/cohere2_moe.py applies huggingface_hub's `@strict` to a PreTrainedConfig
# subclass at import time, which requires `__dataclass_fields__` and accepts an
# inherited `validate` only if `@strict` made it.
_STRICT_DATACLASS = {"__dataclass_fields__": {}, "validate": _strict_validate}
STUB_CLASS_ATTRS = {
    ("transformers", "PreTrainedConfig"): _STRICT_DATACLASS,
    ("transformers", "PretrainedConfig"): _STRICT_DATACLASS,
}


# --------------------------------------------------------------------------
# torch & co stubs (scripts/stub_import.py, shared with scripts/vllm_flags/extract.py)
# --------------------------------------------------------------------------

class _SglangStubMeta:
    """Mixed into the stub metaclass: what sglang's imports ask of stub classes besides the common stubs."""

    def register(cls, *args, **kwargs):  # `AutoProcessor.register(Cfg, Proc)`, not ABCMeta.register
        return args[0] if args else None

    def __int__(cls):  # `int(torch.distributed.ReduceOp.SUM)` at import time
        return 0

    __index__ = __int__

    def __float__(cls):
        return 0.0


class _SglangStub:
    """Mixed into the stub class."""

    # transformers' PretrainedConfig.__class_validators__ (sglang >= 0.5.22 patches it at import).
    __class_validators__: tuple = ()

    def __init_subclass__(cls, **kwargs):  # `class K(ProcessingKwargs, total=False)`
        super().__init_subclass__()

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):  # a stub type in a pydantic model
        from pydantic_core import core_schema

        return core_schema.any_schema()


def _customize_stub(module, stubs) -> None:
    """The few values that sglang / the router evaluate at import time."""
    name = module.__name__
    if name == "torch":
        customize_torch(module, "2.10.0")
        # An Ascend host as torch + torch_npu show it: torch.npu is available,
        # torch.cuda / xpu / hpu / musa are not. Only parser defaults depend on it.
        npu = stubs.Module("torch.npu")
        npu.is_available = lambda: True
        npu.device_count = lambda: 16
        npu.current_device = lambda: 0
        module.npu = npu
        for other in ("cuda", "xpu", "mps"):
            m = stubs.Module(f"torch.{other}")
            m.is_available = lambda: False
            m.device_count = lambda: 0
            setattr(module, other, m)
    elif name == "triton":
        # triton-ascend on an Ascend host: `triton.runtime.driver.active.get_current_target().backend`
        # is the string "npu". sglang 0.5.16's fla/utils.py does `getattr(torch, <that backend>)` at
        # import time, which a stub instance cannot be (TypeError: attribute name must be string).
        runtime = stubs.submodule(module, "runtime")
        driver = stubs.submodule(runtime, "driver")
        active = stubs.new_class("active", driver.__name__)
        target = types.SimpleNamespace(backend="npu", arch="stub", warp_size=0)
        active.get_current_target = staticmethod(lambda: target)
        active.get_current_device = staticmethod(lambda: 0)
        driver.active = active
    elif name == "torch.version":
        module.cuda = None
        module.hip = None
        module.__version__ = "2.10.0"
    elif name == "sglang_router.sglang_router_rs":
        # Rust-side lists used as argparse choices: unknown without the .so.
        module.get_available_tool_call_parsers = lambda: []
        module.get_version_string = lambda: "stub"
        module.get_verbose_version_string = lambda: "stub"


OWN_PACKAGES = ("sglang", "sglang_router")

STUBS = Stubs(own_packages=OWN_PACKAGES, always_stub=ALWAYS_STUB, version="2.10.0", customize=_customize_stub,
              class_attrs=STUB_CLASS_ATTRS, hidden_attrs=HIDDEN_ATTRS,
              meta_mixins=(_SglangStubMeta,), stub_mixins=(_SglangStub,))


# --------------------------------------------------------------------------
# wheels
# --------------------------------------------------------------------------

def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _unpack(src: Path, workdir: Path, package: str) -> tuple[Path, dict]:
    """Extract the package's non-binary files; return (sys.path entry, provenance)."""
    prov: dict = {"wheel": src.name, "wheel_sha256": _sha256(src)}
    newest = None
    binaries = []
    with zipfile.ZipFile(src) as zf:
        for info in zf.infolist():
            name = info.filename
            if not name.startswith(package + "/"):
                continue
            if name.endswith((".so", ".pyd")):
                binaries.append(name)
                continue
            if name.endswith((".py", ".json", ".jinja", ".txt", ".yaml", ".toml")):
                zf.extract(info, workdir)
                if newest is None or info.date_time > newest:
                    newest = info.date_time
    prov["compiled_modules_not_extracted"] = sorted(binaries)
    if newest:
        prov["newest_file_date_in_wheel"] = "%04d-%02d-%02d" % newest[:3]
    return workdir, prov


# --------------------------------------------------------------------------
# argparse dump
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
        "_ExtendAction": "extend",
        "BooleanOptionalAction": "boolean_optional",
    }.get(name, name)


def _json_safe(value, depth=0):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
    if isinstance(value, enum.Enum):
        return _json_safe(value.value, depth + 1) if depth < 3 else repr(value)
    if isinstance(value, (list, tuple)) and depth < 3:
        return [_json_safe(v, depth + 1) for v in value]
    if isinstance(value, dict) and depth < 3:
        return {str(k): _json_safe(v, depth + 1) for k, v in value.items()}
    if value is argparse.SUPPRESS:
        return "==SUPPRESS=="
    if isinstance(value, (set, frozenset)) and depth < 3:
        return sorted((_json_safe(v, depth + 1) for v in value), key=str)
    return {"repr": repr(value)}


def _type_name(t):
    if t is None:
        return None
    name = getattr(t, "__name__", None)
    if name is None:
        name = type(t).__name__
    mod = getattr(t, "__module__", "")
    if mod in ("builtins", None, ""):
        return name
    return f"{mod}.{name}"


def _choices(action):
    if action.choices is None:
        return None
    return [_json_safe(c) for c in action.choices]  # parser order kept


def _dump_parser(parser) -> tuple[dict, list]:
    options: dict = {}
    positionals: list = []
    for action in parser._actions:
        if not action.option_strings:
            positionals.append({"dest": action.dest, "nargs": None if action.nargs is None else str(action.nargs)})
            continue
        kind = _action_kind(action)
        strings = list(action.option_strings)
        longs = [s for s in strings if s.startswith("--")]
        negations: list = []
        if kind == "boolean_optional":
            negations = [s for s in longs if s.startswith("--no-")]
            longs = [s for s in longs if not s.startswith("--no-")]
        primary = longs[0] if longs else strings[0]
        aliases = [s for s in strings if s != primary and s not in negations]
        help_text = action.help if isinstance(action.help, str) else None
        cls_name = type(action).__name__
        deprecated = cls_name.startswith("Deprecated")
        entry = {
            "action": kind,
            "action_class": None if cls_name.startswith("_") or cls_name == "BooleanOptionalAction" else (
                f"{type(action).__module__}.{cls_name}"),
            "aliases": aliases,
            "boolean": kind in ("store_true", "store_false", "boolean_optional") or action.nargs == 0,
            "const": _json_safe(action.const) if kind in ("store_const", "append_const") or deprecated else None,
            "deprecated": deprecated,
            "deprecated_new_flag": getattr(action, "new_flag", None) if deprecated else None,
            "choices": _choices(action),
            "default": _json_safe(action.default),
            "dest": action.dest,
            "help": None if help_text is None else " ".join(help_text.split())[:200],
            "help_suppressed": action.help == argparse.SUPPRESS,
            "metavar": action.metavar if isinstance(action.metavar, str) else None,
            "nargs": None if action.nargs is None else str(action.nargs),
            "negations": negations,
            "required": bool(action.required),
            "takes_value": action.nargs != 0,
            "type": _type_name(action.type),
        }
        if entry["help_suppressed"]:
            entry["help"] = None
        if primary in options:
            raise SystemExit(f"duplicate option {primary}")
        options[primary] = entry
    return options, positionals


def _option_strings(options: dict) -> dict:
    out: dict = {}
    for primary, e in options.items():
        for s in [primary] + e["aliases"] + e["negations"]:
            out[s] = primary
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------
# sglang
# --------------------------------------------------------------------------

def _build_sglang_parser(tree: Path):
    forced: set = set()
    auto: set = set()
    for k, v in {
        "SGLANG_LOGGING_LEVEL": "ERROR",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "SGLANG_DISABLE_PLUGINS": "1",
    }.items():
        os.environ.setdefault(k, v)
    named: set = set()
    sys.path.insert(0, str(tree))
    STUBS.install(forced, auto)
    STUBS.install_name_guard(named, tree)

    import sglang  # noqa: F401

    if not str(Path(sglang.__file__).resolve()).startswith(str(tree.resolve())):
        raise SystemExit(f"imported sglang from {sglang.__file__}, not from {tree}")
    import sglang.srt.server_args as sa

    # The same two lines as sglang.srt.server_args.prepare_server_args (used by
    # `python -m sglang.launch_server` and `sglang serve`).
    parser = argparse.ArgumentParser(prog="sglang serve")
    sa.ServerArgs.add_cli_args(parser)
    spec = None
    try:
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        spec = [m.name for m in SpeculativeAlgorithm]
    except Exception as exc:  # informative only
        spec = {"error": repr(exc)}
    info = {
        "speculative_algorithm_enum": spec,
        "entry_point": "sglang.srt.server_args.prepare_server_args: "
                       "argparse.ArgumentParser(prog='sglang serve'); ServerArgs.add_cli_args(parser)",
        "parser_class": f"{type(parser).__module__}.{type(parser).__name__}",
        "stubbed_modules_forced": sorted({m if m.startswith("sglang") else m.split(".")[0] for m in forced}),
        "stubbed_modules_missing": sorted(auto),
    }
    if named:  # a stub stood in for a str attribute name (see stub_import.Stubs.install_name_guard)
        info["stub_values_used_as_attribute_names"] = sorted(named)
    return parser, info, sa


def _ast_sglang_options(tree: Path) -> dict:
    """Fallback: literal add_argument calls in server_args.py (dataclass-derived flags are NOT covered)."""
    src = (tree / "sglang" / "srt" / "server_args.py").read_text()
    options: dict = {}
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            strs = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if not strs or not strs[0].startswith("-"):
                continue
            kw = {k.arg: ast.unparse(k.value) for k in node.keywords if k.arg}
            longs = [s for s in strs if s.startswith("--")]
            primary = longs[0] if longs else strs[0]
            options[primary] = {
                "action": kw.get("action", "store").strip("'\""),
                "aliases": [s for s in strs if s != primary],
                "boolean": kw.get("action", "").strip("'\"") in ("store_true", "store_false"),
                "choices": None, "default": kw.get("default"), "dest": None,
                "help": None, "help_suppressed": False, "metavar": None,
                "nargs": kw.get("nargs"), "negations": [], "required": False,
                "takes_value": kw.get("action", "").strip("'\"") not in ("store_true", "store_false"),
                "type": kw.get("type"),
            }
    return options


def _notes(options: dict, info: dict) -> dict:
    notes: dict = {
        "speculative_algorithm_enum": info.pop("speculative_algorithm_enum", None),
        "speculative_algorithm_note": "--speculative-algorithm has no argparse choices; the value is "
                                      "upper-cased and looked up in SpeculativeAlgorithm (members above) "
                                      "or a plugin registry after parsing.",
        "device_note": "--device has no argparse choices; its help lists the accepted devices.",
        "deprecated_options": {k: e["deprecated_new_flag"] for k, e in options.items() if e.get("deprecated")},
    }
    for opt in NOTE_OPTIONS:
        e = options.get(opt)
        notes[opt] = None if e is None else {
            "choices": e["choices"],
            "default": e["default"],
            "npu_ascend_values": [c for c in (e["choices"] or []) if isinstance(c, str) and NPU_RE.search(c)],
        }
    notes["options_with_npu_or_ascend_choices"] = {
        k: [c for c in e["choices"] if isinstance(c, str) and NPU_RE.search(c)]
        for k, e in options.items()
        if e["choices"] and any(isinstance(c, str) and NPU_RE.search(c) for c in e["choices"])
    }
    notes["options_named_npu_or_ascend"] = sorted(k for k in options if NPU_RE.search(k))
    notes["options_whose_help_mentions_npu_or_ascend"] = sorted(
        k for k, e in options.items() if e["help"] and NPU_RE.search(e["help"]))
    return notes


def _wheel_version(tree: Path, package: str) -> str:
    for rel in ("_version.py", "version.py"):
        p = tree / package / rel
        if p.exists():
            m = re.search(r"__version__\s*=\s*(?:version\s*=\s*)?['\"]([^'\"]+)['\"]", p.read_text())
            if m:
                return m.group(1)
    return "unknown"


def cmd_sglang(args) -> int:
    src = Path(args.src).resolve()
    with tempfile.TemporaryDirectory(prefix="sglang-src-") as td:
        tree, prov = _unpack(src, Path(td), "sglang")
        version = _wheel_version(tree, "sglang")
        method = args.method
        info: dict = {}
        options: dict = {}
        positionals: list = []
        extra: dict = {}
        if method in ("auto", "stub"):
            try:
                parser, info, sa = _build_sglang_parser(tree)
                options, positionals = _dump_parser(parser)
                method = "stub-import"
                # Sanity: the parser takes a typical Ascend PD argv and rejects an unknown flag.
                argv = ["--model-path", "/m", "--tp-size", "16", "--dp-size", "2", "--enable-dp-attention",
                        "--device", "npu", "--attention-backend", "ascend", "--disaggregation-mode", "prefill",
                        "--disaggregation-transfer-backend", "ascend", "--nnodes", "2", "--node-rank", "0",
                        "--dist-init-addr", "10.0.0.1:5000", "--mem-fraction-static", "0.8",
                        "--host", "0.0.0.0", "--port", "30000"]
                ns = parser.parse_args(argv)
                bad = None
                try:
                    parser.exit = lambda *a, **k: (_ for _ in ()).throw(ValueError("exit"))  # no SystemExit noise
                    parser.error = lambda msg: (_ for _ in ()).throw(ValueError(msg))
                    parser.parse_args(["--model-path", "/m", "--no-such-flag-xyz"])
                except ValueError as exc:
                    bad = str(exc)
                extra["self_check"] = {
                    "ascend_pd_argv": argv,
                    "parsed": {k: _json_safe(getattr(ns, k)) for k in
                               ("tp_size", "dp_size", "device", "attention_backend", "disaggregation_mode",
                                "disaggregation_transfer_backend", "mem_fraction_static")},
                    "unknown_flag_rejected": bad is not None,
                    "option_string_actions_match": sorted(parser._option_string_actions) == sorted(
                        _option_strings(options)),
                }
            except BaseException as exc:  # noqa: BLE001 - we want the fallback
                if args.method == "stub" or os.environ.get("SGLANG_FLAGS_DEBUG"):
                    raise
                print(f"warning: stub import failed ({exc!r}); falling back to AST", file=sys.stderr)
                method = "ast"
        if method == "ast":
            options = _ast_sglang_options(tree)
            info = {"entry_point": None, "note": "AST walk of server_args.py; dataclass-derived flags are NOT covered"}

    all_strings = _option_strings(options)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "package": "sglang",
        "version": version,
        "tag": f"v{version}",
        "release_date": args.release_date,
        "ascend_images": args.ascend_image or [],
        "source": prov,
        "method": method,
        "method_details": info,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "parser_notes": [
            "Plain argparse.ArgumentParser: allow_abbrev is on (unique prefixes parse), "
            "and there is no '--foo_bar' rewriting. deployctl should render the full dashed names listed here.",
            "Defaults are those seen with torch stubbed (no accelerator); ServerArgs.__post_init__ "
            "later rewrites many None defaults per device/model, which this table does not show.",
        ],
        "positionals": positionals,
        "options": options,
        "option_strings": all_strings,
        "options_of_interest_missing": sorted(o for o in SGLANG_OPTIONS_OF_INTEREST if o not in all_strings),
        "notes": _notes(options, info),
        "generated_by": "scripts/sglang_flags/extract.py sglang",
    }
    doc.update(extra)
    _write_json(Path(args.out), doc)
    print(f"{args.out}: sglang {version}, {len(options)} options, method={method}, "
          f"missing={doc['options_of_interest_missing']}")
    return 0


# --------------------------------------------------------------------------
# router
# --------------------------------------------------------------------------

def cmd_router(args) -> int:
    src = Path(args.src).resolve()
    with tempfile.TemporaryDirectory(prefix="sglang-router-src-") as td:
        tree, prov = _unpack(src, Path(td), "sglang_router")
        version = _wheel_version(tree, "sglang_router")
        forced: set = set()
        auto: set = set()
        sys.path.insert(0, str(tree))
        STUBS.install(forced, auto)
        import sglang_router.launch_router as lr

        if not str(Path(lr.__file__).resolve()).startswith(str(tree.resolve())):
            raise SystemExit(f"imported sglang_router from {lr.__file__}, not from {tree}")
        # parse_router_args() builds its parser locally and parses at once; rebuild it
        # the same way (its description is irrelevant to the option set).
        parser = argparse.ArgumentParser(formatter_class=lr.CustomHelpFormatter)
        lr.RouterArgs.add_cli_args(parser, use_router_prefix=False)
        options, positionals = _dump_parser(parser)
        argv = ["--pd-disaggregation", "--prefill", "http://10.0.0.1:30000", "8998",
                "--decode", "http://10.0.0.2:30000", "--host", "0.0.0.0", "--port", "8000"]
        ra = lr.parse_router_args(argv)
        src_text = (tree / "sglang_router" / "launch_router.py").read_text()
    all_strings = _option_strings(options)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "package": "sglang-router",
        "version": version,
        "release_date": args.release_date,
        "source": prov,
        "method": "stub-import",
        "method_details": {
            "entry_point": "sglang_router.launch_router.parse_router_args: argparse.ArgumentParser(...); "
                           "RouterArgs.add_cli_args(parser, use_router_prefix=False)",
            "uses_parse_router_args": "RouterArgs.add_cli_args(parser, use_router_prefix=False)" in src_text,
            "stubbed_modules_forced": sorted(forced),
            "stubbed_modules_missing": sorted(auto),
            "stub_caveat": "sglang_router_rs.get_available_tool_call_parsers() is a stub returning []; "
                           "any choices derived from the Rust extension are therefore empty here.",
        },
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "positionals": positionals,
        "options": options,
        "option_strings": all_strings,
        "options_of_interest_missing": sorted(o for o in ROUTER_OPTIONS_OF_INTEREST if o not in all_strings),
        "self_check": {
            "pd_argv": argv,
            "pd_disaggregation": _json_safe(getattr(ra, "pd_disaggregation", None)),
            "prefill_urls": _json_safe(getattr(ra, "prefill_urls", None)),
            "decode_urls": _json_safe(getattr(ra, "decode_urls", None)),
        },
        "notes": {k: options[k]["choices"] for k in ("--policy", "--prefill-policy", "--decode-policy",
                                                     "--backend", "--history-backend") if k in options},
        "generated_by": "scripts/sglang_flags/extract.py router",
    }
    _write_json(Path(args.out), doc)
    print(f"{args.out}: sglang-router {version}, {len(options)} options, missing={doc['options_of_interest_missing']}")
    return 0


def _write_json(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def main(argv=None) -> int:
    if argv is None and os.environ.get("PYTHONHASHSEED") != "0":
        # Some choices lists are built from sets (e.g. --sampling-backend): fix the
        # string hash seed so that a rerun writes a byte-identical file.
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sglang", help="dump the launch_server parser of one sglang wheel")
    s.add_argument("--src", required=True, help="sglang wheel (.whl)")
    s.add_argument("--out", required=True)
    s.add_argument("--release-date", default=None, help="PyPI upload date (YYYY-MM-DD), recorded as given")
    s.add_argument("--ascend-image", action="append", help="Ascend image tag evidence, recorded as given")
    s.add_argument("--method", choices=("auto", "stub", "ast"), default="auto")
    s.set_defaults(func=cmd_sglang)
    r = sub.add_parser("router", help="dump the launch_router parser of one sglang-router wheel")
    r.add_argument("--src", required=True, help="sglang-router wheel (.whl)")
    r.add_argument("--out", required=True)
    r.add_argument("--release-date", default=None)
    r.set_defaults(func=cmd_router)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
