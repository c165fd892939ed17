#!/usr/bin/env bash
# Runs ljmp's benchmarks on the standard synthetic streams (see README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/bench/ljmp-bench ] || ./dev.sh deps
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
data=build/bench-data
mkdir -p "$data"
gen() { # name events live
  [ -f "$data/$1" ] || build/bench/ljmp-gen --events "$2" --live "$3" \
    --sites 5000 --seed 1 -o "$data/$1"
}
gen s20m.bin 20000000 500000
gen s1m-live.bin 20000000 1000000
for f in s20m.bin s1m-live.bin; do
  echo "== core: $f"
  build/bench/ljmp-bench core "$data/$f" --runs 5 | tee "$data/$f.core.txt"
  echo "== core, fed in 64 KiB chunks (as from a socket): $f"
  build/bench/ljmp-bench core "$data/$f" --runs 3 --chunk 65536
  echo "== core on two threads (as ljmpctl report FILE): $f"
  build/bench/ljmp-bench core "$data/$f" --runs 5 --threads 2
done
# The two streams differ in live heap only (same sites, seed and events),
# so the difference of their RSS growths is what a live block costs,
# without the fixed cost of the sites and their overrides.
awk 'BEGIN { n = 0 }
     /^peak live blocks/ { b[n] = $4 }
     /^peak RSS growth/ { r[n++] = $4 }
     END { printf "== RSS per additional live block (s1m-live.bin - s20m.bin): %.1f bytes\n",
                  (r[1] - r[0]) * 1048576 / (b[1] - b[0]) }' \
  "$data/s20m.bin.core.txt" "$data/s1m-live.bin.core.txt"
echo "== ljmpctl report s20m.bin (two threads)"
build/bench/ljmp-bench exec --runs 5 -- build/client/ljmpctl report "$data/s20m.bin"
echo "== ljmpctl report --threads=1 s20m.bin"
build/bench/ljmp-bench exec --runs 5 -- build/client/ljmpctl report --threads=1 "$data/s20m.bin"
