"""Every `deployctl ...` command the pages show exists, and every flag they use with it is in its `--help`.

The commands are read from fenced code blocks (bash, sh, shell, console or plain) and inline code of README.md,
CONTRIBUTING.md and docs/**/*.md: line continuations joined, comments and `$ ` prompts dropped, a pipeline or a
`&&` chain cut into its commands, `[--optional ARG]` brackets and `a|b` alternatives of a subcommand expanded.
Each distinct command path is looked up in the CLI's own command tree (built once, in-process) and its help
rendered from it; one real `deployctl <path> --help` runs as a subprocess."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cache

import pytest

from mdscan import ROOT, code_spans, doc_files, split_fences

SHELL_FENCES = {"", "bash", "sh", "shell", "console", "shell-session", "zsh"}
# `deployctl` as a command word: alone or as the last part of a path (.venv/bin/deployctl), in command position
_INVOCATION = re.compile(r"(?<![\w./-])(?:[\w./-]*/)?deployctl(?=\s|$)")
_COMMAND_POSITION = re.compile(r"(^|&&|\|\||[;|(`$]|(^|\s)(sudo|exec|time|nohup|env|-m)|(^|\s)[A-Z_][A-Z0-9_]*=\S*)$")
_ENDS_COMMAND = {"&&", "||", ";", "|", "&", ")", ">", ">>", "2>&1", "<", "`"}
ALT = "\x01"
_PLACEHOLDER = re.compile(r"^(<.*>|[A-Z][A-Z_]*|\.\.\.|…)$")


@dataclass(frozen=True)
class Use:
    where: str                                   # file:line
    words: tuple[str, ...]                       # the arguments after `deployctl`, as the shell splits them


@dataclass
class Command:
    path: tuple[str, ...]
    flags: dict[str, list[str]] = field(default_factory=dict)   # flag -> where it is used


def _words(text: str) -> list[str]:
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        return list(lexer)
    except ValueError:                            # an unbalanced quote in prose: split on blanks
        return text.split()


def _uses_in(text: str, where: str) -> list[Use]:
    """The deployctl invocations of one shell line (continuations already joined)."""
    out = []
    text = re.sub(r"(?<=[a-z])\|(?=[a-z])", ALT, text)    # `up|down`: alternatives, not a pipe
    for m in _INVOCATION.finditer(text):
        if not _COMMAND_POSITION.search(text[:m.start()].rstrip()):
            continue                              # prose or output that names deployctl
        words = []
        for w in _words(text[m.end():]):
            if w in _ENDS_COMMAND or w.startswith(("|", ">", "&&", "2>")):
                break
            words.append(w)
        out.append(Use(where, tuple(words)))
    return out


def _shell_lines(lines: tuple[str, ...], first: int) -> list[tuple[int, str]]:
    """Lines of a code block with `\\` continuations joined and `$ ` prompts dropped."""
    out: list[tuple[int, str]] = []
    buf, start = "", first
    for i, line in enumerate(lines):
        if not buf:
            start = first + i
            line = re.sub(r"^\s*[$#>]\s+(?=\S)", "", line) if line.lstrip().startswith("$ ") else line
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        out.append((start, buf + line))
        buf = ""
    if buf:
        out.append((start, buf))
    return out


def documented_uses(pages=None, root=ROOT) -> list[Use]:
    uses: list[Use] = []
    for page in pages or doc_files(root):
        name = page.relative_to(root)
        prose, fences = split_fences(page.read_text(encoding="utf-8"))
        for fence in fences:
            if fence.info in SHELL_FENCES:
                for no, line in _shell_lines(fence.lines, fence.start):
                    uses += _uses_in(line, f"{name}:{no}")
        for no, line in prose:
            for span in code_spans(line):
                uses += _uses_in(span, f"{name}:{no}")
                if "dev" not in name.parts:       # contributor notes also show other tools' `up --dir`
                    uses += _bare_use(span, f"{name}:{no}")
    return uses


def _bare_use(span: str, where: str) -> list[Use]:
    """Inline code that is a deployctl command without its name: `render --target k8s --values-only`,
    `weights sync --from NODE` (a command of the tree followed by a flag)."""
    words = _words(re.sub(r"(?<=[a-z])\|(?=[a-z])", ALT, span))
    if not words or words[0].split(ALT)[0] not in cli().commands:
        return []
    for i, w in enumerate(words):
        if w in _ENDS_COMMAND:
            words = words[:i]
            break
    if not any(w.lstrip("[").startswith("-") for w in words[1:]) or not _plausible(words):
        return []
    return [Use(where, tuple(words))]


def _plausible(words: list[str]) -> bool:
    """Whether bare words read as a deployctl command rather than another tool's (`bench serve --max-concurrency`
    is vLLM's): a word that is neither a subcommand nor an option's value needs a command that takes arguments."""
    cmd = cli()
    i = 0
    while i < len(words):
        w = words[i].strip("[]")
        if w.startswith("-"):
            i += 2 if "=" not in w and _takes_value(cmd, w.split("=")[0]) else 1
            continue
        if hasattr(cmd, "commands"):
            if w.split(ALT)[0] not in cmd.commands:
                return False
            cmd = cmd.commands[w.split(ALT)[0]]
        elif not any(getattr(p, "param_type_name", "") == "argument" for p in cmd.params):
            return False
        i += 1
    return True


# ------------------------------------------------------------------ the CLI's own tree


@cache
def cli():
    import typer.main

    from deployctl.cli import app

    return typer.main.get_command(app)


def _option_names(cmd) -> set[str]:
    names = {"--help", "-h"}
    for p in cmd.params:
        if getattr(p, "param_type_name", "") == "option":
            names |= set(p.opts) | set(p.secondary_opts)
    return names


def _takes_value(cmd, flag: str) -> bool:
    for p in cmd.params:
        if flag in getattr(p, "opts", ()) or flag in getattr(p, "secondary_opts", ()):
            return not (getattr(p, "is_flag", False) or getattr(p, "count", False))
    return False


def _expand(words: tuple[str, ...]) -> list[list[str]]:
    """`[--to 3]` -> `--to 3`; `up|status --target k8s` -> one command per alternative; `--a/--b` -> both."""
    flat: list[str] = []
    for w in words:
        w = w.strip("[]")
        if not w:
            continue
        if w.startswith("--") and "/--" in w:
            flat += w.split("/")
        else:
            flat.append(w)
    alternatives = [[]]
    for w in flat:
        if ALT in w:
            alternatives = [a + [choice] for a in alternatives for choice in w.split(ALT)]
        else:
            alternatives = [a + [w] for a in alternatives]
    return alternatives


def resolve(words: list[str]):
    """(the command path, the flags used along it as (path, flag), why the path does not exist or None)."""
    cmd, path, flags = cli(), [], []
    i = 0
    while i < len(words):
        w = words[i]
        if w == "--":
            break
        if w.startswith("-") and len(w) > 1:
            flag = w.split("=", 1)[0]
            flags.append((tuple(path), flag))
            if "=" not in w and hasattr(cmd, "commands") and _takes_value(cmd, flag):
                i += 1                            # a group's option value is not a subcommand
            i += 1
            continue
        if hasattr(cmd, "commands"):
            if _PLACEHOLDER.match(w):             # `deployctl COMMAND ...`: any command
                break
            sub = cmd.commands.get(w)
            if sub is None:
                return tuple(path), flags, f"`deployctl {' '.join(path + [w])}`: no such command"
            cmd, path = sub, path + [w]
        i += 1
    return tuple(path), flags, None


@cache
def help_text(path: tuple[str, ...]) -> str:
    """What `deployctl <path> --help` prints, rendered from the in-process command tree."""
    root = cli()
    ctx = root.context_class(root, info_name="deployctl")
    cmd = root
    for name in path:
        cmd = cmd.commands[name]
        ctx = root.context_class(cmd, info_name=name, parent=ctx)
    return cmd.get_help(ctx)


def commands(uses: list[Use]) -> tuple[dict[tuple[str, ...], Command], list[str]]:
    found: dict[tuple[str, ...], Command] = {}
    problems: list[str] = []
    for use in uses:
        for words in _expand(use.words):
            path, flags, missing = resolve(words)
            if missing:
                problems.append(f"{use.where}: {missing}")
                continue
            found.setdefault(path, Command(path))
            for at, flag in flags:
                found.setdefault(at, Command(at)).flags.setdefault(flag, []).append(use.where)
    return found, problems


def check(found: dict[tuple[str, ...], Command]) -> list[str]:
    problems = []
    for path, command in sorted(found.items()):
        cmd = cli()
        for name in path:
            cmd = cmd.commands[name]
        text = help_text(path)
        known = _option_names(cmd)
        for flag, where in sorted(command.flags.items()):
            shown = re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None
            if flag not in known or not shown:
                label = " ".join(("deployctl",) + path)
                problems.append(f"{', '.join(sorted(set(where)))}: `{label}` has no {flag} (not in `{label} --help`)")
    return problems


# ------------------------------------------------------------------ the tests


def test_every_documented_command_and_flag_exists():
    uses = documented_uses()
    assert len(uses) > 50, "the extraction found almost no commands"
    found, problems = commands(uses)
    assert {("plan",), ("render",), ("up",), ("weights", "check"), ("observe", "render")} <= set(found)
    problems += check(found)
    assert not problems, "documented commands or flags that do not exist:\n" + "\n".join(problems)


def test_extraction_reads_continuations_comments_placeholders_and_alternatives(tmp_path):
    page = tmp_path / "docs" / "x.md"
    page.parent.mkdir()
    page.write_text(
        "Run `deployctl weights check -i INV [--hash]` or `deployctl up|down --target k8s`; not `deployctl_x` or\n"
        "`deployctl/core/x.py`. Bare: `render --target k8s --values-only`; vLLM's `bench serve --max-concurrency 8`\n"
        "is not deployctl's.\n\n"
        "```bash\n"
        "$ .venv/bin/deployctl render -i my.yaml \\\n"
        "    -o out/ --force   # --not-a-flag in a comment\n"
        "deployctl plan -i my.yaml --output json | jq . && deployctl --debug status -i my.yaml\n"
        "deployctl --max-output-mb 8 COMMAND ...\n"
        "```\n\n```\nout/.deployctl.json   marker (lets deployctl replace --its own trees)\n```\n\n"
        "```yaml\ndeployctl: --nope\n```\n", encoding="utf-8")
    uses = documented_uses([page], tmp_path)
    found, problems = commands(uses)
    assert not problems
    assert set(found) == {("weights", "check"), ("up",), ("down",), ("render",), ("plan",), ("status",), ()}
    assert set(found[("weights", "check")].flags) == {"-i", "--hash"}
    assert set(found[("render",)].flags) == {"-i", "-o", "--force", "--target", "--values-only"}
    assert set(found[("plan",)].flags) == {"-i", "--output"}
    assert set(found[()].flags) == {"--debug", "--max-output-mb"}
    assert check(found) == []


@pytest.mark.parametrize("line,expected", [
    ("deployctl plann -i my.yaml", "no such command"),
    ("deployctl weights verify -i my.yaml", "no such command"),
    ("deployctl plan -i my.yaml --out json", "has no --out"),
    ("deployctl schema --output json", "has no --output"),
])
def test_a_command_or_flag_that_does_not_exist_fails(line, expected):
    found, problems = commands(_uses_in(line, "x.md:1"))
    problems += check(found)
    assert len(problems) == 1 and expected in problems[0], problems


def test_help_runs_as_a_real_process_and_agrees_with_the_tree():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "COLUMNS": "120", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "deployctl", "weights", "sync", "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for flag in sorted(_option_names(cli().commands["weights"].commands["sync"])):
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", done.stdout), flag
    assert "Usage:" in help_text(("weights", "sync"))
