#!/usr/bin/env bash
# The longest pause a program sees when a stream starts in it, by heap
# size, and how long the census of its heap takes: bench/vm/start_pause.lua
# holds the heap, reads a clock in a tight loop that allocates a little,
# and reports its longest gap, starting a stream to a file itself
# (misc.memprof.start) without and with a census, and attached by ljmpctl
# to a private ljmpd (with a census).  ROUNDS rounds (default 5), SIZES objects (default 100000
# 1000000 2500000), VMS the luajit binaries to compare (default the
# build's; give an older build's first to compare), in a random order
# each round; medians.  See bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-5}
sizes=${SIZES:-100000 1000000 2500000}
cmake --build build -j 2 >/dev/null
read -ra vms <<<"${VMS:-build/luajit-patch/work/src/luajit}"
tmp=$(mktemp -d)
ljmpd=''
trap '[ -n "$ljmpd" ] && kill "$ljmpd" 2>/dev/null; rm -rf "$tmp"' EXIT
build/daemon/ljmpd -q -i "$tmp/ingest.sock" -c "$tmp/control.sock" \
  2>"$tmp/ljmpd.log" &
ljmpd=$!
for _ in $(seq 50); do [ -S "$tmp/control.sock" ] && break; sleep 0.1; done
script=bench/vm/start_pause.lua

# One start by the program itself, without a census: "start_ms
# max_gap_ms"; with one: "max_gap_ms census_s".
run_start() { # vm size
  "$1" "$script" "$2" start /dev/null nocensus | awk '{ print $6, $4 }'
}
run_census() { # vm size
  "$1" "$script" "$2" start /dev/null | awk '{ print $4, $12 }'
}

# One attach by ljmpctl while the program loops: "max_gap_ms".
run_attach() { # vm size
  local out=$tmp/attach.out pid
  LJMP_INGEST=$tmp/ingest.sock "$1" "$script" "$2" attach 1.5 >"$out" &
  pid=$!
  until grep -q ready "$out" 2>/dev/null; do sleep 0.05; done
  sleep 0.5
  build/client/ljmpctl -s "$tmp/control.sock" attach "$pid" >/dev/null
  wait "$pid"
  grep -q 'streaming true' "$out" || echo "start_pause.sh: not attached" >&2
  grep -q 'census complete' "$out" || echo "start_pause.sh: census not complete" >&2
  awk '/objects/ { print $4, $10 }' "$out"
}

# The median of a column of numbers, and its best (lowest).
median() {
  sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] " (" v[1] ")" }'
}

for size in $sizes; do
  for _ in $(seq "$rounds"); do
    for i in $(seq 0 $((${#vms[@]} - 1)) | shuf); do
      run_start "${vms[$i]}" "$size" >>"$tmp/start.$size.$i"
      run_census "${vms[$i]}" "$size" >>"$tmp/census.$size.$i"
      run_attach "${vms[$i]}" "$size" >>"$tmp/attach.$size.$i"
    done
  done
done

printf '%-9s %-3s %-15s %-15s %-15s %-15s %-15s %-15s\n' objects vm \
  "start, ms" "gap, ms" "census gap, ms" "census, s" "attach gap, ms" \
  "attach census, s"
for size in $sizes; do
  for i in $(seq 0 $((${#vms[@]} - 1))); do
    printf '%-9s %-3s %-15s %-15s %-15s %-15s %-15s %-15s\n' "$size" "$i" \
      "$(cut -d' ' -f1 "$tmp/start.$size.$i" | median)" \
      "$(cut -d' ' -f2 "$tmp/start.$size.$i" | median)" \
      "$(cut -d' ' -f1 "$tmp/census.$size.$i" | median)" \
      "$(cut -d' ' -f2 "$tmp/census.$size.$i" | median)" \
      "$(cut -d' ' -f1 "$tmp/attach.$size.$i" | median)" \
      "$(cut -d' ' -f2 "$tmp/attach.$size.$i" | median)"
  done
done
echo "medians (best); vm by index from 0: ${vms[*]}"
