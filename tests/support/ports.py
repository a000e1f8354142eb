"""A TCP port nobody listens on right now."""

from __future__ import annotations

import socket


def free_port(ip: str = "127.0.0.1") -> int:
    """A port the kernel hands out on ``ip`` at this moment (free until someone else binds it)."""
    with socket.socket() as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


def free_range(n: int, ip: str = "127.0.0.1", avoid=()) -> int:
    """The first of ``n`` consecutive ports free on ``ip`` (a server binding a port per rank: Mooncake's handshake
    ports are kv_port + rank, NetLoader's LISTEN_PORT + rank), none in ``avoid``.

    Below the kernel's ephemeral range: a port handed out by ``free_port`` or taken by an outgoing connection comes
    from that range, so none of these is taken between this check and the server's bind (a range in it was, in CI).
    """
    import random

    low = _ephemeral_low()
    for _ in range(200):
        base = random.randint(10000, low - n - 1)
        if any(base <= a < base + n for a in avoid):
            continue
        socks = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind((ip, port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError(f"no {n} consecutive free ports on {ip}")


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return max(12000, int(f.read().split()[0]))
    except (OSError, ValueError, IndexError):
        return 32768
