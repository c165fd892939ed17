/*
** ljmp: where memprof streams go; LJMP_SOCKET at VM start.
** New VM file of ljmp's luajit-patch (not part of LuaJIT).
*/

#ifndef _LJ_LJMP_H
#define _LJ_LJMP_H

#include "lj_obj.h"

typedef struct LjmpError {
  int err;      /* errno */
  int running;  /* the profiler was running already */
} LjmpError;

/* What a stream carries besides the events: a census of the heap it
** finds, and call stacks (their depth, 0 for none; their sampling mean in
** allocated bytes, 0 for a stack with every allocation). */
typedef struct LjmpWant {
  int census;
  uint32_t stacks;
  uint64_t stack_sample;
} LjmpWant;

/* Start profiling to a file, or to ljmpd's ingest socket (hello, stream,
** trailer; max_stall_ms bounds how long a write may block, see
** lj_ljmp_stall_bound).  0, or -1 with the reason in *e. */
LJ_FUNC int lj_ljmp_start_file(lua_State *L, const char *path,
			       const LjmpWant *want, LjmpError *e);
LJ_FUNC int lj_ljmp_start_socket(lua_State *L, const char *path,
				 int max_stall_ms, const LjmpWant *want,
				 LjmpError *e);

/* The stacks asked for by LJMP_STACKS (a depth) and LJMP_STACK_SAMPLE (a
** mean in bytes), into *want. */
LJ_FUNC void lj_ljmp_env_stacks(LjmpWant *want);

/*
** How long a write to ljmpd may keep the program waiting, in ms, before
** the profile ends: asked if it is 0 (no bound: lossless) or more, else
** LJMP_MAX_STALL_MS from the environment, else the default.  The program
** comes first: a daemon that stops reading must not stop it.
*/
#define LJMP_DEFAULT_STALL_MS 100
LJ_FUNC int lj_ljmp_stall_bound(int asked);

/* At VM start: the agent serves the VM (its signal's handler installed
** with the first, unless LJMP_AGENT=0); it streams to $LJMP_SOCKET if
** that is set. */
LJ_FUNC void lj_ljmp_env_start(lua_State *L);
/* At lua_close: the agent forgets a VM that goes away. */
LJ_FUNC void lj_ljmp_vm_closing(global_State *g);
/* Why g's last LJMP_SOCKET or attach start failed (errno), or 0. */
LJ_FUNC int lj_ljmp_env_error(global_State *g);

/* Tail calls tracked for stacks, under call and instruction hooks (see
** lj_memprof_stacks.h): the entry of a function at base, and a tail call
** ins about to run in L's current frame. */
LJ_FUNC void LJ_FASTCALL lj_ljmp_tail_entry(global_State *g, cTValue *base);
LJ_FUNC void LJ_FASTCALL lj_ljmp_tail_call(lua_State *L, BCIns ins);

#endif
