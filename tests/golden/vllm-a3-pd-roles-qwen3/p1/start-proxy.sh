#!/usr/bin/env bash
# deployctl 0.1.0: start the prefill/decode proxy on node p1 (every P and D endpoint).
# Run it after start.sh has run on every prefill and decode node.
# Do not edit by hand: change the inventory and re-render.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"  # the revision directory itself, not a symlink to it
NAME=deployctl_qwen3-pd-roles_vllm-proxy
IMAGE=quay.io/ascend/vllm-ascend:v0.13.0-a3
NODE=p1

if docker container inspect "$NAME" >/dev/null 2>&1; then
  echo "container $NAME already exists; stop it first: docker rm -f $NAME" >&2
  exit 1
fi
docker run -d --name "$NAME" --net=host \
  -v "$HERE:"/etc/deployctl:ro \
  -e DEPLOYCTL_WORK=/etc/deployctl \
  -e DEPLOYCTL_PROXY=/vllm-workspace/vllm-ascend/examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py \
  "$IMAGE" \
  bash -c 'mapfile -t ARGS < "$DEPLOYCTL_WORK/proxy.args"; exec python3 "$DEPLOYCTL_PROXY" "${ARGS[@]}"'
echo "started $NAME on $NODE: clients use "http://10.202.0.2:1999
