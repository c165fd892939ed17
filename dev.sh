#!/usr/bin/env bash
# Sets up, builds and runs ljmp: `./dev.sh demo` (the main job) and
# `./dev.sh test` (the whole test suite); both install what is missing.
set -euo pipefail
cd "$(dirname "$0")"

# Debian 12 packages the build, the tests and the fuzzer need.
PACKAGES=(
  build-essential cmake pkg-config clang libclang-rt-14-dev dpkg-dev patch
  libcunit1-dev libevent-dev libprotobuf-c-dev protobuf-c-compiler
    libsystemd-dev systemd libncurses-dev tmux
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

demo() {
  install_deps
  build build
  local stream=build/demo.bin
  log "profiling examples/demo.lua on the patched LuaJIT into $stream"
  build/luajit-patch/work/src/luajit \
    -e "assert(misc.memprof.start('$stream'))" examples/demo.lua
  log "ljmpctl report --human-readable $stream"
  build/client/ljmpctl report --human-readable "$stream" >build/demo.txt
  head -n 12 build/demo.txt
  echo "..."
  sed -n '/^HEAP SUMMARY:/,$p' build/demo.txt | head -n 12
  log "full report in build/demo.txt"
}

run_tests() {
  install_deps
  log "build (gcc, -Werror) and ctest"
  build build
  (cd build && ctest --output-on-failure)
  log "build (clang, ASan + UBSan, libFuzzer) and ctest: unit tests + fuzz run"
  CC=clang build build-san -DLJMP_SANITIZE=ON -DLJMP_FUZZ=ON -DLJMP_LUAJIT=OFF \
    -DLJMP_VM_BIN="$PWD/build/luajit-patch/work/src/luajit"
  (cd build-san && ctest --output-on-failure)
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
