/*
** ljmp memory profiler: the misc.memprof library.
** New VM file of ljmp's luajit-patch (not part of LuaJIT).
**
**   misc.memprof.start(path)                 profile to a file
**   misc.memprof.start{socket = path,        stream to ljmpd
**                      max_stall_ms = n}     (optional bound on blocking)
**     -> true | nil, message, errno
**   misc.memprof.stop()  -> true | nil, message, errno
**   misc.memprof.status() -> running (boolean), message and errno of the
**                            last failure (a writer error, LJMP_SOCKET)
*/

#define lib_misc_c
#define LUA_LIB

#include <errno.h>
#include <string.h>

#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

#include "lj_obj.h"
#include "lj_ljmp.h"
#include "lj_memprof.h"

static int push_failure(lua_State *L, const char *where, int err)
{
  lua_pushnil(L);
  if (where)
    lua_pushfstring(L, "%s: %s", where, strerror(err));
  else
    lua_pushstring(L, strerror(err));
  lua_pushinteger(L, err);
  return 3;
}

static int push_misuse(lua_State *L, const char *msg)
{
  lua_pushnil(L);
  lua_pushstring(L, msg);
  lua_pushinteger(L, EINVAL);
  return 3;
}

static int memprof_start(lua_State *L)
{
  LjmpError e;
  const char *where;
  int r;
  if (lua_istable(L, 1)) {
    int stall;
    lua_getfield(L, 1, "socket");
    lua_getfield(L, 1, "max_stall_ms");
    where = lua_tostring(L, -2);
    luaL_argcheck(L, where != NULL, 1, "socket = PATH expected");
    stall = (int)luaL_optinteger(L, -1, 0);
    r = lj_ljmp_start_socket(L, where, stall, &e);
  } else {
    where = luaL_checkstring(L, 1);
    r = lj_ljmp_start_file(L, where, &e);
  }
  if (r == 0) {
    lua_pushboolean(L, 1);
    return 1;
  }
  if (e.running) return push_misuse(L, "profiler is running already");
  return push_failure(L, where, e.err);
}

static int memprof_stop(lua_State *L)
{
  int r = lj_memprof_stop(L);
  if (r == LJ_MEMPROF_OK) {
    lua_pushboolean(L, 1);
    return 1;
  }
  if (r == LJ_MEMPROF_ERRRUN) return push_misuse(L, "profiler is not running");
  if (r == LJ_MEMPROF_ERRUSE) return push_misuse(L, "profiler misuse");
  return push_failure(L, NULL, errno);
}

static int memprof_status(lua_State *L)
{
  int err = lj_memprof_error();
  if (err == 0) err = lj_ljmp_env_error();
  lua_pushboolean(L, lj_memprof_running());
  if (err == 0) return 1;
  lua_pushstring(L, strerror(err));
  lua_pushinteger(L, err);
  return 3;
}

static const luaL_Reg memprof_lib[] = {
  {"start", memprof_start},
  {"stop", memprof_stop},
  {"status", memprof_status},
  {NULL, NULL}
};

LUALIB_API int luaopen_misc(lua_State *L)
{
  luaL_register(L, "misc.memprof", memprof_lib);
  lua_getglobal(L, "misc");
  return 1;
}
