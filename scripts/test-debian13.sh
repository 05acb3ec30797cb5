#!/usr/bin/env bash
# The Debian 13 ("trixie": libtorch 2.6, Open MPI 5, GCC 14) leg of the tests, on this Debian
# machine: a Debian 13 root made with debootstrap from the machine's own Debian archive, kept
# between runs (one that is stale or broken is made again), the repository bound into it, the
# dependencies installed there by scripts/install-deps.sh, then scripts/test.sh inside it
# (build folder build-debian13). Everything mounted is unmounted however the run ends.
# Needs root. Usage: scripts/test-debian13.sh [ctest arguments...]
#   NANO_DEBIAN13_ROOT   where the root lives (default /var/cache/nano/debian13-root)
#   NANO_DEBIAN13_MAX_AGE_DAYS   rebuild a root older than this (default 14)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
root=${NANO_DEBIAN13_ROOT:-/var/cache/nano/debian13-root}
max_age=${NANO_DEBIAN13_MAX_AGE_DAYS:-14}
stamp=$root/.nano-root-ready

if [ "$(id -u)" -ne 0 ]; then
  echo "test-debian13: needs root (debootstrap, mount, chroot)" >&2
  exit 2
fi

# The Debian archive this machine's apt uses (deb822 or one-line format).
mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/* *$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
if [ -z "$mirror" ]; then
  mirror=$(sed -n 's/^deb \(http[^ ]*debian\)\/* .*/\1/p' /etc/apt/sources.list 2>/dev/null | head -1)
fi
mirror=${mirror:-http://deb.debian.org/debian}

unmount_all() {
  # Deepest first; lazily, so a process still inside cannot keep a mount alive.
  for m in nano dev/shm dev/pts dev sys proc; do
    if mountpoint -q "$root/$m" 2>/dev/null; then umount -l "$root/$m" || true; fi
  done
}
trap unmount_all EXIT INT TERM

root_usable() {
  [ -f "$stamp" ] || return 1
  [ -n "$(find "$stamp" -mtime -"$max_age" 2>/dev/null)" ] || return 1
  chroot "$root" /bin/true 2>/dev/null || return 1
  grep -q '^VERSION_CODENAME=trixie' "$root/etc/os-release" 2>/dev/null
}

if ! root_usable; then
  unmount_all
  echo "test-debian13: making a Debian 13 root in $root from $mirror" >&2
  if ! command -v debootstrap >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >&2 ||
      { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >&2; }
  fi
  rm -rf --one-file-system "$root"
  mkdir -p "$(dirname "$root")"
  debootstrap --variant=minbase trixie "$root" "$mirror" >&2
  echo "deb $mirror trixie main" > "$root/etc/apt/sources.list"
  touch "$stamp"
fi

# What the tests need: processes, devices, a private /dev/shm, a hostname that resolves.
for m in proc sys dev dev/pts dev/shm nano; do mkdir -p "$root/$m"; done
mount -t proc proc "$root/proc"
mount --bind /sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
mount -t tmpfs -o size=2g,mode=1777 tmpfs "$root/dev/shm"
mount --bind "$repo" "$root/nano"
printf '127.0.0.1 localhost\n127.0.1.1 %s\n::1 localhost ip6-localhost ip6-loopback\n' "$(hostname)" > "$root/etc/hosts"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  LANG=C.UTF-8 CI="${CI:-}" NANO_JOBS="${NANO_JOBS:-}" \
  bash -c 'cd /nano && NANO_BUILD_DIR=build-debian13 scripts/test.sh "$@"' test-debian13 "$@"
