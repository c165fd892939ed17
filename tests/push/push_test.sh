#!/bin/sh
# ljmp-push against a stand-in Pyroscope server (tests/push/fake_pyroscope.py):
# a live session's interval profiles arrive with the right path and
# labels, each read by go tool pprof with the expected top line, the
# allocations as the change per interval; as its own user, which ljmpd's
# --reader lets read root's session; the server going away and coming
# back loses no process, keeps the queue bounded and memory flat.
# usage: push_test.sh LUAJIT LJMPD PUSH
set -eu
luajit=$(realpath "$1")
ljmpd=$(realpath "$2")
push=$(realpath "$3")
here=$(dirname "$(realpath "$0")")
tmp=$(mktemp -d)
chmod 755 "$tmp"
pids=
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
export HOME="$tmp" PPROF_TMPDIR="$tmp"
fails=0
fail() {
  echo "FAIL: $*" >&2
  fails=$((fails + 1))
}
# As nobody when root (ljmpd's --reader then matters), else as is; setpriv
# execs, so that $! is ljmp-push's pid.
reader=$(id -u)
as_reader=
if [ "$reader" -eq 0 ]; then
  reader=65534
  as_reader="setpriv --reuid=65534 --regid=65534 --clear-groups"
fi

mkdir "$tmp/got"
chmod 777 "$tmp/got"
start_server() {
  rm -f "$tmp/port"
  python3 "$here/fake_pyroscope.py" "$tmp/got" "$tmp/port" ${1:-} &
  server_pid=$!
  pids="$pids $server_pid"
  for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
  port=$(cat "$tmp/port")
}
start_server

"$ljmpd" -i "$tmp/ingest.sock" -c "$tmp/control.sock" --control-mode 0666 \
  --reader "$reader" 2>"$tmp/ljmpd.log" &
pids="$pids $!"
for _ in $(seq 50); do [ -S "$tmp/control.sock" ] && break; sleep 0.1; done

# A program that keeps 20000 tables (line 3), then idles.
cat >"$tmp/prog.lua" <<'LUA'
local keep = {}
local function grow(n)
  for i = 1, n do keep[#keep + 1] = {i, i + 1} end
end
grow(20000)
io.stdout:write("ready\n")
io.stdout:flush()
io.stdin:read("*l")
LUA
mkfifo "$tmp/in"
(cd "$tmp" && exec env LJMP_SOCKET="$tmp/ingest.sock" "$luajit" prog.lua) \
  <"$tmp/in" >"$tmp/out" &
vm=$!
pids="$pids $vm"
exec 3>"$tmp/in"
for _ in $(seq 100); do grep -q ready "$tmp/out" && break; sleep 0.1; done

echo "s3cret" >"$tmp/token"
chmod 644 "$tmp/token"
$as_reader "$push" -s "$tmp/control.sock" --server "http://127.0.0.1:$port" \
  --interval 1 --app testapp --host testhost --token-file "$tmp/token" \
  --queue 3 2>"$tmp/push.log" &
pusher=$!
pids="$pids $pusher"

# Waits until n requests have arrived (at most s seconds).
wait_requests() {
  for _ in $(seq $((${2} * 10))); do
    [ "$(ls "$tmp/got" | grep -c '\.path$')" -ge "$1" ] && return 0
    sleep 0.1
  done
  return 1
}
wait_requests 3 20 || fail "fewer than 3 pushes in 20 s: $(cat "$tmp/push.log")"

first=$(ls "$tmp/got"/*.path | head -n 1)
path=$(cat "$first")
case $path in
/ingest\?name=testapp%7Bhost%3Dtesthost%2Cpid%3D$vm%2Ccommand%3Dluajit%7D\&from=*\&until=*\&format=pprof*) ;;
*) fail "the first push's path: $path" ;;
esac
[ "$(cat "${first%.path}.auth")" = "Bearer s3cret" ] ||
  fail "no bearer token: '$(cat "${first%.path}.auth")'"
for f in $(ls "$tmp/got"/*.path | head -n 3); do
  body=${f%.path}.profile
  row=$(go tool pprof -top -lines "$body" 2>/dev/null |
    awk '/flat%/ { getline; print; exit }')
  case $row in
  *"@prog.lua:2 prog.lua:3"*) ;;
  *) fail "$(basename "$body"): first row '$row'" ;;
  esac
done
# The first push has the allocations since the start, the later ones
# those of their interval: none, as the program idles.
total() {
  go tool pprof -top -sample_index=alloc_objects "$1" 2>/dev/null |
    sed -n 's/^Showing nodes accounting for \([0-9.a-zA-Z]*\),.*/\1/p'
}
second=$(ls "$tmp/got"/*.profile | sed -n 2p)
[ "$(total "$second")" = "0" ] ||
  fail "the second push's allocations: $(total "$second"), not 0"
[ "$(total "${first%.path}.profile")" != "0" ] ||
  fail "the first push holds no allocations"

# The server goes away for 6 s, then comes back on the same port.
rss() { awk '/VmRSS/ { print $2 }' "/proc/$pusher/status"; }
before=$(rss)
kill "$server_pid"
wait "$server_pid" 2>/dev/null || true
sleep 6
during=$(rss)
n=$(ls "$tmp/got" | grep -c '\.path$')
start_server "$port"
wait_requests $((n + 3)) 20 || fail "no pushes after the server came back"
grep -q "dropped" "$tmp/push.log" || fail "no drop said while the server was away"
kill -0 "$vm" || fail "the VM is gone"
[ $((during - before)) -lt 4096 ] ||
  fail "ljmp-push grew from $before to $during KiB while the server was away"

kill "$pusher"
wait "$pusher" 2>/dev/null || true
grep -q "profiles pushed" "$tmp/push.log" || fail "no summary at the end"
echo >&3
exec 3>&-
[ "$fails" -eq 0 ] || { cat "$tmp/push.log" >&2; exit 1; }
echo "push: $(ls "$tmp/got" | grep -c '\.path$') pushes read back; the outage survived"
