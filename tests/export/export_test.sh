#!/bin/sh
# ljmpctl export read by the real consumers: go tool pprof (a recording and
# a live session from ljmpd), folded stacks by their grammar, speedscope's
# JSON by the rules of its file format (with jq).
# usage: export_test.sh LUAJIT LJMPD LJMPCTL
set -eu
luajit=$(realpath "$1")
ljmpd=$(realpath "$2")
ljmpctl=$(realpath "$3")
tmp=$(mktemp -d)
daemon_pid=
vm_pid=
cleanup() {
  [ -z "$vm_pid" ] || kill "$vm_pid" 2>/dev/null || true
  [ -z "$daemon_pid" ] || kill "$daemon_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
# go keeps its caches and pprof its files under HOME.
export HOME="$tmp" PPROF_TMPDIR="$tmp"
fails=0

fail() {
  echo "FAIL: $*" >&2
  fails=$((fails + 1))
}

# A program that keeps 20000 tables (line 5) beside 60000 strings it drops
# (line 11); with a path, it records itself there, else it streams to
# LJMP_SOCKET and waits for a line on stdin before it exits.
cat >"$tmp/prog.lua" <<'LUA'
local keep = {}

local function grow(n)
  for i = 1, n do
    keep[#keep + 1] = {i, i + 1, i + 2}
  end
end

local function churn(n)
  local s
  for i = 1, n do s = "transient " .. i end
  return s
end

if arg[1] then misc.memprof.start(arg[1]) end
grow(20000)
churn(60000)
collectgarbage()
collectgarbage()
if arg[1] then misc.memprof.stop() return end
io.stdout:write("ready\n")
io.stdout:flush()
io.stdin:read("*l")
LUA

# The first row of `go tool pprof -top -lines` for sample type $2 of $1.
top_line() {
  go tool pprof -top -lines -sample_index="$2" "$1" 2>"$tmp/pprof.err" |
    awk '/flat%/ { getline; print; exit }'
}

# pprof file $1 (what: $2): kept tables on top by live bytes and blocks,
# the dropped strings by allocations; four sample types.
check_pprof() {
  for t in inuse_space inuse_objects; do
    row=$(top_line "$1" $t)
    case $row in
    *"@prog.lua:3 prog.lua:5"*) ;;
    *) fail "$2: $t: first row is not the kept tables' line: '$row'" ;;
    esac
  done
  for t in alloc_objects alloc_space; do
    row=$(top_line "$1" $t)
    case $row in
    *"@prog.lua:9 prog.lua:11"*) ;;
    *) fail "$2: $t: first row is not the strings' line: '$row'" ;;
    esac
  done
  types="alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt]"
  go tool pprof -raw "$1" 2>"$tmp/pprof.err" | grep -qF "$types" ||
    fail "$2: -raw does not list the four sample types"
}

# Folded stacks: "frame;frame VALUE" lines, the kept tables' line first
# by value.
check_folded() {
  if ! awk '!/^[^;\n]+(;[^;\n]+)* [0-9]+$/ { bad = 1 } END { exit bad }' "$1"; then
    fail "$2: a line is not 'frame;... VALUE'"
  fi
  first=$(sort -t ' ' -k 2 -n -r "$1" | awk '{ sub(/ [0-9]+$/, ""); print; exit }')
  [ "$first" = "@prog.lua:5" ] || fail "$2: first frame '$first'"
}

# speedscope: the file format's required members and their kinds, every
# sample a list of frame indices in range, weights as many as samples
# and summing to endValue.
check_speedscope() {
  jq -e '
    (."$schema" == "https://www.speedscope.app/file-format-schema.json") and
    (.version | type == "string") and
    ((.activeProfileIndex // 0) | type == "number") and
    (.shared.frames | type == "array" and length > 0 and
      all(.[]; (.name | type == "string") and
                ((.file // "") | type == "string") and
                ((.line // 0) | type == "number"))) and
    (.profiles | type == "array" and length >= 1) and
    (.shared.frames | length) as $nf |
    all(.profiles[];
        .type == "sampled" and (.name | type == "string") and
        (.unit | IN("none", "nanoseconds", "microseconds", "milliseconds",
                    "seconds", "bytes")) and
        (.startValue | type == "number") and (.endValue >= .startValue) and
        (.samples | length) == (.weights | length) and
        all(.samples[]; type == "array" and all(.[]; . >= 0 and . < $nf)) and
        ([.weights[]] | add) == .endValue)' "$1" >/dev/null ||
    fail "$2: not a valid speedscope file"
  top=$(jq -r '.shared.frames as $f | .profiles[0] |
      [range(0; .weights | length) as $i | {w: .weights[$i], s: .samples[$i][0]}] |
      max_by(.w) | $f[.s].name' "$1")
  [ "$top" = "@prog.lua:5" ] || fail "$2: heaviest frame '$top'"
}

# A recording.
# Run from its directory, so that its chunk is "@prog.lua".
(cd "$tmp" && "$luajit" prog.lua rec.bin)
"$ljmpctl" export "$tmp/rec.bin" -o "$tmp/rec.pb.gz"
check_pprof "$tmp/rec.pb.gz" recording
"$ljmpctl" export "$tmp/rec.bin" --format folded -o "$tmp/rec.folded"
check_folded "$tmp/rec.folded" recording
"$ljmpctl" export "$tmp/rec.bin" --format speedscope -o "$tmp/rec.json"
check_speedscope "$tmp/rec.json" recording

# Call stacks: a line (3) reached from two callers (lines 4 and 5), called
# at lines 8 and 9, 300 and 700 times; interpreted, so that no trace
# label splits a stack's sample.
cat >"$tmp/callers.lua" <<'LUA'
-- usage: callers.lua OUT.bin
local keep = {}
local function hot(n) return {n} end
local function from_a(k) for i = 1, k do keep[#keep + 1] = hot(i) end end
local function from_b(k) for i = 1, k do keep[#keep + 1] = hot(i) end end
jit.off()
assert(misc.memprof.start{path = arg[1], stacks = 8})
from_a(300)
from_b(700)
misc.memprof.stop()
LUA
(cd "$tmp" && "$luajit" callers.lua stacks.bin)
"$ljmpctl" export "$tmp/stacks.bin" -o "$tmp/stacks.pb.gz"
# pprof's traces as "VALUE LINE;LINE;..." lines, leaf first, by the
# file:line column of -lines.
go tool pprof -traces -lines -sample_index=alloc_objects "$tmp/stacks.pb.gz" \
  2>"$tmp/pprof.err" | awk '
    /^-+\+/ { if (v != "") print v, s; v = ""; s = ""; next }
    v == "" && $1 ~ /^[0-9]+$/ { v = $1; s = $NF; next }
    v != "" { s = s ";" $NF }
    END { if (v != "") print v, s }' >"$tmp/stacks.traces"
for want in "300 callers.lua:3;callers.lua:4;callers.lua:8" \
  "700 callers.lua:3;callers.lua:5;callers.lua:9"; do
  grep -q "^$want" "$tmp/stacks.traces" ||
    fail "stacks: pprof -traces has no '$want...': $(cat "$tmp/stacks.traces")"
done
"$ljmpctl" export "$tmp/stacks.bin" --format folded --sample alloc_objects \
  -o "$tmp/stacks.folded"
for want in ";@callers.lua:8;@callers.lua:4;@callers.lua:3 300" \
  ";@callers.lua:9;@callers.lua:5;@callers.lua:3 700"; do
  grep -q -- "$want\$" "$tmp/stacks.folded" ||
    fail "stacks: folded has no '...$want'"
done

# A live session, from ljmpd.
"$ljmpd" -i "$tmp/ingest.sock" -c "$tmp/control.sock" 2>"$tmp/ljmpd.log" &
daemon_pid=$!
for _ in $(seq 50); do [ -S "$tmp/control.sock" ] && break; sleep 0.1; done
mkfifo "$tmp/in"
(cd "$tmp" && exec env LJMP_SOCKET="$tmp/ingest.sock" "$luajit" prog.lua) \
  <"$tmp/in" >"$tmp/out" &
vm_pid=$!
exec 3>"$tmp/in"
for _ in $(seq 100); do grep -q ready "$tmp/out" && break; sleep 0.1; done
grep -q ready "$tmp/out" || fail "the VM did not start"
export LJMP_CONTROL="$tmp/control.sock"
# The session reads what the VM sent before it said ready as the stream
# brings it: within 15 s on a busy host.  The VM, idle in its read, sent
# its collections' frees at the end of their sweeps (patch 0010): no
# dropped string stays live.
live_strings() {
  go tool pprof -top -lines -sample_index=inuse_objects "$1" 2>/dev/null |
    grep 'prog\.lua:11$'
}
left="no export"
for _ in $(seq 30); do
  sleep 0.5
  "$ljmpctl" export "$vm_pid" -o "$tmp/live.pb.gz" || continue
  left=$(live_strings "$tmp/live.pb.gz") || true
  [ -z "$left" ] && break
done
check_pprof "$tmp/live.pb.gz" live
[ -z "$left" ] || fail "live: dropped strings still live: $left"
go tool pprof -tags "$tmp/live.pb.gz" 2>/dev/null | grep -q "): $vm_pid\$" ||
  fail "live: no pid label $vm_pid"
"$ljmpctl" export "$vm_pid" --format folded -o "$tmp/live.folded"
check_folded "$tmp/live.folded" live
"$ljmpctl" export "$vm_pid" --format speedscope -o "$tmp/live.json"
check_speedscope "$tmp/live.json" live
echo >&3
exec 3>&-
wait "$vm_pid" || fail "the VM failed"
vm_pid=

# pprof never goes to a terminal; a bad format is refused.
if "$ljmpctl" export "$tmp/rec.bin" --format nope >/dev/null 2>&1; then
  fail "an unknown format was taken"
fi

[ "$fails" -eq 0 ] || exit 1
echo "export: pprof, folded and speedscope read back, recorded and live"
