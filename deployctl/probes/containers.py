"""The facts deployctl reads from docker and the engines on a host, as fixed programs (shared by preflight,
`watch` and the hosts backend's read-back): values are arguments, never spliced into a script. Container
answers are parsed at one boundary, deployctl.core.models.hostdata (parse_container, parse_count).
"""

from __future__ import annotations

import re

from deployctl.core.models.hostdata import ContainerDoc, parse_container, parse_count
from deployctl.probes.fact import Fact

# one JSON document per line: state, mounts, env (newlines are literal in the Go template)
INSPECT_FORMAT = "{{json .State}}\n{{json .Mounts}}\n{{json .Config.Env}}"
# GET a URL with the host's own python3 (MindIE hosts have it; curl is not always there)
HTTP_STATUS = ("import sys, urllib.request\n"
               "try:\n    print(urllib.request.urlopen(sys.argv[1], timeout=3).status)\n"
               "except Exception as e:\n    print(getattr(e, 'code', 0))\n")
# how often the container's log holds its ready line (a process without HTTP, e.g. a headless vLLM rank);
# container and line are arguments, never spliced into the script
READY_LINES = 'docker logs "$1" 2>&1 | grep -c -F -- "$2"; true'
LOG_BYTES = 64 * 1024       # what `watch` reads of an engine log per round (the tail of the last seconds)
# the log of the last seconds, with docker's timestamps (a line from before the container (re)started is not
# this container's fault any more); container and window are arguments, never spliced into the script
LOG_SINCE = 'docker logs --timestamps --since "$2" "$1" 2>&1 | tail -c ' + str(LOG_BYTES) + '; true'
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]{0,63}$")


def parse_runtime_version(text: str) -> str | None:
    """`docker version --format {{.Server.Version}}`: the version, None when nothing is printed."""
    s = text.strip()
    if not s:
        return None
    if not _VERSION.match(s):
        raise ValueError(f"docker version: expected a version like 24.0.7, got {s[:60]!r}")
    return s


def parse_image_id(text: str) -> str | None:
    """`docker image inspect --format {{.Id}}`: the id as printed, None when nothing is. Whether the image is
    there is the exit code (0), which preflight reads."""
    return text.strip() or None


def parse_http_ok(text: str) -> bool:
    """The HTTP_STATUS script's answer: True only for ``200`` (anything else, or nothing, is not ready)."""
    return text.strip() == "200"


def log_tail(text: str) -> str:
    """The log as `watch` reads it: its last LOG_BYTES characters (timestamps and lines are read by `watch`)."""
    return text[-LOG_BYTES:]


RUNTIME_VERSION: Fact[str | None] = Fact(
    "docker-version", lambda: ["docker", "version", "--format", "{{.Server.Version}}"], parse_runtime_version)
IMAGE: Fact[str | None] = Fact(
    "docker-image", lambda image: ["docker", "image", "inspect", "--format", "{{.Id}}", image], parse_image_id)
# parse(output, node, container): (the container, or None when docker said nothing) and findings naming the node
INSPECT: Fact[tuple[ContainerDoc | None, list[str]]] = Fact(
    "docker-inspect", lambda container: ["docker", "inspect", "--format", INSPECT_FORMAT, container], parse_container)
HTTP_OK: Fact[bool] = Fact("http-status", lambda url: ["python3", "-c", HTTP_STATUS, url], parse_http_ok)
# how many times the ready line is in the log; None when the answer is not a count
READY_COUNT: Fact[int | None] = Fact(
    "ready-lines", lambda container, line: ["sh", "-c", READY_LINES, "deployctl", container, line], parse_count)
# the log of the last ``window_s`` seconds (at least 1)
LOG: Fact[str] = Fact(
    "container-log",
    lambda container, window_s: ["sh", "-c", LOG_SINCE, "deployctl", container, f"{max(1, window_s)}s"], log_tail)
