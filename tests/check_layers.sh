#!/bin/sh
# Checks that no files of the tree depend on each other in a loop: neither
# by #include (a module is its .c and its .h; the VM's new files included,
# LuaJIT's own are not the tree's) nor by calls (what each object file of
# the core, ljmpd, ljmpctl and the unit tests defines and uses).  usage: check_layers.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1
build=$2
dirs="core export daemon client push proto luajit-patch/src tests bench"
pairs=$(mktemp)
trap 'rm -f "$pairs"' EXIT

# tsort names the files of a loop on stderr and fails.
check() {
  what=$1
  if ! tsort "$pairs" >/dev/null 2>"$pairs.err"; then
    echo "check_layers: $what: a loop:" >&2
    grep -v '^tsort: .*input contains a loop' "$pairs.err" |
      sed 's/^tsort: /  /' >&2
    rm -f "$pairs.err"
    return 1
  fi
  rm -f "$pairs.err"
  echo "check_layers: $what: $(wc -l <"$pairs") edges, no loop"
}

# Includes: "dir/x.c" includes "y.h" of the same directory -> module x
# needs module y (a module's own header is no edge).
for d in $dirs; do
  for f in "$src/$d"/*.c "$src/$d"/*.h; do
    [ -e "$f" ] || continue
    from=$(basename "$f")
    sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f" | while read -r inc; do
      [ -e "$src/$d/$inc" ] || continue
      a="$d/${from%.*}"
      b="$d/${inc%.*}"
      [ "$a" = "$b" ] || echo "$a $b"
    done
  done
done >"$pairs"
status=0
check "includes among modules" || status=1

# Calls: an object that uses a symbol another object of the same library
# defines needs that object.
for lib in core/CMakeFiles/ljmpcore.dir export/CMakeFiles/ljmpexport.dir \
  daemon/CMakeFiles/ljmpdmod.dir \
  client/CMakeFiles/ljmpctl.dir client/CMakeFiles/ljmpchart.dir \
  tests/CMakeFiles/test_core.dir \
  tests/CMakeFiles/test_units.dir; do
  objs=$(ls "$build/$lib"/*.o 2>/dev/null || true)
  [ -n "$objs" ] || { echo "check_layers: no objects in $build/$lib" >&2; exit 1; }
  # shellcheck disable=SC2086
  nm -A $objs | awk -v lib="$lib" '
    { n = split($1, path, "/"); obj = path[n]; sub(/:.*/, "", obj)
      sub(/\.c\.o$/, "", obj); type = $(NF - 1); sym = $NF }
    type ~ /^[TDBRCG]$/ { def[sym] = obj }
    type == "U" { use[obj, sym] = 1 }
    END { for (k in use) { split(k, p, SUBSEP)
            if ((p[2] in def) && def[p[2]] != p[1])
              print lib ":" p[1], lib ":" def[p[2]] } }'
done | sort -u >"$pairs"
check "calls among objects" || status=1
exit $status
