# CPack settings: the .deb packages ljmp (daemon, client, units, ljmp-run) and ljmp-vm-<flavour> (one per patched VM).
# `cmake --build BUILD --target package`, or `cpack` in BUILD, writes them.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ljmp)
set(CPACK_PACKAGE_VENDOR "the ljmp developers")
set(CPACK_PACKAGE_CONTACT ${LJMP_PACKAGE_MAINTAINER})
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY: CPack would put it before each
# package's own first line (its synopsis), below.
# Packages install under /usr whatever the build's CMAKE_INSTALL_PREFIX:
# the paths that name the prefix are written at install time.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Installed binaries and libraries lose their symbols in the packages.
set(CPACK_STRIP_FILES TRUE)

# One package per component; anything installed without a component
# (ljmpd, ljmpctl, the units) is ljmp's (CMAKE_INSTALL_DEFAULT_COMPONENT_NAME).
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL ljmp)
foreach(flavour IN LISTS LJMP_VM_BUILT)
  list(APPEND CPACK_COMPONENTS_ALL vm-${flavour})
endforeach()

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${LJMP_PACKAGE_MAINTAINER})
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The maintainer scripts keep their 0755, other control files get 0644.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)

# ljmp: nothing it holds is where a Debian package puts files, and it
# neither provides nor conflicts with anything, so it installs beside
# nginx, Debian's luajit or luajit2 without removing them.
set(CPACK_DEBIAN_LJMP_PACKAGE_NAME ljmp)
set(CPACK_DEBIAN_LJMP_PACKAGE_SECTION devel)
# The postinst runs systemd-sysusers and systemd-tmpfiles.
set(CPACK_DEBIAN_LJMP_PACKAGE_DEPENDS
    "systemd | systemd-sysusers, systemd | systemd-tmpfiles")
set(CPACK_DEBIAN_LJMP_PACKAGE_RECOMMENDS "ljmp-vm-luajit2 | ljmp-vm-luajit")
set(CPACK_DEBIAN_LJMP_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/postinst
    ${PROJECT_SOURCE_DIR}/packaging/prerm
    ${PROJECT_SOURCE_DIR}/packaging/postrm)
set(CPACK_COMPONENT_LJMP_DESCRIPTION
"live memory profiler for LuaJIT
ljmp shows, while a LuaJIT program runs, where it allocates memory and
which lines hold it, without restarting the program. A patched LuaJIT VM
(packages ljmp-vm-luajit and ljmp-vm-luajit2) streams its memory-profiler
events to ljmpd, which keeps a live heap map per process; ljmpctl attaches
to programs, watches them and prints reports.
.
This package holds ljmpd with its socket-activated systemd units, ljmpctl,
ljmp-run (runs a program on a patched VM instead of the system's) and
systemd drop-ins that run nginx or OpenResty on one.")

foreach(flavour IN LISTS LJMP_VM_BUILT)
  string(TOUPPER "vm-${flavour}" comp)
  if(flavour STREQUAL "luajit2")
    set(what "OpenResty's LuaJIT")
    set(whole "OpenResty's branch of LuaJIT (Debian's luajit2)")
    set(who "nginx's Lua module")
  else()
    set(what "LuaJIT")
    set(whole "LuaJIT (Debian's ${flavour} source)")
    set(who "a program linked with the system's LuaJIT")
  endif()
  set(CPACK_DEBIAN_${comp}_PACKAGE_SECTION interpreters)
  set(CPACK_DEBIAN_${comp}_PACKAGE_SUGGESTS ljmp)
  set(CPACK_COMPONENT_${comp}_DESCRIPTION
"${what} with ljmp's memory profiler
${whole},
patched to stream its memory-profiler events to ljmpd (package ljmp) and
to start or stop when ljmpctl attaches or detaches.
.
Installed beside the system's VM, never over it: the library in
/usr/lib/ljmp/${flavour}/ (load it in ${who}
with ljmp-run or LD_LIBRARY_PATH), the interpreter as ljmp-${flavour},
the headers with lmemprof.h in /usr/include/ljmp/${flavour}/ and
ljmp-${flavour}.pc for programs that embed it.")
endforeach()

include(CPack)
