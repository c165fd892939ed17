/*
** ljmp memory profiler: memprof streams (revision R3) for LuaJIT 2.1.
** New VM file of ljmp's luajit-patch (not part of LuaJIT).
*/

#ifndef _LJ_MEMPROF_H
#define _LJ_MEMPROF_H

#include "lj_obj.h"

/*
** The stream (see ljmp's docs/format.md, revision R3):
**
**   stream  := symtab memprof
**   symtab  := 'l' 'j' 's' 0x03 0x00 0x00 0x00 sym* 0x80
**   sym     := 0x00 proto-addr chunk firstline
**            | 0x02 traceno start-proto-addr start-line
**   memprof := 'l' 'j' 'm' 0x03 0x00 0x00 0x00 event* 0x80
**   event   := header loc fields, header = event | source << 2
**
** Numbers are ULEB128, strings a ULEB128 length and the bytes.
*/

/* The size of a buffer that a writer is handed at most. */
#define LJ_MEMPROF_BUFSZ (256 * 1024)

/* Where the stream goes.  write() returns 0, or an errno value to stop. */
typedef int (*lj_memprof_writer)(void *ctx, const void *buf, size_t len);

/* How a stream ended: what was written, and the writer's error if any. */
typedef struct MemprofResult {
  uint64_t events;        /* alloc, realloc and free events */
  uint64_t stream_bytes;  /* from "ljs" to the epilogue */
  int err;                /* errno that stopped the writer, or 0 */
} MemprofResult;

typedef struct MemprofOptions {
  lj_memprof_writer write;
  void *ctx;
  /* Called once when the stream ends: stop, writer error, lua_close, a
  ** failed start (then with err set), or a fork: in the child, with err
  ** ECHILD, and nothing more may be written (the stream is the
  ** parent's). */
  void (*on_stop)(void *ctx, const MemprofResult *res);
  /* If set, a profile still running at exit() (on the thread that
  ** started it) is ended there as by stop(): this is called first, so
  ** that the writer may bound what exit waits for. */
  void (*at_exit)(void *ctx);
  /* Buffers (0 is 1).  With more than one, write() may keep reading a
  ** buffer after it returns (the socket writer lends its pages to a
  ** pipe), and next_buf() says which buffer to fill after each write but
  ** the last, or returns a negative errno value if none is free in time
  ** (which ends the profile as a failed write does). */
  uint32_t nbufs;
  int (*next_buf)(void *ctx);
  /* Take a census of the heap the stream starts in: announce every live
  ** block as an allocation (see the census section of lj_memprof.c). */
  int census;
  /* If set, how full the way to the reader is, in percent of what it
  ** holds (the census waits while it is over a quarter full, so as not to
  ** make the program wait for the reader); -1 if it cannot say. */
  int (*backlog)(void *ctx);
  /* Call stacks (revision R3S, see lj_memprof_stacks.h): the depth of
  ** each (0: none, the stream is R3; at most 64), and the mean of their
  ** sampling in allocated bytes (0: a stack with every allocation). */
  uint32_t stacks;
  uint64_t stack_sample;
} MemprofOptions;

enum {
  LJ_MEMPROF_OK,
  LJ_MEMPROF_ERRRUN,  /* Already running, or not running on stop. */
  LJ_MEMPROF_ERRUSE,  /* Unused (each VM has a profiler of its own). */
  LJ_MEMPROF_ERRMEM,  /* No memory for the buffer. */
  LJ_MEMPROF_ERRIO    /* The writer failed; errno says why. */
};

/* Each VM of a process has a profiler of its own: several may stream at
** once, from any threads (each VM's from the thread that runs it). */
LJ_FUNC int lj_memprof_start(lua_State *L, const MemprofOptions *opt);
LJ_FUNC int lj_memprof_stop(lua_State *L);
LJ_FUNC int lj_memprof_running(global_State *g);
/* The errno value that stopped g's last stream, or 0. */
LJ_FUNC int lj_memprof_error(global_State *g);

/* Hooks: a prototype or a trace was made; a VM closes; the stack moves.
** Each says which VM, whose profiler (if it streams) it concerns. */
LJ_FUNC void lj_memprof_add_proto(global_State *g, const GCproto *pt);
struct GCtrace;
LJ_FUNC void lj_memprof_add_trace(global_State *g, const struct GCtrace *tr);
LJ_FUNC void lj_memprof_close(global_State *g);
LJ_FUNC void lj_memprof_stack_moving(global_State *g, int moving);
/* The collector swept its heap (a cycle's end): what the stream holds goes
** out now, as the program may not allocate again for a long while. */
LJ_FUNC void lj_memprof_swept(global_State *g);

/*
** The census of the heap a stream finds (lj_memprof.c).  The collector
** calls these while lj_memprof_census_on (the censuses running in the
** process) is not 0: a live object its sweep
** keeps or an upvalue it closes (obj), the flip of its whites (flip), the
** end of the sweep (swept); and, while a census runs, it works in slices
** (slice_begin: whether one is due; slice_more: whether it may go on;
** slice_end).
*/
LJ_DATA int lj_memprof_census_on;
LJ_FUNC int lj_memprof_census_running(global_State *g);
LJ_FUNC void lj_memprof_census_obj(global_State *g, GCobj *o);
LJ_FUNC void lj_memprof_census_flip(global_State *g);
LJ_FUNC void lj_memprof_census_swept(global_State *g);
LJ_FUNC int lj_memprof_census_slice_begin(global_State *g);
LJ_FUNC int lj_memprof_census_slice_more(global_State *g);
LJ_FUNC void lj_memprof_census_slice_end(global_State *g);

/* How the census of the current (or last) stream stands. */
typedef struct MemprofCensus {
  int state;  /* LJ_MEMPROF_CENSUS_* */
  uint64_t blocks, bytes;  /* announced so far */
  uint64_t total_begin, total_end;  /* the heap's bytes (gc.total) */
  uint64_t begin_ns, end_ns;  /* CLOCK_MONOTONIC */
} MemprofCensus;

enum {
  LJ_MEMPROF_CENSUS_NONE,  /* not asked for */
  LJ_MEMPROF_CENSUS_WAITING,  /* for the collector's next flip */
  LJ_MEMPROF_CENSUS_SWEEPING,  /* riding the sweep after it */
  LJ_MEMPROF_CENSUS_COMPLETE,
  LJ_MEMPROF_CENSUS_PARTIAL  /* the stream ended before it completed */
};

LJ_FUNC void lj_memprof_census_get(global_State *g, MemprofCensus *out);

/*
** Lines inside compiled code (x86-64 only; elsewhere an allocation on a
** trace is named by the trace).  While recording, each IR instruction
** keeps the line (prototype and line) of the bytecode it came from; the
** assembler stores, before each call the trace makes, the site of the
** instruction (its line on this trace) in jit_State's ljmp_site, which
** the allocator reads on a trace, in ljmp_sitetab.
*/
#define LJ_MEMPROF_JITSITES (LJ_HASJIT && LJ_TARGET_X64)
#if LJ_MEMPROF_JITSITES
struct jit_State;
/* Instruction ref was emitted by the recorder, or copied from ref from. */
LJ_FUNC void lj_memprof_jit_ins(struct jit_State *J, uint32_t ref);
LJ_FUNC void lj_memprof_jit_copy(struct jit_State *J, uint32_t ref,
				 uint32_t from);
/* The assembler starts on the current trace; then wants the site of
** instruction ref (0: none) to store before a call. */
LJ_FUNC void lj_memprof_jit_asm(struct jit_State *J);
LJ_FUNC uint32_t lj_memprof_jit_site(struct jit_State *J, uint32_t ref);
LJ_FUNC void lj_memprof_jit_free(struct jit_State *J);
/* A trace was made: its sites get their stand-ins, and its sunk
** allocations' lines are kept, for the exits (snapshot restore) and side
** traces (replay) that make them.  Before lj_memprof_add_trace, which
** announces the stand-ins. */
struct GCtrace;
LJ_FUNC void lj_memprof_jit_trace(struct jit_State *J,
				  const struct GCtrace *T);
LJ_FUNC uint32_t lj_memprof_jit_sunk_site(struct jit_State *J,
					  const struct GCtrace *T,
					  uint32_t ref);
/* Instruction ref of a side trace makes its parent T's allocation pref. */
LJ_FUNC void lj_memprof_jit_replay(struct jit_State *J, uint32_t ref,
				   const struct GCtrace *T, uint32_t pref);
#endif

#endif
