"""Inventory fuzzer (issue 11): hostile mutations of the example inventories against the real CLI.

Per case (see tests/fuzz/mutate.py for the mutations), in-process through ``deployctl.cli.main``:
``validate``, ``plan --output json``, ``render -o DIR`` and ``render --target helm --values-only``.

Asserted per command: exit code 0 or 2; no "Traceback", no "deployctl bug"; a refusal (2) names
``file:line`` or a key path; output under 50 kB; bounded time. Per rendered tree: every node's
``start.sh`` / ``start-ms.sh`` runs under bash with a recording ``docker`` first on PATH (cwd a tmp dir):
the case's marker file never appears, docker never gets an option that came from the inventory more often
than the unmutated example gives it, every env line is ``KEY=VALUE`` with an identifier key that the
examples render or ``engine.env`` sets (never an injected LD_PRELOAD), with no control characters.

Size: DEPLOYCTL_FUZZ_EXAMPLES (default 400, about 2 minutes on 2 cores). DEPLOYCTL_FUZZ_COLLECT=FILE
records failures as JSON lines instead of failing (to survey every failure class in one long run).
Cases and distinct deployctl lines reached (sys.settrace; coverage is not a dependency) are printed
and written to <tmp>/fuzz-stats.json.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .mutate import EXAMPLES, ROOT, Case, get, load_example, substitute_marker, cases, write_case

N_EXAMPLES = int(os.environ.get("DEPLOYCTL_FUZZ_EXAMPLES", "400"))
COLLECT = os.environ.get("DEPLOYCTL_FUZZ_COLLECT")
TRACE = os.environ.get("DEPLOYCTL_FUZZ_TRACE", "1") != "0"
MAX_OUTPUT = 50_000
# a plan echoes the inventory and adds a JSON entry per rank (16 per A3 server, with device IP and SDID): a plan
# is up to ~60x its inventory's bytes (a 1,024-server fleet: 30 MB from 490 kB). Output beyond both bounds is a
# blow-up (the 547-byte alias bomb printed 51 kB, ~94x)
OUTPUT_RATIO = 60
MAX_SECONDS = 30.0          # per command; loose on purpose (CI machines are slow)
SCRIPT_TIMEOUT = 15
HERE = Path(__file__).resolve().parent
PKG = str(ROOT / "deployctl")
ENV_LINE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
ENV_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
KEY_PATH = re.compile(r"\b(cluster|engine|model|layout|nodes|ssh|kubernetes|deploy)(\.[A-Za-z_<]|\[\d+\])")
TOP_LEVEL = ("cluster", "engine", "model", "layout", "nodes", "ssh", "kubernetes", "deploy")


# ---------------------------------------------------------------------------------------------- the CLI

class Lines:
    """Distinct (file, line) pairs executed in deployctl/ (sys.settrace, only while the CLI runs)."""

    def __init__(self):
        self.seen: set[tuple[str, int]] = set()
        self._mine: dict = {}

    def _local(self, frame, event, arg):
        if event == "line":
            self.seen.add((frame.f_code.co_filename, frame.f_lineno))
        return self._local

    def _global(self, frame, event, arg):
        code = frame.f_code
        mine = self._mine.get(code)
        if mine is None:
            mine = self._mine[code] = code.co_filename.startswith(PKG)
        if mine:
            self.seen.add((code.co_filename, frame.f_lineno))
            return self._local
        return None

    @contextlib.contextmanager
    def tracing(self):
        if not TRACE:
            yield
            return
        old = sys.gettrace()
        sys.settrace(self._global)
        try:
            yield
        finally:
            sys.settrace(old)


LINES = Lines()


def run_cli(*args: str) -> tuple[int, str, float]:
    """``deployctl ARGS`` in-process, as the console script runs it (main() maps errors to exit codes)."""
    from deployctl.cli import _state, main

    out, err = io.StringIO(), io.StringIO()
    saved_argv, saved_env = sys.argv, dict(os.environ)
    sys.argv = ["deployctl", *args]
    os.environ.update(COLUMNS="120", NO_COLOR="1")
    os.environ.pop("DEPLOYCTL_DEBUG", None)
    _state["debug"] = False
    code: object = 0
    start = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), LINES.tracing():
            main()
    except SystemExit as exc:
        code = exc.code
    except BaseException as exc:      # noqa: BLE001 - anything escaping main() is a finding
        code = f"escaped {type(exc).__name__}"
        err.write(f"Traceback (escaped main): {type(exc).__name__}: {exc}")
    finally:
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
    elapsed = time.monotonic() - start
    if code is None:
        code = 0
    if not isinstance(code, int):
        code = code if isinstance(code, str) and code.startswith("escaped") else f"exit({code!r})"
    return code, out.getvalue() + err.getvalue(), elapsed


# ---------------------------------------------------------------------------------------------- scripts

def run_scripts(tree: Path, bindir: Path, workdir: Path) -> list[list[str]]:
    """Run every start.sh / start-ms.sh of a rendered tree; return the docker argv lists recorded."""
    log = workdir / "docker.log"
    log.unlink(missing_ok=True)
    for script in sorted(tree.glob("*/start*.sh")):
        run_dir = workdir / "cwd"
        run_dir.mkdir(parents=True, exist_ok=True)
        env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(workdir), "DEPLOYCTL_FUZZ_DOCKER_LOG": str(log),
               "LC_ALL": "C"}
        try:
            subprocess.run(["bash", str(script)], cwd=run_dir, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=SCRIPT_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
    return parse_docker_log(log.read_bytes() if log.exists() else b"")


def parse_docker_log(data: bytes) -> list[list[str]]:
    parts = data.split(b"\0")
    calls, i = [], 0
    while i < len(parts) - 1:
        n = int(parts[i])
        calls.append([p.decode("utf-8", "surrogateescape") for p in parts[i + 1:i + 1 + n]])
        i += 1 + n
    return calls


def option_counts(calls: list[list[str]]) -> Counter:
    """Per option-looking argument, the most times one docker call received it."""
    most: Counter = Counter()
    for argv in calls:
        for arg, n in Counter(a for a in argv if a.startswith("-")).items():
            most[arg] = max(most[arg], n)
    return most


def env_keys(tree: Path) -> set[str]:
    keys = set()
    for env in tree.glob("*/env"):
        for line in env.read_text(encoding="utf-8", errors="replace").split("\n"):
            if line and not line.startswith("#") and "=" in line:
                keys.add(line.split("=", 1)[0])
    return keys


# ---------------------------------------------------------------------------------------------- fixture

class Bench:
    """Per-session scratch space, the docker stand-in, and what the unmutated examples render."""

    def __init__(self, base: Path):
        self.base = base
        self.bindir = base / "bin"
        self.bindir.mkdir()
        shutil.copy(HERE / "recording_docker", self.bindir / "docker")
        (self.bindir / "docker").chmod(0o755)
        self.invdir = base / "inv"
        self.invdir.mkdir()
        shutil.copytree(ROOT / "inventories" / "examples" / "hccn", self.invdir / "hccn")
        self.n = 0
        self.exits: Counter = Counter()     # "command:exit code" -> cases
        self.failures: Counter = Counter()
        self.started = time.monotonic()
        self.baseline_opts: dict[str, Counter] = {}
        self.baseline_strings: dict[str, set] = {}
        self.known_env_keys: set[str] = set()
        for example in EXAMPLES:
            name = str(example.relative_to(ROOT))
            out = base / "baseline" / example.stem
            inv = self.invdir / f"baseline-{example.name}"
            shutil.copy(example, inv)
            code, text, _ = run_cli("render", "-i", str(inv), "-o", str(out))
            assert code == 0, f"the unmutated {name} must render: {text}"
            self.baseline_opts[name] = option_counts(run_scripts(out, self.bindir, base / "baseline-run"))
            self.baseline_strings[name] = set(leaves(load_example(example)))
            self.known_env_keys |= env_keys(out)

    def stats(self) -> dict:
        seconds = time.monotonic() - self.started
        return {"cases": self.n, "seconds": round(seconds, 1), "cases_per_second": round(self.n / seconds, 2),
                "distinct_lines": len(LINES.seen), "line_measure": "sys.settrace (file, line) in deployctl/"
                if TRACE else "off (DEPLOYCTL_FUZZ_TRACE=0)",
                "files": len({f for f, _ in LINES.seen}), "exit_codes": dict(sorted(self.exits.items())),
                "failures": dict(self.failures)}


def leaves(tree):
    if isinstance(tree, dict):
        for k, v in tree.items():
            if isinstance(k, str):
                yield k
            yield from leaves(v)
    elif isinstance(tree, list):
        for v in tree:
            yield from leaves(v)
    elif isinstance(tree, str):
        yield tree


# ---------------------------------------------------------------------------------------------- checks

_FAILURE_TYPES: dict[str, type] = {}


def failure(key: str, message: str) -> AssertionError:
    """An AssertionError whose type names its class, so hypothesis shrinks and reports each class apart."""
    name = "Fuzz_" + re.sub(r"\W+", "_", key)[:80]
    cls = _FAILURE_TYPES.setdefault(name, type(name, (AssertionError,), {}))
    return cls(f"[{key}] {message}")


def check_command(cmd: str, code, text: str, elapsed: float, inv: Path) -> list[tuple[str, str]]:
    found = []
    if code not in (0, 2):
        m = re.search(r"unexpected error: (\w+)", text) or re.search(r"escaped (\w+)", str(code))
        detail = m.group(1) if m else ("RenderError" if "deployctl validation should have refused" in text
                                       else "other")
        found.append((f"exit{code if isinstance(code, int) else 'X'}:{cmd}:{detail}",
                      f"exit code {code!r}: {text[:1500]}"))
    if "Traceback" in text:
        found.append((f"traceback:{cmd}", text[:1500]))
    if "deployctl bug" in text and code in (0, 2):
        found.append((f"bug-text:{cmd}", text[:1500]))
    if code == 2 and not (re.search(re.escape(inv.name) + r":\d+", text) or re.search(r'"line": \d+', text)
                          or KEY_PATH.search(text) or re.search(r'"path": "[^"]', text)):
        found.append((f"no-location:{cmd}", f"refusal names no file:line or key path: {text[:1500]}"))
    if len(text.encode("utf-8", "surrogateescape")) >= max(MAX_OUTPUT, OUTPUT_RATIO * inv.stat().st_size):
        found.append((f"output-size:{cmd}", f"{len(text)} characters of output: {text[:300]!r}..."))
    if elapsed > MAX_SECONDS:
        found.append((f"slow:{cmd}", f"took {elapsed:.1f}s"))
    return found


def check_tree(out: Path, calls: list[list[str]], case: Case, tree, marker: Path, bench: Bench,
               injected: set) -> list[tuple[str, str]]:
    found = []
    if marker.exists():
        found.append(("marker:script", f"a rendered script executed an injected payload ({marker} exists)"))
    # options: an option-looking string from the mutated inventory must not become an extra docker option
    fresh = {s for s in leaves(tree) if s.startswith("-")} - bench.baseline_strings[case.example]
    fresh |= {s for s in injected if s.startswith("-")}
    engine = tree.get("engine") if isinstance(tree, dict) else None
    if isinstance(engine, dict) and engine.get("privileged") not in (None, False, "false", 0):
        fresh.discard("--privileged")           # asked for explicitly (or refused by validation)
    base = bench.baseline_opts[case.example]
    for argv in calls:
        for arg, n in Counter(a for a in argv if a.startswith("-")).items():
            if arg in fresh and n > base.get(arg, 0):
                found.append((f"docker-option:{arg[:20]}", f"docker got {arg!r} x{n} (example: "
                              f"{base.get(arg, 0)}): {argv}"))
    # env files
    user_env = engine.get("env") if isinstance(engine, dict) else None
    user_keys = {str(k) for k in user_env} if isinstance(user_env, dict) else set()
    # a pd-split role's own env (layout.<role>.env) is the user's too: its keys are rendered into that role's nodes
    layout = tree.get("layout") if isinstance(tree, dict) else None
    for role in ("prefill", "decode"):
        block = layout.get(role) if isinstance(layout, dict) else None
        role_env = block.get("env") if isinstance(block, dict) else None
        user_keys |= {str(k) for k in role_env} if isinstance(role_env, dict) else set()
    allowed = bench.known_env_keys | user_keys
    for env in sorted(out.glob("*/env")):
        raw = env.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            found.append(("env-not-utf8", f"{env.relative_to(out)}: {exc}"))
            continue
        for line in text.split("\n"):
            if not line or line.startswith("#"):
                continue
            if not ENV_LINE.match(line):
                found.append(("env-line", f"{env.relative_to(out)}: not KEY=VALUE: {line[:200]!r}"))
                continue
            key = line.split("=", 1)[0]
            if key not in allowed:
                found.append((f"env-extra-key:{key[:20]}", f"{env.relative_to(out)}: key {key!r} is in no "
                              f"example and not in engine.env: {line[:200]!r}"))
            if ENV_CONTROL.search(line):
                found.append(("env-control", f"{env.relative_to(out)}: control character in {line[:200]!r}"))
    return found


# ---------------------------------------------------------------------------------------------- the test

def one_case(bench: Bench, case: Case, allow_unicode: bool) -> list[tuple[str, str]]:
    bench.n += 1
    work = bench.base / f"case-{bench.n}"
    work.mkdir()
    marker = work / "MARKER"
    inv = bench.invdir / f"case-{bench.n}.yaml"
    data = write_case(case, allow_unicode, str(marker))
    inv.write_bytes(data)
    tree = substitute_marker(case.tree, str(marker))
    injected = {s.replace("@MARKER@", str(marker)) for s in case.injected}
    found: list[tuple[str, str]] = []
    try:
        for cmd, args in (("validate", ["validate", "-i", str(inv)]),
                          ("plan", ["plan", "-i", str(inv), "--output", "json"]),
                          ("render", ["render", "-i", str(inv), "-o", str(work / "out")]),
                          ("helm", ["render", "-i", str(inv), "-o", str(work / "helm"), "--target", "helm",
                                    "--values-only"])):
            code, text, elapsed = run_cli(*args)
            bench.exits[f"{cmd}:{code}"] += 1
            found += check_command(cmd, code, text, elapsed, inv)
            if marker.exists():
                found.append((f"marker:{cmd}", f"the CLI itself executed a payload ({marker} exists)"))
            if cmd == "render" and code == 0:
                calls = run_scripts(work / "out", bench.bindir, work)
                found += check_tree(work / "out", calls, case, tree, marker, bench, injected)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if found:
        for key, _ in found:
            bench.failures[key] += 1
        if COLLECT:
            with open(COLLECT, "a", encoding="utf-8") as fh:
                for key, message in found:
                    fh.write(json.dumps({"key": key, "message": message[:3000], "case": case.describe()[:3000],
                                         "size": len(data), "input": data.decode("utf-8", "backslashreplace")
                                         if len(data) < 20000 else None}) + "\n")
        else:
            key, message = found[0]
            others = "".join(f"\n  also [{k}]" for k, _ in found[1:])
            raise failure(key, f"{message}\ncase: {case.describe()[:2000]}\ninventory ({len(data)} bytes):\n"
                               f"{data[:6000].decode('utf-8', 'backslashreplace')}{others}")
    inv.unlink(missing_ok=True)
    return found


_BENCH: list[Bench] = []


def _bench(tmp_path_factory) -> Bench:
    if not _BENCH:
        _BENCH.append(Bench(tmp_path_factory.mktemp("fuzz")))
    return _BENCH[0]


def test_fuzz_inventories(tmp_path_factory):
    bench = _bench(tmp_path_factory)

    @settings(max_examples=N_EXAMPLES, deadline=None, print_blob=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much, HealthCheck.large_base_example])
    @given(cases())
    def fuzz(drawn):
        case, allow_unicode = drawn
        one_case(bench, case, allow_unicode)

    try:
        fuzz()
    finally:
        stats = bench.stats()
        (bench.base / "fuzz-stats.json").write_text(json.dumps(stats, indent=2))
        print(f"\nfuzz: {stats['cases']} cases in {stats['seconds']}s ({stats['cases_per_second']}/s), "
              f"{stats['distinct_lines']} distinct deployctl lines in {stats['files']} files "
              f"[{stats['line_measure']}]; exit codes {stats['exit_codes']}; stats: {bench.base / 'fuzz-stats.json'}")
        if stats["failures"]:
            print("fuzz failures by class: " + json.dumps(stats["failures"], indent=1))
