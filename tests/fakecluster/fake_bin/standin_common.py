#!/usr/bin/python3
"""The process plumbing shared by the stand-in engines vllm.py (vLLM-Ascend) and sglang_fake.py (SGLang)
(tests/fakecluster). Standard library only; both import it from their own directory, as they import openai_fake (in
a fake container: /.fakecluster/, where the fake docker copies the stand-ins).

* the process: `out` (one whole line to stdout), `Fatal` (end with its exit code), `STOP` (set by SIGTERM/SIGINT
  once `stop_on_signals` ran), `wait_stop`, `sleep_or_stop`, `exit_now`;
* the engine's parser table, read as a file: `image_tag`, `read_table`, `ServeParser` (argparse's errors, exit 2);
* the host: `container_devices`, `node_ip`;
* the rendezvous between the nodes of one engine, JSON lines over TCP. The master (`tcp_listener`, then
  `next_hello` for each worker) checks every worker's hello, then sends each {"go": true}, or {"abort": reason} to
  all (`tell_all`); a worker (`join_master`) connects, says hello and waits for the go. After the start both sides
  `watch_peer` the connections: a peer that goes away breaks the group;
* HTTP: `http_server`, uvicorn's lines (`uvicorn_bind_error`, `uvicorn_started`), `prom_label`.

What each engine logs around these (its log format, its error texts) stays in its own stand-in.
"""

import argparse
import json
import os
import re
import signal
import socket
import sys
import threading
import time

from openai_fake import ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))

STOP = threading.Event()
PID = os.getpid()
_out_lock = threading.Lock()

# What both engines' loaders say for a model that is no local folder (no hub is reachable from a fake node).
NO_LOCAL_MODEL = ("OSError: %s is not a local folder and is not a valid model identifier listed on "
                  "'https://huggingface.co/models' (no local config.json; the hub is not reachable)")
# The default of the engine_crash fault (a node state `engine.crash` of true rather than a message).
NPU_OOM = ("NPU out of memory. Tried to allocate 450.00 MiB (NPU 0; 60.97 GiB total capacity; 14.67 GiB already "
           "allocated; 14.67 GiB current active; 22.66 MiB free; 14.71 GiB reserved in total by PyTorch)")


# ---- the process --------------------------------------------------------------------------------------

def out(text):
    with _out_lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


class Fatal(Exception):
    def __init__(self, code=1):
        super().__init__(code)
        self.code = code


def stop_on_signals():
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())
    signal.signal(signal.SIGINT, lambda *_: STOP.set())


def wait_stop():
    while not STOP.wait(1):
        pass
    raise Fatal(0)


def sleep_or_stop(seconds):
    if STOP.wait(seconds):
        raise Fatal(0)


def exit_now(code):
    """End the process with `code` at once (no interpreter shutdown waiting for threads)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# ---- the parser table -----------------------------------------------------------------------------------

def image_tag(image):
    """The tag of an image reference (`quay.io/ascend/vllm-ascend:v0.13.0-a3@sha256:...` -> `v0.13.0-a3`), or ""."""
    last = (image or "").split("@", 1)[0].rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else ""


def flags_dir(settings, prefix, engine):
    """The folder of the tables: settings' flags_dir (unit tests), /.fakecluster/<prefix>-flags in a fake container,
    else the repository's deployctl/core/engines/<engine>/flags."""
    for d in (settings.get("flags_dir"), os.path.join(HERE, prefix + "-flags"),
              os.path.join(HERE, "..", "..", "..", "deployctl", "core", "engines", engine, "flags")):
        if d and os.path.isdir(d):
            return d
    return None


def read_table(settings, prefix, engine, parts, want, missing):
    """The engine's parser table `<prefix>-X.Y.Z.json` for version `want` (a tuple of the first `parts` numbers;
    None: the newest): that version, else the newest older one, else the oldest. None at all: `missing`, exit 1."""
    d = flags_dir(settings, prefix, engine)
    tables = {}
    for name in os.listdir(d) if d else []:
        m = re.fullmatch(re.escape(prefix) + r"-(\d+)\.(\d+)\.(\d+)\.json", name)
        if m:
            tables[tuple(int(x) for x in m.groups()[:parts])] = os.path.join(d, name)
    if not tables:
        out(missing)
        raise Fatal(1)
    want = want or max(tables)
    older = [k for k in tables if k <= want]
    key = want if want in tables else (max(older) if older else min(tables))
    with open(tables[key]) as f:
        return json.load(f)


class ServeParser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        sys.stderr.write("%s: error: %s\n" % (self.prog, message))
        sys.stderr.flush()
        raise SystemExit(2)


# ---- the host -------------------------------------------------------------------------------------------

def container_devices(settings):
    d = settings.get("dev_dir") or "/dev"
    try:
        names = os.listdir(d)
    except OSError:
        return []
    return sorted(int(m.group(1)) for m in (re.fullmatch(r"davinci(\d+)", n) for n in names) if m)


def node_ip(settings, ifaces):
    if settings.get("ip"):
        return settings["ip"]
    return next((a for n, a in sorted(ifaces.items()) if a and n != "lo"), "127.0.0.1")


# ---- the rendezvous -------------------------------------------------------------------------------------

def send(conn, obj):
    conn.sendall((json.dumps(obj) + "\n").encode())


class Lines:
    """JSON lines from a socket."""

    def __init__(self, conn):
        self.conn, self.buf = conn, b""

    def next(self, deadline):
        while b"\n" not in self.buf:
            remaining = deadline - time.time()
            if remaining <= 0 or STOP.is_set():
                raise TimeoutError()
            self.conn.settimeout(min(remaining, 0.2))
            try:
                chunk = self.conn.recv(4096)
            except socket.timeout:
                continue
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line.decode())


def tcp_listener(host, port):
    """A listening TCP socket on host:port (SO_REUSEADDR); OSError (the socket closed) when it cannot bind."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, port))
        s.listen(64)
    except OSError:
        s.close()
        raise
    return s


def next_hello(lsock, deadline):
    """The master's side: the next worker that connected and said hello, as (conn, peer address, hello); None once
    `deadline` has passed. A connection that says nothing readable within 5 s is dropped. STOP: Fatal(0)."""
    lsock.settimeout(0.2)
    while True:
        if STOP.is_set():
            raise Fatal(0)
        if time.time() > deadline:
            return None
        try:
            conn, peer = lsock.accept()
        except socket.timeout:
            continue
        try:
            hello = Lines(conn).next(time.time() + 5)
        except (TimeoutError, ConnectionError, ValueError):
            conn.close()
            continue
        return conn, peer, hello


def tell_all(joined, msg):
    """Send msg to every (conn, who) of joined; a peer already gone is skipped."""
    for c, _ in joined:
        try:
            send(c, msg)
        except OSError:
            pass


def start_group(joined, gone):
    """The master's go to every (conn, who) of joined, each then watched: `gone(who)` makes its on_gone."""
    for c, who in joined:
        try:
            send(c, {"go": True})
        except OSError:
            pass
        watch_peer(c, gone(who))


def join_master(addr, port, hello, deadline, failure):
    """A worker's side: connect to the master at addr:port (retrying until `deadline`), send `hello`, wait for the
    go; returns the connection. `failure(what, reason)` must raise; what: "connect" (nothing accepted by the
    deadline), "timeout" (no go by the deadline), "closed" (the master closed the connection or sent garbage),
    "abort" (reason: the master's). STOP: Fatal(0)."""
    conn = None
    while conn is None:
        if STOP.is_set():
            raise Fatal(0)
        if time.time() > deadline:
            failure("connect", None)
        try:
            conn = socket.create_connection((addr, port), timeout=1)
        except OSError:
            time.sleep(0.2)
    send(conn, hello)
    lines = Lines(conn)
    while True:
        try:
            msg = lines.next(deadline)
        except TimeoutError:
            if STOP.is_set():
                raise Fatal(0)
            failure("timeout", None)
        except (ConnectionError, OSError, ValueError):
            failure("closed", None)
        if msg.get("abort"):
            failure("abort", msg["abort"])
        if msg.get("go"):
            return conn


def watch_peer(conn, on_gone):
    """After the start: on_gone() once the peer closes the connection (not when this process is stopping)."""
    def run():
        conn.settimeout(None)
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass
        if STOP.is_set():
            return
        on_gone()
    threading.Thread(target=run, daemon=True).start()


# ---- HTTP -----------------------------------------------------------------------------------------------

def http_server(host, port, handler):
    """A threaded HTTP server bound to host:port and listening (not serving yet); OSError when it cannot bind."""
    srv = ThreadingHTTPServer((host, port), handler, bind_and_activate=False)
    srv.allow_reuse_address = True
    srv.server_bind()
    srv.server_activate()
    return srv


def uvicorn_bind_error(e, host, port):
    """uvicorn's line for a port it cannot bind (the OSError e)."""
    return ("ERROR:    [Errno %d] error while attempting to bind on address ('%s', %d): %s"
            % (e.errno or 0, host, port, (e.strerror or str(e)).lower()))


def uvicorn_started(host, port):
    out("INFO:     Started server process [%d]" % PID)
    out("INFO:     Waiting for application startup.")
    out("INFO:     Application startup complete.")
    out("INFO:     Uvicorn running on http://%s:%d (Press CTRL+C to quit)" % (host, port))


def prom_label(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
