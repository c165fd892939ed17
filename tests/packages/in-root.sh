#!/bin/bash
# Inside a throw-away copy of the system: installs ljmp's .debs, checks what they put where and that they work, removes and purges them.
# usage: in-root.sh DIR FLAVOURS   (DIR holds the .debs and embed.c)
set -eu

dir=$1
flavours=${2//;/ }
cd "$dir"

fail() {
  echo "FAILED: $*" >&2
  exit 1
}
step() {
  printf '== %s\n' "$*"
}
has_flavour() {
  case " $flavours " in *" $1 "*) return 0 ;; esac
  return 1
}

module=/usr/lib/nginx/modules/ngx_http_lua_module.so
nginx_packages=(nginx-core libnginx-mod-http-lua libluajit2-5.1-2 lua-resty-core)
ours=(ljmp)
for f in $flavours; do
  ours+=("ljmp-vm-$f")
done

# What must not change: Debian's packages that use or hold a LuaJIT, their
# files and their state.
system_state() {
  local p
  for p in "${nginx_packages[@]}" libluajit-5.1-2; do
    dpkg-query -W -f='${Package} ${Version} ${Status}\n' "$p" 2>/dev/null ||
      echo "$p absent"
  done
  dpkg --verify "${nginx_packages[@]}" 2>&1 || true
  sha256sum "$module" /usr/lib/*/libluajit-5.1.so.2* 2>/dev/null || true
  ls -l /usr/lib/*/libluajit-5.1.so.2* 2>&1 || true
}
# Every file and link the packages hold, and the directories of ours.
our_paths() {
  local d
  for d in ./*.deb; do
    dpkg-deb --fsys-tarfile "$d" | tar -t | grep -v '/$' | sed 's|^\./|/|'
  done
  echo /usr/lib/ljmp /usr/include/ljmp /usr/share/ljmp /usr/share/doc/ljmp
  for f in $flavours; do
    echo "/usr/share/doc/ljmp-vm-$f"
  done
}

system_state >state.before
if has_flavour luajit2; then
  line=$(ldd "$module" | grep 'libluajit-5.1.so.2 => /') ||
    fail "nginx's Lua module loads no LuaJIT"
  case "$line" in
  */ljmp/*) fail "nginx's Lua module loads ljmp's VM to begin with: $line" ;;
  esac
fi

step "dpkg -i"
dpkg -i ./*.deb >dpkg-install.log 2>&1 || {
  cat dpkg-install.log
  fail "dpkg -i"
}
for p in "${ours[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p")" = "install ok installed" ] ||
    fail "$p is not installed"
done
system_state >state.installed
diff -u state.before state.installed ||
  fail "installing ljmp changed Debian's nginx or LuaJIT packages"

step "ljmp: the daemon, its units, user and socket directory"
for f in /usr/sbin/ljmpd /usr/bin/ljmpctl /usr/bin/ljmp-run; do
  [ -x "$f" ] || fail "no $f"
done
/usr/sbin/ljmpd --help >/dev/null || fail "ljmpd --help"
/usr/bin/ljmpctl help >/dev/null || fail "ljmpctl help"
grep -qx 'ExecStart=/usr/sbin/ljmpd -q' /usr/lib/systemd/system/ljmpd.service ||
  fail "ljmpd.service does not run /usr/sbin/ljmpd"
getent passwd ljmp >/dev/null || fail "no user ljmp (systemd-sysusers)"
getent group ljmp >/dev/null || fail "no group ljmp"
[ "$(stat -c '%a %U %G' /run/ljmp)" = "755 root ljmp" ] ||
  fail "/run/ljmp: $(stat -c '%a %U %G' /run/ljmp 2>&1)"
systemd-analyze verify ljmpd.service ljmpd.socket ljmpd-control.socket ||
  fail "systemd-analyze verify of ljmpd's units"
# As an operator would; the purge must remove these links.
systemctl enable ljmpd.service >/dev/null 2>&1 || fail "systemctl enable"
[ -L /etc/systemd/system/sockets.target.wants/ljmpd.socket ] ||
  fail "enabling ljmpd.service enables no socket"

for f in $flavours; do
  step "ljmp-vm-$f: library, interpreter, headers, pkg-config"
  lib=/usr/lib/ljmp/$f/libluajit-5.1.so.2
  if [ ! -f "$lib" ] || [ -L "$lib" ]; then fail "no file $lib"; fi
  readelf -d "$lib" | grep -q 'SONAME.*\[libluajit-5.1.so.2\]' ||
    fail "$lib: wrong soname"
  [ "$(readlink "/usr/lib/ljmp/$f/libluajit-5.1.so")" = libluajit-5.1.so.2 ] ||
    fail "no link libluajit-5.1.so -> libluajit-5.1.so.2"
  out=$("ljmp-$f" -e 'assert(type(misc.memprof.start) == "function") print(jit.version)') ||
    fail "ljmp-$f does not run"
  echo "ljmp-$f: $out"
  for h in lua.h luaconf.h lualib.h lauxlib.h luajit.h lua.hpp lmemprof.h; do
    [ -f "/usr/include/ljmp/$f/$h" ] || fail "no /usr/include/ljmp/$f/$h"
  done
  flags=$(pkg-config --cflags --libs "ljmp-$f") || fail "pkg-config ljmp-$f"
  echo "pkg-config: $flags"
  # shellcheck disable=SC2086 # the flags are words
  cc -o "embed-$f" embed.c $flags || fail "an embedder does not build with ljmp-$f.pc"
  out=$("./embed-$f") || fail "the embedder of ljmp-$f"
  echo "$out"
  echo "$out" | grep -qx "library $lib" ||
    fail "the embedder did not load $lib (RUNPATH)"
  # The jit.* modules of this VM, for -jv and -jdump.
  export LUA_PATH="/usr/share/ljmp/$f/?.lua;;"
  [ "$("ljmp-$f" -e 'print(package.searchpath("jit.vmdef", package.path))')" = \
    "/usr/share/ljmp/$f/jit/vmdef.lua" ] || fail "no jit.vmdef in /usr/share/ljmp/$f"
  "ljmp-$f" -jv -e 'local x = 0 for i = 1, 300 do x = x + i end' 2>&1 |
    grep -q 'TRACE *1 ' ||
    fail "ljmp-$f -jv with /usr/share/ljmp/$f"
  unset LUA_PATH
done

step "ljmp-run"
ljmp-run --help | grep -q '^usage: ljmp-run' || fail "ljmp-run --help"
default=luajit
has_flavour luajit2 && default=luajit2
# shellcheck disable=SC2016 # the command's own shell expands it
[ "$(env -u LD_LIBRARY_PATH ljmp-run sh -c 'echo "$LD_LIBRARY_PATH"')" = \
  "/usr/lib/ljmp/$default" ] || fail "ljmp-run's default flavour is not $default"
for f in $flavours; do
  # shellcheck disable=SC2016
  [ "$(LD_LIBRARY_PATH=/opt/x ljmp-run --flavour "$f" sh -c 'echo "$LD_LIBRARY_PATH"')" = \
    "/usr/lib/ljmp/$f:/opt/x" ] || fail "ljmp-run --flavour $f: LD_LIBRARY_PATH"
done
if ljmp-run --flavour luajit3 true 2>err; then fail "ljmp-run took flavour luajit3"; fi
grep -q "unknown flavour 'luajit3'" err || fail "ljmp-run: $(cat err)"
rc=0
ljmp-run 2>err || rc=$?
if [ "$rc" -ne 2 ] || ! grep -q 'no command given' err; then
  fail "ljmp-run without a command: $rc $(cat err)"
fi
rc=0
ljmp-run no-such-command-here 2>err || rc=$?
if [ "$rc" -ne 127 ] ||
  ! grep -q 'no-such-command-here: command not found' err; then
  fail "ljmp-run of a missing command: $rc $(cat err)"
fi

if has_flavour luajit2; then
  step "nginx's Lua module on the patched luajit2"
  ljmp-run ldd "$module" | grep -q 'libluajit-5.1.so.2 => /usr/lib/ljmp/luajit2/libluajit-5.1.so.2' ||
    fail "under ljmp-run, nginx's Lua module does not load /usr/lib/ljmp/luajit2"
  ldd "$module" | grep -q 'libluajit-5.1.so.2 => /usr/lib/ljmp/' &&
    fail "nginx's Lua module loads ljmp's VM without ljmp-run"
  # nginx runs its init_by_lua (which needs resty.core from Debian's
  # lua-resty-core) and says which VM ran it; os.exit ends nginx there.
  mkdir -p ngx
  cat >ngx/nginx.conf <<EOF
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module $module;
pid $dir/ngx/nginx.pid;
error_log stderr;
events {}
http {
  init_by_lua_block {
    local f = assert(io.open("$dir/ngx/vm", "w"))
    f:write(type(misc) == "table" and type(misc.memprof) == "table" and "patched" or "stock")
    f:close()
    os.exit(0)
  }
}
EOF
  for how in plain ljmp-run; do
    rm -f ngx/vm
    run=()
    [ "$how" = plain ] || run=(ljmp-run --flavour luajit2)
    timeout 30 "${run[@]}" nginx -p "$dir/ngx" -c "$dir/ngx/nginx.conf" \
      -g 'daemon off;' || fail "nginx ($how)"
    echo "nginx ($how): $(cat ngx/vm)"
    want=stock
    [ "$how" = plain ] || want=patched
    [ "$(cat ngx/vm)" = "$want" ] || fail "nginx ($how) ran the $(cat ngx/vm) VM"
  done

  step "the systemd drop-in for nginx"
  dropin=/usr/share/ljmp/systemd/ljmp-luajit2.conf
  grep -qx 'Environment=LD_LIBRARY_PATH=/usr/lib/ljmp/luajit2' "$dropin" ||
    fail "$dropin: no LD_LIBRARY_PATH"
  grep -qx 'Environment=LJMP_INGEST=/run/ljmp/ingest.sock' "$dropin" ||
    fail "$dropin: no LJMP_INGEST"
  mkdir -p /etc/systemd/system/nginx.service.d
  ln -s "$dropin" /etc/systemd/system/nginx.service.d/ljmp.conf
  systemd-analyze verify nginx.service >verify.log 2>&1 || {
    cat verify.log
    fail "systemd-analyze verify nginx.service with the drop-in"
  }
  if grep ljmp verify.log; then fail "systemd-analyze: the drop-in"; fi
fi

step "dpkg -r"
dpkg -r "${ours[@]}" >dpkg-remove.log 2>&1 || {
  cat dpkg-remove.log
  fail "dpkg -r"
}
left=$(our_paths | grep -v '^/run/' | while read -r p; do
  if [ -e "$p" ] || [ -L "$p" ]; then echo "$p"; fi
done)
[ -z "$left" ] || fail "left after removal: $left"

step "dpkg -P"
dpkg -P "${ours[@]}" >dpkg-purge.log 2>&1 || {
  cat dpkg-purge.log
  fail "dpkg -P"
}
for p in "${ours[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed; then
    fail "$p still known to dpkg: $(dpkg-query -W -f='${Status}' "$p")"
  fi
done
left=$( (
  our_paths
  echo /run/ljmp
  echo /etc/systemd/system/sockets.target.wants/ljmpd.socket
  echo /etc/systemd/system/sockets.target.wants/ljmpd-control.socket
  echo /etc/systemd/system/multi-user.target.wants/ljmpd.service
  echo /etc/systemd/system/nginx.service.d
) | while read -r p; do
  if [ -e "$p" ] || [ -L "$p" ]; then echo "$p"; fi
done)
[ -z "$left" ] || fail "left after purge: $left"
system_state >state.after
diff -u state.before state.after ||
  fail "ljmp's packages changed Debian's nginx or LuaJIT packages"
echo "in-root: installed, used, removed and purged"
