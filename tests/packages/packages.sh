#!/usr/bin/env bash
# Builds the .debs of a build tree and checks them: lintian, apt beside nginx, and install, removal and purge in a copy of this system.
# usage: packages.sh CPACK BUILD_DIR WORK_DIR FLAVOURS
#   CPACK: the cpack program; FLAVOURS: the VM flavours built ("luajit;luajit2").
# Exits 77 (skipped) where the machine cannot run it: not root, no lintian,
# nginx's Lua module not installed, no overlay mounts.
set -eu

here=$(cd "$(dirname "$0")" && pwd)

skip() {
  echo "SKIPPED: $*"
  exit 77
}
fail() {
  echo "FAILED: $*" >&2
  exit 1
}
step() {
  printf '== %s\n' "$*"
}

# The second half, in a mount namespace of its own: a copy-on-write view
# of this system's root (an overlay on a tmpfs), where dpkg installs,
# removes and purges the packages while the real system stays untouched.
if [ "${1:-}" = --in-namespace ]; then
  work=$2
  flavours=$3
  top=$work/root
  mkdir -p "$top"
  mount -t tmpfs -o mode=0755 ljmp-test "$top"
  mkdir "$top/upper" "$top/work" "$top/merged"
  mount -t overlay overlay \
    -o "lowerdir=/,upperdir=$top/upper,workdir=$top/work" "$top/merged" ||
    exit 78
  root=$top/merged
  mount -t proc proc "$root/proc"
  mount --bind /dev "$root/dev"
  # A /run of its own, where no systemd runs: the maintainer scripts see
  # a system without systemd as PID 1, as on this machine.
  mount -t tmpfs -o mode=0755 run "$root/run"
  mount -t tmpfs -o mode=1777 tmp "$root/tmp"
  mkdir "$root/tmp/ljmp-test"
  cp "$work"/debs/*.deb "$here/in-root.sh" "$here/embed.c" \
    "$root/tmp/ljmp-test/"
  exec chroot "$root" /bin/bash /tmp/ljmp-test/in-root.sh /tmp/ljmp-test \
    "$flavours"
fi

cpack=$1
build=$2
work=$3
flavours=$4

[ "$(id -u)" -eq 0 ] || skip "needs root (dpkg in a private root, mounts)"
for c in lintian dpkg-deb apt-get unshare chroot mount; do
  command -v "$c" >/dev/null 2>&1 || skip "no $c (package lintian?)"
done
case ";$flavours;" in
*";luajit2;"*)
  for p in nginx-core libnginx-mod-http-lua; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
      skip "package $p is not installed: the packages are checked beside it"
  done
  ;;
esac

rm -rf "$work"
mkdir -p "$work/debs"

step "cpack"
# From what the build made: CPACK_CMAKE_GENERATOR names a generator that
# has no preinstall step, so cpack does not build the tree again (which
# could rebuild files that other tests are running).
"$cpack" -G DEB -B "$work/debs" -D CPACK_CMAKE_GENERATOR=Ninja \
  --config "$build/CPackConfig.cmake" >"$work/cpack.log" 2>&1 || {
  cat "$work/cpack.log"
  fail "cpack"
}
expected="ljmp"
for f in ${flavours//;/ }; do
  expected="$expected ljmp-vm-$f"
done
debs=()
for p in $expected; do
  d=$(find "$work/debs" -maxdepth 1 -name "${p}_*.deb")
  if [ -z "$d" ] || [ "$(echo "$d" | wc -l)" -ne 1 ]; then
    fail "not one ${p}_*.deb in $work/debs"
  fi
  debs+=("$d")
  # Nothing that makes apt remove or replace another package.
  for field in Provides Conflicts Breaks Replaces Pre-Depends; do
    v=$(dpkg-deb -f "$d" "$field")
    [ -z "$v" ] || fail "$p declares $field: $v"
  done
  echo "$p: Depends: $(dpkg-deb -f "$d" Depends)"
done
[ "$(find "$work/debs" -maxdepth 1 -name '*.deb' | wc -l)" -eq "${#debs[@]}" ] ||
  fail "unexpected packages: $(ls "$work/debs")"

step "lintian"
lintian --fail-on error "${debs[@]}" >"$work/lintian.log" 2>&1 || {
  cat "$work/lintian.log"
  fail "lintian reports errors"
}
cat "$work/lintian.log"
echo "lintian: $(grep -c '^E:' "$work/lintian.log") errors," \
  "$(grep -c '^W:' "$work/lintian.log") warnings"

step "no file where an installed package has one"
# Files and links only: directories such as /usr/bin are everyone's.
owned=$(for d in "${debs[@]}"; do
  dpkg-deb --fsys-tarfile "$d" | tar -t | grep -v '/$' | sed 's|^\./|/|'
done | xargs dpkg-query -S 2>/dev/null || true)
[ -z "$owned" ] || fail "files of installed packages: $owned"

step "apt-get install -s beside nginx and Debian's luajit2"
apt-get install -s "${debs[@]}" >"$work/apt.log" 2>&1 || {
  cat "$work/apt.log"
  fail "apt-get install -s"
}
if grep '^Remv' "$work/apt.log"; then
  fail "installing the packages would remove the packages above"
fi
for p in $expected; do
  grep -q "^Inst $p " "$work/apt.log" || {
    cat "$work/apt.log"
    fail "apt would not install $p"
  }
done
grep -E '^(Inst|Remv)' "$work/apt.log"

step "install, use, remove and purge in a copy of this system"
rc=0
unshare -m --propagation private -- bash "$0" --in-namespace "$work" \
  "$flavours" || rc=$?
[ "$rc" -ne 78 ] || skip "cannot mount an overlay file system here"
[ "$rc" -eq 0 ] || fail "in the private root (exit $rc)"
echo "packages: all checks passed"
