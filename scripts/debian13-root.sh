#!/usr/bin/env bash
# Runs a command inside a Debian 13 ("trixie": libtorch 2.6, Open MPI 5, GCC 14) root on this
# Debian machine, in the repository (bound at /nano): the root is made with debootstrap from
# the machine's own Debian archive and kept between runs (one that is stale or broken is made
# again), the dependencies are installed there by scripts/install-deps.sh, and everything
# mounted is unmounted however the command ends. scripts/test-debian13.sh and
# scripts/bench.sh platforms use it. Needs root.
# Usage: scripts/debian13-root.sh COMMAND [ARGS...]   (run from the repository, e.g. scripts/test.sh)
#   NANO_DEBIAN13_ROOT   where the root lives (default /var/cache/nano/debian13-root)
#   NANO_DEBIAN13_MAX_AGE_DAYS   make the root again when older than this (default 14)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
if [ $# -eq 0 ]; then
  echo "debian13-root: usage: scripts/debian13-root.sh COMMAND [ARGS...]" >&2
  exit 2
fi
root=${NANO_DEBIAN13_ROOT:-/var/cache/nano/debian13-root}
max_age=${NANO_DEBIAN13_MAX_AGE_DAYS:-14}
# Written once the dependencies are installed in a new root, not before: a root whose making was
# cut short (debootstrap or apt killed) is made again rather than reused half-installed.
stamp=$root/.nano-root-ready

if [ "$(id -u)" -ne 0 ]; then
  echo "debian13-root: needs root (debootstrap, mount, chroot)" >&2
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
  if mountpoint -q "$root" 2>/dev/null; then umount -l "$root" || true; fi
}
# A signal ends the script (and so unmounts): without the exits it would go on after the trap.
trap unmount_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

root_usable() {
  [ -f "$stamp" ] || return 1
  [ -n "$(find "$stamp" -mtime -"$max_age" 2>/dev/null)" ] || return 1
  chroot "$root" /bin/true 2>/dev/null || return 1
  grep -q '^VERSION_CODENAME=trixie' "$root/etc/os-release" 2>/dev/null
}

if ! root_usable; then
  unmount_all
  echo "debian13-root: making a Debian 13 root in $root from $mirror" >&2
  if ! command -v debootstrap >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >&2 ||
      { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >&2; }
  fi
  rm -rf --one-file-system "$root"
  mkdir -p "$(dirname "$root")"
  debootstrap --variant=minbase trixie "$root" "$mirror" >&2
  echo "deb $mirror trixie main" > "$root/etc/apt/sources.list"
fi

# What the tests need: processes, devices, a private /dev/shm, a hostname that resolves, and
# a root that is a mount point of its own (private), so tests can make private mount
# namespaces inside (a full disk as a small tmpfs) as on a real system.
mount --bind "$root" "$root"
mount --make-private "$root"
for m in proc sys dev dev/pts dev/shm nano; do mkdir -p "$root/$m"; done
mount -t proc proc "$root/proc"
mount --bind /sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
mount -t tmpfs -o size=2g,mode=1777 tmpfs "$root/dev/shm"
mount --bind "$repo" "$root/nano"
printf '127.0.0.1 localhost\n127.0.1.1 %s\n::1 localhost ip6-localhost ip6-loopback\n' "$(hostname)" > "$root/etc/hosts"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

# A clean environment, as a login on that system would have; the callers pass what they need.
chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  LANG=C.UTF-8 CI="${CI:-}" bash -c 'cd /nano && scripts/install-deps.sh >&2 && { [ -f /.nano-root-ready ] || touch /.nano-root-ready; } && exec "$@"' debian13-root "$@"
