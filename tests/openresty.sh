#!/bin/sh
# Builds ljmp's VM patch on OpenResty's LuaJIT (Debian's luajit2) in a
# build tree of its own and runs the VM and daemon tests against it.
# usage: openresty.sh SOURCE_DIR BUILD_DIR
set -e
src=$1
dir=$2
cmake -S "$src" -B "$dir" -DLUAJIT_PACKAGE=luajit2 -DLJMP_WERROR=ON >/dev/null
cmake --build "$dir" -j "$(nproc)" --target test_vm test_embed test_daemon \
  >/dev/null
"$dir/tests/test_vm"
"$dir/tests/test_embed"
"$dir/tests/test_daemon"
