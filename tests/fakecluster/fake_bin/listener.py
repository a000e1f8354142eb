#!/usr/bin/python3
"""Occupy TCP ports inside a fake host: listen on 0.0.0.0:PORT for each argument, accept and close.

Started in the node's network namespace by cluster.py; `ss -ltn` / a bind() there shows the port busy.
"""

import select
import signal
import socket
import sys


def main(ports):
    socks = []
    for p in ports:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", int(p)))
        s.listen(64)
        socks.append(s)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sys.stdout.write("listening on %s\n" % " ".join(ports))
    sys.stdout.flush()
    while True:
        ready, _, _ = select.select(socks, [], [], 3600)
        for s in ready:
            try:
                conn, _ = s.accept()
                conn.close()
            except OSError:
                pass


if __name__ == "__main__":
    main(sys.argv[1:])
