/*
** ljmp memory profiler: the C API for programs that embed LuaJIT.
** New VM file of ljmp's luajit-patch (not part of LuaJIT).
**
** A profile is a memprof stream (revision R3, or R3S with call stacks)
** that the VM hands to a
** writer, from inside its allocator: the writer must not call into the
** VM, allocate from the Lua heap or throw.  It returns 0, or an errno
** value that ends the profile (the program goes on).
*/

#ifndef _LMEMPROF_H
#define _LMEMPROF_H

#include <stddef.h>

#include "lua.h"

typedef int (*ljmp_memprof_writer)(void *ctx, const void *buf, size_t len);

/* Called once when the stream ends; err is 0 or the writer's errno.  In
** a child forked while profiling it is called with ECHILD, in the child,
** from pthread_atfork's handler: the stream is the parent's, and nothing
** more may be written to it.  A profile still running at exit() is not
** ended (neither the writer nor this is called then): stop it first. */
typedef void (*ljmp_memprof_done)(void *ctx, int err);

/* Results of the calls below. */
#define LJMP_MEMPROF_OK 0
#define LJMP_MEMPROF_ERRRUN 1 /* running already (start), or not (stop) */
#define LJMP_MEMPROF_ERRUSE 2 /* another VM of the process owns it */
#define LJMP_MEMPROF_ERRMEM 3
#define LJMP_MEMPROF_ERRIO 4  /* the writer failed; errno says why */

/* Profile the VM of L into writer; done (may be NULL) is called once the
** stream has ended, whichever way. */
LUA_API int ljmp_memprof_start(lua_State *L, ljmp_memprof_writer writer,
			       ljmp_memprof_done done, void *ctx);
/* Stream to ljmpd's ingest socket at path (hello, stream, trailer).  A
** write that keeps the program waiting longer than max_stall_ms ends the
** profile: 0 waits as long as ljmpd takes (lossless),
** LJMP_MEMPROF_STALL_DEFAULT takes $LJMP_MAX_STALL_MS or 100 ms. */
#define LJMP_MEMPROF_STALL_DEFAULT (-1)
LUA_API int ljmp_memprof_start_socket(lua_State *L, const char *path,
				      int max_stall_ms);
/* Whether the starts above take a census of the heap they find (every
** live block announced as an allocation, see ljmp's docs/format.md): on
** unless turned off here, for the whole process. */
LUA_API void ljmp_memprof_set_census(int on);
/* Whether the starts above carry Lua call stacks (revision R3S, see ljmp's
** docs/format.md), for the whole process: the depth of each (0: none, the
** default; at most 64), and the mean of their sampling in allocated bytes
** (0: a stack with every allocation). */
LUA_API void ljmp_memprof_set_stacks(int depth, size_t sample_bytes);
/* Ends the stream: the epilogue, the allocator restored. */
LUA_API int ljmp_memprof_stop(lua_State *L);

#endif
