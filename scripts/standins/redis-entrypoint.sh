#!/bin/bash
# The stand-in redis image's entrypoint: as the official image does, redis-server runs as the
# redis user in /data without protected mode (the container's network is the boundary).
set -euo pipefail
if [ "$(id -u)" = 0 ]; then
  chown -R redis:redis /data
  exec setpriv --reuid=redis --regid=redis --init-groups "$0" "$@"
fi
if [ $# = 0 ] || [ "$1" = redis-server ]; then
  [ $# = 0 ] || shift
  exec redis-server --protected-mode no "$@"
fi
exec "$@"
