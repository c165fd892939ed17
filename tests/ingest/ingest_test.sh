#!/bin/sh
# ljmpctl ingest: memprof streams that ljmp's VM did not write, relayed to
# ljmpd.  Every revision (the encoder's samples) and a VM's stream, written
# slowly into a FIFO and into a growing file: the session is live during
# the write and its report then equals the file's; a writer that stops
# midway, garbage, ljmpd stopped during a relay (the writer goes on), and
# --pid of another user's process.
# usage: ingest_test.sh LUAJIT LJMPD LJMPCTL TEST_CORE
set -eu
luajit=$(realpath "$1")
ljmpd=$(realpath "$2")
ljmpctl=$(realpath "$3")
test_core=$(realpath "$4")
tmp=$(mktemp -d)
daemon_pid=
cleanup() {
  [ -z "$daemon_pid" ] || kill "$daemon_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
fail() {
  echo "FAIL: $*" >&2
  fails=$((fails + 1))
}

start_ljmpd() {
  rm -f "$tmp/ingest.sock" "$tmp/control.sock"
  "$ljmpd" -i "$tmp/ingest.sock" -c "$tmp/control.sock" -v \
    --hello-timeout 500 \
    2>>"$tmp/ljmpd.log" &
  daemon_pid=$!
  for _ in $(seq 50); do [ -S "$tmp/control.sock" ] && return; sleep 0.1; done
  fail "ljmpd did not start"
}
export LJMP_CONTROL="$tmp/control.sock" LJMP_SOCKET="$tmp/ingest.sock"

# Writes file $1 to $2 in 16 pieces, $3 seconds apart (appending to a
# regular file, or through a FIFO's one open).
write_slowly() {
  size=$(stat -c %s "$1")
  piece=$(((size + 15) / 16))
  i=0
  while [ $((i * piece)) -lt "$size" ]; do
    dd if="$1" bs="$piece" skip="$i" count=1 status=none
    sleep "$3"
    i=$((i + 1))
  done >>"$2"
}

# The state and reason of session $1's newest session, from list.
session_line() {
  "$ljmpctl" list | awk -v pid="$1" '$2 == pid { getline r; line = $0 " | " r }
    END { print line }'
}

# The relay of $1 (pid $2) ended: its report equals the file's.
same_report() {
  "$ljmpctl" report "$2" >"$tmp/live.txt" 2>&1 || true
  "$ljmpctl" report "$1" >"$tmp/file.txt" 2>&1 || true
  cmp -s "$tmp/live.txt" "$tmp/file.txt" ||
    fail "$3: the session's report differs from the file's:
$(diff "$tmp/live.txt" "$tmp/file.txt" | head -n 8)"
}

# Relays stream file $1 written slowly through a FIFO, then into a
# growing file; what: $2.
relay_both_ways() {
  rm -f "$tmp/fifo" "$tmp/grow"
  mkfifo "$tmp/fifo"
  # Named by this shell, as a writer's own process would be.
  "$ljmpctl" ingest --pid $$ --name "$2" "$tmp/fifo" &
  relay=$!
  write_slowly "$1" "$tmp/fifo" 0.02
  wait "$relay" || fail "$2 through a FIFO: ingest exited $?"
  sleep 0.3
  case $(session_line $$) in
  *complete*"[$2]"*"no VM trailer"*) ;;
  *) fail "$2 through a FIFO: $(session_line $$)" ;;
  esac
  same_report "$1" $$ "$2 through a FIFO"

  : >"$tmp/grow"
  "$ljmpctl" ingest --name "$2" "$tmp/grow" &
  relay=$!
  write_slowly "$1" "$tmp/grow" 0.02
  wait "$relay" || fail "$2 in a growing file: ingest exited $?"
  sleep 0.3
  same_report "$1" "$relay" "$2 in a growing file"
}

start_ljmpd
"$test_core" --write-samples "$tmp"
for rev in r1 r2 r3-seed r3; do
  relay_both_ways "$tmp/sample-$rev.bin" "sample $rev"
done

# A VM's stream: the session is live while the writer is still at it.
cat >"$tmp/prog.lua" <<'LUA'
local keep = {}
misc.memprof.start(arg[1])
for i = 1, 30000 do keep[i] = {i} end
for i = 1, 30000 do local s = "drop " .. i end
misc.memprof.stop()
LUA
(cd "$tmp" && env -u LJMP_SOCKET "$luajit" prog.lua vm.bin)
relay_both_ways "$tmp/vm.bin" "a VM's stream"
rm -f "$tmp/fifo"
mkfifo "$tmp/fifo"
"$ljmpctl" ingest "$tmp/fifo" &
relay=$!
size=$(stat -c %s "$tmp/vm.bin")
{
  head -c $((size / 2)) "$tmp/vm.bin"
  sleep 1
  live=$("$ljmpctl" snapshot "$relay" --json 2>/dev/null || true)
  echo "$live" >"$tmp/mid.json"
  tail -c +$((size / 2 + 1)) "$tmp/vm.bin"
} >"$tmp/fifo"
wait "$relay" || fail "the VM's stream: ingest exited $?"
grep -q '"state":"STREAMING"' "$tmp/mid.json" ||
  fail "no live session in the middle of the write: $(head -c 300 "$tmp/mid.json")"

# A writer whose first byte comes late (Tarantool's buffers 8 MiB before
# its first write): well past ljmpd's --hello-timeout, the session waits.
rm -f "$tmp/fifo"
mkfifo "$tmp/fifo"
"$ljmpctl" ingest "$tmp/fifo" --name late &
relay=$!
{
  sleep 2
  cat "$tmp/vm.bin"
} >"$tmp/fifo"
wait "$relay" || fail "a late writer: ingest exited $?"
sleep 0.3
case $(session_line "$relay") in
*complete*) ;;
*) fail "a late writer: $(session_line "$relay")" ;;
esac

# A writer that stops in the middle: truncated.
rm -f "$tmp/fifo"
mkfifo "$tmp/fifo"
"$ljmpctl" ingest "$tmp/fifo" 2>"$tmp/err" &
relay=$!
head -c $((size / 3)) "$tmp/vm.bin" >"$tmp/fifo"
rc=0
wait "$relay" || rc=$?
[ "$rc" -eq 2 ] || fail "a cut stream: ingest exited $rc, not 2"
sleep 0.3
case $(session_line "$relay") in
*truncated*) ;;
*) fail "a cut stream: $(session_line "$relay")" ;;
esac

# Garbage: the session fails with the offset.
head -c 4096 /dev/urandom | sed '1s/^/ljs/' >"$tmp/garbage.bin"
rc=0
"$ljmpctl" ingest "$tmp/garbage.bin" --no-follow 2>"$tmp/err" || rc=$?
[ "$rc" -eq 3 ] || fail "garbage: ingest exited $rc, not 3"
grep -q "malformed stream at offset" "$tmp/err" ||
  fail "garbage: ingest said $(cat "$tmp/err")"
sleep 0.3
case $("$ljmpctl" list | grep -A1 "\[$tmp/garbage.bin\]") in
*failed*"malformed stream at offset"*) ;;
*) fail "garbage: the session: $("$ljmpctl" list | grep -A1 garbage)" ;;
esac

# ljmpd stopped during a relay: the writer still writes everything.
rm -f "$tmp/fifo"
mkfifo "$tmp/fifo"
"$ljmpctl" ingest "$tmp/fifo" 2>"$tmp/err" &
relay=$!
{
  head -c $((size / 2)) "$tmp/vm.bin"
  sleep 0.5
  kill "$daemon_pid"
  wait "$daemon_pid" 2>/dev/null || true
  daemon_pid=
  tail -c +$((size / 2 + 1)) "$tmp/vm.bin"
} >"$tmp/fifo" &
writer=$!
for _ in $(seq 100); do kill -0 "$writer" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$writer" 2>/dev/null; then
  fail "the writer is blocked after ljmpd went away"
  kill "$writer"
fi
rc=0
wait "$relay" || rc=$?
[ "$rc" -eq 4 ] || fail "ljmpd gone: ingest exited $rc, not 4"
grep -q "draining" "$tmp/err" || fail "ljmpd gone: ingest said $(cat "$tmp/err")"
start_ljmpd

# --pid of another user's process.
if [ "$(id -u)" -eq 0 ]; then
  rc=0
  setpriv --reuid=65534 --regid=65534 --clear-groups \
    "$ljmpctl" ingest --pid 1 "$tmp/vm.bin" 2>"$tmp/err" || rc=$?
  [ "$rc" -eq 5 ] || fail "--pid 1 as nobody: ingest exited $rc, not 5"
  grep -q "belongs to uid 0, not to you" "$tmp/err" ||
    fail "--pid 1 as nobody: $(cat "$tmp/err")"
else
  echo "skipped: --pid of another user's process (not root)"
fi

[ "$fails" -eq 0 ] || exit 1
echo "ingest: every revision and a VM's stream relayed, live, with each end"
