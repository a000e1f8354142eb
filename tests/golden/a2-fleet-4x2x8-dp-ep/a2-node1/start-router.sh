#!/usr/bin/env bash
# deployctl 0.1.0: start the router (HAProxy) in front of the instances, on node a2-node1.
# Run it after start.sh has been run on the instances' nodes (it health-checks them and routes to those up).
# Do not edit by hand: change the inventory and re-render.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"  # the revision directory itself, not a symlink to it
IMAGE=haproxy:2.6
NAME=deployctl_r1-fleet_router

chmod 644 "$HERE/haproxy.cfg"   # the official image runs HAProxy as user haproxy; the file holds no secret
if docker container inspect "$NAME" >/dev/null 2>&1; then
  echo "container $NAME already exists; stop it first: docker rm -f $NAME" >&2
  exit 1
fi
# the official image's own command: CMD haproxy -f /usr/local/etc/haproxy/haproxy.cfg, which its
# docker-entrypoint.sh runs as haproxy -W -db ... (master-worker, foreground; docker-library/haproxy)
docker run -d --name "$NAME" --net=host \
  -v "$HERE/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro" \
  "$IMAGE"
echo "started $NAME: clients use "http://10.200.5.2:8080
