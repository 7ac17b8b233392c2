#!/usr/bin/env bash
# Stand-in for the postgres image deploy/compose.yaml uses, tagged under the official name: the
# debootstrap minbase bookworm rootfs with Debian's postgresql package of that major and an
# entrypoint honouring POSTGRES_PASSWORD, POSTGRES_USER, POSTGRES_DB and PGDATA
# (postgres-entrypoint.sh). Idempotent: see lib.sh.
source "$(dirname "$0")/lib.sh"
need podman tar chroot
here=$(cd "$(dirname "$0")" && pwd)
major=15   # bookworm's PostgreSQL
tag=docker.io/library/postgres:$major-bookworm
name=postgres-$major-bookworm-$(recipe_hash postgres.sh postgres-entrypoint.sh)

if ! have_rootfs "$name"; then
  root=$(unpack_base)
  trap 'rm -rf "$root"' EXIT
  say "$tag: postgresql-$major from Debian"
  mkdir -p "$root/etc/postgresql-common"
  # The package would create and start a cluster of its own; the entrypoint makes one in PGDATA.
  echo 'create_main_cluster = false' >"$root/etc/postgresql-common/createcluster.conf"
  chroot_apt_install "$root" "postgresql-$major"
  install -m 755 "$here/postgres-entrypoint.sh" "$root/usr/local/bin/docker-entrypoint.sh"
  mkdir -p "$root/var/lib/postgresql/data"
  save_rootfs "$root" "$name"
  trap - EXIT
fi
import_image "$name" "$tag" \
  "ENV PATH=/usr/lib/postgresql/$major/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  'ENV PGDATA=/var/lib/postgresql/data' \
  'ENV LANG=C.UTF-8' \
  'VOLUME /var/lib/postgresql/data' \
  'EXPOSE 5432' \
  'STOPSIGNAL SIGINT' \
  'ENTRYPOINT ["docker-entrypoint.sh"]' \
  'CMD ["postgres"]'
