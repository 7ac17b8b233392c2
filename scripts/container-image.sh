#!/usr/bin/env bash
# The gateway's image, built with Podman from the Dockerfile as it is (--pull=never: on the
# stand-in base, scripts/standins/node.sh), and tagged by a hash of what the Dockerfile copies and
# of its base image: built once per change, whoever asks first (.ci/run before the suite, or the
# container tests, test/helpers/containers.ts), reused by the others and by the second Node run.
# Prints the tag. Docker format: the OCI one has no HEALTHCHECK. Images of other inputs built
# over 3 hours ago are untagged (not forced: one a container still runs stays), so that another
# checkout's run on this machine keeps the image it has just built.
set -euo pipefail
cd "$(dirname "$0")/.."
PATH=$PATH:/usr/sbin:/sbin

inputs=(Dockerfile .dockerignore package.json package-lock.json tsconfig.json tsconfig.build.json gateway.yaml gateway.schema.json src migrations console)
bases=$(sed -n 's/^FROM \([^ ]*\).*/\1/p' Dockerfile | sort -u)
hash=$({
  find "${inputs[@]}" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  for base in $bases; do podman image inspect --format '{{.Id}}' "$base"; done
} | sha256sum | cut -c1-16)
tag=localhost/auth-gateway:test-$hash

# Two test files, or two checkouts on one machine, asking at once: one builds, the other waits.
exec 9>"${TMPDIR:-/tmp}/auth-gateway-image.lock"
flock 9
if ! podman image exists "$tag"; then
  log=$(mktemp)
  start=$SECONDS
  podman --runtime runc build --pull=never --format docker -t "$tag" -f Dockerfile . >"$log" 2>&1 \
    || { tail -n 40 "$log" >&2; rm -f "$log"; exit 1; }
  rm -f "$log"
  echo "[image] built $tag in $((SECONDS - start)) s" >&2
  podman images --filter until=3h --format '{{.Repository}}:{{.Tag}}' | grep '^localhost/auth-gateway:test-' | grep -vx "$tag" \
    | xargs -r podman rmi >/dev/null 2>&1 || true
fi
echo "$tag"
