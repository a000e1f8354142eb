#!/usr/bin/env bash
# deployctl 0.1.0: start SGLang on node d2 (decode, instance decode, node rank 1).
# Run it on d2 from the folder holding env and server.args.
# Do not edit by hand: change the inventory and re-render.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"  # the revision directory itself, not a symlink to it
NAME=deployctl_r1-sglang-2p1d_sglang
IMAGE=quay.io/ascend/sglang:cann9.0.0-a3-v0.5.16
NODE=d2

if docker container inspect "$NAME" >/dev/null 2>&1; then
  echo "container $NAME already exists; stop it first: docker rm -f $NAME" >&2
  exit 1
fi
docker run -d --name "$NAME" \
  --privileged \
  --net=host --ipc=host --shm-size=16g \
  --device=/dev/davinci0 \
  --device=/dev/davinci1 \
  --device=/dev/davinci2 \
  --device=/dev/davinci3 \
  --device=/dev/davinci4 \
  --device=/dev/davinci5 \
  --device=/dev/davinci6 \
  --device=/dev/davinci7 \
  --device=/dev/davinci8 \
  --device=/dev/davinci9 \
  --device=/dev/davinci10 \
  --device=/dev/davinci11 \
  --device=/dev/davinci12 \
  --device=/dev/davinci13 \
  --device=/dev/davinci14 \
  --device=/dev/davinci15 \
  --device=/dev/davinci_manager \
  --device=/dev/devmm_svm \
  --device=/dev/hisi_hdc \
  -v /usr/local/sbin:/usr/local/sbin:ro \
  -v /usr/local/Ascend/driver:/usr/local/Ascend/driver:ro \
  -v /usr/local/Ascend/firmware:/usr/local/Ascend/firmware:ro \
  -v /etc/ascend_install.info:/etc/ascend_install.info:ro \
  -v /var/queue_schedule:/var/queue_schedule:ro \
  -v /data/models/DeepSeek-R1-W8A8:/data/models/DeepSeek-R1-W8A8:ro \
  -v /var/log/npu/slog:/var/log/npu/slog:rw \
  -v /var/log/npu/plog:/root/ascend/log:rw \
  -v "$HERE:"/etc/deployctl:ro \
  --env-file "$HERE/env" \
  -e DEPLOYCTL_WORK=/etc/deployctl \
  "$IMAGE" \
  bash -c '_keep=(); for _k in ${DEPLOYCTL_ENV_KEYS:-}; do if [ -n "${!_k+x}" ]; then _keep+=("$_k=${!_k}"); fi; done; for f in /usr/local/Ascend/ascend-toolkit/set_env.sh /usr/local/Ascend/nnal/atb/set_env.sh; do if [ -f "$f" ]; then source "$f"; fi; done; for _kv in "${_keep[@]}"; do export "$_kv"; done; mapfile -t ARGS < "$DEPLOYCTL_WORK/server.args"; exec python3 -m sglang.launch_server "${ARGS[@]}"'
echo "started $NAME on $NODE; follow it with: docker logs -f $NAME"
