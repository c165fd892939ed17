#!/usr/bin/env bash
# Makes the patched LuaJIT tree: copies the pristine source to WORK, adds
# ljmp's new VM files and applies the hook series.
# usage: prepare.sh PRISTINE WORK PATCHDIR
set -euo pipefail
pristine=$1
work=$2
patchdir=$3
rm -rf "$work"
mkdir -p "$work"
cp -a "$pristine/." "$work/"
# New VM source files are ordinary files of this repository; the ingest
# wire header is shared with the daemon, the CPU check with the core.
if compgen -G "$patchdir/src/*" >/dev/null; then
  cp "$patchdir"/src/* "$work/src/"
fi
cp "$patchdir/../proto/ljmp_ingest.h" "$patchdir/../core/lm_cpu.h" \
  "$patchdir/../core/lm_format.h" "$work/src/"
# Hooks into LuaJIT's own files, in order.
if [ -f "$patchdir/patches/series" ]; then
  while read -r p; do
    case "$p" in '' | '#'*) continue ;; esac
    patch -d "$work" -p1 --forward --quiet <"$patchdir/patches/$p" || {
      echo "prepare.sh: $p does not apply to $pristine" >&2
      exit 1
    }
  done <"$patchdir/patches/series"
fi
