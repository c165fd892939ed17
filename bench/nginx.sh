#!/usr/bin/env bash
# nginx with its Lua module under wrk: requests/s and p99 latency on the unpatched luajit2, the patched one not attached, and attached to ljmpd.
#
# usage: [ROUNDS=N] [DURATION=S] [CONNECTIONS=C] bench/nginx.sh
# Three nginx instances (one worker each, pinned to CPU 0) run at once on
# free ports: on OpenResty's LuaJIT (Debian's luajit2 source) built
# unpatched as ljmp builds it, on the patched build, and on the patched
# build attached to a private ljmpd for the whole run.  ROUNDS rounds
# (default 15) load each for DURATION seconds (3) with wrk (one thread, C
# connections, default 16, pinned to CPU 1 with ljmpd), in a random order
# each round.  Prints the medians and the medians of the rounds' ratios
# (requests/s, p99, and the worker's CPU time per request), the events
# the attached worker streamed per request, and ljmpd's CPU time per
# million events.  Needs root, nginx, its Lua module and wrk.
# See bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-15}
secs=${DURATION:-3}
conns=${CONNECTIONS:-16}
modules=/usr/lib/nginx/modules
nginx=$(command -v nginx || echo /usr/sbin/nginx)
for need in "$nginx" "$modules/ngx_http_lua_module.so" "$(command -v wrk || echo wrk)"; do
  [ -e "$need" ] || {
    echo "nginx.sh: $need is missing (nginx, its Lua module and wrk)" >&2
    exit 1
  }
done
[ "$(id -u)" = 0 ] || {
  echo "nginx.sh: run as root (the workers run as nobody)" >&2
  exit 1
}
[ "$(nproc)" -ge 2 ] || {
  echo "nginx.sh: needs two CPUs (the worker on one, wrk on the other)" >&2
  exit 1
}

cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
flavour=build/luajit-patch/luajit2
patched=$flavour/work/src/libluajit.so
[ -f "$patched" ] || {
  echo "nginx.sh: no luajit2 flavour in build/ ($patched): LJMP_VM_FLAVOURS" >&2
  exit 1
}
# The same source unpatched, built the same way: what the patch costs.
pristine=build/bench-luajit2-pristine
if [ ! -f "$pristine/src/libluajit.so" ] ||
  [ "$pristine/src/libluajit.so" -ot "$flavour/pristine/src/luajit.c" ]; then
  echo "nginx.sh: building the unpatched luajit2 for comparison" >&2
  rm -rf "$pristine"
  cp -a "$flavour/pristine" "$pristine"
  multiarch=$(gcc -print-multiarch 2>/dev/null || true)
  env -u CFLAGS -u LDFLAGS make -C "$pristine/src" -j "$(nproc)" amalg \
    CC=cc Q= E=@: PREFIX=/usr MULTILIB="lib${multiarch:+/$multiarch}" \
    >"$pristine.log" 2>&1
fi

tmp=$(mktemp -d /tmp/ljmp-bench-nginx-XXXXXX)
chmod 755 "$tmp"
masters=()
worker_stock='' worker_patched='' worker_attached=''
ljmpd=''
cleanup() {
  set +e
  for m in "${masters[@]}"; do kill -TERM "$m" 2>/dev/null; done
  [ -n "$ljmpd" ] && kill -TERM "$ljmpd" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

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

# The handler: a few strings and a table per request, the last 10000
# responses kept (a bounded cache), so that the heap stays the same size
# however long the run.
handler='
  local b = bench
  b.n = b.n + 1
  local parts = {}
  for i = 1, 4 do parts[i] = ngx.var.uri .. ":" .. (b.n * i) end
  local body = table.concat(parts, ",")
  b.ring[b.n % 10000] = { body = body, n = b.n }
  ngx.say(body)'

# start NAME LIB: an nginx of one worker on LIB; sets port_NAME, worker_NAME.
start() {
  local name=$1 lib d port master w
  lib=$(readlink -f "$2")
  d=$tmp/$name
  mkdir -p "$d/lib" "$d/tmp"
  ln -s "$lib" "$d/lib/libluajit-5.1.so.2"
  port=$(free_port)
  cat >"$d/nginx.conf" <<EOF
$([ -f "$modules/ndk_http_module.so" ] && echo "load_module $modules/ndk_http_module.so;")
load_module $modules/ngx_http_lua_module.so;
daemon off;
master_process on;
worker_processes 1;
worker_cpu_affinity 01;
user nobody nogroup;
error_log $d/error.log notice;
pid $d/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $d/tmp/body;
  proxy_temp_path $d/tmp/proxy;
  fastcgi_temp_path $d/tmp/fastcgi;
  uwsgi_temp_path $d/tmp/uwsgi;
  scgi_temp_path $d/tmp/scgi;
  lua_package_path "/usr/share/lua/5.1/?.lua;;";
  init_by_lua_block { bench = { n = 0, ring = {} } }
  server {
    listen 127.0.0.1:$port;
    location / { content_by_lua_block { $handler } }
  }
}
EOF
  LD_LIBRARY_PATH=$d/lib taskset -c 0 "$nginx" -p "$d/" -c "$d/nginx.conf" \
    -e "$d/error.log" &
  master=$!
  masters+=("$master")
  w=''
  for _ in $(seq 100); do
    w=$(pgrep -P "$master" | head -n 1) || true
    [ -n "$w" ] && grep -qF "$lib" "/proc/$w/maps" 2>/dev/null && break
    w=''
    sleep 0.05
  done
  [ -n "$w" ] || {
    echo "nginx.sh: nginx ($name) has no worker on $lib" >&2
    tail -n 20 "$d/error.log" >&2
    exit 1
  }
  if grep -i libluajit "/proc/$w/maps" | grep -qvF "$lib"; then
    echo "nginx.sh: worker $w ($name) maps another LuaJIT too" >&2
    exit 1
  fi
  printf -v "port_$name" '%s' "$port"
  printf -v "worker_$name" '%s' "$w"
}

# load NAME SECONDS: wrk on CPU 1 against NAME; prints requests/s, the
# p99 latency in ms, and the worker's CPU time per request in us (from
# /proc/PID/schedstat: time on a CPU, in ns; the worker has one thread).
load() {
  local port_var=port_$1 worker_var=worker_$1 ns0 ns1
  ns0=$(cut -d' ' -f1 "/proc/${!worker_var}/schedstat")
  taskset -c 1 wrk -t1 -c"$conns" -d"$2s" --latency \
    "http://127.0.0.1:${!port_var}/" >"$tmp/wrk.txt" 2>&1
  ns1=$(cut -d' ' -f1 "/proc/${!worker_var}/schedstat")
  if grep -E 'Socket errors|Non-2xx' "$tmp/wrk.txt" >&2; then
    echo "nginx.sh: wrk against $1 saw errors" >&2
    exit 1
  fi
  awk -v ns=$((ns1 - ns0)) '/^Requests\/sec:/ { rps = $2 }
    / requests in / { n = $1 }
    $1 == "99%" { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
      p99 = v * (u == "us" ? 0.001 : u == "s" ? 1000 : 1) }
    END { printf "%s %.3f %.3f\n", rps, p99, ns / 1000 / n }' "$tmp/wrk.txt"
}

ctl() { build/client/ljmpctl -s "$tmp/control.sock" "$@"; }

# ljmpd's CPU time so far, in clock ticks (utime + stime).
ljmpd_ticks() { sed 's/.*) //' "/proc/$ljmpd/stat" | awk '{ print $12 + $13 }'; }

# The attached worker's events so far (allocations, reallocations, frees).
events() {
  ctl list --json >"$tmp/list.json"
  build/luajit-patch/work/src/luajit -e "
    local s = io.open('$tmp/list.json'):read('*a')
    local n = 0
    for pid, a, r, f in s:gmatch('\"pid\":(%d+),.-\"alloc_events\":(%d+),\"realloc_events\":(%d+),\"free_events\":(%d+)') do
      if tonumber(pid) == $worker_attached then n = a + r + f end
    end
    print(n)"
}

# ljmpd listens on the default ingest socket: nginx's process title hides
# an LJMP_INGEST from ljmpd's check.
taskset -c 1 build/daemon/ljmpd -q -c "$tmp/control.sock" 2>"$tmp/ljmpd.log" &
ljmpd=$!
for _ in $(seq 50); do [ -S "$tmp/control.sock" ] && break; sleep 0.1; done
[ -S "$tmp/control.sock" ] || {
  cat "$tmp/ljmpd.log" >&2
  exit 1
}

start stock "$pristine/src/libluajit.so"
start patched "$patched"
start attached "$patched"
echo "nginx.sh: workers: stock $worker_stock, patched $worker_patched," \
  "attached $worker_attached (CPU 0); wrk and ljmpd on CPU 1" >&2
# Warm-up (the JIT's traces), and the attach, which needs Lua to run.
load stock 1 >/dev/null
load patched 1 >/dev/null
load attached 3 >/dev/null &
sleep 0.5
ctl attach "$worker_attached" >&2
wait $!

labels=(stock patched attached)
names=("luajit2 unpatched" "patched, not attached" "patched, attached")
: >"$tmp/rounds"
ticks=0
evs=0
reqs=0
echo "== nginx, one worker: $rounds rounds of ${secs}s, $conns connections, each round in a random order" >&2
for r in $(seq "$rounds"); do
  declare -A rps=() p99=() cpu=()
  for i in $(shuf -e 0 1 2); do
    name=${labels[$i]}
    if [ "$name" = attached ]; then
      t0=$(ljmpd_ticks)
      e0=$(events)
    fi
    out=$(load "$name" "$secs")
    read -r "rps[$i]" "p99[$i]" "cpu[$i]" <<<"$out"
    if [ "$name" = attached ]; then
      ticks=$((ticks + $(ljmpd_ticks) - t0))
      evs=$((evs + $(events) - e0))
      reqs=$(awk -v a="$reqs" -v b="${rps[$i]}" -v s="$secs" 'BEGIN { printf "%d", a + b * s }')
    fi
  done
  echo "${rps[0]} ${rps[1]} ${rps[2]} ${p99[0]} ${p99[1]} ${p99[2]}" \
    "${cpu[0]} ${cpu[1]} ${cpu[2]}" >>"$tmp/rounds"
  echo "round $r: requests/s ${rps[0]} ${rps[1]} ${rps[2]};" \
    "p99 ms ${p99[0]} ${p99[1]} ${p99[2]};" \
    "worker us/request ${cpu[0]} ${cpu[1]} ${cpu[2]}" >&2
done
# Detach under load (an idle VM stops at its next Lua call): the session
# must end complete, the VM's totals equal to ljmpd's.
load attached 2 >/dev/null &
sleep 0.5
ctl detach "$worker_attached" >&2
wait $!

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
col() { awk -v c="$1" '{ print $c }' "$tmp/rounds" | median; }
ratio() { awk -v a="$1" -v b="$2" '{ printf "%.3f\n", $a / $b }' "$tmp/rounds" | median; }
range() {
  awk -v a="$1" -v b="$2" '{ printf "%.3f\n", $a / $b }' "$tmp/rounds" | sort -n |
    awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'
}
for i in 0 1 2; do
  printf '%-24s %10s requests/s  p99 %7s ms  worker %6s us/request\n' \
    "${names[$i]}" "$(col $((i + 1)))" "$(col $((i + 4)))" "$(col $((i + 7)))"
done
echo "ratios, medians of the rounds' own (range):"
echo "  requests/s, not attached / unpatched: $(ratio 2 1) ($(range 2 1))   target >= 0.98"
echo "  requests/s, attached / not attached:  $(ratio 3 2) ($(range 3 2))   target >= 0.85"
echo "  p99, not attached / unpatched: $(ratio 5 4); attached / not attached: $(ratio 6 5)"
# What the worker can serve on its CPU, from its CPU time per request:
# the ratio that noise from other processes hardly moves.
echo "  worker's capacity (1 / CPU per request), not attached / unpatched: $(ratio 7 8) ($(range 7 8))"
echo "  worker's capacity, attached / not attached: $(ratio 8 9) ($(range 8 9))"
hz=$(getconf CLK_TCK)
awk -v t="$ticks" -v hz="$hz" -v e="$evs" -v r="$reqs" 'BEGIN {
  printf "attached: %.1f events per request; ljmpd CPU %.3f s per million events (%d events, %.2f s)\n",
    e / r, t / hz / (e / 1e6), e, t / hz }'
