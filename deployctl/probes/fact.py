"""A probe as a fact, the way pyinfra keeps facts: the exact command deployctl sends a host and how its
answer becomes a typed value, in one object (issue 35 item 5).

Preflight, ``watch`` and the hosts backend's read-back all ask ``fact.command(...)`` for the argument list
they put in a batch (deployctl.io.batch quotes it with shlex.join and names it with a key of the caller's
choosing) and hand the answer to ``fact.parse(...)``. Each fact lives in the module of its area
(``npu_smi.NPU_HEALTH``, ``hccn_tool.LINK``, ``host.OS_RELEASE``, ...); ``catalog.FACTS`` lists them all,
and tests/probes/fixtures/<fact name>/<case>/ ties a command, a real answer and the parsed value together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Fact(Generic[T]):
    """One read-only probe.

    ``name`` is the fixture folder's name; ``argv`` builds the argument list from the fact's arguments (a device
    id, a path, a container name: values are arguments, never spliced into a script); ``parser`` turns the
    output into the value. Parsers raise ValueError on output they do not recognise, except the deploy
    read-back's, which take the node's name and return findings instead (deployctl.core.models.hostdata).
    """

    name: str
    argv: Callable[..., list[str]]
    parser: Callable[..., T]

    def command(self, *args: object) -> list[str]:
        """The exact argument list the host runs, for these arguments."""
        return list(self.argv(*args))

    def parse(self, output: str, *context: object) -> T:
        """The value of ``output``; ``context`` is passed on to parsers that name the host in their findings."""
        return self.parser(output, *context)

    def __repr__(self) -> str:
        return f"Fact({self.name!r})"
