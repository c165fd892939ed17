#!/usr/bin/env bash
# Black-box tests of ljmp against a real nginx with its Lua module, running on the patched OpenResty LuaJIT.
#
# usage: nginx_test.sh CASE...   CASE: attach ljmpd_killed latency reload
#                                 private_ingest idle_attach tree
#                                 socket_helpers
# Environment (tests/nginx/CMakeLists.txt sets it): NGINX_TEST_LIB, the
# patched libluajit.so of OpenResty's branch; LJMPD, LJMPCTL; LUAJIT, a VM
# to read JSON with.  Each case runs its own nginx (a prefix in a
# temporary directory, a free port on 127.0.0.1, workers as nobody) and
# its own ljmpd (private control socket; the ingest socket is the default
# one unless the case says otherwise), drives it with wrk and asserts on
# `ljmpctl ... --json`.  Exit 0: passed; 77: skipped (no nginx, Lua
# module or wrk); 1: failed, with what was expected, what was seen and
# the logs' tails.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
: "${NGINX_TEST_LIB:?the patched libluajit.so to run nginx on}"
: "${LJMPD:?ljmpd}" "${LJMPCTL:?ljmpctl}" "${LUAJIT:?a luajit binary}"
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
MODULES=${NGINX_MODULES:-/usr/lib/nginx/modules}
DEFAULT_INGEST=/run/ljmp/ingest.sock

case_name=setup
dir=''
master=''
ljmpd_pid=''
wrk_pid=''
last_out=''

say() { printf '%s\n' "nginx: $case_name: $*"; }

skip() {
  printf 'skipped: nginx: %s: %s\n' "$case_name" "$*"
  exit 77
}

# Says what failed, shows the logs' tails, and fails the test (the
# directory is kept for a look).
fail() {
  printf '%s\n' "FAIL: nginx: $case_name: $*" >&2
  if [ -n "$last_out" ]; then
    printf '%s\n%.2000s\n' "--- last ljmpctl output (its first 2000 bytes):" \
      "$last_out" >&2
  fi
  if [ -n "$dir" ]; then
    for f in "$dir/error.log" "$dir/ljmpd.log" "$dir"/wrk-*.txt; do
      [ -s "$f" ] || continue
      printf '%s\n' "--- tail of $f:" >&2
      tail -n 25 "$f" >&2
    done
    printf '%s\n' "(files kept in $dir)" >&2
    dir_keep=1
  fi
  exit 1
}

dir_keep=0
cleanup() {
  set +e
  [ -n "$wrk_pid" ] && kill "$wrk_pid" 2>/dev/null
  [ -n "$master" ] && kill -TERM "$master" 2>/dev/null
  [ -n "$ljmpd_pid" ] && kill -TERM "$ljmpd_pid" 2>/dev/null
  wait 2>/dev/null
  if [ -n "$dir" ] && [ "$dir_keep" = 0 ]; then rm -rf "$dir"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ljmpctl with the test's control socket; its output in last_out, its
# status returned.
ctl() {
  local rc=0
  last_out=$("$LJMPCTL" -s "$dir/control.sock" "$@" 2>&1) || rc=$?
  return "$rc"
}

# q FILE EXPR: the value of a Lua expression over a JSON file (query.lua).
q() { "$LUAJIT" "$here/query.lua" "$1" "$2"; }

# --- ljmpd -----------------------------------------------------------------

# start_ljmpd [INGEST]: a private ljmpd; its ingest socket is INGEST, else
# the default path (as an attached VM without LJMP_INGEST would look).
start_ljmpd() {
  local ingest=${1:-$DEFAULT_INGEST} i
  # Another ljmpd on the default path (another test tree's run) holds it
  # for the length of a test at most: wait for it.
  for i in $(seq 60); do
    "$LJMPD" -i "$ingest" -c "$dir/control.sock" 2>>"$dir/ljmpd.log" &
    ljmpd_pid=$!
    while [ ! -S "$dir/control.sock" ] && kill -0 "$ljmpd_pid" 2>/dev/null; do
      sleep 0.05
    done
    [ -S "$dir/control.sock" ] && return 0
    wait "$ljmpd_pid" || true
    ljmpd_pid=''
    grep -q 'another ljmpd is listening' "$dir/ljmpd.log" ||
      fail "ljmpd did not start (ingest $ingest)"
    [ "$i" = 1 ] && say "another ljmpd listens on $ingest; waiting for it"
    sleep 1
  done
  fail "another ljmpd kept $ingest for a minute"
}

stop_ljmpd() {
  kill -TERM "$ljmpd_pid"
  wait "$ljmpd_pid" || fail "ljmpd exited with status $? on SIGTERM"
  ljmpd_pid=''
}

# --- nginx -----------------------------------------------------------------

# A TCP port nothing on the host listens on (nginx retries if it is taken
# meanwhile).
free_port() {
  local p hex
  while :; do
    p=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 40000))
    hex=$(printf '%04X' "$p")
    awk -v h=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == h { f = 1 }
      END { exit !f }' /proc/net/tcp /proc/net/tcp6 || break
  done
  echo "$p"
}

# write_conf WORKERS JIT(on|off) [DAEMON(off|on)]: nginx.conf in $dir for
# port $port.
write_conf() {
  local workers=$1 jit=$2 daemon=${3:-off} ndk=''
  [ -f "$MODULES/ndk_http_module.so" ] &&
    ndk="load_module $MODULES/ndk_http_module.so;"
  cat >"$dir/nginx.conf" <<EOF
$ndk
load_module $MODULES/ngx_http_lua_module.so;
daemon $daemon;
master_process on;
worker_processes $workers;
user nobody nogroup;
error_log $dir/error.log info;
pid $dir/nginx.pid;
env LJMP_INGEST;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  lua_package_path "$dir/lua/?.lua;/usr/share/lua/5.1/?.lua;;";
  init_by_lua_block { jit.$jit() require "store" }
  server {
    listen 127.0.0.1:$port reuseport;
    location = /ping { return 200 "pong\n"; }
    location = /fill { content_by_lua_block { require("store").fill() } }
    location / { content_by_lua_block { require("store").handle() } }
  }
}
EOF
}

# workers_of MASTER: its worker processes' pids, sorted, on one line.
workers_of() {
  local p out=''
  for p in $(pgrep -P "$1" 2>/dev/null | sort -n); do
    case $(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline") in
      *"worker process"*) out="$out $p" ;;
    esac
  done
  printf '%s\n' "${out# }"
}

# http_get PATH: the response's body (bash's /dev/tcp: no curl needed);
# fails unless the status is 200.
http_get() {
  local line status='' body=''
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n' "$1" >&3
  read -r _ status _ <&3 || true
  while IFS= read -r line <&3; do [ "$line" = $'\r' ] && break; done
  body=$(cat <&3)
  exec 3<&-
  [ "$status" = 200 ] || return 1
  printf '%s\n' "$body"
}

# wait_workers N: until the master has N workers not among $old (the
# workers before a reload, which may still be finishing); sets workers.
wait_workers() {
  local n=$1 w new count
  for _ in $(seq 100); do
    new=''
    count=0
    for w in $(workers_of "$master"); do
      case " $old " in *" $w "*) continue ;; esac
      new="$new $w"
      count=$((count + 1))
    done
    if [ "$count" = "$n" ]; then
      workers=${new# }
      return 0
    fi
    kill -0 "$master" 2>/dev/null || fail "the nginx master died"
    sleep 0.1
  done
  fail "expected $n new workers under master $master, saw: $(workers_of "$master") (before: ${old:-none})"
}

# start_nginx WORKERS JIT [INGEST]: nginx on the patched library, listening
# on a free port; INGEST goes to its environment as LJMP_INGEST.  Sets
# master, port, workers.
start_nginx() {
  local nworkers=$1 jit=$2 ingest=${3:-} i w
  local lib
  lib=$(readlink -f "$NGINX_TEST_LIB")
  for _ in 1 2 3; do
    port=$(free_port)
    write_conf "$nworkers" "$jit"
    : >"$dir/error.log"
    if [ -n "$ingest" ]; then
      LD_LIBRARY_PATH="$dir/lib" LJMP_INGEST="$ingest" \
        "$NGINX" -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" &
    else
      env -u LJMP_INGEST LD_LIBRARY_PATH="$dir/lib" \
        "$NGINX" -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" &
    fi
    master=$!
    for i in $(seq 100); do
      kill -0 "$master" 2>/dev/null || break
      [ "$(http_get /ping 2>/dev/null)" = pong ] && break
      sleep 0.05
    done
    kill -0 "$master" 2>/dev/null && break
    wait "$master" || true
    master=''
    grep -q 'Address already in use' "$dir/error.log" ||
      fail "nginx did not start"
  done
  [ -n "$master" ] || fail "nginx found no free port in three tries"
  [ "$(http_get /ping 2>/dev/null)" = pong ] ||
    fail "nginx (master $master) does not answer on 127.0.0.1:$port"
  old=''
  wait_workers "$nworkers"
  # Each worker maps the patched library, and no other LuaJIT.
  for w in $workers; do
    grep -qF "$lib" "/proc/$w/maps" ||
      fail "worker $w does not map the patched library $lib: $(grep -i luajit "/proc/$w/maps" | head -n 1)"
    if grep -i 'libluajit' "/proc/$w/maps" | grep -qvF "$lib"; then
      fail "worker $w maps another LuaJIT too: $(grep -i libluajit "/proc/$w/maps" | grep -vF "$lib" | head -n 1)"
    fi
  done
}

# stop_nginx: a fast shutdown; nginx must exit cleanly and no worker may
# have died of a signal meanwhile.
stop_nginx() {
  kill -TERM "$master"
  wait "$master" || fail "nginx exited with status $? on SIGTERM"
  master=''
  check_error_log
}

# No worker died, nothing alarming in the error log.
check_error_log() {
  if grep -E 'exited on signal|\[(alert|crit|emerg)\]' "$dir/error.log" >&2; then
    fail "nginx's error log reports the lines above"
  fi
}

# --- wrk -------------------------------------------------------------------

# wrk_start NAME SECONDS CONNECTIONS [SCRIPT ARG]: load in the
# background, its output in $dir/wrk-NAME.txt.
wrk_start() {
  local name=$1 secs=$2 conns=$3
  shift 3
  if [ $# -gt 0 ]; then
    wrk -t1 -c"$conns" -d"${secs}s" --latency -s "$1" \
      "http://127.0.0.1:$port/" -- "$2" >"$dir/wrk-$name.txt" 2>&1 &
  else
    wrk -t1 -c"$conns" -d"${secs}s" --latency "http://127.0.0.1:$port/" \
      >"$dir/wrk-$name.txt" 2>&1 &
  fi
  wrk_pid=$!
}

# wrk_check NAME [READ_ERRORS]: wrk ended, every request got a 2xx, no
# socket errors (at most READ_ERRORS on reads: a reload closes the old
# workers' idle keep-alive connections, and a request wrk sends on one
# at that moment is reset; a connection wrk opens again may still reach
# an old worker that had not yet stopped accepting, and be reset once
# more, so two a connection).
wrk_check() {
  local name=$1 f=$dir/wrk-$1.txt n errors c r w t
  wait "$wrk_pid" || fail "wrk ($name) exited with status $?"
  wrk_pid=''
  if grep -E 'Non-2xx' "$f" >&2; then
    fail "wrk ($name): expected every request answered with 2xx"
  fi
  errors=$(sed -n 's/^ *Socket errors: connect \([0-9]*\), read \([0-9]*\), write \([0-9]*\), timeout \([0-9]*\)/\1 \2 \3 \4/p' "$f")
  if [ -n "$errors" ]; then
    read -r c r w t <<<"$errors"
    if [ "$c" != 0 ] || [ "$w" != 0 ] || [ "$t" != 0 ] ||
      [ "$r" -gt "${2:-0}" ]; then
      fail "wrk ($name): expected no socket errors (reads: at most ${2:-0}), saw connect $c, read $r, write $w, timeout $t"
    fi
  fi
  n=$(awk '/requests in/ { print $1 }' "$f")
  [ "${n:-0}" -gt 0 ] || fail "wrk ($name) made no requests"
  wrk_rps=$(awk '/^Requests\/sec:/ { print $2 }' "$f")
  wrk_requests=$n
}

# --- sessions --------------------------------------------------------------

# attach PID: ljmpctl attach succeeds with a new session (or says why not).
attach() {
  ctl attach "$1" || fail "expected 'ljmpctl attach $1' to succeed; status $?"
  case $last_out in
    "pid $1: attached, session "*) ;;
    *) fail "expected 'pid $1: attached, session N', saw: $last_out" ;;
  esac
}

# detach PID: the session ends complete.
detach() {
  ctl detach "$1" || fail "expected 'ljmpctl detach $1' to succeed; status $?"
  case $last_out in
    "pid $1: detached, session "*" complete"*) ;;
    *) fail "expected 'pid $1: detached, session N complete', saw: $last_out" ;;
  esac
}

# The newest session of a pid, in a list or snapshot JSON (query.lua).
newest='local function newest(pid) local s for _, x in ipairs(j.sessions or {}) do if x.info.pid == pid and (not s or x.info.id > s.info.id) then s = x end end return s end '

# expect_streaming FILE PID: a snapshot shows PID's session streaming
# with events decoded.
expect_streaming() {
  local st ev
  st=$(q "$1" "$newest local s = newest($2) return s and s.info.state") ||
    fail "expected a session of pid $2 in the snapshot ($1)"
  ev=$(q "$1" "$newest return newest($2).totals.alloc_events or 0")
  [ "$st" = STREAMING ] ||
    fail "expected pid $2's session STREAMING, saw $st"
  [ "$ev" -gt 0 ] || fail "expected allocations in pid $2's session, saw $ev"
}

# store_rank FILE PID: where the store's line ranks in PID's top sites by
# live bytes (0: not among them), and its live bytes.
store_rank() {
  q "$1" "$newest local s = newest($2)
    for i, t in ipairs(s.top or {}) do
      if t.name == '@$dir/lua/store.lua:$keep_line' then
        return i .. ' ' .. t.live_bytes end end
    return '0 0'"
}

# top_names FILE PID: the top sites, for messages.
top_names() {
  q "$1" "$newest local s, o = newest($2), {}
    for i, t in ipairs(s.top or {}) do o[#o + 1] = t.name .. '=' .. t.live_bytes end
    return table.concat(o, ' ')"
}

# state_in FILE PID: the state of PID's newest session in a list's JSON.
state_in() {
  q "$1" "$newest local s = newest($2) return s and s.info.state" || true
}

# wait_streaming PID [TRIES]: ljmpctl list (into $dir/list.json) until
# PID's newest session streams, TRIES times (40) 50 ms apart; st is its
# state then.
wait_streaming() {
  st=''
  for _ in $(seq "${2:-40}"); do
    ctl list --json || fail "ljmpctl list failed: status $?"
    printf '%s\n' "$last_out" >"$dir/list.json"
    st=$(state_in "$dir/list.json" "$1")
    [ "$st" = STREAMING ] && return 0
    sleep 0.05
  done
}

# expect_complete PID: in ljmpctl list, PID's newest session ended
# complete: its trailer seen, and the VM's counts (allocations,
# reallocations and frees; bytes) equal ljmpd's.
expect_complete() {
  local f=$dir/list.json facts
  ctl list --json || fail "ljmpctl list failed: status $?"
  printf '%s\n' "$last_out" >"$f"
  facts=$(q "$f" "$newest local s = newest($1)
    if not s then return 'none' end
    local t, i = s.totals, s.info
    local ev = t.alloc_events + t.realloc_events + t.free_events
    return ('%s trailer=%s events=%s/%s bytes=%s/%s'):format(i.state,
      tostring(i.trailer_seen), tostring(i.trailer_events), ev,
      tostring(i.trailer_stream_bytes), t.stream_bytes)")
  local state trailer e b
  read -r state trailer e b <<<"$facts"
  [ "$state" = COMPLETE ] ||
    fail "expected pid $1's session COMPLETE in ljmpctl list, saw: $facts"
  [ "$trailer" = trailer=true ] ||
    fail "expected pid $1's trailer seen: $facts"
  # events=VM/ljmpd bytes=VM/ljmpd: the VM's totals equal what ljmpd decoded.
  e=${e#events=}
  b=${b#bytes=}
  if [ "${e%/*}" != "${e#*/}" ] || [ "${b%/*}" != "${b#*/}" ]; then
    fail "expected pid $1's VM totals to equal ljmpd's: $facts"
  fi
}

# --- the cases -------------------------------------------------------------

# Attach to each worker under load, the store's line among the top sites
# (with the JIT off), detach complete; WORKERS and JIT as given.
attach_run() {
  local nworkers=$1 jit=$2 w snap rank top
  start_nginx "$nworkers" "$jit"
  wrk_start "attach-$nworkers-$jit" 3 $((8 * nworkers))
  sleep 0.5
  for w in $workers; do attach "$w"; done
  sleep 1
  snap=$dir/snap-$nworkers-$jit.json
  ctl snapshot --json -n 10 || fail "ljmpctl snapshot failed: status $?"
  printf '%s\n' "$last_out" >"$snap"
  for w in $workers; do
    expect_streaming "$snap" "$w"
    rank=$(store_rank "$snap" "$w")
    # The store is the only thing that grows: it leads, with every
    # request's entry held, by its line with the JIT on too (on x86-64,
    # compiled code names the line it was recorded from, not its trace).
    if [ "${rank% *}" != 1 ] || [ "${rank#* }" -lt 65536 ]; then
      fail "expected store.lua:$keep_line first by live bytes in worker $w (jit $jit), saw rank ${rank% *} with ${rank#* } B; top: $(top_names "$snap" "$w")"
    fi
  done
  for w in $workers; do detach "$w"; done
  for w in $workers; do expect_complete "$w"; done
  wrk_check "attach-$nworkers-$jit"
  [ "$(workers_of "$master")" = "$workers" ] ||
    fail "expected the same workers after the run: $workers; saw $(workers_of "$master")"
  stop_nginx
  say "$nworkers worker(s), jit $jit: attached, streamed, detached complete; $wrk_requests requests, $wrk_rps/s"
}

case_attach() {
  start_ljmpd
  attach_run 1 off
  attach_run 2 off
  attach_run 1 on
  attach_run 2 on
  stop_ljmpd
}

# ljmpd dies (SIGKILL) under load while both workers stream: nginx serves
# every request, no worker dies, and a new ljmpd attaches again.
case_ljmpd_killed() {
  local w before snap
  start_ljmpd
  start_nginx 2 on
  before=$workers
  wrk_start killed 4 16
  sleep 0.5
  for w in $workers; do attach "$w"; done
  sleep 1
  ctl snapshot --json -n 3 || fail "ljmpctl snapshot failed: status $?"
  snap=$dir/snap-killed.json
  printf '%s\n' "$last_out" >"$snap"
  for w in $workers; do expect_streaming "$snap" "$w"; done
  kill -KILL "$ljmpd_pid"
  wait "$ljmpd_pid" 2>/dev/null || true
  ljmpd_pid=''
  wrk_check killed
  kill -0 "$master" 2>/dev/null || fail "the nginx master died with ljmpd"
  [ "$(workers_of "$master")" = "$before" ] ||
    fail "expected the same workers ($before) after ljmpd's death, saw: $(workers_of "$master")"
  check_error_log
  case $(http_get /) in ok*) ;; *) fail "expected 'ok N' from / after ljmpd's death" ;; esac
  say "ljmpd killed under load: $wrk_requests requests, all 2xx, no socket errors, workers $before unchanged"
  # The profiles ended when their writes failed: a new ljmpd attaches anew.
  rm -f "$dir/control.sock"
  start_ljmpd
  wrk_start reattach 2 16
  sleep 0.3
  for w in $workers; do attach "$w"; done
  for w in $workers; do detach "$w"; done
  for w in $workers; do expect_complete "$w"; done
  wrk_check reattach
  stop_nginx
  stop_ljmpd
  say "a new ljmpd attached both workers again and detached them complete"
}

# latency_run LABEL NAME: one connection's requests for 3 s, an attach
# after 1 s, a detach a second later.  Prints the latencies before the
# attach, the slowest request answered while the attach ran (from the
# moment ljmpctl started to 200 ms after it answered: the request the VM
# paused in to start its profile is among them), and the first ten
# answered after that window.  Sets lat_worst (ms).
latency_run() {
  local label=$1 f=$dir/lat-$2.txt t0 t1 stats
  wrk_start "lat-$2" 3 1 "$here/latency.lua" "$f"
  sleep 1
  t0=$(date +%s.%N)
  attach "$workers"
  t1=$(date +%s.%N)
  sleep 1
  detach "$workers" # while the load lasts: an idle VM stops late
  wrk_check "lat-$2"
  expect_complete "$workers"
  if awk '$3 != 200' "$f" | grep -q .; then
    fail "latency ($label): expected every request answered 200: $(awk '$3 != 200' "$f" | head -n 3)"
  fi
  # Each line: start (s), latency (ms); answered at start + latency.
  awk -v t0="$t0" '$1 + $2 / 1000 < t0 { print $2 }' "$f" | sort -n >"$f.before"
  awk -v t0="$t0" -v t1="$t1" '$1 + $2 / 1000 >= t0 && $1 + $2 / 1000 < t1 + 0.2 { print $2 }' "$f" |
    sort -n >"$f.during"
  sort -n "$f" | awk -v t1="$t1" '$1 + $2 / 1000 >= t1 + 0.2 { print $2 }' |
    head -n 10 >"$f.after"
  if [ "$(wc -l <"$f.before")" -lt 10 ] || [ ! -s "$f.during" ] ||
    [ "$(wc -l <"$f.after")" != 10 ]; then
    fail "latency ($label): expected requests before, during and after the attach, saw $(wc -l <"$f.before"), $(wc -l <"$f.during") and $(wc -l <"$f.after")"
  fi
  stats="$(awk '{ v[NR] = $1 } END { printf "%.3f %.3f %.3f", v[int((NR - 1) * 0.5) + 1], v[int((NR - 1) * 0.99) + 1], v[NR] }' "$f.before") $(awk 'END { printf "%d %.3f", NR, $1 }' "$f.during") $(sort -n "$f.after" | tail -n 1) $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) * 1000 }')"
  local p50 p99 max n worst after took
  read -r p50 p99 max n worst after took <<<"$stats"
  say "$label: before the attach p50 $p50 ms, p99 $p99 ms, max $max ms; while attaching ($took ms, $n requests answered) the slowest $worst ms; the next ten at most $after ms"
  lat_worst=$worst
  lat_before_max=$max
}

case_latency() {
  local mb filled
  start_ljmpd
  start_nginx 1 on
  latency_run "small heap" small
  # A store of a few tens of MB: 200000 tables of 200-byte strings.
  filled=$(http_get '/fill?n=200000&bytes=200') ||
    fail "expected /fill to answer 200"
  mb=$(awk '/^VmRSS/ { printf "%d", $2 / 1024 }' "/proc/$workers/status")
  say "$filled; worker RSS $mb MiB"
  latency_run "store of 200000 tables, worker RSS $mb MiB" big
  # The start costs the worker a few ms (it walks prototypes and traces,
  # not the heap, and does not wait for ljmpd's answer); the census that
  # follows runs in slices of at most 1 ms, each leaving the program at
  # least as long, and a request that allocates across many of them is
  # slowed by up to its own length again (bench/start_pause.sh measures
  # the pauses themselves).  So no request takes 25 ms more than the
  # slowest before the attach (the machine's noise): a start that walked
  # the heap, as before the census, stopped a worker 79 ms at 118 MB.
  awk -v l="$lat_worst" -v m="$lat_before_max" 'BEGIN { exit !(l < m + 25) }' ||
    fail "expected no request to take 25 ms more than the slowest before ($lat_before_max ms) while attaching, the slowest took $lat_worst ms"
  stop_nginx
  stop_ljmpd
}

# wait_census PID TRIES: lists every 0.1 s (into $dir/census.json) until
# PID's newest session's census is complete, at most TRIES times; prints
# its state then.
wait_census() {
  local f=$dir/census.json state=none
  for _ in $(seq "$2"); do
    ctl list --json || fail "ljmpctl list failed: status $?"
    printf '%s\n' "$last_out" >"$f"
    state=$(q "$f" "$newest local s = newest($1)
      return s and s.info.census and s.info.census.state or 'none'")
    [ "$state" = CENSUS_COMPLETE ] && break
    sleep 0.1
  done
  echo "$state"
}

# expect_census_complete PID WHAT: PID's newest census completes within
# 20 s, what it could not place under 1% of the heap; its heap bytes and
# that remainder in census_total and census_rem.
expect_census_complete() {
  local state facts
  state=$(wait_census "$1" 200)
  [ "$state" = CENSUS_COMPLETE ] ||
    fail "expected $2 complete within 20 s, saw $state"
  facts=$(q "$dir/census.json" "$newest local c = newest($1).info.census
    return ('%d %d'):format(c.complete_total, c.remainder or 0)")
  read -r census_total census_rem <<<"$facts"
  [ $((census_rem * 100)) -le "$census_total" ] ||
    fail "expected $2 to place all but 1% of $census_total B, saw $census_rem B unplaced"
}

# The census: a worker whose store holds 100000 tables made before the
# attach.  Attached under load (whose allocations drive the census), its
# session shows the census complete within 20 s, what the census could
# not place under 1% of the worker's heap, and the old strings and
# tables first by live bytes; detached complete.  Attached again, a
# second census completes as well; attached with --no-census, the
# session has none.  Idle, attached at one request and detached at the
# next, the session ends complete with its census partial.
case_census() {
  local w f state total rem rank
  start_ljmpd
  start_nginx 1 on
  w=$workers
  http_get '/fill?n=100000&bytes=100' >/dev/null ||
    fail "expected /fill to answer 200"
  wrk_start census 10 8
  sleep 0.3
  attach "$w"
  f=$dir/census.json
  expect_census_complete "$w" "worker $w's census"
  total=$census_total
  rem=$census_rem
  [ "$total" -gt 20000000 ] ||
    fail "expected the worker's heap over 20 MB at the census, saw $total B"
  ctl snapshot --json -n 5 "$w" || fail "ljmpctl snapshot failed: status $?"
  printf '%s\n' "$last_out" >"$f"
  # The old entries: a string of some 100 bytes each and its table.
  rank=$(q "$f" "$newest local s, r = newest($w), {}
    for i, t in ipairs(s.top or {}) do r[t.name] = i end
    return (r['[before profiling] string'] or 0) .. ' ' ..
      (r['[before profiling] table'] or 0)")
  case $rank in
    '1 2' | '2 1') ;;
    *) fail "expected the old strings and tables first by live bytes, saw: $(top_names "$f" "$w")" ;;
  esac
  detach "$w"
  expect_complete "$w"
  # Attached again: a census of the heap as it is now, complete too.
  attach "$w"
  expect_census_complete "$w" "the second census"
  detach "$w"
  ctl attach --no-census "$w" ||
    fail "expected 'ljmpctl attach --no-census' to succeed; status $?"
  wait_streaming "$w"
  ctl list --json || fail "ljmpctl list failed: status $?"
  printf '%s\n' "$last_out" >"$f"
  state=$(q "$f" "$newest local s = newest($w)
    return s.info.census and s.info.census.state or 'none'")
  [ "$state" = none ] || [ "$state" = CENSUS_NONE ] ||
    fail "expected no census with --no-census, saw $state"
  detach "$w"
  wrk_check census
  # Idle: armed, the stream starts at a request, and the census waits
  # for more work; the detach is served at the next request.
  ctl attach "$w" || fail "expected 'ljmpctl attach $w' to succeed; status $?"
  http_get / >/dev/null || fail "expected / to answer 200"
  wait_streaming "$w"
  ctl detach --timeout 200 "$w" || true
  http_get / >/dev/null || fail "expected / to answer 200"
  for _ in $(seq 50); do
    ctl list --json || fail "ljmpctl list failed: status $?"
    printf '%s\n' "$last_out" >"$f"
    state=$(q "$f" "$newest local s = newest($w)
      return s.info.state .. ' ' ..
        (s.info.census and s.info.census.state or 'none')")
    case $state in STREAMING*) sleep 0.1 ;; *) break ;; esac
  done
  [ "$state" = "COMPLETE CENSUS_PARTIAL" ] ||
    fail "expected a detach during the census to end the session complete, its census partial; saw $state"
  stop_nginx
  stop_ljmpd
  say "census of a worker holding 100000 old tables: complete, $total B, $rem B unplaced; again complete; partial when detached during it"
}

# nginx -s reload, then attach the new workers by pid (each reload makes
# the workers' VM anew in the master).
case_reload() {
  local w snap rank
  start_ljmpd
  start_nginx 2 off
  wrk_start reload 6 16
  sleep 0.5
  for w in $workers; do attach "$w"; done
  old=$workers
  LD_LIBRARY_PATH="$dir/lib" "$NGINX" -p "$dir/" -c "$dir/nginx.conf" \
    -e "$dir/error.log" -s reload ||
    fail "nginx -s reload failed: status $?"
  wait_workers 2
  # The old workers end gracefully: their streams end with them.
  for w in $old; do
    for _ in $(seq 50); do kill -0 "$w" 2>/dev/null || break; sleep 0.1; done
    expect_complete "$w"
  done
  for w in $workers; do attach "$w"; done
  sleep 1
  snap=$dir/snap-reload.json
  ctl snapshot --json -n 10 || fail "ljmpctl snapshot failed: status $?"
  printf '%s\n' "$last_out" >"$snap"
  for w in $workers; do
    expect_streaming "$snap" "$w"
    rank=$(store_rank "$snap" "$w")
    [ "${rank% *}" = 1 ] ||
      fail "expected store.lua:$keep_line first by live bytes in new worker $w, saw rank ${rank% *}; top: $(top_names "$snap" "$w")"
  done
  for w in $workers; do detach "$w"; done
  for w in $workers; do expect_complete "$w"; done
  wrk_check reload 32
  stop_nginx
  stop_ljmpd
  say "reloaded: old workers' sessions complete, new workers $workers attached and detached complete"
}

# ljmpd on a private ingest path, given to nginx as LJMP_INGEST (kept by
# `env LJMP_INGEST;`): attach must find it although nginx's process
# title has overwritten /proc/PID/environ.
case_private_ingest() {
  local w snap rank
  start_ljmpd "$dir/ingest.sock"
  start_nginx 1 off "$dir/ingest.sock"
  wrk_start private 3 8
  sleep 0.5
  for w in $workers; do attach "$w"; done
  sleep 1
  snap=$dir/snap-private.json
  ctl snapshot --json -n 10 || fail "ljmpctl snapshot failed: status $?"
  printf '%s\n' "$last_out" >"$snap"
  for w in $workers; do
    expect_streaming "$snap" "$w"
    rank=$(store_rank "$snap" "$w")
    [ "${rank% *}" = 1 ] ||
      fail "expected store.lua:$keep_line first by live bytes in worker $w, saw rank ${rank% *}; top: $(top_names "$snap" "$w")"
  done
  for w in $workers; do detach "$w"; done
  for w in $workers; do expect_complete "$w"; done
  wrk_check private
  stop_nginx
  stop_ljmpd
  say "ljmpd on $dir/ingest.sock: attached through LJMP_INGEST, detached complete"
}

# An idle worker: attach answers at once that it is armed, and the
# worker's next request starts its session without another attach.
case_idle_attach() {
  local w t0 t1 ms armed st
  start_ljmpd
  start_nginx 1 off
  w=$workers
  t0=$(date +%s%N)
  ctl attach "$w" ||
    fail "expected 'ljmpctl attach $w' on an idle worker to succeed (armed); status $?"
  t1=$(date +%s%N)
  ms=$(((t1 - t0) / 1000000))
  case $last_out in
    *[Aa]rmed*) ;;
    *) fail "expected attach to an idle worker to say it is armed, saw: $last_out" ;;
  esac
  [ "$ms" -lt 2000 ] ||
    fail "expected attach to an idle worker to answer within 2000 ms, it took $ms ms"
  ctl list --json || fail "ljmpctl list failed: status $?"
  printf '%s\n' "$last_out" >"$dir/list.json"
  armed=$(q "$dir/list.json" "for _, a in ipairs(j.armed or {}) do
    if a.pid == $w then return 'yes' end end return 'no'")
  [ "$armed" = yes ] || fail "expected pid $w among ljmpctl list's armed processes"
  case $(http_get /) in ok*) ;; *) fail "expected 'ok N' from /" ;; esac
  wait_streaming "$w"
  [ "$st" = STREAMING ] ||
    fail "expected a streaming session of pid $w after one request to the armed worker, saw: ${st:-none}"
  # A streaming VM stops at its next Lua call: detach under load.
  wrk_start idle 2 4
  sleep 0.3
  detach "$w"
  wrk_check idle
  expect_complete "$w"
  stop_nginx
  stop_ljmpd
  say "an idle worker: armed in $ms ms, streaming from its next request, detached complete"
}

# merged_facts FILE: of a merged snapshot's JSON, the members' pids
# (sorted), its first row of code's name and live bytes, and how many processes
# share that row: "PIDS|NAME|BYTES|SHARES".
merged_facts() {
  q "$1" "local m, p = j.merged or {}, {}
    for _, s in ipairs(j.sessions or {}) do p[#p + 1] = s.info.pid end
    table.sort(p)
    local t = {}
    for _, r in ipairs(m.top or {}) do
      if not r.name:find('[before profiling]', 1, true) then t = r break end
    end
    return table.concat(p, ' ') .. '|' .. tostring(t.name) .. '|' ..
      tostring(t.live_bytes) .. '|' .. #(t.by_process or {})"
}

# expect_merged_store WHAT PIDS [HOLDERS]: a merged snapshot of the tree
# of the master has exactly PIDS as members, the store's line first of
# the lines of code (the census's rows of what the heap held before come
# first or not, with the workers' start-up heaps), held by HOLDERS of them
# (default: each; an idle master holds none).
expect_merged_store() {
  local what=$1 want=$2 holders=${3:-} f=$dir/merged-$1.json
  local facts pids name bytes shares
  want=$(tr ' ' '\n' <<<"$want" | sort -n | tr '\n' ' ')
  want=${want% }
  [ -n "$holders" ] || holders=$(wc -w <<<"$want")
  for _ in $(seq 40); do
    ctl snapshot --tree "$master" --by-process --json -n 5 ||
      fail "ljmpctl snapshot --tree $master failed: status $?"
    printf '%s\n' "$last_out" >"$f"
    facts=$(merged_facts "$f")
    IFS='|' read -r pids name bytes shares <<<"$facts"
    [ "$pids" = "$want" ] && [ "$shares" = "$holders" ] && break
    sleep 0.1
  done
  [ "$pids" = "$want" ] ||
    fail "$what: expected the merged view's members to be $want, saw: $pids"
  [ "$name" = "@$dir/lua/store.lua:$keep_line" ] ||
    fail "$what: expected store.lua:$keep_line first in the merged view, saw: $name ($bytes B)"
  [ "$shares" = "$holders" ] ||
    fail "$what: expected the store's line held by $holders of $want, saw $shares shares"
  say "$what: merged over $pids, store.lua:$keep_line first with $bytes B live"
}

# attach --tree on the master: the workers stream (the idle master is
# armed), top, snapshot and report of the tree show one merged view; after
# a reload the new workers are attached without another command and the
# merged view is theirs; detach --tree ends every stream complete.
case_tree() {
  local w n streaming
  start_ljmpd "$dir/ingest.sock"
  start_nginx 2 off "$dir/ingest.sock"
  wrk_start tree 8 16
  sleep 0.5
  ctl attach --tree "$master" ||
    fail "expected 'ljmpctl attach --tree $master' to succeed; status $?"
  for w in $workers; do
    case $last_out in
      *"$w"*) ;;
      *) fail "expected worker $w among the tree's members: $last_out" ;;
    esac
  done
  expect_merged_store "attached" "$workers"
  ctl top --tree "$master" --once -n 3 ||
    fail "ljmpctl top --tree failed: status $?"
  case $last_out in
    *"the tree of pid $master: 2 processes"*"store.lua:$keep_line"*) ;;
    *) fail "expected top --tree to show 2 processes and store.lua:$keep_line" ;;
  esac
  old=$workers
  LD_LIBRARY_PATH="$dir/lib" LJMP_INGEST="$dir/ingest.sock" "$NGINX" \
    -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" -s reload ||
    fail "nginx -s reload failed: status $?"
  wait_workers 2
  for w in $old; do
    for _ in $(seq 50); do kill -0 "$w" 2>/dev/null || break; sleep 0.1; done
    expect_complete "$w"
  done
  # Followed: the new workers stream without another attach (the master
  # too, if its armed agent saw the reload's Lua).
  for w in $workers; do
    wait_streaming "$w" 120
    [ "$st" = STREAMING ] ||
      fail "expected new worker $w streaming after the reload without another attach, saw: ${st:-none}"
  done
  streaming=$workers
  [ "$(state_in "$dir/list.json" "$master")" = STREAMING ] &&
    streaming="$streaming $master"
  sleep 1
  expect_merged_store "after the reload" "$streaming" 2
  ctl report --tree "$master" --by-process ||
    fail "ljmpctl report --tree failed: status $?"
  for w in $workers; do
    case $last_out in
      *PROCESSES:*"pid $w "*"HEAP SUMMARY:"*"store.lua:$keep_line holds"*) ;;
      *) fail "expected report --tree to list pid $w and the store's line held" ;;
    esac
  done
  ctl detach --tree "$master" ||
    fail "expected 'ljmpctl detach --tree $master' to succeed; status $?"
  for w in $workers; do expect_complete "$w"; done
  wrk_check tree 32
  stop_nginx
  stop_ljmpd
  say "attach --tree: followed through a reload; merged top, snapshot and report"
}

# nginx started as a daemon with LJMP_SOCKET: the start-up process, which
# forks the master and exits, leaves a brief session that list counts but
# does not show; the worker streams from its first request; after a
# reload the master's new VM streams, and its new worker too, and the
# tree's merged view is of the live processes only.
case_socket_helpers() {
  local hidden n w st
  start_ljmpd "$dir/ingest.sock"
  port=$(free_port)
  write_conf 1 off on
  LD_LIBRARY_PATH="$dir/lib" LJMP_SOCKET="$dir/ingest.sock" "$NGINX" \
    -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" ||
    fail "nginx (daemon on) did not start: status $?"
  for _ in $(seq 100); do
    [ -s "$dir/nginx.pid" ] && [ "$(http_get /ping 2>/dev/null)" = pong ] &&
      break
    sleep 0.05
  done
  master=$(cat "$dir/nginx.pid")
  old=''
  wait_workers 1
  # The master runs no Lua after its start-up: like any child that has not
  # run Lua since its fork, it opens no session until it does (a reload).
  # The worker does at its first request.
  wrk_start first 1 4
  wrk_check first
  for w in $workers; do
    wait_streaming "$w"
    [ "$st" = STREAMING ] ||
      fail "expected worker $w streaming from LJMP_SOCKET, saw: ${st:-none}"
  done
  hidden=$(q "$dir/list.json" "return j.brief_hidden or 0")
  [ "$hidden" -ge 1 ] ||
    fail "expected the start-up process's session left out of list as brief, saw $hidden left out"
  ctl list --all --json || fail "ljmpctl list --all failed: status $?"
  printf '%s\n' "$last_out" >"$dir/list-all.json"
  n=$(q "$dir/list-all.json" "local n = 0 for _, s in ipairs(j.sessions) do
    if s.info.brief then n = n + 1 end end return n")
  [ "$n" = "$hidden" ] ||
    fail "expected list --all to show the $hidden brief sessions, saw $n"
  old=$workers
  LD_LIBRARY_PATH="$dir/lib" LJMP_SOCKET="$dir/ingest.sock" "$NGINX" \
    -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" -s reload ||
    fail "nginx -s reload failed: status $?"
  wait_workers 1
  wrk_start helpers 2 4
  wrk_check helpers 8
  ctl list --json || fail "ljmpctl list failed: status $?"
  printf '%s\n' "$last_out" >"$dir/list.json"
  for w in $master $workers; do
    st=$(state_in "$dir/list.json" "$w")
    [ "$st" = STREAMING ] ||
      fail "expected pid $w streaming after the reload (the master's new VM from LJMP_SOCKET, its new worker following it), saw: ${st:-none}"
  done
  expect_merged_store "LJMP_SOCKET after a reload" "$master $workers" 1
  kill -QUIT "$master"
  for _ in $(seq 100); do kill -0 "$master" 2>/dev/null || break; sleep 0.05; done
  master=''
  check_error_log
  stop_ljmpd
  say "LJMP_SOCKET: start-up session brief ($hidden left out of list); worker, then after a reload master and new worker streamed"
}

# --- main ------------------------------------------------------------------

case_name=$*
[ -x "$NGINX" ] || skip "nginx is not installed ($NGINX)"
[ -f "$MODULES/ngx_http_lua_module.so" ] ||
  skip "nginx's Lua module is not installed ($MODULES/ngx_http_lua_module.so)"
command -v wrk >/dev/null || skip "wrk is not installed"
[ "$(id -u)" = 0 ] || skip "the tests run nginx's workers as nobody: root needed"
[ -f "$NGINX_TEST_LIB" ] || fail "no patched library at $NGINX_TEST_LIB"

keep_line=$(grep -n -- '-- KEEP$' "$here/store.lua" | cut -d: -f1)
[ -n "$keep_line" ] || fail "no '-- KEEP' line in store.lua"

for case_name in "$@"; do
  dir=$(mktemp -d /tmp/ljmp-nginx-XXXXXX)
  chmod 755 "$dir" # the workers run as nobody
  mkdir "$dir/lua" "$dir/lib" "$dir/tmp"
  cp "$here/store.lua" "$dir/lua/"
  chmod 644 "$dir/lua/store.lua"
  ln -s "$(readlink -f "$NGINX_TEST_LIB")" "$dir/lib/libluajit-5.1.so.2"
  start=$(date +%s)
  "case_$case_name"
  say "passed in $(($(date +%s) - start)) s"
  [ "$dir_keep" = 0 ] && rm -rf "$dir"
  dir=''
done
