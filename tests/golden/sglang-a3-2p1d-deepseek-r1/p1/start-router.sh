#!/usr/bin/env bash
# deployctl 0.1.0: start the SGLang router on node p1 (every prefill and decode server).
# Run it after start.sh has run on every prefill and decode node.
# Do not edit by hand: change the inventory and re-render.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"  # the revision directory itself, not a symlink to it
NAME=deployctl_r1-sglang-2p1d_sglang-router
IMAGE=quay.io/ascend/sglang:cann9.0.0-a3-v0.5.16
NODE=p1

if docker container inspect "$NAME" >/dev/null 2>&1; then
  echo "container $NAME already exists; stop it first: docker rm -f $NAME" >&2
  exit 1
fi
docker run -d --name "$NAME" --net=host \
  -v "$HERE:"/etc/deployctl:ro \
  --env-file "$HERE/router.env" \
  -e DEPLOYCTL_WORK=/etc/deployctl \
  "$IMAGE" \
  bash -c 'mapfile -t ARGS < "$DEPLOYCTL_WORK/router.args"; exec python3 -m sglang_router.launch_router "${ARGS[@]}"'
echo "started $NAME on $NODE: clients use "http://10.204.0.2:6688
