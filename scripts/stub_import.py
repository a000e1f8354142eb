"""Import an engine's pure-Python sources with torch & co replaced by stubs.

Shared by the flag-table extractors, scripts/vllm_flags/extract.py and scripts/sglang_flags/extract.py: each builds
its engine's real argparse parser from a wheel on a machine without the accelerator stack. Not a script; the
extractors are run as `python scripts/<engine>_flags/extract.py ...` and import this file from their parent folder.

    STUBS = Stubs(own_packages=("vllm",), always_stub=("torch", ...), version="2.9.0", customize=_customize_stub)
    STUBS.install(forced, auto)     # then `import vllm` from the unpacked wheel

`install` puts two finders on sys.meta_path: the first stubs `always_stub` (and their submodules) even when they are
installed; the last stubs any other package that an import statement of the engine's own modules (`own_packages`)
asks for and that is missing. Probes through `importlib.util.find_spec` always get the truth. What was stubbed is
recorded in the two sets handed to `install` (full names for the first finder, top-level packages for the last).

A stub module answers every attribute with a stub class; a stub class answers every attribute with another stub
class, is a no-op decorator, and its instances are falsy, zero, empty, equal only to themselves and print "stub".
"""

from __future__ import annotations

import abc
import importlib.abc
import importlib.machinery
import os
import sys
import types


class Stubs:
    """One set of stub types and the finders that hand them out.

    own_packages: the engine's top-level packages (never stubbed: a missing module of theirs is a real error).
    always_stub: modules stubbed even when installed (the GPU stack, compiled extensions).
    version: `__version__` of every stub module (torch.__version__ etc. compared with packaging).
    customize: `customize(module, stubs)` fills in the few values the engine evaluates at import time.
    class_attrs: {(top-level package, class name): {attribute: value}} given to particular stub classes.
    hidden_attrs: {module name: attribute names} that a stub module must NOT have (hasattr() probes).
    meta_mixins, stub_mixins: classes mixed into the stub metaclass and the stub class (extra behaviour).
    """

    def __init__(self, *, own_packages, always_stub, version, customize=None, class_attrs=None, hidden_attrs=None,
                 meta_mixins=(), stub_mixins=()):
        self.own_packages = tuple(own_packages)
        self.always_stub = tuple(always_stub)
        self.version = version
        self.customize = customize
        self.class_attrs = class_attrs or {}
        self.hidden_attrs = hidden_attrs or {}
        self.Meta, self.Stub, self.Module = _stub_types(self, tuple(meta_mixins), tuple(stub_mixins))

    def new_class(self, name, module):
        safe = name if name.isidentifier() else "Stub"
        ns = {"__module__": module}
        for k, v in self.class_attrs.get((module.split(".")[0], name), {}).items():
            ns[k] = dict(v) if isinstance(v, dict) else v
        return self.Meta(safe, (self.Stub,), ns)

    def submodule(self, parent, attr: str):
        """A stub submodule reachable both as `parent.attr` and through `import parent.attr`."""
        full = f"{parent.__name__}.{attr}"
        sub = sys.modules.get(full)
        if not isinstance(sub, self.Module):
            sub = self.Module(full)
            sub.__spec__ = importlib.machinery.ModuleSpec(full, StubLoader(self), is_package=True)
            sys.modules[full] = sub
        setattr(parent, attr, sub)
        return sub

    def install(self, record_forced: set, record_auto: set) -> None:
        sys.meta_path.insert(0, StubFinder(self, self.always_stub, record_forced))
        sys.meta_path.append(StubFinder(self, None, record_auto))

    def install_name_guard(self, record: set, tree) -> None:
        """Let getattr/hasattr/setattr/delattr accept a stub *value* as the attribute name.

        Import-time code such as `getattr(torch, <a device string computed from triton>)`
        receives a stub where the real library returns a str and would die with
        "TypeError: attribute name must be string, not '_Stub'". The stub is replaced by its
        name ("stub" for an instance) and the call site ("sglang/...py:LINE", relative to `tree`)
        is recorded in `record`.
        Calls with a str name take the fast path and behave exactly as before.
        """
        import builtins

        prefix = str(tree) + os.sep
        stub_types = (self.Stub, self.Meta)
        meta = self.Meta

        def fix(name):
            if isinstance(name, str) or not isinstance(name, stub_types):
                return name
            f = sys._getframe(2)
            fn = f.f_code.co_filename
            record.add(f"{fn[len(prefix):] if fn.startswith(prefix) else fn}:{f.f_lineno}")
            return name.__name__ if isinstance(name, meta) else str(name)

        o_get, o_has, o_set, o_del = builtins.getattr, builtins.hasattr, builtins.setattr, builtins.delattr

        def getattr_(obj, name, *default):
            return o_get(obj, name if type(name) is str else fix(name), *default)

        def hasattr_(obj, name):
            return o_has(obj, name if type(name) is str else fix(name))

        def setattr_(obj, name, value):
            return o_set(obj, name if type(name) is str else fix(name), value)

        def delattr_(obj, name):
            return o_del(obj, name if type(name) is str else fix(name))

        builtins.getattr, builtins.hasattr, builtins.setattr, builtins.delattr = getattr_, hasattr_, setattr_, delattr_


def _stub_types(stubs: Stubs, meta_mixins: tuple, stub_mixins: tuple):
    """The metaclass, the root stub class and the stub module type of one Stubs."""

    class _StubMeta(*meta_mixins, abc.ABCMeta):
        """Metaclass: every attribute of a stub class is another stub class."""

        def __getattr__(cls, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            sub = stubs.new_class(name, cls.__module__)
            setattr(cls, name, sub)
            return sub

        def __getitem__(cls, item):
            return cls

        def __setitem__(cls, key, value):
            pass

        def __delitem__(cls, key):
            pass

        def __contains__(cls, item):
            return False

        def __call__(cls, *args, **kwargs):
            # Used as a bare decorator (`@torch.compile`, `@triton.jit`): keep the function.
            if len(args) == 1 and not kwargs and isinstance(args[0], (types.FunctionType, type)):
                return args[0]
            return super().__call__(*args, **kwargs)

        def __bool__(cls):
            return True

        def __iter__(cls):
            return iter(())

        def __len__(cls):
            return 0

        def __mro_entries__(cls, bases):  # pragma: no cover - py3.7+ protocol
            return (cls,)

    class _Stub(*stub_mixins, metaclass=_StubMeta):
        def __init__(self, *args, **kwargs):
            pass

        def __getattr__(self, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return _Stub()

        def __call__(self, *args, **kwargs):
            # Used as a decorator factory's result (`@torch.inference_mode()`).
            if len(args) == 1 and not kwargs and isinstance(args[0], (types.FunctionType, type)):
                return args[0]
            return _Stub()

        def __getitem__(self, item):
            return _Stub()

        def __setitem__(self, key, value):
            pass

        def __delitem__(self, key):
            pass

        def __contains__(self, item):
            return False

        def __iter__(self):
            return iter(())

        def __len__(self):
            return 0

        def __bool__(self):
            return False

        def __int__(self):
            return 0

        def __index__(self):
            return 0

        def __float__(self):
            return 0.0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def __hash__(self):
            return id(self)

        def __eq__(self, other):
            return self is other

        def __lt__(self, other):
            return False

        __le__ = __gt__ = __ge__ = __lt__

        def __add__(self, other):
            return self

        __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __add__
        __floordiv__ = __mod__ = __pow__ = __and__ = __or__ = __ror__ = __add__

        def __str__(self):
            return "stub"

        __repr__ = __str__

    class _StubModule(types.ModuleType):
        def __init__(self, name):
            super().__init__(name)
            self.__path__ = []  # a package: submodules import too
            self.__file__ = f"<stub {name}>"
            self.__version__ = stubs.version

        def __getattr__(self, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            if name in stubs.hidden_attrs.get(self.__name__, ()):
                raise AttributeError(name)  # e.g. `hasattr(torch, "hpu")` is False
            sub = stubs.new_class(name, self.__name__)
            setattr(self, name, sub)
            return sub

    return _StubMeta, _Stub, _StubModule


def customize_torch(module, version: str) -> None:
    """The torch values every engine evaluates at import time: iinfo (int64), finfo (float32), __version__."""
    def iinfo(dtype=None):
        return types.SimpleNamespace(min=-(2**63), max=2**63 - 1, bits=64, dtype="int64")

    def finfo(dtype=None):
        return types.SimpleNamespace(min=-3.4028234663852886e38, max=3.4028234663852886e38,
                                     eps=1.1920928955078125e-07, tiny=1.1754943508222875e-38,
                                     bits=32, dtype="float32")

    module.iinfo = iinfo
    module.finfo = finfo
    module.__version__ = version


class StubLoader(importlib.abc.Loader):
    def __init__(self, stubs: Stubs):
        self.stubs = stubs

    def create_module(self, spec):
        return self.stubs.Module(spec.name)

    def exec_module(self, module):
        if self.stubs.customize is not None:
            self.stubs.customize(module, self.stubs)


def _called_from_util_find_spec() -> bool:
    f = sys._getframe(2)
    while f is not None:
        code = f.f_code
        if code.co_name == "find_spec" and (
            code.co_filename == "<frozen importlib.util>"
            or code.co_filename.endswith(os.path.join("importlib", "util.py"))
        ):
            return True
        f = f.f_back
    return False


def _importer_is_own(own_packages: tuple) -> bool:
    f = sys._getframe(2)
    while f is not None and (
        f.f_code.co_filename.startswith("<frozen importlib")
        or f.f_globals.get("__name__", "").split(".")[0] == "importlib"
    ):
        f = f.f_back
    if f is None:
        return False
    return f.f_globals.get("__name__", "").split(".")[0] in own_packages


class StubFinder(importlib.abc.MetaPathFinder):
    """Stubs `forced` (first on meta_path) or, with forced None, any missing package (last)."""

    def __init__(self, stubs: Stubs, forced, record: set):
        self.stubs = stubs
        self.forced = forced
        self.record = record

    def find_spec(self, fullname, path=None, target=None):
        if _called_from_util_find_spec():
            # `importlib.util.find_spec(...)` is how libraries (transformers,
            # vllm.utils) probe for optional packages: report the truth
            # (absent) there, and stub only real `import` statements.
            return None
        if self.forced is not None:
            if not any(fullname == m or fullname.startswith(m + ".") for m in self.forced):
                return None
        else:
            top = fullname.split(".")[0]
            # Never stub the engine itself: a missing module of its own is a real error we want to see.
            if top in self.stubs.own_packages:
                return None
            # Never fake the standard library or private/platform modules
            # (`_winapi`, ...): code probes them with try/except ImportError.
            if top in sys.stdlib_module_names or top.startswith("_"):
                return None
            # A missing submodule of a real package (`from regex import X` probing
            # regex.X) is not ours to fake; only whole missing packages are.
            if "." in fullname and not isinstance(sys.modules.get(top), self.stubs.Module):
                return None
            # Only imports made by the engine's own modules: a third-party library's
            # optional imports (requests -> chardet, ...) keep their real outcome.
            if not _importer_is_own(self.stubs.own_packages):
                return None
        self.record.add(fullname.split(".")[0] if self.forced is None else fullname)
        return importlib.machinery.ModuleSpec(fullname, StubLoader(self.stubs), is_package=True)
