#!/bin/bash
# A LeaderWorkerSet worker of vLLM-Ascend or SGLang (chart templates/lws.yaml): start the server whose node this
# pod runs on. Every worker's files and env are mounted under /opt/deployctl/servers/<k>/{files,env}; the map
# /opt/deployctl/servers/nodes/<node> holds the server index of each node the instance names (without nodes:
# the LWS worker index). The env files are exported as they are (values, not commands), then the engine's
# launcher runs with DEPLOYCTL_WORK at the server's files, as the pod of a StatefulSet does.
set -euo pipefail
root=${DEPLOYCTL_SERVERS:-/opt/deployctl/servers}      # the mounts (a test points it elsewhere)
k=""
if [ -n "${NODE_NAME:-}" ] && [ -f "$root/nodes/$NODE_NAME" ]; then
    k=$(cat "$root/nodes/$NODE_NAME")
elif [ -n "${LWS_WORKER_INDEX:-}" ]; then
    k=$LWS_WORKER_INDEX
fi
case "$k" in
    ''|*[!0-9]*) echo "pick-server: node ${NODE_NAME:-?} runs no server of this instance (index '$k')" >&2; exit 2 ;;
esac
dir="$root/$k"
if [ ! -d "$dir/files" ]; then
    echo "pick-server: no files for server $k (node ${NODE_NAME:-?})" >&2
    exit 2
fi
for f in "$dir"/env/*; do
    [ -f "$f" ] || continue
    name=${f##*/}
    value=$(cat "$f"; printf x)
    export "$name=${value%x}"
done
export DEPLOYCTL_WORK="$dir/files" DEPLOYCTL_SERVER="$k"
exec /bin/bash -c "$1"
