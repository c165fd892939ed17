#!/usr/bin/env bash
# Sets up, builds and runs ljmp: `./dev.sh demo` (the main job) and
# `./dev.sh test` (the whole test suite); both install what is missing.
set -euo pipefail
cd "$(dirname "$0")"

# Debian 12 packages the build, the tests and the fuzzer need.
PACKAGES=(
  build-essential cmake pkg-config clang libclang-rt-14-dev dpkg-dev patch
  libcunit1-dev libevent-dev libprotobuf-c-dev protobuf-c-compiler
      libsystemd-dev libelf-dev systemd libncurses-dev tmux libseccomp-dev
  nginx-core libnginx-mod-http-lua wrk lintian zlib1g-dev golang-go jq
  libcurl4-openssl-dev python3 libxml2-utils librsvg2-bin
)
JOBS=$(nproc 2>/dev/null || echo 2)

log() { printf '==> %s\n' "$*" >&2; }

# The LuaJIT source comes from Debian's source packages: apt needs deb-src.
enable_deb_src() {
  local f=/etc/apt/sources.list.d/debian.sources
  if [ -f "$f" ]; then
    grep -q '^Types:.*deb-src' "$f" && return 1
    log "enabling deb-src entries in $f"
    "${sudo[@]}" sed -i 's/^Types: deb$/Types: deb deb-src/' "$f"
  else
    grep -qs '^deb-src ' /etc/apt/sources.list && return 1
    log "enabling deb-src entries in /etc/apt/sources.list"
    sed -n 's/^deb /deb-src /p' /etc/apt/sources.list |
      "${sudo[@]}" tee -a /etc/apt/sources.list >/dev/null
  fi
  return 0
}

install_deps() {
  local missing=() update=0
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  enable_deb_src && update=1
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] && update=1
  [ "$update" -eq 1 ] && "${sudo[@]}" apt-get update -qq
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"
}

# build DIR [cmake options...]: configure (cheap when nothing changed, and
# options given here always win over a tree's cache), build incrementally.
build() {
  local dir=$1
  shift
  cmake -S . -B "$dir" -DLJMP_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS" >/dev/null
}

# The live demo: ljmpd on private sockets, a pretend server on the patched
# VM, attached by pid, watched with `ljmpctl top`, detached, reported.
demo() {
  install_deps
  build build
  local dir lj=build/luajit-patch/work/src/luajit ctl=build/client/ljmpctl
  dir=$(mktemp -d /tmp/ljmp-demo-XXXXXX)
  local ljmpd_pid='' app_pid=''
  # shellcheck disable=SC2064
  trap "kill \${app_pid:-} \${ljmpd_pid:-} 2>/dev/null || true; rm -rf '$dir'" \
    EXIT
  log "starting ljmpd on private sockets in $dir (log: build/demo-ljmpd.log)"
  build/daemon/ljmpd -i "$dir/ingest.sock" -c "$dir/control.sock" \
    2>build/demo-ljmpd.log &
  ljmpd_pid=$!
  export LJMP_CONTROL=$dir/control.sock
  for _ in $(seq 50); do [ -S "$LJMP_CONTROL" ] && break; sleep 0.1; done
  # The JIT off, so every allocation is named by its line (with it on,
  # allocations in compiled code are named after the trace that holds them).
  log "starting examples/server.lua on the patched LuaJIT (not profiled yet)"
  LJMP_INGEST=$dir/ingest.sock "$lj" -joff examples/server.lua 60 "$dir/stop" \
    >build/demo-server.log &
  app_pid=$!
  sleep 1
  log "ljmpctl attach $app_pid"
  "$ctl" attach "$app_pid"
  log "ljmpctl top $app_pid, five snapshots a second apart"
  "$ctl" top "$app_pid" --count 5 -n 12
  log "ljmpctl detach $app_pid"
  "$ctl" detach "$app_pid"
  local pid=$app_pid
  touch "$dir/stop"
  wait "$app_pid" || true
  app_pid=''
  log "ljmpctl report --human-readable $pid (the session is kept after the"
  log "program ended; full report in build/demo.txt)"
  "$ctl" report --human-readable "$pid" >build/demo.txt
  head -n 14 build/demo.txt
  echo "..."
  sed -n '/^HEAP SUMMARY:/,$p' build/demo.txt | head -n 10
  kill "$ljmpd_pid"
  wait "$ljmpd_pid" || true
  ljmpd_pid=''
}

run_tests() {
  install_deps
  log "build (gcc, -Werror, the VMs also with ASan) and ctest"
  build build -DLJMP_VM_ASAN=ON
  run_ctest build
  log "build (clang, ASan + UBSan, libFuzzer) and ctest: unit tests + fuzz run"
  CC=clang build build-san -DLJMP_SANITIZE=ON -DLJMP_FUZZ=ON -DLJMP_LUAJIT=OFF \
    -DLJMP_VM_BIN="$PWD/build/luajit-patch/work/src/luajit"
  run_ctest build-san
  log "build (clang, ThreadSanitizer): the core's tests (its worker thread),"
  log "ljmpd's modules' and the daemon's (their feed threads)"
  CC=clang cmake -S . -B build-tsan -DLJMP_WERROR=ON -DLJMP_TSAN=ON \
    -DLJMP_LUAJIT=OFF -DLJMP_VM_BIN="$PWD/build/luajit-patch/work/src/luajit" \
    >/dev/null
  cmake --build build-tsan -j "$JOBS" --target test_core test_units test_daemon \
    >/dev/null
  tsan_run test_core
  tsan_run test_units
  tsan_run test_daemon 2 4096
}

# ctest in a build tree, then the list of what it skipped: ctest lists
# the entries whose every test was skipped (status 77, "did not run"); a
# test skipped in an entry that ran is in that entry's log.  A failed
# test still fails the run, once the list is out.
run_ctest() {
  local dir=$1 rc=0
  (cd "$dir" && ctest --output-on-failure) || rc=$?
  list_skipped "$dir" "$dir/Testing/Temporary/LastTest.log"
  return "$rc"
}

# list_skipped WHAT LOG: the tests LOG's programs skipped (their
# "skipped: SUITE: TEST: WHY" lines, after CUnit's summary), each with the
# ctest entry it ran in.
list_skipped() {
  local what=$1 log=$2 lines=''
  [ -f "$log" ] && lines=$(awk -v entry="$what" '
    /^[0-9]+\/[0-9]+ Test: / { entry = $3 }
    /^skipped: / { print "    " entry ": " substr($0, 10) }' "$log")
  if [ -z "$lines" ]; then
    log "tests skipped in $what: none"
  else
    log "tests skipped in $what (they could not run here):"
    printf '%s\n' "$lines" >&2
  fi
}

# Runs a test of the ThreadSanitizer build; a report from it or from a
# process it started (ljmpd) fails the run.  Status 77: every test it ran
# was skipped.
tsan_run() {
  local name=$1 log=build-tsan/$1.log rc=0
  shift
  rm -f build-tsan/tsan-report.*
  TSAN_OPTIONS="halt_on_error=1 log_path=$PWD/build-tsan/tsan-report" \
    "build-tsan/tests/$name" "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
    tail -n 60 "$log"
    echo "ThreadSanitizer run of $name failed: $log" >&2
    exit 1
  fi
  if compgen -G 'build-tsan/tsan-report.*' >/dev/null; then
    head -n 80 build-tsan/tsan-report.*
    echo "ThreadSanitizer reported on $name: build-tsan/tsan-report.*" >&2
    exit 1
  fi
  list_skipped "ThreadSanitizer's $name" "$log"
}

case "${1:-}" in
  demo) demo ;;
  test) run_tests ;;
  deps) install_deps ;;
  *)
    echo "usage: $0 demo|test|deps" >&2
    exit 1
    ;;
esac
