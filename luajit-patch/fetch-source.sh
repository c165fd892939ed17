#!/usr/bin/env bash
# Fetches a LuaJIT 2.1 source tree from Debian's source packages into DEST.
# usage: fetch-source.sh PACKAGE DEST   (PACKAGE: luajit, or luajit2 for
# OpenResty's branch).  Needs deb-src entries (dev.sh enables them).
set -euo pipefail
pkg=$1
dest=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# As root, apt downloads unsandboxed; say so once, not as a warning.
if ! apt-get source -qq "$pkg" >/dev/null 2>apt.log; then
  cat apt.log >&2
  echo "fetch-source.sh: 'apt-get source $pkg' failed; are deb-src" \
    "entries enabled?  (./dev.sh deps enables them)" >&2
  exit 1
fi
tree=$(find . -mindepth 1 -maxdepth 1 -type d | head -n 1)
[ -f "$tree/src/luajit.c" ] || {
  echo "fetch-source.sh: no LuaJIT tree in the $pkg source package" >&2
  exit 1
}
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$tree" "$dest"
