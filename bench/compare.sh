#!/usr/bin/env bash
# Compares the core's speed at two commits on one stream, in interleaved
# runs, since this machine's speed drifts more between minutes than most
# changes move it.  Usage: [THREADS=2] bench/compare.sh OLD NEW FILE [ROUNDS]
# OLD and NEW are git revisions (NEW may be "work": the working tree).
# See bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { echo "usage: bench/compare.sh OLD NEW FILE [ROUNDS]" >&2; exit 2; }
old=$1 new=$2 file=$(realpath "$3") rounds=${4:-5}
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/old" 2>/dev/null; git worktree remove --force "$tmp/new" 2>/dev/null; rm -rf "$tmp"' EXIT

# ljmp-bench built at a revision (or from the working tree), into $tmp/$2.
build_at() { # REV NAME
  local src=$PWD
  if [ "$1" != work ]; then
    git worktree add --detach -q "$tmp/$2" "$1"
    src=$tmp/$2
  fi
  cmake -S "$src" -B "$tmp/build-$2" -DLJMP_LUAJIT=OFF >/dev/null
  cmake --build "$tmp/build-$2" -j "$(nproc)" --target ljmp-bench >/dev/null
  cp "$tmp/build-$2/bench/ljmp-bench" "$tmp/bench-$2"
}
build_at "$old" old
build_at "$new" new

# One timed decode + aggregation of FILE by bench-NAME, in seconds.
once() {
  "$tmp/bench-$1" core "$file" --runs 1 ${THREADS:+--threads "$THREADS"} |
    sed -n 's/.*median of 1: \([0-9.]*\) s.*/\1/p'
}
# Each round runs the two in a random order: in a fixed one, the same
# revision against itself came out 1% apart (bench/README.md).
for r in $(seq "$rounds"); do
  if [ $((RANDOM % 2)) = 0 ]; then
    a=$(once old) b=$(once new)
  else
    b=$(once new) a=$(once old)
  fi
  echo "$a $b"
done >"$tmp/times"
# Best and median of each column, new/old for both, and the median of
# the rounds' own ratios: the machine's speed drifts (by 30% within an
# hour on a shared host), and a ratio taken within one round cancels
# what the two columns' medians, taken at different moments, do not.
sort -n -k1,1 "$tmp/times" | awk '{print $1}' >"$tmp/old.s"
sort -n -k2,2 "$tmp/times" | awk '{print $2}' >"$tmp/new.s"
awk '{print $2 / $1}' "$tmp/times" | sort -n >"$tmp/ratio.s"
paste "$tmp/old.s" "$tmp/new.s" "$tmp/ratio.s" |
  awk -v n="$rounds" -v o="$old" -v w="$new" '
  { a[NR] = $1; b[NR] = $2; q[NR] = $3 }
  END {
    m = int((n + 1) / 2)
    printf "%-12s best %.3f s  median %.3f s\n", o, a[1], a[m]
    printf "%-12s best %.3f s  median %.3f s\n", w, b[1], b[m]
    printf "new/old      best %.3f  median %.3f\n", b[1] / a[1], b[m] / a[m]
    printf "rounds       new/old median %.3f (from %.3f to %.3f)\n", q[m], q[1], q[n]
  }'
