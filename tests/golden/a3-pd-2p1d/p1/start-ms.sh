#!/usr/bin/env bash
# deployctl 0.1.0: start MindIE-MS (controller + coordinator) on node p1.
# Run it after start.sh has been run on every prefill and decode node.
# Do not edit by hand: change the inventory and re-render.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"  # the revision directory itself, not a symlink to it
IMAGE=swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie:3.0.0-800I-A3-py311-openeuler24.03-lts
NODE=p1
MS_URL=http://10.202.1.2:1035

chmod 640 "$HERE/global_ranktable.json" "$HERE/ms_controller.json" "$HERE/ms_coordinator.json"
NAME=deployctl_v32-2p1d_mindie-ms-controller
if docker container inspect "$NAME" >/dev/null 2>&1; then
  echo "container $NAME already exists; stop it first: docker rm -f $NAME" >&2
  exit 1
fi
docker run -d --name "$NAME" --net=host \
  -v "$HERE:"/etc/deployctl:ro \
  --env-file "$HERE/env" \
  -e DEPLOYCTL_MS_HOME=/usr/local/lib/python3.11/site-packages/mindie_motor \
  -e DEPLOYCTL_MS_IP=10.202.1.2 \
  -e DEPLOYCTL_MS_PORT=1035 \
  -e DEPLOYCTL_MS_MANAGE_PORT=1036 \
  "$IMAGE" \
  bash -c '_keep=(); for _k in ${DEPLOYCTL_ENV_KEYS:-}; do if [ -n "${!_k+x}" ]; then _keep+=("$_k=${!_k}"); fi; done; for f in /usr/local/Ascend/ascend-toolkit/set_env.sh /usr/local/Ascend/nnal/atb/set_env.sh /usr/local/lib/python3.11/site-packages/mindie_llm/set_env.sh; do if [ -f "$f" ]; then source "$f"; fi; done; for _kv in "${_keep[@]}"; do export "$_kv"; done; export HSECEASY_PATH="$DEPLOYCTL_MS_HOME/lib"; exec mindie_motor_controller'
echo "started $NAME on $NODE"
NAME=deployctl_v32-2p1d_mindie-ms-coordinator
if docker container inspect "$NAME" >/dev/null 2>&1; then
  echo "container $NAME already exists; stop it first: docker rm -f $NAME" >&2
  exit 1
fi
docker run -d --name "$NAME" --net=host \
  -v "$HERE:"/etc/deployctl:ro \
  --env-file "$HERE/env" \
  -e DEPLOYCTL_MS_HOME=/usr/local/lib/python3.11/site-packages/mindie_motor \
  -e DEPLOYCTL_MS_IP=10.202.1.2 \
  -e DEPLOYCTL_MS_PORT=1035 \
  -e DEPLOYCTL_MS_MANAGE_PORT=1036 \
  "$IMAGE" \
  bash -c '_keep=(); for _k in ${DEPLOYCTL_ENV_KEYS:-}; do if [ -n "${!_k+x}" ]; then _keep+=("$_k=${!_k}"); fi; done; for f in /usr/local/Ascend/ascend-toolkit/set_env.sh /usr/local/Ascend/nnal/atb/set_env.sh /usr/local/lib/python3.11/site-packages/mindie_llm/set_env.sh; do if [ -f "$f" ]; then source "$f"; fi; done; for _kv in "${_keep[@]}"; do export "$_kv"; done; export HSECEASY_PATH="$DEPLOYCTL_MS_HOME/lib"; exec mindie_motor_coordinator "$DEPLOYCTL_MS_IP" "$DEPLOYCTL_MS_IP"'
echo "started $NAME on $NODE"
echo "the coordinator serves the OpenAI API at $MS_URL; it logs 'MindIE-MS coordinator is ready!' when done"
