#!/usr/bin/env bash
# deployctl 0.1.0: start vLLM-Ascend on node d2 (decode, instance decode): 16 vllm serve processes (external DP).
# Run it on d2 from the folder holding env and serve-0.args, serve-1.args, serve-2.args, serve-3.args, serve-4.args, serve-5.args, serve-6.args, serve-7.args, serve-8.args, serve-9.args, serve-10.args, serve-11.args, serve-12.args, serve-13.args, serve-14.args, serve-15.args.
# Do not edit by hand: change the inventory and re-render.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"  # the revision directory itself, not a symlink to it
NAME=deployctl_qwen3-pd-roles_vllm
IMAGE=quay.io/ascend/vllm-ascend:v0.13.0-a3
NODE=d2

if docker container inspect "$NAME" >/dev/null 2>&1; then
  echo "container $NAME already exists; stop it first: docker rm -f $NAME" >&2
  exit 1
fi
docker run -d --name "$NAME" \
  --net=host --shm-size=1g \
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
  -v /usr/local/dcmi:/usr/local/dcmi:ro \
  -v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro \
  -v /usr/local/Ascend/driver:/usr/local/Ascend/driver:ro \
  -v /etc/ascend_install.info:/etc/ascend_install.info:ro \
  -v /data/models/Qwen3-235B-A22B-W8A8:/data/models/Qwen3-235B-A22B-W8A8:ro \
  -v /etc/hccn.conf:/etc/hccn.conf:ro \
  -v /var/log/npu/slog:/var/log/npu/slog:rw \
  -v /var/log/npu/plog:/root/ascend/log:rw \
  -v "$HERE:"/etc/deployctl:ro \
  --env-file "$HERE/env" \
  -e DEPLOYCTL_WORK=/etc/deployctl \
  -e DEPLOYCTL_MOONCAKE=1 \
  "$IMAGE" \
  bash -c '_keep=(); for _k in ${DEPLOYCTL_ENV_KEYS:-}; do if [ -n "${!_k+x}" ]; then _keep+=("$_k=${!_k}"); fi; done; for f in /usr/local/Ascend/ascend-toolkit/set_env.sh /usr/local/Ascend/nnal/atb/set_env.sh; do if [ -f "$f" ]; then source "$f"; fi; done; for _kv in "${_keep[@]}"; do export "$_kv"; done; if [ -n "${DEPLOYCTL_MOONCAKE:-}" ]; then export LD_LIBRARY_PATH="/usr/local/Ascend/ascend-toolkit/latest/python/site-packages/mooncake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi; pids=(); for a in "$DEPLOYCTL_WORK"/serve-*.args; do mapfile -t ARGS < "$a"; d="${a%.args}.devices"; if [ -f "$d" ]; then ASCEND_RT_VISIBLE_DEVICES="$(cat "$d")" vllm serve "${ARGS[@]}" & else vllm serve "${ARGS[@]}" & fi; pids+=($!); done; wait -n; rc=$?; kill "${pids[@]}" 2>/dev/null; wait; exit "$rc"'
echo "started $NAME on $NODE; follow it with: docker logs -f $NAME"
