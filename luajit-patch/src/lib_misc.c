/*
** ljmp memory profiler: the misc.memprof library.
** New VM file of ljmp's luajit-patch (not part of LuaJIT).
**
**   misc.memprof.start(path)                 profile to a file
**   misc.memprof.start{path = path}          the same
**   misc.memprof.start{socket = path,        stream to ljmpd
**                      max_stall_ms = n}     (bound on blocking, 0: none)
**     either table may say census = false: no census of the heap found,
**     stacks = DEPTH (or true: 16): Lua call stacks of allocations, and
**     stack_sample = BYTES: one stack per BYTES allocated on average
**     -> true | nil, message, errno
**   misc.memprof.stop()  -> true | nil, message, errno
**   misc.memprof.status() -> running (boolean), message and errno of the
**                            last failure (a writer error, LJMP_SOCKET)
**   misc.memprof.census() -> state ("none", "waiting", "sweeping",
**                            "complete", "partial"), and a table: blocks,
**                            bytes, total_begin, total_end, seconds,
**                            gc_phase (the collector's)
*/

#define lib_misc_c
#define LUA_LIB

#include <errno.h>
#include <string.h>
#include <time.h>

#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

#include "lj_obj.h"
#include "lj_gc.h"
#include "lj_ljmp.h"
#include "lj_memprof.h"
#include "lm_format.h"

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

#define STACKS_DEFAULT_DEPTH 16

/* The start table's stacks and stack_sample, into *want. */
static void stacks_option(lua_State *L, LjmpWant *want)
{
  lua_Integer depth = 0, sample = 0;
  lua_getfield(L, 1, "stacks");
  lua_getfield(L, 1, "stack_sample");
  if (lua_isboolean(L, -2))
    depth = lua_toboolean(L, -2) ? STACKS_DEFAULT_DEPTH : 0;
  else if (!lua_isnil(L, -2))
    depth = luaL_checkinteger(L, -2);
  luaL_argcheck(L, depth >= 0 && depth <= LM_STACK_MAX_DEPTH, 1,
		"stacks = DEPTH expects 1 to 64");
  if (!lua_isnil(L, -1)) sample = luaL_checkinteger(L, -1);
  luaL_argcheck(L, sample >= 0, 1, "stack_sample = BYTES expects >= 0");
  luaL_argcheck(L, sample == 0 || depth > 0, 1,
		"stack_sample needs stacks = DEPTH");
  want->stacks = (uint32_t)depth;
  want->stack_sample = (uint64_t)sample;
  lua_pop(L, 2);
}

static int memprof_start(lua_State *L)
{
  LjmpError e;
  LjmpWant want = {1, 0, 0};
  const char *where;
  int r;
  if (lua_istable(L, 1)) {
    const char *file;
    int stall;
    stacks_option(L, &want);
    lua_getfield(L, 1, "socket");
    lua_getfield(L, 1, "path");
    lua_getfield(L, 1, "max_stall_ms");
    lua_getfield(L, 1, "census");
    where = lua_tostring(L, -4);
    file = lua_tostring(L, -3);
    luaL_argcheck(L, (where != NULL) != (file != NULL), 1,
		  "socket = PATH or path = FILE expected");
    /* Absent: the default bound; 0: none. */
    stall = lua_isnil(L, -2) ? -1 : (int)luaL_checkinteger(L, -2);
    want.census = lua_isnil(L, -1) || lua_toboolean(L, -1);
    if (where != NULL) {
      r = lj_ljmp_start_socket(L, where, stall, &want, &e);
    } else {
      where = file;
      r = lj_ljmp_start_file(L, where, &want, &e);
    }
  } else {
    where = luaL_checkstring(L, 1);
    r = lj_ljmp_start_file(L, where, &want, &e);
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
  return push_failure(L, NULL, errno);
}

static int memprof_status(lua_State *L)
{
  int err = lj_memprof_error(G(L));
  if (err == 0) err = lj_ljmp_env_error(G(L));
  lua_pushboolean(L, lj_memprof_running(G(L)));
  if (err == 0) return 1;
  lua_pushstring(L, strerror(err));
  lua_pushinteger(L, err);
  return 3;
}

static void set_number(lua_State *L, const char *k, double v)
{
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

/* By GCState (lj_gc.h). */
static const char *const gc_phase[] = {
  "pause", "propagate", "atomic", "sweepstring", "sweep", "finalize"
};

static int memprof_census(lua_State *L)
{
  static const char *const state[] = {
    "none", "waiting", "sweeping", "complete", "partial"
  };
  MemprofCensus c;
  uint64_t end;
  lj_memprof_census_get(G(L), &c);
  lua_pushstring(L, state[c.state]);
  lua_createtable(L, 0, 5);
  set_number(L, "blocks", (double)c.blocks);
  set_number(L, "bytes", (double)c.bytes);
  set_number(L, "total_begin", (double)c.total_begin);
  set_number(L, "total_end", (double)c.total_end);
  end = c.end_ns;
  if (end == 0 && c.begin_ns != 0) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    end = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  }
  set_number(L, "seconds", (double)(end - c.begin_ns) * 1e-9);
  /* What a waiting census waits for: the collector's phase. */
  lua_pushstring(L, gc_phase[G(L)->gc.state]);
  lua_setfield(L, -2, "gc_phase");
  return 2;
}

static const luaL_Reg memprof_lib[] = {
  {"start", memprof_start},
  {"stop", memprof_stop},
  {"status", memprof_status},
  {"census", memprof_census},
  {NULL, NULL}
};

LUALIB_API int luaopen_misc(lua_State *L)
{
  luaL_register(L, "misc.memprof", memprof_lib);
  lua_getglobal(L, "misc");
  return 1;
}
