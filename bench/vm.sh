#!/usr/bin/env bash
# VM overhead of memprof: stock Debian luajit, the patched VM with the
# profiler off, profiling to a file, and streaming to a socket drained by
# a reader.  Medians of --runs runs; see bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-5}
command -v luajit >/dev/null || {
  echo "vm.sh: installing Debian's luajit for the stock figures" >&2
  apt-get install -y -qq luajit >/dev/null
}
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
lj=build/luajit-patch/work/src/luajit
bench=build/bench/ljmp-bench
# The same source unpatched, built the same way: what the patch costs.
pristine=build/bench-luajit-pristine
if [ ! -x "$pristine/src/luajit" ]; then
  echo "vm.sh: building the unpatched LuaJIT for comparison" >&2
  rm -rf "$pristine"
  cp -a build/luajit-patch/pristine "$pristine"
  env -u CFLAGS -u LDFLAGS make -C "$pristine/src" -j "$(nproc)" amalg \
    CC=cc Q= E=@: >"$pristine.log" 2>&1
fi
tmp=$(mktemp -d)
trap 'kill "$drain" 2>/dev/null; rm -rf "$tmp"' EXIT
"$bench" drain "$tmp/ingest.sock" &
drain=$!
sleep 0.2
median() { # label command...
  local label=$1
  shift
  printf '%-34s' "$label"
  "$bench" exec --runs "$runs" -- "$@" | sed -n 's/^wall *median \([0-9.]*\) s.*/\1 s/p'
}
for prog in alloc_loop binary_trees string_build jit_numeric; do
  p=bench/vm/$prog.lua
  echo "== $prog"
  median "Debian's luajit (shared lib)" luajit "$p"
  median "same source, unpatched" "$pristine/src/luajit" "$p"
  median "patched, profiler off" "$lj" "$p"
  median "patched, profiling to a file" \
    "$lj" -e "assert(misc.memprof.start('$tmp/$prog.bin'))" "$p"
  median "patched, streaming to a socket" \
    env LJMP_SOCKET="$tmp/ingest.sock" "$lj" "$p"
done
