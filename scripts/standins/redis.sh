#!/usr/bin/env bash
# Stand-in for the redis image deploy/compose.yaml uses, tagged under the official name: the
# debootstrap minbase bookworm rootfs with Debian's redis-server (7.0) and an entrypoint that
# runs it as the redis user in /data (redis-entrypoint.sh). Idempotent: see lib.sh.
source "$(dirname "$0")/lib.sh"
need podman tar chroot
here=$(cd "$(dirname "$0")" && pwd)
tag=docker.io/library/redis:7-bookworm
name=redis-7-bookworm-$(recipe_hash redis.sh redis-entrypoint.sh)

if ! have_rootfs "$name"; then
  root=$(unpack_base)
  trap 'rm -rf "$root"' EXIT
  say "$tag: redis-server from Debian"
  chroot_apt_install "$root" redis-server
  install -m 755 "$here/redis-entrypoint.sh" "$root/usr/local/bin/docker-entrypoint.sh"
  mkdir -p "$root/data"
  save_rootfs "$root" "$name"
  trap - EXIT
fi
import_image "$name" "$tag" \
  'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  'VOLUME /data' \
  'WORKDIR /data' \
  'EXPOSE 6379' \
  'ENTRYPOINT ["docker-entrypoint.sh"]' \
  'CMD ["redis-server"]'
