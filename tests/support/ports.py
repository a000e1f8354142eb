"""A TCP port nobody listens on right now."""

from __future__ import annotations

import socket


def free_port(ip: str = "127.0.0.1") -> int:
    """A port the kernel hands out on ``ip`` at this moment (free until someone else binds it)."""
    with socket.socket() as s:
        s.bind((ip, 0))
        return s.getsockname()[1]
