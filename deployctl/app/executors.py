"""The one place a command's SSH executor is made (deployctl/io/ssh.py SshExecutor): one per command, handed
down to the backend or feature that runs it, closed when the command ends; one connection per host however many
stages read it."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from deployctl.io.ssh import SshExecutor


@contextmanager
def ssh(*, trust_new_hosts: bool = False, connect_timeout: float | None = None) -> Iterator[SshExecutor]:
    """The command's SSH executor (``--trust-new-hosts``, ``--connect-timeout`` as given)."""
    from deployctl.io.ssh import SshExecutor

    executor = (SshExecutor(trust_new_hosts=trust_new_hosts) if connect_timeout is None else
                SshExecutor(trust_new_hosts=trust_new_hosts, connect_timeout=connect_timeout))
    try:
        yield executor
    finally:
        executor.close()
