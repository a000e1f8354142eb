"""One fake executor for tests of code that takes an executor (``run(target, argv, timeout)``, ``close()``).

    FakeExecutor(answers)                   # canned answers, looked up by key(argv) (the script label by default)
    FakeExecutor(here=True)                 # every host is this machine: argv runs here
    FakeExecutor(here=True, roots={...})    # ...with a directory per host standing in for ``root``
    FakeExecutor(here=True, down={"n3"})    # ...and n3 refuses connections

``answers`` is a dict key -> answer or a callable ``(target, argv) -> answer | None``. An answer is
``(rc, stdout)``, a ``CommandResult``, or an exception (raised); ``None`` means not answered: the command runs
here when ``here`` is set, otherwise the test fails (an unexpected command). Every call is kept in ``calls``
as ``(host, argv)``; subclasses override ``answer`` for behaviour no table holds (barriers, floods).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable

from deployctl.io.executor import CommandResult, HostError


def label(argv: list[str]) -> str:
    """The label of a ``python3 -c SCRIPT LABEL ...`` remote script, else the program's name."""
    return argv[3] if len(argv) > 3 and argv[1] == "-c" else argv[0]


class FakeExecutor:
    def __init__(self, answers: dict | Callable | None = None, *, key: Callable[[list[str]], object] = label,
                 here: bool = False, roots: dict | None = None, root: str = "/data/w", down: Iterable[str] = (),
                 down_kind: str = "unreachable", timeout: float | None = None, command: str | None = None):
        self.answers = answers if answers is not None else {}
        self.key, self.here, self.roots, self.root = key, here, roots or {}, root
        self.down, self.down_kind = set(down), down_kind
        self.timeout = timeout            # a fixed timeout for commands run here (else the caller's)
        self.command = command            # CommandResult.command of answers run here (else argv[0])
        self.calls: list[tuple[str, list[str]]] = []
        self.closed = False

    @property
    def argvs(self) -> list[list[str]]:
        return [argv for _, argv in self.calls]

    def labels(self) -> list[str]:
        return [label(argv) for argv in self.argvs]

    def answer(self, target, argv: list[str]):
        if callable(self.answers):
            return self.answers(target, argv)
        return self.answers.get(self.key(argv))

    def run(self, target, argv: list[str], timeout: float) -> CommandResult:
        self.calls.append((target.name, list(argv)))
        if target.name in self.down:
            raise HostError(target.name, self.down_kind, "refused")
        answer = self.answer(target, argv)
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, CommandResult):
            return answer
        if answer is not None:
            rc, out = answer
            return CommandResult(target.name, argv[0], rc, out)
        if not self.here:
            raise AssertionError(f"{type(self).__name__}: no answer for {argv!r} on {target.name}")
        return self.run_here(target, argv, timeout)

    def run_here(self, target, argv: list[str], timeout: float) -> CommandResult:
        if target.name in self.roots:
            mine = str(self.roots[target.name])
            argv = [a.replace(self.root, mine) if a.startswith(self.root) else a for a in argv]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout or timeout)
        return CommandResult(target.name, self.command or argv[0], r.returncode, r.stdout, r.stderr)

    def close(self) -> None:
        self.closed = True
