/*
** ljmp memory profiler: the misc.memprof library.
** New VM file of ljmp's luajit-patch (not part of LuaJIT).
**
**   misc.memprof.start(path)  -> true | nil, message, errno
**   misc.memprof.stop()       -> true | nil, message, errno
**   misc.memprof.running()    -> boolean
*/

#define lib_misc_c
#define LUA_LIB

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

#include "lj_obj.h"
#include "lj_memprof.h"

/* A file the stream goes to. */
typedef struct FileSink {
  int fd;
} FileSink;

static int file_write(void *ctx, const void *buf, size_t len)
{
  FileSink *fs = (FileSink *)ctx;
  const char *p = (const char *)buf;
  while (len > 0) {
    ssize_t n = write(fs->fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static void file_stop(void *ctx)
{
  FileSink *fs = (FileSink *)ctx;
  close(fs->fd);
  free(fs);
}

static int push_failure(lua_State *L, const char *msg, int err)
{
  lua_pushnil(L);
  lua_pushstring(L, msg);
  lua_pushinteger(L, err);
  return 3;
}

static int push_errno(lua_State *L, const char *prefix, int err)
{
  if (prefix)
    lua_pushfstring(L, "%s: %s", prefix, strerror(err));
  else
    lua_pushstring(L, strerror(err));
  lua_pushnil(L);
  lua_insert(L, -2);
  lua_pushinteger(L, err);
  return 3;
}

static int memprof_start(lua_State *L)
{
  const char *path = luaL_checkstring(L, 1);
  MemprofOptions opt;
  FileSink *fs;
  int r;
  /* Checked before opening: a second start must not truncate the file. */
  if (lj_memprof_running())
    return push_failure(L, "profiler is running already", EINVAL);
  fs = (FileSink *)malloc(sizeof(*fs));
  if (fs == NULL) return push_errno(L, NULL, ENOMEM);
  fs->fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fs->fd < 0) {
    int e = errno;
    free(fs);
    return push_errno(L, path, e);
  }
  opt.write = file_write;
  opt.ctx = fs;
  opt.on_stop = file_stop;
  r = lj_memprof_start(L, &opt);
  if (r == LJ_MEMPROF_OK) {
    lua_pushboolean(L, 1);
    return 1;
  }
  if (r == LJ_MEMPROF_ERRRUN)
    return push_failure(L, "profiler is running already", EINVAL);
  return push_errno(L, path, r == LJ_MEMPROF_ERRMEM ? ENOMEM : errno);
}

static int memprof_stop(lua_State *L)
{
  int r = lj_memprof_stop(L);
  if (r == LJ_MEMPROF_OK) {
    lua_pushboolean(L, 1);
    return 1;
  }
  if (r == LJ_MEMPROF_ERRRUN)
    return push_failure(L, "profiler is not running", EINVAL);
  if (r == LJ_MEMPROF_ERRUSE)
    return push_failure(L, "profiler misuse", EINVAL);
  return push_errno(L, NULL, errno);
}

static int memprof_running(lua_State *L)
{
  lua_pushboolean(L, lj_memprof_running());
  return 1;
}

static const luaL_Reg memprof_lib[] = {
  {"start", memprof_start},
  {"stop", memprof_stop},
  {"running", memprof_running},
  {NULL, NULL}
};

LUALIB_API int luaopen_misc(lua_State *L)
{
  luaL_register(L, "misc.memprof", memprof_lib);
  lua_getglobal(L, "misc");
  return 1;
}
