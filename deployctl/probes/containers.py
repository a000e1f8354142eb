"""What deployctl asks docker and the engines on a host, as fixed programs (shared by `status` in the hosts
backend and `watch`): values are arguments, never spliced into a script. Their answers are parsed at one
boundary, deployctl.core.models.hostdata (parse_container, parse_count)."""

from __future__ import annotations

# one JSON document per line: state, mounts, env (newlines are literal in the Go template)
INSPECT_FORMAT = "{{json .State}}\n{{json .Mounts}}\n{{json .Config.Env}}"
# GET a URL with the host's own python3 (MindIE hosts have it; curl is not always there)
HTTP_STATUS = ("import sys, urllib.request\n"
               "try:\n    print(urllib.request.urlopen(sys.argv[1], timeout=3).status)\n"
               "except Exception as e:\n    print(getattr(e, 'code', 0))\n")
# how often the container's log holds its ready line (a process without HTTP, e.g. a headless vLLM rank);
# container and line are arguments, never spliced into the script
READY_LINES = 'docker logs "$1" 2>&1 | grep -c -F -- "$2"; true'
