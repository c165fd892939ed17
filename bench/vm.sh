#!/usr/bin/env bash
# VM overhead of memprof: the same LuaJIT source unpatched, the patched VM
# with the profiler off, profiling to a file, and streaming to a socket
# drained by a reader, on the socket or through a pipe (LJMP_PIPE=1), and
# on the socket with call stacks of depth 16 (LJMP_STACKS=16), on every
# allocation or sampled at a mean of 512 KiB (LJMP_STACK_SAMPLE).
# RUNS rounds (default 8), each running the seven in a random order;
# medians, and the medians of each round's ratios to the profiler off.
# PROGRAMS="binary_trees ..." runs some of bench/vm/ only.  Installs
# nothing: the unpatched VM is built in the build tree.
# See bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-8}
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
lj=build/luajit-patch/work/src/luajit
bench=build/bench/ljmp-bench
# The same source unpatched, built the same way (luajit-patch/CMakeLists.txt's
# make flags): what the patch costs.  Rebuilt when the source or the
# flags change.
pristine=build/bench-luajit-pristine
multiarch=$(gcc -print-multiarch 2>/dev/null || true)
flags=(amalg CC=cc Q= E=@: PREFIX=/usr "MULTILIB=lib${multiarch:+/$multiarch}")
if [ ! -x "$pristine/src/luajit" ] ||
  [ "$pristine/src/luajit" -ot build/luajit-patch/pristine/src/luajit.c ] ||
  [ "$(cat "$pristine.flags" 2>/dev/null)" != "${flags[*]}" ]; then
  echo "vm.sh: building the unpatched LuaJIT for comparison" >&2
  rm -rf "$pristine"
  cp -a build/luajit-patch/pristine "$pristine"
  env -u CFLAGS -u LDFLAGS make -C "$pristine/src" -j "$(nproc)" "${flags[@]}" \
    >"$pristine.log" 2>&1
  echo "${flags[*]}" >"$pristine.flags"
fi
tmp=$(mktemp -d)
trap 'kill "$drain" 2>/dev/null; rm -rf "$tmp"' EXIT
"$bench" drain "$tmp/ingest.sock" &
drain=$!
sleep 0.2
# One run of a command, wall seconds (ljmp-bench exec, 1 run).
once() {
  "$bench" exec --runs 1 -- "$@" | sed -n 's/^wall *median \([0-9.]*\) s.*/\1/p'
}
# The seven configurations, by index: 0 unpatched, 1 off, 2 file,
# 3 socket, 4 pipe, 5 socket with stacks, 6 socket with sampled stacks.
# pad is the Lua chunk that allocates the round's padding, first.  The
# streams wait for the drain as long as it takes (no stall bound): a
# profile that gave up would make its run look cheaper.
export LJMP_MAX_STALL_MS=0
config() { # index program
  local p=bench/vm/$2.lua
  case $1 in
    0) once "$pristine/src/luajit" -e "$pad" "$p" ;;
    1) once "$lj" -e "$pad" "$p" ;;
    2) once "$lj" -e "$pad" -e "assert(misc.memprof.start('$tmp/$2.bin'))" "$p" ;;
    3) once env LJMP_SOCKET="$tmp/ingest.sock" "$lj" -e "$pad" "$p" ;;
    4) once env LJMP_PIPE=1 LJMP_SOCKET="$tmp/ingest.sock" "$lj" -e "$pad" "$p" ;;
    5) once env LJMP_STACKS=16 LJMP_SOCKET="$tmp/ingest.sock" "$lj" -e "$pad" "$p" ;;
    6) once env LJMP_STACKS=16 LJMP_STACK_SAMPLE=524288 \
      LJMP_SOCKET="$tmp/ingest.sock" "$lj" -e "$pad" "$p" ;;
  esac
}
labels=("same source, unpatched" "patched, profiler off"
  "patched, profiling to a file" "patched, streaming to a socket"
  "patched, streaming through a pipe" "patched, socket, stacks of 16"
  "patched, socket, 16, sampled 512K")
# Each round runs the seven in a random order: run one after another, a
# configuration would meet the machine's drift (10-20% over minutes) at
# the same point of every round, and ratios between them lean by a few
# percent (bench/README.md).
for prog in ${PROGRAMS:-alloc_loop binary_trees string_build jit_numeric}; do
  echo "== $prog ($runs rounds, each in a random order)"
  : >"$tmp/times"
  for r in $(seq "$runs"); do
    # A string of 0 to 112 bytes, kept, before the program: the heap's
    # layout moves binary_trees by up to 10% (bench/README.md), so that
    # rounds take eight layouts in turn, the same for all seven.
    pad="LJMP_BENCH_PAD = ('x'):rep($((16 * ((r - 1) % 8))))"
    declare -A t=()
    for i in $(shuf -e 0 1 2 3 4 5 6); do t[$i]=$(config "$i" "$prog"); done
    echo "${t[0]} ${t[1]} ${t[2]} ${t[3]} ${t[4]} ${t[5]} ${t[6]}" >>"$tmp/times"
  done
  for i in 0 1 2 3 4 5 6; do
    printf '%-34s%s s' "${labels[$i]}" \
      "$(awk -v c=$((i + 1)) '{print $c}' "$tmp/times" | sort -n |
        awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')"
    # The median of the rounds' ratios to the profiler off, from the
    # same round: the figure the targets are about.
    if [ "$i" != 1 ]; then
      printf '  (%sx off)' "$(awk -v c=$((i + 1)) '{printf "%.3f\n", $c / $2}' \
        "$tmp/times" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')"
    fi
    # Stacks against the same stream without them: what stacks add.
    if [ "$i" -ge 5 ]; then
      printf '  (%sx socket)' "$(awk -v c=$((i + 1)) '{printf "%.3f\n", $c / $4}' \
        "$tmp/times" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')"
    fi
    echo
  done
done
