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
# ljmpd's own behaviour (control, limits, budgets, peers) is the same
# whichever VM streams: the daemon tests run here are those where the VM
# takes part (streams, attach, census, stacks, stalls).
LJMP_TEST_ONLY="sites, report and record|two VMs at once|VM killed mid-stream\
|record from the middle|a pipe VM's wake-asks|a VM's census\
|a VM waits no longer than its stall bound\
|a VM waits for its C symbols no longer than told|attach and detach\
|attach --no-census|an idle VM is armed\
|attach after the title overwrote the environment|callers of a site\
|a slow record file slows its VM and loses nothing" "$dir/tests/test_daemon"
