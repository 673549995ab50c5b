#!/bin/sh
# Runs the [full-disk] checkpoint test on a 1 MiB tmpfs and a read-only tmpfs. Needs the right to
# mount (root in a container that allows it); exits 77 (CTest: skipped, not passed) where it has not.
set -u
binary=$1
base=$(mktemp -d /tmp/nostrum-full-disk-XXXXXX)
mkdir -p "$base/full" "$base/ro"
cleanup() { umount "$base/full" 2>/dev/null; umount "$base/ro" 2>/dev/null; rm -rf "$base"; }
trap cleanup EXIT
if ! mount -t tmpfs -o size=1m tmpfs "$base/full" 2>/dev/null ||
   ! mount -t tmpfs -o ro,size=1m tmpfs "$base/ro" 2>/dev/null; then
  echo "checkpoint_full_disk: cannot mount a tmpfs here (needs root and mount rights): skipped"
  exit 77
fi
NOSTRUM_FULL_DIR="$base/full" NOSTRUM_READONLY_DIR="$base/ro" "$binary" "[full-disk]"
