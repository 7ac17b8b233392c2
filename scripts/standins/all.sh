#!/usr/bin/env bash
# Every stand-in the container tests need: the Dockerfile's node base, and the postgres and
# redis images of deploy/compose.yaml. Cached (lib.sh): a second run imports nothing and takes
# a second.
set -euo pipefail
here=$(dirname "$0")
bash "$here/node.sh"
bash "$here/postgres.sh"
bash "$here/redis.sh"
