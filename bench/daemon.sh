#!/usr/bin/env bash
# ljmpd under load: VMS patched VMs running SCRIPT stream into ljmpd while
# SUBS clients subscribe; prints ingest rate, daemon CPU, snapshot latency,
# daemon memory per live block, and the VMs' speed against a plain drain.
# See bench/README.md.  Usage: VMS=2 SUBS=10 bench/daemon.sh [SCRIPT]
# (REPLAY_ONLY=1: phase 4 alone; FEED_THREADS=N: ljmpd's --feed-threads;
# PARITY=N: first N interleaved rounds of drain and ljmpd; PARITY_ONLY=1:
# those alone; LJMPD=PATH: another ljmpd, e.g. one built at an older
# commit, for before/after figures)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
script=$(realpath "${1:-bench/vm/alloc_loop.lua}")
lj=build/luajit-patch/work/src/luajit
# SCRIPT's stream recorded once, for the replay phase (phase 4).
mkdir -p build/bench-data
replay=build/bench-data/replay-$(basename "$script" .lua).bin
if [ ! -s "$replay" ] || [ "$replay" -ot "$lj" ]; then
  "$lj" -e "assert(misc.memprof.start('$replay.tmp'))" "$script" >/dev/null
  mv "$replay.tmp" "$replay"
fi
# The VMs wait for ljmpd as long as it takes: the benchmark measures
# lossless ingest under load, where the default stall bound would end a
# VM's profile whenever ljmpd fell 100 ms behind.
export LJMP_MAX_STALL_MS=${LJMP_MAX_STALL_MS:-0}
exec build/bench/ljmpd-bench --replay "$replay" \
  --ljmpd "${LJMPD:-build/daemon/ljmpd}" --luajit "$lj" --script "$script" \
  --probe "$PWD/bench/vm/probe.lua" --hold "$PWD/bench/vm/hold.lua" \
  --drain build/bench/ljmp-bench --vms "${VMS:-1}" --subs "${SUBS:-1}" \
  --interval "${INTERVAL:-1000}" --hold-blocks "${HOLD:-1000000}" \
  --nice "${NICE:--5}" ${REPLAY_ONLY:+--replay-only} \
  ${FEED_THREADS:+--feed-threads "$FEED_THREADS"} \
  ${PARITY:+--parity-rounds "$PARITY"} ${PARITY_ONLY:+--parity-only}
