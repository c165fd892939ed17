#!/bin/sh
# ljmpctl plot's charts read by the real consumers: xmllint parses them,
# rsvg-convert renders them to a PNG of the size asked with nothing on
# stderr, and the legend names the growing cache's line of leak.lua; from
# a recording and from a live session in ljmpd, and its history kept
# after the session ends.
# usage: plot_test.sh LUAJIT LJMPD LJMPCTL LEAK_LUA
set -eu
luajit=$(realpath "$1")
ljmpd=$(realpath "$2")
ljmpctl=$(realpath "$3")
leak=$(realpath "$4")
tmp=$(mktemp -d)
daemon_pid=
vm_pid=
cleanup() {
  [ -z "$vm_pid" ] || kill "$vm_pid" 2>/dev/null || true
  [ -z "$daemon_pid" ] || kill "$daemon_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
. "$(dirname "$0")/../svg_check.sh"
svg_tools plot_test

# The cache's line: the end of its site's name, which the legend shows
# (a name too long for its column loses its start).
cache_line=$(grep -n 'SITE cache' "$leak" | cut -d: -f1)
cache="leak.lua:$cache_line"

# Whether the legend of chart $1 names the cache's line.
names_cache() {
  legend_of "$1" | grep -q "leak\.lua:$cache_line\$"
}

# The names the legend shows (its monospace texts), one a line.
names="//*[local-name()='text'][@font-family='monospace']"
legend_of() {
  xmllint --xpath "$names/text()" "$1" 2>/dev/null
}

# check_svg, and the cache's line in the legend.
check_chart() {
  check_svg "$@"
  names_cache "$1" ||
    fail "$2: the legend does not name $cache: $(legend_of "$1" | tr '\n' '|')"
}

# A recording of leak.lua's first seconds, made by the VM itself.
cat >"$tmp/rec.lua" <<'LUA'
-- Records the script arg[3], run for arg[2] seconds, into the file arg[1].
local out, secs, script = arg[1], arg[2], arg[3]
assert(misc.memprof.start(out))
arg = {[0] = script, out .. ".stop", secs}
dofile(script)
assert(misc.memprof.stop())
LUA
"$luajit" "$tmp/rec.lua" "$tmp/rec.bin" 2 "$leak" >/dev/null
"$ljmpctl" plot "$tmp/rec.bin" -o "$tmp/rec.svg" --peak 2>"$tmp/plot.err" ||
  fail "recording: ljmpctl plot failed: $(cat "$tmp/plot.err")"
[ ! -s "$tmp/plot.err" ] ||
  fail "recording: ljmpctl said: $(cat "$tmp/plot.err")"
check_chart "$tmp/rec.svg" recording 960 540
grep -q 'bytes allocated so far' "$tmp/rec.svg" ||
  fail "recording: the x axis is not the bytes allocated"
grep -q 'stroke-dasharray' "$tmp/rec.svg" || fail "recording: no peak marked"
# The same from standard input.
"$ljmpctl" plot - <"$tmp/rec.bin" >"$tmp/stdin.svg" --sites 2 --width 640 \
  --height 400 || fail "recording: standard input not charted"
check_chart "$tmp/stdin.svg" "standard input" 640 400

# A site's name is any bytes: markup, quotes, a byte that is not UTF-8, a
# control character; escaped or replaced, the chart still parses.
cat >"$tmp/odd.lua" <<'LUA'
assert(misc.memprof.start(arg[1]))
local f = assert(load(
  "local t = {} for i = 1, 20000 do t[i] = {i} end return t",
  "=<odd> & \"name\" \255\1"))
local kept = f()
assert(misc.memprof.stop())
LUA
"$luajit" "$tmp/odd.lua" "$tmp/odd.bin"
"$ljmpctl" plot "$tmp/odd.bin" -o "$tmp/odd.svg" ||
  fail "odd names: ljmpctl plot failed"
check_svg "$tmp/odd.svg" "odd names" 960 540
# The first in the legend, read back: the name, two U+FFFD for its last
# two bytes.
first=$(xmllint --xpath "string(($names)[1]/text()[1])" "$tmp/odd.svg")
[ "$first" = "$(printf '=<odd> & "name" \357\277\275\357\277\275:1')" ] ||
  fail "odd names: the legend's first is '$first'"

# A live session in ljmpd, charted from its history.
"$ljmpd" -i "$tmp/ingest.sock" -c "$tmp/control.sock" 2>"$tmp/ljmpd.log" &
daemon_pid=$!
for _ in $(seq 50); do [ -S "$tmp/control.sock" ] && break; sleep 0.1; done
export LJMP_CONTROL="$tmp/control.sock"
LJMP_SOCKET="$tmp/ingest.sock" "$luajit" "$leak" "$tmp/leak.stop" 60 \
  >"$tmp/vm.out" &
vm_pid=$!
# ljmpd samples the sites every second: the cache is charted within 15 s.
for _ in $(seq 15); do
  sleep 1
  "$ljmpctl" plot "$vm_pid" -o "$tmp/live.svg" --peak --width 800 \
    --height 500 --window 60 2>"$tmp/plot.err" || continue
  names_cache "$tmp/live.svg" && break
done
check_chart "$tmp/live.svg" live 800 500
grep -q 'local time' "$tmp/live.svg" || fail "live: the x axis is not the clock"
grep -q 'stroke-dasharray' "$tmp/live.svg" || fail "live: no peak marked"
touch "$tmp/leak.stop"
wait "$vm_pid" || fail "the VM failed"
ended=$vm_pid
vm_pid=
# A finished session keeps its history: still charted.
"$ljmpctl" plot "$ended" -o "$tmp/ended.svg" || fail "ended: not charted"
check_chart "$tmp/ended.svg" "ended session" 960 540

[ "$fails" -eq 0 ] || exit 1
echo "plot: charts parsed and rendered, recorded and live"
