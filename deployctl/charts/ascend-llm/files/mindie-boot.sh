#!/bin/bash
# Boot of every pod of the mindie chart (mounted from ConfigMap <fullname>-boot).
# 1. Copy the rendered files (config.json, ranktable.json, MindIE-MS files) from the ConfigMap into
#    $DEPLOYCTL_WORK_DIR with mode 640: MindIE refuses more open files, and ConfigMap files are symlinks.
# 2. rankTable.source cluster: wait until the cluster's hccl.json says "completed", copy it to
#    $RANK_TABLE_FILE and take MASTER_IP from its first server (the scheduler placed the pods).
# 3. exec the role's launcher: the MindIE server, or the MindIE-MS controller or coordinator.
set -eo pipefail
role="${1:?usage: boot.sh server|controller|coordinator}"
work="${DEPLOYCTL_WORK_DIR:?DEPLOYCTL_WORK_DIR is not set}"
mkdir -p "$work"
for f in /opt/deployctl/files/*; do
  [ -f "$f" ] || continue
  cp "$f" "$work/${f##*/}"
  chmod 640 "$work/${f##*/}"
done
if [ "$role" = server ] && [ "${DEPLOYCTL_RANK_TABLE_SOURCE:-deployctl}" = cluster ] && [ -n "${RANK_TABLE_FILE:-}" ]; then
  table=/user/serverid/devindex/config/hccl.json
  waited=0
  until grep -q '"status"[[:space:]]*:[[:space:]]*"completed"' "$table" 2>/dev/null; do
    if [ "$waited" -ge "${DEPLOYCTL_RANK_TABLE_WAIT:-600}" ]; then
      echo "boot: $table is not completed after ${waited}s: is Ascend Operator running, and does it watch" \
           "ring-controller.atlas pods of this namespace?" >&2
      exit 1
    fi
    sleep 5
    waited=$((waited + 5))
  done
  cp "$table" "$RANK_TABLE_FILE"
  chmod 640 "$RANK_TABLE_FILE"
  MASTER_IP="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["server_list"][0]["server_id"])' \
               "$RANK_TABLE_FILE")"
  export MASTER_IP
fi
set +e   # as bare metal: the vendor set_env.sh scripts are sourced without -e
case "$role" in
  server|controller|coordinator)
    # the role's launcher (values mindie.launchers, the engine version's layout; the same text as start.sh)
    exec bash -c "${DEPLOYCTL_LAUNCHER:?DEPLOYCTL_LAUNCHER is not set}"
    ;;
  *)
    echo "boot: unknown role '$role' (server, controller or coordinator)" >&2
    exit 2
    ;;
esac
