# Shared by the stand-in builders (sourced, not run). Stand-ins are images built on this machine
# from Debian's packages (debootstrap) and the npm registry, tagged under the official names the
# Dockerfile and deploy/compose.yaml use, because there is no registry to pull those from here.
# Every rootfs is kept as a tarball outside the repository and rebuilt only when missing; an
# image is imported into Podman's storage only when it is missing there. STANDINS_REBUILD=1
# rebuilds both.
set -euo pipefail

STANDINS_CACHE=${STANDINS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/auth-gateway/standins}
# debootstrap and chroot live in /usr/sbin, off some PATHs.
PATH=$PATH:/usr/sbin:/sbin
SUITE=bookworm
STANDINS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# The Debian mirror this machine's apt uses (deb822 or one-line sources), else deb.debian.org.
debian_mirror() {
  local uri
  uri=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v -- '-security' | grep -m1 debian || true)
  [ -n "$uri" ] || uri=$(grep -hs '^deb ' /etc/apt/sources.list | awk '{print $2}' | grep -v -- '-security' | grep -m1 debian || true)
  echo "${DEBIAN_MIRROR:-${uri:-http://deb.debian.org/debian}}"
}

say() { echo "[standins] $*" >&2; }

need() {
  local missing=
  for tool in "$@"; do command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || missing+=" $tool"; done
  [ -z "$missing" ] || { say "missing:$missing (apt-get install -y podman runc debootstrap)"; exit 1; }
}

# The debootstrap minbase rootfs every stand-in starts from, as a cached tarball; echoes its path.
# Built in a temporary directory next to its final place and renamed there, so an interrupted
# build never looks complete.
base_tarball() {
  local tarball=$STANDINS_CACHE/$SUITE-minbase-$(recipe_hash).tar
  if [ -s "$tarball" ] && [ "${STANDINS_REBUILD:-}" != 1 ]; then echo "$tarball"; return; fi
  need debootstrap
  mkdir -p "$STANDINS_CACHE"
  local dir
  dir=$(mktemp -d "$STANDINS_CACHE/.base.XXXXXX")
  say "debootstrap --variant=minbase $SUITE from $(debian_mirror) (once; cached in $tarball)"
  debootstrap --variant=minbase --include=ca-certificates,libatomic1 "$SUITE" "$dir/rootfs" "$(debian_mirror)" >"$dir/debootstrap.log" 2>&1 \
    || { tail -n 20 "$dir/debootstrap.log" >&2; rm -rf "$dir"; exit 1; }
  rm -rf "$dir/rootfs/var/cache/apt/archives/"*.deb
  tar -C "$dir/rootfs" --numeric-owner -cf "$dir/base.tar" .
  rm -f "$STANDINS_CACHE/$SUITE-minbase-"????????????.tar
  mv "$dir/base.tar" "$tarball"
  rm -rf "$dir"
  echo "$tarball"
}

# Unpacks the base rootfs into a fresh directory (for a builder to customise); echoes the directory.
unpack_base() {
  local base dir
  base=$(base_tarball)
  dir=$(mktemp -d "$STANDINS_CACHE/.rootfs.XXXXXX")
  tar -C "$dir" --numeric-owner -xf "$base"
  echo "$dir"
}

# apt-get install inside an unpacked rootfs, services kept from starting (policy-rc.d) and the
# host's resolver and CA bundle (an intercepting proxy's CA included) used for the download.
chroot_apt_install() {
  local root=$1; shift
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  echo "deb $(debian_mirror) $SUITE main" >"$root/etc/apt/sources.list"
  local log=$STANDINS_CACHE/.apt.log
  { chroot "$root" apt-get update -qq && DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends "$@"; } >"$log" 2>&1 \
    || { tail -n 20 "$log" >&2; exit 1; }
  chroot "$root" apt-get clean
  rm -rf "$root/var/lib/apt/lists/"* "$root/usr/sbin/policy-rc.d"
}

# A short hash of the files that make a stand-in (its builder, its entrypoint, this file): part of
# its rootfs tarball's name and a label of its image, so that a changed builder rebuilds both.
recipe_hash() { (cd "$STANDINS_DIR" && cat "$@" lib.sh | sha256sum | cut -c1-12); }

# Tars a customised rootfs into the cache as NAME.tar, removes the directory and the tarballs of
# the same stand-in's older recipes (NAME is <stand-in>-<recipe hash>).
save_rootfs() {
  local root=$1 name=$2
  rm -f "$STANDINS_CACHE/${name%-*}"-????????????.tar
  : >"$root/etc/resolv.conf"
  tar -C "$root" --numeric-owner -cf "$STANDINS_CACHE/.$name.tar.partial" .
  mv "$STANDINS_CACHE/.$name.tar.partial" "$STANDINS_CACHE/$name.tar"
  rm -rf "$root"
}

# True when the cached rootfs NAME.tar exists (and no rebuild was asked for).
have_rootfs() { [ -s "$STANDINS_CACHE/$1.tar" ] && [ "${STANDINS_REBUILD:-}" != 1 ]; }

# Imports NAME.tar as TAG unless Podman already has TAG from that tarball (its label); the rest
# are `podman import --change`s (ENV, USER, WORKDIR, ENTRYPOINT, CMD...).
import_image() {
  local name=$1 tag=$2; shift 2
  if [ "$(podman image inspect --format '{{index .Labels "org.auth-gateway.standin"}}' "$tag" 2>/dev/null)" = "$name" ] \
    && [ "${STANDINS_REBUILD:-}" != 1 ]; then say "$tag: already in Podman's storage"; return; fi
  local changes=(--change "LABEL org.auth-gateway.standin=$name")
  for change in "$@"; do changes+=(--change "$change"); done
  podman import --quiet "${changes[@]}" --message "stand-in for $tag built from Debian $SUITE (scripts/standins)" \
    "$STANDINS_CACHE/$name.tar" "$tag" >/dev/null
  say "$tag: imported from $STANDINS_CACHE/$name.tar"
}
