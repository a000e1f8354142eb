#!/usr/bin/env bash
# deployctl 0.1.0: start MindIE on node d2 (decode, instance decode, 4 DP servers).
# Run it on d2 from the folder holding config1.json, config2.json, config3.json, config4.json, ranktable.json and env.
# Do not edit by hand: change the inventory and re-render.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"  # the revision directory itself, not a symlink to it
NAME=deployctl_v32-2p1d_mindie
IMAGE=swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie:3.0.0-800I-A3-py311-openeuler24.03-lts
NODE=d2

if docker container inspect "$NAME" >/dev/null 2>&1; then
  echo "container $NAME already exists; stop it first: docker rm -f $NAME" >&2
  exit 1
fi
# MindIE reads these only when the engine's uid owns them and their mode is at most 640 (ConstrainOwner,
# file_utils.cpp L342-386). The engine runs as the image's user: root in MindIE's images (implied
# by deepseek_v3.2.md L97, "root can skip the chown"; set engine.run_as_uid for another user).
ENGINE_UID=0
for f in "$HERE" "$HERE/"config1.json "$HERE/"config2.json "$HERE/"config3.json "$HERE/"config4.json "$HERE/"ranktable.json; do
  if [ "$(stat -c %u "$f")" != "$ENGINE_UID" ]; then chown "$ENGINE_UID" "$f"; fi
done
chmod 640 "$HERE/"config1.json "$HERE/"config2.json "$HERE/"config3.json "$HERE/"config4.json "$HERE/"ranktable.json
docker run -d --name "$NAME" \
  --net=host --ipc=host --shm-size=500g \
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
  -v /usr/local/Ascend/driver:/usr/local/Ascend/driver:ro \
  -v /usr/local/Ascend/firmware:/usr/local/Ascend/firmware:ro \
  -v /usr/local/dcmi:/usr/local/dcmi:ro \
  -v /usr/local/sbin/npu-smi:/usr/local/sbin/npu-smi:ro \
  -v /etc/hccn.conf:/etc/hccn.conf:ro \
  -v /data/models/DeepSeek-V3.2-W8A8:/data/models/DeepSeek-V3.2-W8A8:ro \
  -v /var/log/npu/slog:/var/log/npu/slog:rw \
  -v /var/log/npu/plog:/root/ascend/log:rw \
  -v "$HERE:"/etc/deployctl:ro \
  --env-file "$HERE/env" \
  -e DEPLOYCTL_DAEMON=/usr/local/bin/mindie_llm_server \
  -e DEPLOYCTL_DP_SERVERS=4 \
  -e DEPLOYCTL_WORK=/etc/deployctl \
  -e DEPLOYCTL_DP_CPU_SLICES=16 \
  "$IMAGE" \
  bash -c '_keep=(); for _k in ${DEPLOYCTL_ENV_KEYS:-}; do if [ -n "${!_k+x}" ]; then _keep+=("$_k=${!_k}"); fi; done; for f in /usr/local/Ascend/ascend-toolkit/set_env.sh /usr/local/Ascend/nnal/atb/set_env.sh /usr/local/lib/python3.11/site-packages/mindie_llm/set_env.sh; do if [ -f "$f" ]; then source "$f"; fi; done; for _kv in "${_keep[@]}"; do export "$_kv"; done; pids=() && for i in $(seq 1 "$DEPLOYCTL_DP_SERVERS"); do bind=(); if [ -n "${DEPLOYCTL_DP_CPU_SLICES:-}" ]; then per=$(( $(getconf _NPROCESSORS_ONLN) / DEPLOYCTL_DP_CPU_SLICES )); if [ "$per" -ge 3 ]; then bind=(taskset -c "$(( (i - 1) * per ))-$(( i * per - 3 ))"); fi; fi; "${bind[@]}" "$DEPLOYCTL_DAEMON" --config-file "$DEPLOYCTL_WORK/config$i.json" --expert-parallel true & pids+=($!); done; wait -n; rc=$?; kill "${pids[@]}" 2>/dev/null; wait; exit "$rc"'
echo "started $NAME on $NODE; follow it with: docker logs -f $NAME"
