/*
** ljmp memory profiler: wraps the allocator and writes a memprof stream.
** New VM file of ljmp's luajit-patch (not part of LuaJIT).
*/

#define lj_memprof_c
#define LUA_CORE

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "lj_obj.h"
#include "lj_debug.h"
#include "lj_frame.h"
#include "lj_gc.h"
#include "lj_memprof.h"
#include "lj_alloc.h"
#include "lj_str.h"
#include "lj_tab.h"
#include "lj_buf.h"
#include "lj_dispatch.h"
#if LJ_HASFFI
#include "lj_ctype.h"
#endif
#include "lm_format.h"

#include "lm_cpu.h"
#ifdef LM_HAVE_BMI2
#include <immintrin.h>
#endif
#if LJ_HASJIT
#include "lj_jit.h"
#include "lj_trace.h"
#endif

/* -- Stream constants ---------------------------------------------------- */

enum { SYM_LFUNC = 0, SYM_TRACE = 2 };
enum { EV_SYMTAB = 0, EV_ALLOC = 1, EV_FREE = 2, EV_REALLOC = 3 };
enum { SRC_INTERNAL = 1, SRC_LFUNC = 2, SRC_CFUNC = 3, SRC_TRACE = 4 };
#define HDR_FINAL 0x80
#define EV_HEADER(ev, src) ((uint8_t)((ev) | (src) << 2))

/* The buffer is flushed when less than one item's worth is left: the
** longest event (61 bytes, and a stack id of 5), and the 7 bytes
** put_uleb() may store past it. */
#define MEMPROF_BUFSZ LJ_MEMPROF_BUFSZ
#define MEMPROF_ITEM_MAX 80

/* A live reader should not wait for a slow allocator to fill the buffer:
** every MEMPROF_CLOCK_EVERY events the clock is read (a coarse clock, a
** few ns through the vDSO), and what waited longer than MEMPROF_STALE_NS
** is flushed.  What a VM holds when it stops allocating (a server between
** requests, a program waiting on input) waits for its next allocation,
** or for the end of its collector's next sweep (lj_memprof_swept): the
** frees of a collection go out with it, except through a pipe.
** The bound is a part of what a subscriber waits for an allocation to
** show (see ljmpd's latency target in bench/README.md); a busy VM fills
** the buffer much sooner, so only light VMs write more often. */
#define MEMPROF_CLOCK_EVERY 64
#define MEMPROF_STALE_NS (20 * 1000000ull)
#ifdef CLOCK_MONOTONIC_COARSE
#define MEMPROF_CLOCK CLOCK_MONOTONIC_COARSE
#else
#define MEMPROF_CLOCK CLOCK_MONOTONIC
#endif

/* -- State --------------------------------------------------------------- */

/*
** One profiler per VM: a process may hold several (nginx makes the new VM
** of a reload before it closes the old one; a host may embed a VM per
** thread), each streaming a session of its own.  While it streams, the
** VM's allocator is the wrapper and its ud the profiler (memprof_of), so
** that the allocator's hot path finds it in a register.  The record
** outlives its streams, for how the last one ended, until the VM closes;
** the process's records are listed for fork and exit (memprof_list).
*/
typedef struct Memprof {
  struct Memprof *next;  /* The process's records (memprof_list). */
  global_State *vm;  /* The VM it belongs to. */
  global_State *g;  /* The VM while streaming, NULL when idle. */
  lua_Alloc allocf;  /* The VM's allocator, wrapped while profiling. */
  lua_Alloc wrapper;  /* The wrapper installed for it. */
  void *allocd;
  MemprofOptions opt;
  uint8_t *ring;  /* opt.nbufs buffers of MEMPROF_BUFSZ */
  uint8_t *buf;  /* The one being filled. */
  uint8_t *cur;  /* The end of what buf holds. */
  uint32_t filling;  /* buf's index in ring */
  int err;  /* errno of the first failed write; the stream stops there. */
  int last_err;  /* How the last stream ended, for readers after it. */
  volatile int moving;  /* The Lua stack is being reallocated. */
  /* Events the allocator's fast paths may write before the general path
  ** runs again: 0 while anything needs the general path (a stack being
  ** moved, an error, not running, too little room for a run of fast
  ** events, a clock check due).  The fast paths do not count their
  ** events: the run's are added to events when it ends (mp_fast_end),
  ** as armed less what is left. */
  uint32_t fast_left, armed;
  /* An allocation's size, kept here across the allocator's call by the
  ** fast path for traces (a register fewer to save). */
  size_t fast_nsize;
  uint64_t events, stream_bytes;
  uint64_t flushed_ns;  /* When the buffer was last written out. */
  pthread_t owner;  /* The thread that started it. */
  /* The census (see its section below). */
  MemprofCensus census;
  uint32_t census_types;  /* type names announced, one bit each */
  struct CensusNames *census_names;  /* metatables' names, or NULL */
  GCstr *census_key;  /* "__name", fixed; NULL: no names by metatable */
  uint64_t slice_ns, next_slice_ns;
  uint64_t slice_pos;  /* stream bytes when the slice began */
  /* Call stacks (lj_memprof_stacks.h): the depth asked for (0: none),
  ** the sampling mean in bytes (0: every allocation), the distance to
  ** the next sample (counted down by the trace's fast path too), whether
  ** that path found one due, and the stacks sent. */
  uint32_t stacks;
  int sample_due;
  uint64_t stack_sample;
  int64_t sample_left;
  uint64_t prng;
  struct MemStacks *st;
} Memprof;

/* The records of the process's VMs, under memprof_lock: starts, stops,
** closes, forks and exits look them up; the hot path and the VM's hooks
** reach a VM's through its allocator (memprof_of). */
static pthread_mutex_t memprof_lock;
static pthread_once_t memprof_lock_once = PTHREAD_ONCE_INIT;
static Memprof *memprof_list;

/* Recursive: a writer's on_stop, called with the lock held, may start or
** stop a stream again (a host's done callback). */
static void memprof_lock_init(void)
{
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&memprof_lock, &a);
  pthread_mutexattr_destroy(&a);
}

static void memprof_lock_take(void)
{
  pthread_once(&memprof_lock_once, memprof_lock_init);
  pthread_mutex_lock(&memprof_lock);
}

static void memprof_lock_give(void)
{
  pthread_mutex_unlock(&memprof_lock);
}

static int memprof_is_wrapper(lua_Alloc f);

/* The profiler streaming g, or NULL. */
static LJ_AINLINE Memprof *memprof_of(global_State *g)
{
  return memprof_is_wrapper(g->allocf) ? (Memprof *)g->allocd : NULL;
}

/* -- Encoding ------------------------------------------------------------ */

static uint64_t mp_clock_ns(void)
{
  struct timespec ts;
  clock_gettime(MEMPROF_CLOCK, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Bytes in the buffer. */
static size_t mp_len(const Memprof *mp)
{
  return (size_t)(mp->cur - mp->buf);
}

/* Ends the fast paths' run: its events counted, and the next event
** takes the general path (which arms a new run). */
static void mp_fast_end(Memprof *mp)
{
  mp->events += mp->armed - mp->fast_left;
  mp->armed = mp->fast_left = 0;
}

/* The stream failed (err): the profile stops at the next allocation. */
static void mp_fail(Memprof *mp, int err)
{
  mp->err = err;
  mp_fast_end(mp);
  /* Part of the ring may be in a pipe that is still read: what is written
  ** from now on (the epilogue, symbols), never sent, goes to pages of its
  ** own, mapped over the ring. */
  if (mp->opt.nbufs > 1 &&
      mmap(mp->ring, (size_t)mp->opt.nbufs * MEMPROF_BUFSZ,
	   PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
	   -1, 0) == MAP_FAILED)
    mp->buf = mp->ring + (size_t)mp->opt.nbufs * MEMPROF_BUFSZ;  /* spare */
}

/* Writes the buffer out; unless it was the last, the writer says which
** to fill next, as it may still read this one (see nbufs). */
static void mp_flush_as(Memprof *mp, int last)
{
  size_t len = mp_len(mp);
  if (len > 0 && mp->err == 0) {
    int e = mp->opt.write(mp->opt.ctx, mp->buf, len);
    if (e != 0) {
      mp_fail(mp, e);
    } else {
      mp->stream_bytes += len;
      if (mp->opt.nbufs > 1 && !last) {
	int next = mp->opt.next_buf(mp->opt.ctx);
	if (next < 0) {
	  mp_fail(mp, -next);
	} else {
	  mp->filling = (uint32_t)next % mp->opt.nbufs;
	  mp->buf = mp->ring + (size_t)mp->filling * MEMPROF_BUFSZ;
	}
      }
    }
  }
  mp->cur = mp->buf;
  mp->flushed_ns = mp_clock_ns();
}

static void mp_flush(Memprof *mp)
{
  mp_flush_as(mp, 0);
}

static void mp_flush_if_stale(Memprof *mp)
{
  if (mp_clock_ns() - mp->flushed_ns >= MEMPROF_STALE_NS) mp_flush(mp);
}

static void mp_reserve(Memprof *mp, size_t n)
{
  if (mp_len(mp) + n > MEMPROF_BUFSZ) mp_flush(mp);
}

static void mp_byte(Memprof *mp, uint8_t b)
{
  *mp->cur++ = b;
}

#ifdef LM_HAVE_BMI2
/* The 7-bit groups of v spread into bytes, by BMI2's PDEP. */
static inline __attribute__((target("bmi2"))) uint64_t spread_pdep(uint64_t v)
{
  return _pdep_u64(v, 0x7f7f7f7f7f7f7f7fULL);
}
#endif

#if LJ_LE && defined(__GNUC__)
/* The 7-bit groups spread with shifts: 28-bit halves, then 14-bit
** quarters, then 7. */
static LJ_AINLINE uint64_t spread_shifts(uint64_t v)
{
  uint64_t x = (v & 0x000000000fffffffULL) |
	       ((v & 0x00fffffff0000000ULL) << 4);
  x = (x & 0x00003fff00003fffULL) | ((x & 0x0fffc0000fffc000ULL) << 2);
  return (x & 0x007f007f007f007fULL) | ((x & 0x3f803f803f803f80ULL) << 1);
}

/* The bytes of a ULEB by the highest set bit of its value (loads where
** a division by 7 takes five instructions), and its continuation bits. */
static const uint8_t uleb_len[64] = {
  1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 3, 3,
  3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5,
  5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7,
  7, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 10
};

#define CONT(n) (0x8080808080808080ULL >> (64 - 8 * (n)))
static const uint64_t uleb_cont[64] = {
  0, 0, 0, 0, 0, 0, 0, CONT(1), CONT(1), CONT(1), CONT(1), CONT(1),
  CONT(1), CONT(1), CONT(2), CONT(2), CONT(2), CONT(2), CONT(2), CONT(2),
  CONT(2), CONT(3), CONT(3), CONT(3), CONT(3), CONT(3), CONT(3), CONT(3),
  CONT(4), CONT(4), CONT(4), CONT(4), CONT(4), CONT(4), CONT(4), CONT(5),
  CONT(5), CONT(5), CONT(5), CONT(5), CONT(5), CONT(5), CONT(6), CONT(6),
  CONT(6), CONT(6), CONT(6), CONT(6), CONT(6), CONT(7), CONT(7), CONT(7),
  CONT(7), CONT(7), CONT(7), CONT(7), 0, 0, 0, 0, 0, 0, 0, 0
};
#undef CONT
#endif

#if LJ_LE && defined(__GNUC__)
#define MEMPROF_SPREAD 1
/* v's 7-bit groups spread into bytes, by PDEP where the wrapper was
** compiled for it (pdep), else by shifts. */
static LJ_AINLINE uint64_t spread_groups(uint64_t v, int pdep)
{
#ifdef LM_HAVE_BMI2
  if (pdep) return spread_pdep(v);
#endif
  UNUSED(pdep);
  return spread_shifts(v);
}

/* A ULEB128 of v, below 2^56, at p by the tables: the 7-bit groups
** spread into bytes without a loop (the lengths of addresses vary, which
** a loop would mispredict), the continuation bits set, 8 bytes stored of
** which as many are kept as needed.  The buffer's reserve covers the
** slack. */
static LJ_AINLINE uint8_t *put_uleb_spread(uint8_t *p, uint64_t v, int pdep)
{
#ifdef __x86_64__
  uint64_t hb;  /* 0 to 55: BSR's whole register, no zero extension. */
  __asm__("bsrq %1, %0" : "=r"(hb) : "r"(v | 1));
#else
  uint32_t hb = 63 ^ (uint32_t)__builtin_clzll(v | 1);
#endif
  uint64_t x = spread_groups(v, pdep) | uleb_cont[hb];
  memcpy(p, &x, 8);
  return p + uleb_len[hb];
}
#endif

/* A ULEB128 at p (any value); returns the byte after it.  See
** put_uleb_with. */
static LJ_AINLINE uint8_t *put_uleb_long(uint8_t *p, uint64_t v, int pdep)
{
#ifdef MEMPROF_SPREAD
  if (LJ_LIKELY(v < ((uint64_t)1 << 56))) return put_uleb_spread(p, v, pdep);
#endif
  UNUSED(pdep);
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/*
** A ULEB128 at p; returns the byte after it.  Inlined into the allocator
** wrapper, which is compiled twice (pdep: with BMI2's PDEP or not).  The
** hot path encodes through a local cursor: stores through a uint8_t
** pointer may alias anything, so writing via mp->cur would make
** the compiler reload the position after every byte.
*/
static LJ_AINLINE uint8_t *put_uleb_with(uint8_t *p, uint64_t v, int pdep)
{
  if (v < 0x80) {  /* Sizes and lines, mostly: one byte. */
    *p = (uint8_t)v;
    return p + 1;
  }
  return put_uleb_long(p, v, pdep);
}

/*
** The same for an address, which is never that small: no test for one
** byte (the table's first lengths still write a small value right).  A
** block of LuaJIT's own allocator (direct) on x86-64 with 64-bit GC
** references lies below 2^47, where the VM needs its objects: its
** address is written in 7 bytes, the length of every address from 2^42
** up (the heap's mmaps are there), padded when it is smaller (a form
** every reader takes): the groups spread and the continuation bits set,
** without finding the length.
*/
#if defined(MEMPROF_SPREAD) && LJ_TARGET_X64 && LJ_GC64
#define MEMPROF_ADDR7 1
#endif

static LJ_AINLINE uint8_t *put_uleb_addr(uint8_t *p, uint64_t v, int pdep,
					 int direct)
{
#ifdef MEMPROF_ADDR7
  if (direct) {
    /* Six bytes that go on, and the last. */
    uint64_t x = spread_groups(v, pdep) | 0x0000808080808080ULL;
    memcpy(p, &x, 8);
    return p + 7;
  }
#endif
  UNUSED(direct);
  return put_uleb_long(p, v, pdep);
}

static LJ_AINLINE uint8_t *put_uleb(uint8_t *p, uint64_t v)
{
  return put_uleb_with(p, v, 0);
}

static void mp_uleb(Memprof *mp, uint64_t v)
{
  mp->cur = put_uleb(mp->cur, v);
}

/* A string: long ones go to the writer in pieces. */
static void mp_string(Memprof *mp, const char *s, size_t len)
{
  mp_uleb(mp, len);
  while (len > 0) {
    size_t n;
    if (mp_len(mp) == MEMPROF_BUFSZ) mp_flush(mp);
    n = MEMPROF_BUFSZ - mp_len(mp);
    if (n > len) n = len;
    memcpy(mp->cur, s, n);
    mp->cur += n;
    s += n;
    len -= n;
  }
  mp_reserve(mp, MEMPROF_ITEM_MAX);
}

/* A prologue: R3's, or R3S's events prologue when the stream has stacks
** (its version, and the extension's in the first reserved byte). */
static void mp_prologue(Memprof *mp, const char *magic)
{
  int stacks = magic[2] == 'm' && mp->stacks != 0;
  mp_byte(mp, (uint8_t)magic[0]);
  mp_byte(mp, (uint8_t)magic[1]);
  mp_byte(mp, (uint8_t)magic[2]);
  mp_byte(mp, stacks ? LM_LJM_STACKS : 3);
  mp_byte(mp, stacks ? LM_STACKS_EXT_VERSION : 0);
  mp_byte(mp, 0);
  mp_byte(mp, 0);
}

#include "lj_memprof_stacks.h"

/* -- Symbols ------------------------------------------------------------- */

static void sym_proto(Memprof *mp, const GCproto *pt)
{
  GCstr *name = proto_chunkname(pt);
  mp_uleb(mp, (uintptr_t)pt);
  mp_string(mp, strdata(name), name->len);
  mp_uleb(mp, pt->firstline);
}

#if LJ_HASJIT
static void sym_trace(Memprof *mp, const GCtrace *tr)
{
  GCproto *pt = gco2pt(gcref(tr->startpt));
  BCPos pos = proto_bcpos(pt, mref(tr->startpc, const BCIns));
  mp_uleb(mp, tr->traceno);
  mp_uleb(mp, (uintptr_t)pt);
  mp_uleb(mp, (uint64_t)lj_debug_line(pt, pos));
}
#endif

/*
** Every live prototype, from the VM's list of them (lj_protolist.h): a
** start costs time in proportion to the prototypes, not to the heap.
** Prototypes a running sweep has found dead are skipped: their chunk
** names may be gone already.
*/
static void dump_protos(Memprof *mp, global_State *g)
{
  GCobj *o;
  for (o = gcref(g->protolist); o != NULL; o = gcref(gco2pt(o)->ptnext)) {
    if (isdead(g, o)) continue;
    mp_reserve(mp, MEMPROF_ITEM_MAX);
    mp_byte(mp, SYM_LFUNC);
    sym_proto(mp, gco2pt(o));
  }
}

#if LJ_MEMPROF_JITSITES
static void jit_say_standins(Memprof *mp, global_State *g, const GCtrace *T,
			    int symtab);
#endif

#if LJ_HASJIT
/* Every live trace, from the JIT's table of them, with its stand-ins.  The
** trace being recorded holds a slot there too; it is announced once
** saved. */
static void dump_traces(Memprof *mp, global_State *g)
{
  jit_State *J = G2J(g);
  MSize i;
  for (i = 1; i < J->sizetrace; i++) {
    GCobj *o = gcref(J->trace[i]);
    if (o == NULL || o == obj2gco(&J->cur) || isdead(g, o)) continue;
    mp_reserve(mp, MEMPROF_ITEM_MAX);
    mp_byte(mp, SYM_TRACE);
    sym_trace(mp, gco2trace(o));
#if LJ_MEMPROF_JITSITES
    jit_say_standins(mp, g, gco2trace(o), 1);
#endif
  }
}
#endif

/* The symbol table a stream starts with. */
static void dump_symtab(Memprof *mp, global_State *g)
{
  mp_prologue(mp, "ljs");
  dump_protos(mp, g);
#if LJ_HASJIT
  dump_traces(mp, g);
#endif
  mp_reserve(mp, MEMPROF_ITEM_MAX);
  mp_byte(mp, HDR_FINAL);
}

void lj_memprof_add_proto(global_State *g, const GCproto *pt)
{
  Memprof *mp = memprof_of(g);
  if (mp == NULL) return;
  stacks_new_proto(mp, pt);
  mp_reserve(mp, MEMPROF_ITEM_MAX);
  mp_byte(mp, EV_HEADER(EV_SYMTAB, SRC_LFUNC));
  sym_proto(mp, pt);
  mp_fast_end(mp);  /* The room it counted on is used. */
}

void lj_memprof_add_trace(global_State *g, const struct GCtrace *tr)
{
#if LJ_HASJIT
  Memprof *mp = memprof_of(g);
  if (mp == NULL) return;
  mp_reserve(mp, MEMPROF_ITEM_MAX);
  mp_byte(mp, EV_HEADER(EV_SYMTAB, SRC_TRACE));
  sym_trace(mp, tr);
#if LJ_MEMPROF_JITSITES
  jit_say_standins(mp, g, tr, 0);
#endif
  mp_fast_end(mp);
#else
  UNUSED(g); UNUSED(tr);
#endif
}

void lj_memprof_stack_moving(global_State *g, int moving)
{
  Memprof *mp = memprof_of(g);
  /* Frames at new addresses: none is known (see StackKept). */
  setmref(g->ljmp_low, NULL);
  if (mp != NULL) {
    mp->moving = moving;
    mp_fast_end(mp);  /* The move's allocation names no Lua site. */
  }
}

/* -- Census of the heap a stream finds ----------------------------------- */

/*
** A stream that starts in a running VM would show only what is allocated
** from then on: the heap it finds would be invisible, and frees of its
** blocks unknown.  The census announces every block the heap holds, as
** allocation events at names that say they predate the stream (or at a
** prototype's first line, for prototypes and Lua closures), so that once
** it completes a reader's live bytes equal the VM's own count.
**
** It does not walk the heap itself: it rides the collector, which already
** visits every object without stopping the program and stays correct
** while the program allocates, frees and moves objects between lists.
** After the stream starts, the collector's next flip of its whites (the
** end of a mark phase, which marked everything live) arms it; the sweep
** that follows announces each live object it keeps that is not of the new
** white (those were allocated after the flip, hence already streamed).
** Open upvalues are swept with their threads; one closed before its
** thread is swept moves to the swept part of the root list, and is
** announced as it moves.  At the sweep's end, what it never visits is
** announced: objects waiting for their finalizers, and the VM's own
** blocks (its state, the string table, the JIT's and the FFI's buffers).
** No pointer into the heap is kept between two calls.
**
** An object allocated after the stream started but before the flip is
** announced although its allocation was streamed, and an old block may
** be freed or moved before the sweep reaches it: readers drop the first
** (an allocation at a live address while a census runs) and count the
** second apart from unknown frees.  The markers that open and close the
** census (symbol events at reserved addresses, lm_format.h) carry the
** VM's count of heap bytes, which a reader's live bytes then match.
**
** While a census waits for the collector, the collector works in slices
** of at most CENSUS_SLICE_NS, each followed by as long for the program,
** whenever it allocates (lj_gc.c: gc_census_step), so that the census
** completes in about twice the time of one collector cycle, or at the
** pace a live reader takes its events.  A program
** that allocates nothing makes no progress (and needs none: its heap is
** what it was).
*/
#define CENSUS_SLICE_NS (1000 * 1000ull)
/* The census writes at most a buffer a slice, and waits while the way to
** a live reader is over a quarter full, looking again after CENSUS_WAIT_NS: a
** reader slower than the census slows the census, not the program. */
#define CENSUS_WAIT_NS (500 * 1000ull)
#define CENSUS_BACKLOG_MAX 25
#define CENSUS_PREFIX "[before profiling] "
#define CENSUS_NAME_MAX 48  /* bytes of a metatable's __name kept */
#define CENSUS_NAMES_MAX 1024  /* names by metatable; later ones by type */
#define CENSUS_NAMES_SLOTS 2048

LJ_DATADEF int lj_memprof_census_on;

/* Blocks by the type of what owns them. */
enum {
  CT_STRING, CT_UPVAL, CT_THREAD, CT_CFUNC, CT_TRACE, CT_CDATA, CT_TABLE,
  CT_UDATA, CT_BUFFER, CT__MAX
};

static const char *const census_type_name[CT__MAX] = {
  "string", "upvalue", "thread", "C function", "trace", "cdata", "table",
  "userdata", "string.buffer"
};

/* Names by metatable (__name), interned by content; addresses follow
** the types'. */
typedef struct CensusName {
  uint16_t id;  /* 1 + index, 0: empty */
  uint8_t kind, len;
  char s[CENSUS_NAME_MAX];
} CensusName;

typedef struct CensusNames {
  uint32_t n;
  CensusName slot[CENSUS_NAMES_SLOTS];
} CensusNames;

static uint64_t census_clock_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int census_running(const Memprof *mp)
{
  return mp->census.state == LJ_MEMPROF_CENSUS_WAITING ||
	 mp->census.state == LJ_MEMPROF_CENSUS_SWEEPING;
}

int lj_memprof_census_running(global_State *g)
{
  Memprof *mp = memprof_of(g);
  return mp != NULL && census_running(mp);
}

/* A name at a reserved address: a symbol event (name prefixed). */
static void census_name(Memprof *mp, uint64_t addr, const char *prefix,
			const char *name, size_t len, uint64_t line)
{
  char buf[sizeof(CENSUS_PREFIX) + 16 + CENSUS_NAME_MAX + 1];
  size_t plen = strlen(prefix);
  if (len > sizeof(buf) - plen) len = sizeof(buf) - plen;
  memcpy(buf, prefix, plen);
  memcpy(buf + plen, name, len);
  mp_reserve(mp, MEMPROF_ITEM_MAX);
  mp_byte(mp, EV_HEADER(EV_SYMTAB, SRC_LFUNC));
  mp_uleb(mp, addr);
  mp_string(mp, buf, plen + len);
  mp_uleb(mp, line);
  mp_fast_end(mp);  /* The room it counted on is used. */
}

static uint64_t census_type_site(Memprof *mp, int kind)
{
  uint64_t addr = LM_CENSUS_TYPE_FIRST + (uint64_t)kind;
  if (!(mp->census_types & (1u << kind))) {
    const char *t = census_type_name[kind];
    mp->census_types |= 1u << kind;
    census_name(mp, addr, CENSUS_PREFIX, t, strlen(t), 0);
  }
  return addr;
}

static uint32_t census_name_hash(int kind, const char *s, size_t len)
{
  uint32_t h = 2166136261u ^ (uint32_t)kind;
  size_t i;
  for (i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
  return h;
}

/* The site of a table or userdata: by its metatable's __name if it has a
** string there, else by type. */
static uint64_t census_named_site(Memprof *mp, int kind, GCtab *mt)
{
  CensusNames *cn;
  cTValue *tv;
  GCstr *name;
  const char *s;
  size_t len;
  uint32_t k;
  if (mt == NULL || mp->census_key == NULL ||
      (tv = lj_tab_getstr(mt, mp->census_key)) == NULL || !tvisstr(tv))
    return census_type_site(mp, kind);
  name = strV(tv);
  s = strdata(name);
  len = name->len < CENSUS_NAME_MAX ? name->len : CENSUS_NAME_MAX;
  if ((cn = mp->census_names) == NULL) {
    cn = mp->census_names = (CensusNames *)calloc(1, sizeof(CensusNames));
    if (cn == NULL) return census_type_site(mp, kind);
  }
  for (k = census_name_hash(kind, s, len) & (CENSUS_NAMES_SLOTS - 1);
       cn->slot[k].id != 0; k = (k + 1) & (CENSUS_NAMES_SLOTS - 1)) {
    const CensusName *e = &cn->slot[k];
    if (e->kind == kind && e->len == len && memcmp(e->s, s, len) == 0)
      return LM_CENSUS_TYPE_FIRST + CT__MAX + e->id - 1;
  }
  if (cn->n >= CENSUS_NAMES_MAX) return census_type_site(mp, kind);
  {
    CensusName *e = &cn->slot[k];
    char prefix[sizeof(CENSUS_PREFIX) + 16];
    uint64_t addr = LM_CENSUS_TYPE_FIRST + CT__MAX + cn->n;
    e->id = (uint16_t)++cn->n;
    e->kind = (uint8_t)kind;
    e->len = (uint8_t)len;
    memcpy(e->s, s, len);
    snprintf(prefix, sizeof(prefix), "%s%s ", CENSUS_PREFIX,
	     census_type_name[kind]);
    census_name(mp, addr, prefix, s, len, 0);
    return addr;
  }
}

/* One block, as an allocation at (site, line). */
static void census_block(Memprof *mp, uint64_t site, uint64_t line,
			 const void *p, uint64_t size)
{
  if (p == NULL || size == 0) return;
  mp_fast_end(mp);
  mp_reserve(mp, MEMPROF_ITEM_MAX);
  mp_byte(mp, EV_HEADER(EV_ALLOC, SRC_LFUNC));
  mp_uleb(mp, site);
  mp_uleb(mp, line);
  mp_uleb(mp, (uintptr_t)p);
  mp_uleb(mp, size);
  mp->census.blocks++;
  mp->census.bytes += size;
  mp->events++;
}

static void census_type_block(Memprof *mp, int kind, const void *p,
			      uint64_t size)
{
  if (p != NULL && size != 0)
    census_block(mp, census_type_site(mp, kind), 0, p, size);
}

/* The blocks a table owns, as lj_tab_free frees them. */
static void census_table(Memprof *mp, GCtab *t)
{
  uint64_t site = census_named_site(mp, CT_TABLE, tabref(t->metatable));
  if (t->hmask > 0)
    census_block(mp, site, 0, noderef(t->node),
		 (uint64_t)(t->hmask + 1) * sizeof(Node));
  if (t->asize > 0 && LJ_MAX_COLOSIZE != 0 && t->colo <= 0)
    census_block(mp, site, 0, tvref(t->array),
		 (uint64_t)t->asize * sizeof(TValue));
  if (LJ_MAX_COLOSIZE != 0 && t->colo)
    census_block(mp, site, 0, t, sizetabcolo((uint32_t)t->colo & 0x7f));
  else
    census_block(mp, site, 0, t, sizeof(GCtab));
}

/* A userdata, and a string buffer's own memory (lj_bufx_free). */
static void census_udata(Memprof *mp, GCudata *ud)
{
  census_block(mp, census_named_site(mp, CT_UDATA, tabref(ud->metatable)), 0,
	       ud, sizeudata(ud));
#if LJ_HASBUFFER
  if (ud->udtype == UDTYPE_BUFFER) {
    SBufExt *sbx = (SBufExt *)uddata(ud);
    if (!sbufiscoworborrow(sbx))
      census_type_block(mp, CT_BUFFER, sbx->b, sbufsz(sbx));
  }
#endif
}

/* Where a prototype is defined; the library's own Lua functions (built
** from bytecode) have no line. */
static uint64_t census_line(const GCproto *pt)
{
  return pt->firstline > 0 ? (uint64_t)pt->firstline : 0;
}

/* An object's blocks, as the collector's free functions free them. */
static void census_object(Memprof *mp, global_State *g, GCobj *o)
{
  switch (o->gch.gct) {
  case ~LJ_TSTR:
    census_type_block(mp, CT_STRING, o, lj_str_size(gco2str(o)->len));
    break;
  case ~LJ_TUPVAL:
    census_type_block(mp, CT_UPVAL, o, sizeof(GCupval));
    break;
  case ~LJ_TTHREAD: {
    lua_State *th = gco2th(o);
    /* The main thread lives in GG_State, one of the VM's own blocks. */
    if (th != mainthread(g))
      census_type_block(mp, CT_THREAD, th, sizeof(lua_State));
    census_type_block(mp, CT_THREAD, tvref(th->stack),
		      (uint64_t)th->stacksize * sizeof(TValue));
    break;
  }
  case ~LJ_TPROTO: {
    GCproto *pt = gco2pt(o);
    census_block(mp, (uintptr_t)pt, census_line(pt), pt, pt->sizept);
    break;
  }
  case ~LJ_TFUNC: {
    GCfunc *fn = gco2func(o);
    if (isluafunc(fn)) {
      GCproto *pt = funcproto(fn);
      census_block(mp, (uintptr_t)pt, census_line(pt), fn,
		   sizeLfunc((MSize)fn->l.nupvalues));
    } else {
      census_type_block(mp, CT_CFUNC, fn, sizeCfunc((MSize)fn->c.nupvalues));
    }
    break;
  }
#if LJ_HASJIT
  case ~LJ_TTRACE: {
    GCtrace *T = gco2trace(o);
    census_type_block(mp, CT_TRACE, T,
		      ((sizeof(GCtrace) + 7) & ~7) +
		      (T->nins - T->nk) * sizeof(IRIns) +
		      T->nsnap * sizeof(SnapShot) +
		      T->nsnapmap * sizeof(SnapEntry));
    break;
  }
#endif
#if LJ_HASFFI
  case ~LJ_TCDATA: {
    GCcdata *cd = gco2cd(o);
    if (cdataisv(cd)) {
      census_type_block(mp, CT_CDATA, memcdatav(cd), sizecdatav(cd));
    } else {
      CType *ct = ctype_raw(ctype_ctsG(g), cd->ctypeid);
      CTSize sz = ctype_hassize(ct->info) ? ct->size : CTSIZE_PTR;
      census_type_block(mp, CT_CDATA, cd, sizeof(GCcdata) + sz);
    }
    break;
  }
#endif
  case ~LJ_TTAB:
    census_table(mp, gco2tab(o));
    break;
  case ~LJ_TUDATA:
    census_udata(mp, gco2ud(o));
    break;
  default:
    break;
  }
}

void lj_memprof_census_obj(global_State *g, GCobj *o)
{
  Memprof *mp = memprof_of(g);
  if (mp == NULL || mp->census.state != LJ_MEMPROF_CENSUS_SWEEPING ||
      mp->err != 0 || (o->gch.marked & curwhite(g)))
    return;
  census_object(mp, g, o);
}

void lj_memprof_census_flip(global_State *g)
{
  Memprof *mp = memprof_of(g);
  if (mp != NULL && mp->census.state == LJ_MEMPROF_CENSUS_WAITING)
    mp->census.state = LJ_MEMPROF_CENSUS_SWEEPING;
}

static void census_internal(Memprof *mp, const void *p, uint64_t size)
{
  if (p != NULL && size != 0)
    census_block(mp, LM_CENSUS_INTERNALS, 0, p, size);
}

/* The VM's own blocks, as close_state (lj_state.c) frees them. */
static void census_internals(Memprof *mp, global_State *g)
{
#if LJ_HASJIT
  jit_State *J = G2J(g);
#endif
#if LJ_HASFFI
  CTState *cts = ctype_ctsG(g);
#endif
  census_internal(mp, G2GG(g), sizeof(GG_State));
  census_internal(mp, g->str.tab, (uint64_t)(g->str.mask + 1) * sizeof(GCRef));
  census_internal(mp, g->tmpbuf.b, sbufsz(&g->tmpbuf));
#if LJ_64
  if (mref(g->gc.lightudseg, uint32_t)) {
    MSize segnum = g->gc.lightudnum ? (2 << lj_fls(g->gc.lightudnum)) : 2;
    census_internal(mp, mref(g->gc.lightudseg, uint32_t),
		    (uint64_t)segnum * sizeof(uint32_t));
  }
#endif
#if LJ_HASJIT
  census_internal(mp, J->snapmapbuf, (uint64_t)J->sizesnapmap *
		  sizeof(SnapEntry));
  census_internal(mp, J->snapbuf, (uint64_t)J->sizesnap * sizeof(SnapShot));
  if (J->irbuf != NULL)
    census_internal(mp, J->irbuf + J->irbotlim,
		    (uint64_t)(J->irtoplim - J->irbotlim) * sizeof(IRIns));
  census_internal(mp, J->trace, (uint64_t)J->sizetrace * sizeof(GCRef));
#endif
#if LJ_HASFFI
  if (cts != NULL) {
    census_internal(mp, cts->tab, (uint64_t)cts->sizetab * sizeof(CType));
    census_internal(mp, cts->cb.cbid,
		    (uint64_t)cts->cb.sizeid * sizeof(CTypeID1));
    census_internal(mp, cts, sizeof(CTState));
  }
#endif
}

/* The census is over, one way or the other: the collector's hooks off. */
static void census_end(Memprof *mp, int state)
{
  mp->census.state = state;
  mp->census.end_ns = census_clock_ns();
  mp->census_key = NULL;
  free(mp->census_names);
  mp->census_names = NULL;
  __atomic_sub_fetch(&lj_memprof_census_on, 1, __ATOMIC_RELAXED);
}

void lj_memprof_swept(global_State *g)
{
  Memprof *mp = memprof_of(g);
  /* Not through a pipe: there a write lends the reader a whole buffer of
  ** the ring, however little it holds (see nbufs). */
  if (mp != NULL && mp->opt.nbufs <= 1 && mp_len(mp) > 0) mp_flush(mp);
}

void lj_memprof_census_swept(global_State *g)
{
  Memprof *mp = memprof_of(g);
  GCobj *last;
  if (mp == NULL || mp->census.state != LJ_MEMPROF_CENSUS_SWEEPING) return;
  /* Objects waiting for their finalizers: userdata the flip separated,
  ** cdata the sweep kept for theirs. */
  if ((last = gcref(g->gc.mmudata)) != NULL) {
    GCobj *o = last;
    do {
      o = gcref(o->gch.nextgc);
      census_object(mp, g, o);
    } while (o != last);
  }
  census_internals(mp, g);
  mp->census.total_end = g->gc.total;
  census_name(mp, LM_CENSUS_COMPLETE, "", "[census complete]", 17,
	      g->gc.total);
  census_end(mp, LJ_MEMPROF_CENSUS_COMPLETE);
}

/* "__name", for names by metatable: made (and fixed, as the collector
** must not free what the census reads) in protected mode. */
static int census_make_key(lua_State *L)
{
  GCstr **key = (GCstr **)lua_touserdata(L, 1);
  GCstr *s = lj_str_newlit(L, "__name");
  fixstring(s);
  *key = s;
  return 0;
}

/* A census begins with the stream: its marker, then the collector's
** hooks on and a step due at the next allocation check. */
static void census_begin(Memprof *mp, lua_State *L)
{
  global_State *g = G(L);
  GCstr *key = NULL;
  if (lua_cpcall(L, census_make_key, &key) != 0) lua_pop(L, 1);
  memset(&mp->census, 0, sizeof(mp->census));
  mp->census_key = key;
  mp->census_types = 0;
  mp->census_names = NULL;
  mp->next_slice_ns = 0;
  mp->census.state = LJ_MEMPROF_CENSUS_WAITING;
  mp->census.total_begin = g->gc.total;
  mp->census.begin_ns = census_clock_ns();
  census_name(mp, LM_CENSUS_BEGIN, "", "[census begin]", 14, g->gc.total);
  census_name(mp, LM_CENSUS_INTERNALS, CENSUS_PREFIX, "VM internals", 12, 0);
  __atomic_add_fetch(&lj_memprof_census_on, 1, __ATOMIC_RELAXED);
  /* A stopped collector (collectgarbage("stop")) stays stopped: the
  ** census then waits for it. */
  if (g->gc.threshold != LJ_MAX_MEM) g->gc.threshold = g->gc.total;
}

/* Where the stream stands: bytes written out and buffered. */
static uint64_t mp_pos(const Memprof *mp)
{
  return mp->stream_bytes + mp_len(mp);
}

int lj_memprof_census_slice_begin(global_State *g)
{
  Memprof *mp = memprof_of(g);
  uint64_t now = census_clock_ns();
  if (mp == NULL) return 0;
  if (now < mp->next_slice_ns) return 0;
  if (mp->opt.backlog != NULL &&
      mp->opt.backlog(mp->opt.ctx) > CENSUS_BACKLOG_MAX) {
    mp->next_slice_ns = now + CENSUS_WAIT_NS;
    return 0;
  }
  mp->slice_ns = now;
  mp->slice_pos = mp_pos(mp);
  return 1;
}

int lj_memprof_census_slice_more(global_State *g)
{
  Memprof *mp = memprof_of(g);
  return mp != NULL && mp_pos(mp) - mp->slice_pos < MEMPROF_BUFSZ &&
	 census_clock_ns() - mp->slice_ns < CENSUS_SLICE_NS;
}

void lj_memprof_census_slice_end(global_State *g)
{
  Memprof *mp = memprof_of(g);
  uint64_t now = census_clock_ns();
  if (mp != NULL) mp->next_slice_ns = now + (now - mp->slice_ns);
}

static Memprof *memprof_find(global_State *g);

void lj_memprof_census_get(global_State *g, MemprofCensus *out)
{
  Memprof *mp;
  memprof_lock_take();
  mp = memprof_find(g);
  if (mp != NULL) *out = mp->census;
  else memset(out, 0, sizeof(*out));
  memprof_lock_give();
}

/* -- Allocation sites ---------------------------------------------------- */

struct MemprofJitSite;

/* A site: the source, and its address and line (or trace number); or, on
** compiled code, the site it stored, whose event head is encoded. */
typedef struct Site {
  int src;
  uint64_t addr, line;
  const struct MemprofJitSite *jit;
} Site;

#if LJ_MEMPROF_JITSITES
/*
** Lines inside compiled code.  The recorder gives each IR instruction the
** line of the bytecode it came from: a number for a (prototype address,
** line) pair, interned per VM (MemprofJitLine).  The assembler asks, for
** each call a trace makes, for its instruction's site: a number standing
** for that line on that trace (MemprofJitSite), which the trace stores
** before the call (lj_asm_x86.h) and the allocator reads on the trace.  A
** site holds its allocation event's header and location, encoded once, so
** that an event copies them: the line, at a stand-in for its prototype for
** the trace (see "Stand-ins" below), which tells readers the trace too.  A
** call whose instruction has no line (or no room for a site) stores the
** trace's own site, which names the trace by its number, as elsewhere.
**
** Lines live as long as the VM, up to MEMPROF_JIT_MAXLINE; past it, new
** instructions have none.  A trace's sites are made while it is assembled,
** given their stand-ins when it is saved, and made free again once another
** trace is saved under its number (an assembly that fails frees its own
** at the next).  Numbers only, read inside the allocator: the tables are
** outside the Lua heap, and a prototype is read only to announce a live
** trace's stand-ins.
**
** Stand-ins: the k-th prototype a trace allocates for has, for that trace,
** the address of the trace's machine code plus k: an address of its own
** for the pair, which no GC object can have.  It is announced as a
** prototype with the real one's chunk name and first line (so that any R3
** reader names its events by their lines), right after a symbol event that
** says which trace it stands for (LM_STANDIN_ADDR, lm_format.h): when the
** trace is saved, or in the symbol table of a stream that starts while it
** lives.  A trace made at the same address after a flush announces its own.
*/
#define MEMPROF_JIT_MAXLINE (1u << 20)
#define MEMPROF_JIT_MAXSITE (1u << 20)
#define MEMPROF_JIT_NREF 32768  /* Instruction refs, REF_BIAS to 65535. */

/* A line, in the chain of frames a trace runs it in: the line of its
** caller's frame on the trace (0: none, the trace's root frame runs it).
** pt is a prototype, or (ffid << 1 | 1) for a builtin's frame (pcall's,
** on the way to a function it calls), whose line is 0. */
typedef struct MemprofJitLine {
  uintptr_t pt;
  uint32_t line;
  uint32_t parent;
  uint32_t tail;  /* its frame was entered by a tail call (see tail_entered) */
  uint32_t asm_no;  /* The assembly that last asked for it, */
  uint32_t asm_site;  /* and the site it got there. */
  uint64_t mix;  /* frame_mix() of its frame in a stack (jit_frame()) */
} MemprofJitLine;

typedef struct MemprofJitSite {
  /* An allocation event's header and location, as the stream has them
  ** (the header, two ULEBs of at most 7 and 5 bytes): an event copies all
  ** 16 bytes, and keeps len of them. */
  uint8_t ev[16];
  uint32_t len;
  uint32_t line;  /* Its line (0: the trace's number); if free, the next. */
  uint64_t unused;
} MemprofJitSite;  /* 32 bytes: an index is a shift. */

/* Site 0, stored by nothing but compiled code that found no room for a
** site of its own: internal. */
static const MemprofJitSite jit_nosite = {
  {EV_HEADER(EV_ALLOC, SRC_INTERNAL)}, 1, 0, 0
};

/* A saved trace's: its sites, its stand-ins' prototypes, and the lines of
** the allocations the JIT may sink, for the exits (snapshot restore) and
** side traces (replay) that make them.  By trace number, with the trace,
** as numbers are reused. */
typedef struct MemprofJitTrace {
  const GCtrace *T;
  uint32_t nsite, nstandin, nsunk;
  uint32_t *site;
  uint32_t *sunk;  /* nsunk pairs: an allocation's ref, its line. */
  uintptr_t standin[1];  /* The prototype of stand-in k, at T->mcode + k. */
} MemprofJitTrace;

typedef struct MemprofJitSites {
  MemprofJitLine *line;  /* By id; line[0] is none. */
  uint32_t nline, szline;
  uint32_t *hash;  /* Line ids by (pt, line), open addressing; 0 is empty. */
  uint32_t hmask;
  uint32_t lua_line;  /* The line of the last Lua bytecode recorded. */
  MemprofJitSite *site;  /* By id; site[0] is jit_nosite. */
  uint32_t nsite, szsite;
  uint32_t free_site;  /* The first free site, 0: none. */
  uint32_t asm_no;  /* The assembly under way, from 1. */
  uint32_t *pend;  /* Its sites of lines, */
  uint32_t npend, szpend;
  uint32_t pend_no;  /* and its site of the trace's number (0: none yet). */
  MemprofJitTrace **trace;  /* By trace number. */
  uint32_t sztrace;
  uint32_t irline[MEMPROF_JIT_NREF];  /* The current trace's, by ref. */
} MemprofJitSites;

static uint32_t jit_hash(uintptr_t pt, uint32_t line, uint32_t parent,
			 uint32_t tail)
{
  uint64_t h = ((uint64_t)pt ^ ((uint64_t)line << 40) ^ line) *
	       0x9e3779b97f4a7c15ull;
  h = (h ^ parent ^ ((uint64_t)tail << 32)) * 0xff51afd7ed558ccdull;
  return (uint32_t)(h >> 32);
}

/* Doubles the hash (or makes its first); 0 if out of memory. */
static int jit_rehash(MemprofJitSites *js)
{
  uint32_t n = js->hmask ? (js->hmask + 1) * 2 : 1024, i;
  uint32_t *h = (uint32_t *)calloc(n, sizeof(uint32_t));
  if (h == NULL) return 0;
  for (i = 1; i < js->nline; i++) {
    uint32_t k = jit_hash(js->line[i].pt, js->line[i].line,
			  js->line[i].parent, js->line[i].tail) & (n - 1);
    while (h[k] != 0) k = (k + 1) & (n - 1);
    h[k] = i;
  }
  free(js->hash);
  js->hash = h;
  js->hmask = n - 1;
  return 1;
}

/* Line l's frame in a stack: a builtin's (see build_builtin), or its
** prototype's at its line. */
static LJ_AINLINE void jit_frame(const MemprofJitLine *l, StackFrame *f)
{
  if (l->pt & 1) {
    f->tag = LM_FRAME_C;
    f->addr = l->pt >> 1;
  } else {
    f->tag = (uint64_t)l->line << 2 | LM_FRAME_LUA;
    f->addr = l->pt;
  }
}

/* The line id of (pt, line) called from parent, made if new; 0 if there
** is no room. */
static uint32_t jit_intern(MemprofJitSites *js, uintptr_t pt, uint32_t line,
			   uint32_t parent, uint32_t tail)
{
  uint32_t k, id;
  if ((js->nline + 1) * 2 > js->hmask + 1 && !jit_rehash(js)) return 0;
  for (k = jit_hash(pt, line, parent, tail) & js->hmask;
       (id = js->hash[k]) != 0; k = (k + 1) & js->hmask)
    if (js->line[id].pt == pt && js->line[id].line == line &&
	js->line[id].parent == parent && js->line[id].tail == tail)
      return id;
  if (js->nline >= MEMPROF_JIT_MAXLINE) return 0;
  if (js->nline == js->szline) {
    uint32_t sz = js->szline ? js->szline * 2 : 1024;
    MemprofJitLine *l = (MemprofJitLine *)realloc(js->line, sz * sizeof(*l));
    if (l == NULL) return 0;
    js->line = l;
    js->szline = sz;
  }
  if (js->nline == 0) js->nline = 1;  /* Id 0 is none. */
  id = js->nline++;
  js->line[id].pt = pt;
  js->line[id].line = line;
  js->line[id].parent = parent;
  js->line[id].tail = tail;
  js->line[id].asm_no = 0;
  js->line[id].asm_site = 0;
  {
    StackFrame f;
    jit_frame(&js->line[id], &f);
    js->line[id].mix = frame_mix(f.tag, f.addr);
  }
  js->hash[k] = id;
  return id;
}

/*
** The chain of the frame being recorded on the trace: its caller's line,
** interned with its own caller's, down to the trace's root frame (0 if
** the root frame is the one recorded).  The recorder runs beside the
** interpreter, so the frames it has inlined are on the stack: from the
** current one (L->base) down to the root, J->baseslot slots below.  A
** walk that does not meet the root frame exactly names no chain.  *tail:
** whether the frame recorded was entered by a tail call, as each frame's
** node says of its own: for the frames the trace inlined, as the stream
** tracking them saw the recorder's run (see lj_memprof_stacks.h); for the
** root frame, whether the trace replaced it by a tail call (the frame
** there when the trace runs says the rest, see jit_build).
*/
#define JIT_CHAIN_MAX 64

static uint32_t jit_caller_line(jit_State *J, MemprofJitSites *js,
				uint32_t *tail)
{
  lua_State *L = J->L;
  cTValue *root = L->base - J->baseslot + LJ_FR2, *cur = L->base - 1;
  uintptr_t pt[JIT_CHAIN_MAX];
  uint32_t line[JIT_CHAIN_MAX], tails[JIT_CHAIN_MAX], n = 0, parent = 0;
  StackWalk w;
  GCfunc *fn;
  BCLine l;
  *tail = J->ljmp_roottail;
  if (cur <= root) return 0;
  walk_init(&w, L, cur, NULL);
  walk_skip(&w);  /* The frame recorded: J->pt's. */
  *tail = w.tails != NULL && tail_entered(w.tails, w.next);
  while (n < JIT_CHAIN_MAX && walk_next(&w, &fn, &l)) {
    if (w.at < root) return 0;
    pt[n] = isluafunc(fn) ? (uintptr_t)funcproto(fn) :
	    isffunc(fn) ? ((uintptr_t)fn->c.ffid << 1 | 1) : 1;
    line[n] = l < 0 ? 0 : (uint32_t)l;
    tails[n++] = w.at == root ? J->ljmp_roottail
			      : w.tails != NULL && tail_entered(w.tails, w.next);
    if (w.at == root) break;
  }
  if (n == 0 || w.at != root) return 0;
  while (n-- > 0 &&
	 (parent = jit_intern(js, pt[n], line[n], parent, tails[n])) != 0) ;
  return parent;
}

/* Frames a trace runs at a line (its chain, innermost first), then the
** frames below the trace, from its root frame's at root_base (NULL: none
** known), with st's line cache. */
static void jit_build(StackBuild *b, const MemprofJitSites *js, uint32_t id,
		      lua_State *L, cTValue *root_base, MemStacks *st)
{
  StackWalk w;
  uint32_t tail = 0;  /* the last node's */
  for (; id != 0 && js != NULL; id = js->line[id].parent) {
    const MemprofJitLine *l = &js->line[id];
    StackFrame f;
    if (build_full(b)) {
      build_truncated(b);
      return;
    }
    if (l->pt & 1) {  /* a builtin's frame: pcall's and its kin, rare */
      build_builtin(b, (uint32_t)(l->pt >> 1));
    } else {
      jit_frame(l, &f);
      build_put(b, f.tag, f.addr, l->mix);
    }
    tail = l->tail;
    if (tail && build_tail_fits(b)) build_marker(b, LM_MARK_TAILCALL);
  }
  if (root_base == NULL) return;
  walk_init(&w, L, root_base - 1, NULL);
  w.st = st;
  if (b->n > 0) {
    walk_skip(&w);  /* The root frame, the chain's last. */
    if (!tail) {  /* Its entry is the last. */
      b->at[b->n - 1] = w.at;
      if (build_joins(b, st, w.at)) return;
    }
    /* Unless the trace replaced it, how the root frame was entered. */
    if (!tail && w.tails != NULL && tail_entered(w.tails, w.next) &&
	build_tail_fits(b))
      build_marker(b, LM_MARK_TAILCALL);
  }
  build_walk(b, &w);
}

/* The VM's tables, made at its first recorded instruction (so before any
** trace runs).  Outside the Lua heap: they are the profiler's, and read
** inside the allocator. */
static MemprofJitSites *jit_sites(jit_State *J)
{
  if (J->ljmp_sites == NULL) {
    J->ljmp_sitetab = &jit_nosite;
    J->ljmp_sites = (MemprofJitSites *)calloc(1, sizeof(MemprofJitSites));
  }
  return J->ljmp_sites;
}

void lj_memprof_jit_ins(jit_State *J, uint32_t ref)
{
  MemprofJitSites *js;
  uint32_t id = 0;
  if (ref < REF_BIAS || ref - REF_BIAS >= MEMPROF_JIT_NREF ||
      (js = jit_sites(J)) == NULL)
    return;
  if (J->pt != NULL && J->pc != NULL) {
    BCLine line = lj_debug_line(J->pt, proto_bcpos(J->pt, J->pc));
    if (line >= 0) {
      uint32_t tail, parent = jit_caller_line(J, js, &tail);
      id = jit_intern(js, (uintptr_t)J->pt, (uint32_t)line, parent, tail);
    }
    js->lua_line = id;
  } else {
    /* A fast function, recorded at its own entry: what it makes is its
    ** Lua caller's, at the call just recorded (as in the interpreter). */
    id = js->lua_line;
  }
  js->irline[ref - REF_BIAS] = id;
}

void lj_memprof_jit_copy(jit_State *J, uint32_t ref, uint32_t from)
{
  MemprofJitSites *js = J->ljmp_sites;
  if (js != NULL && ref >= REF_BIAS && from >= REF_BIAS &&
      ref - REF_BIAS < MEMPROF_JIT_NREF && from - REF_BIAS < MEMPROF_JIT_NREF)
    js->irline[ref - REF_BIAS] = js->irline[from - REF_BIAS];
}

/* Encodes a site as an allocation at addr (a prototype or a stand-in) and
** line. */
static void jit_site_at(MemprofJitSite *s, uintptr_t addr, uint32_t line)
{
  uint8_t enc[32];  /* put_uleb() may store 7 bytes past the end. */
  uint8_t *e = enc;
  *e++ = EV_HEADER(EV_ALLOC, SRC_LFUNC);
  e = put_uleb(put_uleb(e, addr), line);
  memcpy(s->ev, enc, sizeof(s->ev));
  s->len = (uint32_t)(e - enc);
}

/* Encodes a site as an allocation on trace traceno. */
static void jit_site_trace(MemprofJitSite *s, uint32_t traceno)
{
  uint8_t enc[32];
  uint8_t *e = enc;
  *e++ = EV_HEADER(EV_ALLOC, SRC_TRACE);
  e = put_uleb(e, traceno);
  memcpy(s->ev, enc, sizeof(s->ev));
  s->len = (uint32_t)(e - enc);
}

/* A new site of line (0: the trace's number), from the free ones or
** made; 0 if there is no room.  Sites only move when the table grows,
** which compiled code, not running while a trace is assembled, never
** sees: the allocator reads them through ljmp_sitetab. */
static uint32_t jit_site_new(jit_State *J, MemprofJitSites *js, uint32_t line)
{
  uint32_t id = js->free_site;
  if (id != 0) {
    js->free_site = js->site[id].line;
  } else {
    if (js->nsite >= MEMPROF_JIT_MAXSITE) return 0;
    if (js->nsite == js->szsite) {
      uint32_t sz = js->szsite ? js->szsite * 2 : 1024;
      MemprofJitSite *s = (MemprofJitSite *)realloc(js->site, sz * sizeof(*s));
      if (s == NULL) return 0;
      js->site = s;
      js->szsite = sz;
      J->ljmp_sitetab = s;
    }
    if (js->nsite == 0) js->site[js->nsite++] = jit_nosite;
    id = js->nsite++;
  }
  js->site[id].line = line;
  js->site[id].unused = 0;
  return id;
}

/* A site no trace stores any more: free, and still a valid event head
** (as it was) for a stale read. */
static void jit_site_free(MemprofJitSites *js, uint32_t id)
{
  js->site[id].line = js->free_site;
  js->free_site = id;
}

/* Frees the sites of an assembly that made no trace. */
static void jit_pend_free(MemprofJitSites *js)
{
  uint32_t i;
  for (i = 0; i < js->npend; i++) jit_site_free(js, js->pend[i]);
  if (js->pend_no != 0) jit_site_free(js, js->pend_no);
  js->npend = js->pend_no = 0;
}

/* The assembler starts on a trace (again, after an abort or an mcode
** limit): a new set of sites. */
void lj_memprof_jit_asm(jit_State *J)
{
  MemprofJitSites *js = J->ljmp_sites;
  if (js == NULL) return;
  jit_pend_free(js);
  if (++js->asm_no == 0) {  /* Wrapped: no line may seem asked already. */
    uint32_t i;
    for (i = 1; i < js->nline; i++) js->line[i].asm_no = 0;
    js->asm_no = 1;
  }
}

uint32_t lj_memprof_jit_site(jit_State *J, uint32_t ref)
{
  MemprofJitSites *js = J->ljmp_sites;
  uint32_t line, id;
  if (js == NULL || ref < REF_BIAS || ref - REF_BIAS >= MEMPROF_JIT_NREF)
    return 0;
  line = js->irline[ref - REF_BIAS];
  if (line != 0) {
    MemprofJitLine *l = &js->line[line];
    if (l->asm_no == js->asm_no) return l->asm_site;
    if (js->npend == js->szpend) {
      uint32_t sz = js->szpend ? js->szpend * 2 : 64;
      uint32_t *p = (uint32_t *)realloc(js->pend, sz * sizeof(*p));
      if (p != NULL) {
	js->pend = p;
	js->szpend = sz;
      }
    }
    if (js->npend < js->szpend && (id = jit_site_new(J, js, line)) != 0) {
      /* The prototype itself until the trace is saved with its stand-ins. */
      jit_site_at(&js->site[id], l->pt, l->line);
      js->pend[js->npend++] = id;
      l->asm_no = js->asm_no;
      l->asm_site = id;
      return id;
    }
  }
  if (js->pend_no == 0 && (id = jit_site_new(J, js, 0)) != 0) {
    jit_site_trace(&js->site[id], J->cur.traceno);
    js->pend_no = id;
  }
  return js->pend_no;
}

static int jit_sinkable(const IRIns *ir)
{
  return ir->o == IR_TNEW || ir->o == IR_TDUP || ir->o == IR_CNEW ||
	 ir->o == IR_CNEWI;
}

/* Frees a trace's record and the sites it held. */
static void jit_trace_free(MemprofJitSites *js, MemprofJitTrace *t)
{
  uint32_t i;
  if (t == NULL) return;
  for (i = 0; i < t->nsite; i++) jit_site_free(js, t->site[i]);
  free(t);
}

/* The trace T was saved: its sites get their stand-ins, and its record
** what the exits and side traces that make its sunk allocations need. */
void lj_memprof_jit_trace(jit_State *J, const GCtrace *T)
{
  MemprofJitSites *js = J->ljmp_sites;
  MemprofJitTrace *t;
  IRRef ref;
  uint32_t nsunk = 0, nsite, i, no = T->traceno;
  if (js == NULL) return;
  if (no >= js->sztrace) {
    uint32_t sz = no + 64;
    MemprofJitTrace **v = (MemprofJitTrace **)realloc(js->trace,
						      sz * sizeof(*v));
    if (v == NULL) goto keep;
    memset(v + js->sztrace, 0, (sz - js->sztrace) * sizeof(*v));
    js->trace = v;
    js->sztrace = sz;
  }
  jit_trace_free(js, js->trace[no]);  /* A freed trace's, of the number. */
  js->trace[no] = NULL;
  if (T->nins - REF_BIAS <= MEMPROF_JIT_NREF)
    for (ref = REF_FIRST; ref < T->nins; ref++)
      if (jit_sinkable(&T->ir[ref])) nsunk++;
  nsite = js->npend + (js->pend_no != 0);
  /* At most one stand-in a site. */
  t = (MemprofJitTrace *)malloc(sizeof(*t) + js->npend * sizeof(uintptr_t) +
				(nsite + 2 * nsunk) * sizeof(uint32_t));
  if (t == NULL) goto keep;
  t->T = T;
  t->nsite = t->nstandin = t->nsunk = 0;
  t->site = (uint32_t *)(t->standin + (js->npend ? js->npend : 1));
  t->sunk = t->site + nsite;
  for (i = 0; i < js->npend; i++) {
    MemprofJitSite *s = &js->site[js->pend[i]];
    const MemprofJitLine *l = &js->line[s->line];
    uint32_t k;
    for (k = 0; k < t->nstandin && t->standin[k] != l->pt; k++) ;
    if (k == t->nstandin && k < T->szmcode) t->standin[t->nstandin++] = l->pt;
    if (k < t->nstandin)
      jit_site_at(s, (uintptr_t)T->mcode + k, l->line);
    t->site[t->nsite++] = js->pend[i];
  }
  if (js->pend_no != 0) t->site[t->nsite++] = js->pend_no;
  if (nsunk != 0)
    for (ref = REF_FIRST; ref < T->nins; ref++)
      if (jit_sinkable(&T->ir[ref])) {
	t->sunk[2 * t->nsunk] = ref;
	t->sunk[2 * t->nsunk + 1] = js->irline[ref - REF_BIAS];
	t->nsunk++;
      }
  js->trace[no] = t;
keep:
  /* The trace's now (out of memory: kept as they are, at the prototypes
  ** themselves, for good). */
  js->npend = js->pend_no = 0;
}

/* The record of trace T, or NULL. */
static const MemprofJitTrace *jit_trace_of(const MemprofJitSites *js,
					   const GCtrace *T)
{
  const MemprofJitTrace *t;
  if (js == NULL || T->traceno >= js->sztrace ||
      (t = js->trace[T->traceno]) == NULL || t->T != T)
    return NULL;
  return t;
}

uint32_t lj_memprof_jit_sunk_site(jit_State *J, const GCtrace *T,
				  uint32_t ref)
{
  const MemprofJitTrace *t = jit_trace_of(J->ljmp_sites, T);
  uint32_t i;
  if (t == NULL) return 0;
  for (i = 0; i < t->nsunk; i++)
    if (t->sunk[2 * i] == ref) return t->sunk[2 * i + 1];
  return 0;
}

void lj_memprof_jit_replay(jit_State *J, uint32_t ref, const GCtrace *T,
			   uint32_t pref)
{
  uint32_t line = lj_memprof_jit_sunk_site(J, T, pref);
  if (line != 0 && ref >= REF_BIAS && ref - REF_BIAS < MEMPROF_JIT_NREF)
    J->ljmp_sites->irline[ref - REF_BIAS] = line;
}

void lj_memprof_jit_free(jit_State *J)
{
  MemprofJitSites *js = J->ljmp_sites;
  uint32_t i;
  J->ljmp_sites = NULL;
  J->ljmp_sitetab = &jit_nosite;  /* No site names freed tables. */
  J->ljmp_site = J->ljmp_exit_site = 0;
  if (js == NULL) return;
  for (i = 0; i < js->sztrace; i++) free(js->trace[i]);
  free(js->trace);
  free(js->pend);
  free(js->site);
  free(js->line);
  free(js->hash);
  free(js);
}

/* The symbol that says which trace a stand-in stands for: its header and
** name, then the trace number. */
static void mp_standin_of(Memprof *mp, int symtab, uint32_t traceno)
{
  mp_reserve(mp, MEMPROF_ITEM_MAX);
  mp_byte(mp, symtab ? SYM_LFUNC : EV_HEADER(EV_SYMTAB, SRC_LFUNC));
  mp_uleb(mp, LM_STANDIN_ADDR);
  mp_string(mp, LM_STANDIN_NAME, sizeof(LM_STANDIN_NAME) - 1);
  mp_uleb(mp, traceno);
}

/* Announces the stand-ins of trace T (a live one: the prototypes it
** allocates for are alive), as symbol table entries or as events. */
static void jit_say_standins(Memprof *mp, global_State *g, const GCtrace *T,
			    int symtab)
{
  const MemprofJitTrace *t = jit_trace_of(G2J(g)->ljmp_sites, T);
  uint32_t k;
  for (k = 0; t != NULL && k < t->nstandin; k++) {
    const GCproto *pt = (const GCproto *)t->standin[k];
    GCstr *name = proto_chunkname(pt);
    mp_standin_of(mp, symtab, T->traceno);
    mp_reserve(mp, MEMPROF_ITEM_MAX);
    mp_byte(mp, symtab ? SYM_LFUNC : EV_HEADER(EV_SYMTAB, SRC_LFUNC));
    mp_uleb(mp, (uintptr_t)T->mcode + k);
    mp_string(mp, strdata(name), name->len);
    mp_uleb(mp, pt->firstline);
  }
}

/* The line stored for an exit's sunk allocation, as a Site: 1, or 0 if
** none. */
static int jit_exit_site(global_State *g, Site *s)
{
  jit_State *J = G2J(g);
  const MemprofJitLine *l;
  if (J->ljmp_exit_site == 0 || J->ljmp_sites == NULL) return 0;
  l = &J->ljmp_sites->line[J->ljmp_exit_site];
  s->src = SRC_LFUNC;
  s->addr = l->pt;
  s->line = l->line;
  return 1;
}
#endif

/*
** The function running on the allocating thread.  The interpreter's and
** C's states both end here: a Lua function names its line; a fast
** function, the line of its Lua caller; a C function, its address.
*/
static void site_of_frame(const Memprof *mp, Site *s)
{
  global_State *g = mp->g;
  lua_State *L = gco2th(gcref(g->cur_L));
  cTValue *frame;
  GCobj *o;
  GCfunc *fn;

  s->src = SRC_INTERNAL;
  if (L == NULL || mp->moving) return;  /* L->base may be stale. */
  frame = L->base - 1;
  if (frame <= tvref(L->stack) + LJ_FR2) return;  /* The bottom frame. */
  o = frame_gc(frame);
  if (o->gch.gct != ~LJ_TFUNC) return;  /* The dummy frame of a thread. */
  fn = &o->fn;
  if (isluafunc(fn)) {
    BCLine line = lj_debug_frameline(L, fn, NULL);
    if (line < 0) return;
    s->src = SRC_LFUNC;
    s->addr = (uintptr_t)funcproto(fn);
    s->line = (uint64_t)line;
    return;
  }
  if (isffunc(fn) && frame_islua(frame)) {
    cTValue *caller = frame_prevl(frame);
    GCobj *co;
    if (caller > tvref(L->stack) + LJ_FR2 &&
	(co = frame_gc(caller))->gch.gct == ~LJ_TFUNC &&
	isluafunc(&co->fn)) {
      BCLine line = lj_debug_frameline(L, &co->fn, frame);
      if (line >= 0) {
	s->src = SRC_LFUNC;
	s->addr = (uintptr_t)funcproto(&co->fn);
	s->line = (uint64_t)line;
	return;
      }
    }
  }
  s->src = SRC_CFUNC;
  s->addr = (uintptr_t)fn->c.f;
}

static void site_now(const Memprof *mp, Site *s)
{
  global_State *g = mp->g;
  int32_t st = g->vmstate;
  s->addr = s->line = 0;
  s->jit = NULL;
  if (st > 0) {  /* Running compiled code: the site it stored. */
#if LJ_MEMPROF_JITSITES
    jit_State *J = G2J(g);
    s->jit = &J->ljmp_sitetab[J->ljmp_site];
    s->src = s->jit->ev[0] >> 2;
#else
    s->src = SRC_TRACE;
    s->line = (uint64_t)st;
#endif
    return;
  }
  switch (~st) {
  case LJ_VMST_INTERP: case LJ_VMST_C:
    site_of_frame(mp, s);
    break;
#if LJ_MEMPROF_JITSITES
  case LJ_VMST_EXIT:  /* A sunk allocation made at an exit, or internal. */
    if (!jit_exit_site(g, s)) s->src = SRC_INTERNAL;
    break;
#endif
  default:  /* GC, trace exits, the compiler; 0, before the VM ran. */
    s->src = SRC_INTERNAL;
    break;
  }
}

/* An event's header (event ev) and location. */
static LJ_AINLINE uint8_t *put_head(uint8_t *p, int ev, const Site *s,
				    int pdep)
{
#if LJ_MEMPROF_JITSITES
  if (s->jit != NULL) {  /* Encoded as an allocation's. */
    memcpy(p, s->jit->ev, sizeof(s->jit->ev));  /* Within the room. */
    *p = (uint8_t)((*p & ~3) | ev);
    return p + s->jit->len;
  }
#endif
  *p++ = EV_HEADER(ev, s->src);
  switch (s->src) {
  case SRC_LFUNC:
    p = put_uleb_with(p, s->addr, pdep);
    return put_uleb_with(p, s->line, pdep);
  case SRC_CFUNC:
    return put_uleb_with(p, s->addr, pdep);
  case SRC_TRACE:
    return put_uleb_with(p, s->line, pdep);
  default:
    return p;
  }
}

/* L's stack at the allocation at site s, in b, in VM state vmst: frames
** while fewer than cap entries, tail calls' markers while fewer than
** tailcap; from join down, the kept one's (StackBuild). */
static void stacks_build(StackBuild *b, MemStacks *st, const Site *s,
			 lua_State *L, int32_t vmst, uintptr_t join)
{
  global_State *g = G(L);
  b->n = b->nbuiltin = b->coroutine = b->truncated = b->joined = 0;
  b->join = join;
  if (vmst > 0 || vmst == ~LJ_VMST_EXIT) {
#if LJ_MEMPROF_JITSITES
    jit_State *J = G2J(g);
    const MemprofJitSites *js = J->ljmp_sites;
    uint32_t id = vmst > 0 ? s->jit->line : J->ljmp_exit_site;
    if (js == NULL || id >= js->nline) id = 0;  /* a freed site's */
    jit_build(b, js, id, L, vmst > 0 ? tvref(g->jit_base) : L->base, st);
#else
    UNUSED(s);
    if (vmst > 0) {
      StackWalk w;
      walk_init(&w, L, tvref(g->jit_base) - 1, NULL);
      build_walk(b, &w);
    }
#endif
  } else if (vmst == ~LJ_VMST_INTERP || vmst == ~LJ_VMST_C) {
    StackWalk w;
    walk_init(&w, L, L->base - 1, NULL);
    w.st = st;
    build_walk(b, &w);
  }
}

#ifdef LUA_USE_ASSERT
/* The stack sent is the one a walk to the depth finds (the checked VM's
** builds check each, that the kept stack and its cut are right). */
static void stacks_check(MemStacks *st, const Site *s, lua_State *L,
			 int32_t vmst, uint32_t depth, const StackFrame *f,
			 uint32_t n)
{
  StackBuild *b = (StackBuild *)malloc(sizeof(StackBuild));
  if (b == NULL) return;
  b->cap = b->tailcap = b->depth = depth;
  stacks_build(b, st, s, L, vmst, 0);
  if (b->n != n || memcmp(b->f, f, n * sizeof(StackFrame)) != 0) {
    fprintf(stderr, "ljmp: the stack sent (%u entries, kept from %u, "
	    "%s) is not the one walked (%u entries)\n", (unsigned)n,
	    (unsigned)st->kept.top, st->kept.cut ? "cut" : "whole",
	    (unsigned)b->n);
    abort();
  }
  free(b);
}
#endif

/* The stack of the allocation at site s (not internal), announced if
** new; 0 if none. */
static uint32_t stacks_capture(Memprof *mp, const Site *s)
{
  global_State *g = mp->g;
  lua_State *L = gco2th(gcref(g->cur_L));
  int32_t vmst = g->vmstate;
  /* A trace's exit writes frames as it goes: a stack taken then is not
  ** kept. */
  int keep = vmst != ~LJ_VMST_EXIT;
  MemStacks *st;
  StackKept *k;
  StackBuild b;
  const StackFrame *f;
  uint32_t n, id;
  uint64_t hash;
  TValue *base;
  int same;
  if (L == NULL || (st = stacks_table(mp)) == NULL) return 0;
  k = &st->kept;
  b.depth = mp->stacks;
  b.cap = b.depth + KEPT_EXTRA;
  b.tailcap = b.cap + 2;  /* every one */
  /* On a trace L->base is stale; lj_debug_framepos() starts there to find
  ** the C frame of a frame below a C one: the trace's base, meanwhile. */
  base = L->base;
  if (vmst > 0) L->base = tvref(g->jit_base);
  stacks_build(&b, st, s, L, vmst, keep ? kept_bound(st, g, L) : 0);
  if (b.n == 0) {
    L->base = base;
    return 0;
  }
  if (b.nbuiltin != 0) stacks_say_builtins(mp, st, &b);
  same = kept_take(k, &b, L);
#ifdef LUA_USE_ASSERT
  f = kept_stack(k, b.depth, b.f, &n, &hash);
  stacks_check(st, s, L, vmst, b.depth, f, n);
#endif
  L->base = base;
  if (same && k->id != 0) {
    id = k->id;
  } else {
    f = kept_stack(k, b.depth, b.f, &n, &hash);
    id = k->id = stacks_id(mp, st, f, n, hash);
  }
  if (keep) {
    setmref(g->ljmp_low, (TValue *)~(uintptr_t)0);  /* none made since */
  } else {
    k->L = NULL;
  }
  return id;
}

/* -- The allocator wrapper ----------------------------------------------- */

static int memprof_finish(Memprof *mp);

/* A fast event: a site's 16 bytes (an allocation at a line inside a
** trace: at most 13 of them kept), two ULEBs of at most 10 bytes, and the
** 7 bytes past its end put_uleb() may store. */
#define MEMPROF_FAST_MAX 48
/* The room the general path leaves for a run of fast events. */
#define MEMPROF_FAST_ROOM (MEMPROF_CLOCK_EVERY * MEMPROF_FAST_MAX)

/*
** An event of any kind from any state, after the allocator ran: the
** general path.  It also arms the fast paths for the next run of events,
** with room for them in the buffer, and reads the clock.
*/
static LJ_AINLINE void *memprof_record(Memprof *mp, void *ptr, size_t osize,
				       size_t nsize, void *nptr, int pdep,
				       int direct)
{
  int rearm = mp->fast_left == 0, counted = mp->sample_due;
  uint32_t sid = 0;
  Site s;
  if (mp->g == NULL) return nptr;
  if (mp->err != 0) {
    /* The writer failed (a reader gone, a stall too long): the profile
    ** ends here and the program goes on with its own allocator. */
    memprof_finish(mp);
    return nptr;
  }
  mp->events++;
  site_now(mp, &s);
  /* A stack reallocation is a single call: if it throws (out of memory),
  ** the flag must not outlive it. */
  mp->moving = 0;
  mp->sample_due = 0;
  if (nsize != 0 && s.src != SRC_INTERNAL &&
      stacks_wanted(mp, nsize, counted))
    sid = stacks_capture(mp, &s);
  mp_reserve(mp, MEMPROF_ITEM_MAX);
  {
    uint8_t *p = mp->cur, *head = p;
    if (nsize == 0) {
      p = put_head(p, EV_FREE, &s, pdep);
      p = put_uleb_addr(p, (uintptr_t)ptr, pdep, direct);
      p = put_uleb_with(p, osize, pdep);
    } else if (ptr == NULL) {
      p = put_head(p, EV_ALLOC, &s, pdep);
      p = put_uleb_addr(p, (uintptr_t)nptr, pdep, direct);
      p = put_uleb_with(p, nsize, pdep);
    } else {
      p = put_head(p, EV_REALLOC, &s, pdep);
      p = put_uleb_addr(p, (uintptr_t)ptr, pdep, direct);
      p = put_uleb_with(p, osize, pdep);
      p = put_uleb_addr(p, (uintptr_t)nptr, pdep, direct);
      p = put_uleb_with(p, nsize, pdep);
    }
    if (sid != 0) {
      *head |= LM_EV_STACK;
      p = put_uleb_with(p, sid, pdep);
    }
    mp->cur = p;
  }
  if (rearm || (mp->events & (MEMPROF_CLOCK_EVERY - 1)) == 0)
    mp_flush_if_stale(mp);
  if (mp_len(mp) > MEMPROF_BUFSZ - MEMPROF_FAST_ROOM) mp_flush(mp);
  if (rearm) {
    mp_fast_end(mp);  /* The last run's events, counted. */
    if (mp->err == 0) mp->fast_left = mp->armed = MEMPROF_CLOCK_EVERY;
  }
  return nptr;
}

/* The VM's allocator, with its own ud.  LuaJIT's own, the usual one, is
** called directly by wrappers made for it (direct): built as one unit,
** its dispatch merges into ours, and an event saves a call through a
** pointer. */
static LJ_AINLINE void *memprof_call(Memprof *mp, int direct, void *ptr,
				     size_t osize, size_t nsize)
{
#ifndef LUAJIT_USE_SYSMALLOC
  if (direct) return lj_alloc_f(mp->allocd, ptr, osize, nsize);
#endif
  UNUSED(direct);
  return mp->allocf(mp->allocd, ptr, osize, nsize);
}

/* The general path: the allocator, then the event from the stack.  ud,
** here and below, is the profiler (see memprof_of). */
static LJ_AINLINE void *memprof_general_with(void *ud, void *ptr,
					     size_t osize, size_t nsize,
					     int pdep, int direct)
{
  Memprof *mp = (Memprof *)ud;
  void *nptr = memprof_call(mp, direct, ptr, osize, nsize);
  return memprof_record(mp, ptr, osize, nsize, nptr, pdep, direct);
}

/*
** Everything but a collector's free, behind the wrapper below.  An
** allocation on a trace needs no stack walk: its header and site (as the
** site compiled code stored encodes them: the line at its prototype's
** stand-in for the trace, or the trace number) are copied before the
** allocator runs, its address and size written after, so that only the
** profiler is kept across the call (the size waits in it, the general
** path, a call of its own, would keep three).  The allocator changes
** neither the buffer's cursor nor fast_left, and cannot throw.  Anything
** else, or any event while fast_left is 0, takes the general path.
*/
static LJ_AINLINE void *memprof_other_with(void *ud, void *ptr, size_t osize,
					   size_t nsize, int pdep, int direct,
					   lua_Alloc general)
{
  Memprof *mp = (Memprof *)ud;
  global_State *g;
  void *nptr;
  uint8_t *p;
  if (LJ_UNLIKELY(mp->fast_left == 0 || ptr != NULL || nsize == 0) ||
      (g = mp->g)->vmstate <= 0)
    return general(ud, ptr, osize, nsize);
  /* A sample due (see lj_memprof_stacks.h): never with stacks off. */
  if (LJ_UNLIKELY((mp->sample_left -= (int64_t)nsize) <= 0)) {
    mp->sample_due = 1;
    return general(ud, ptr, osize, nsize);
  }
  p = mp->cur;
#if LJ_MEMPROF_JITSITES
  {
    jit_State *J = G2J(g);
    const MemprofJitSite *js = &J->ljmp_sitetab[J->ljmp_site];
    memcpy(p, js->ev, sizeof(js->ev));  /* Within the event's room. */
    mp->cur = p + js->len;
  }
#else
  *p = EV_HEADER(EV_ALLOC, SRC_TRACE);
  mp->cur = put_uleb_with(p + 1, (uint64_t)g->vmstate, pdep);
#endif
  mp->fast_nsize = nsize;
  nptr = memprof_call(mp, direct, NULL, osize, nsize);
  p = put_uleb_addr(mp->cur, (uintptr_t)nptr, pdep, direct);
  mp->cur = put_uleb_with(p, mp->fast_nsize, pdep);
  mp->fast_left--;
  return nptr;
}

/*
** The allocator wrapper.  Most events are frees by the collector and
** allocations on traces: their sites need no stack walk, and they are
** written behind one check (fast_left) for everything that needs the
** general path.  A collector's free, the commonest, is written here,
** before the block is freed, and every call this function makes is its
** last: it keeps nothing across one, so it saves no registers (a
** prologue and an epilogue would be a fifth of its instructions).
*/
static LJ_AINLINE void *memprof_event(void *ud, void *ptr, size_t osize,
				       size_t nsize, int pdep, int direct,
				       lua_Alloc other)
{
  Memprof *mp = (Memprof *)ud;
  uint32_t left = mp->fast_left;
  uint8_t *p;
  if (nsize != 0 || LJ_UNLIKELY(left == 0) ||
      mp->g->vmstate != ~LJ_VMST_GC)
    return other(ud, ptr, osize, nsize);
  p = mp->cur;
  *p = EV_HEADER(EV_FREE, SRC_INTERNAL);
  p = put_uleb_addr(p + 1, (uintptr_t)ptr, pdep, direct);
  mp->cur = put_uleb_with(p, osize, pdep);
  mp->fast_left = left - 1;
  return memprof_call(mp, direct, ptr, osize, 0);
}

/* A wrapper `name` and the function behind it, compiled for PDEP or not
** and for LuaJIT's allocator (direct) or any. */
#define MEMPROF_WRAPPER(name, attr, pdep, direct)                        \
  static LJ_NOINLINE attr void *name##_general(void *ud, void *ptr,      \
					       size_t osize, size_t nsize) \
  {                                                                      \
    return memprof_general_with(ud, ptr, osize, nsize, pdep, direct);    \
  }                                                                      \
  static LJ_NOINLINE attr void *name##_other(void *ud, void *ptr,        \
					     size_t osize, size_t nsize) \
  {                                                                      \
    return memprof_other_with(ud, ptr, osize, nsize, pdep, direct,       \
			      name##_general);                           \
  }                                                                      \
  static attr void *name(void *ud, void *ptr, size_t osize, size_t nsize) \
  {                                                                      \
    return memprof_event(ud, ptr, osize, nsize, pdep, direct,            \
			 name##_other);                                  \
  }

MEMPROF_WRAPPER(memprof_allocf, , 0, 0)
#ifndef LUAJIT_USE_SYSMALLOC
MEMPROF_WRAPPER(memprof_allocf_lj, , 0, 1)
#endif
#ifdef LM_HAVE_BMI2
MEMPROF_WRAPPER(memprof_allocf_pdep, __attribute__((target("bmi2"))), 1, 0)
#ifndef LUAJIT_USE_SYSMALLOC
MEMPROF_WRAPPER(memprof_allocf_pdep_lj, __attribute__((target("bmi2"))), 1, 1)
#endif
#endif

/* The wrapper for this CPU (PDEP halves the cost of an event's ULEBs)
** and this allocator. */
static lua_Alloc memprof_wrapper(lua_Alloc allocf)
{
#ifndef LUAJIT_USE_SYSMALLOC
  int direct = allocf == lj_alloc_f;
#endif
  UNUSED(allocf);
#ifdef LM_HAVE_BMI2
  static int fast = -1;
  if (fast < 0) fast = lm_bmi2_is_fast();
#ifndef LUAJIT_USE_SYSMALLOC
  if (fast && direct) return memprof_allocf_pdep_lj;
#endif
  if (fast) return memprof_allocf_pdep;
#endif
#ifndef LUAJIT_USE_SYSMALLOC
  if (direct) return memprof_allocf_lj;
#endif
  return memprof_allocf;
}

static int memprof_is_wrapper(lua_Alloc f)
{
  return f == memprof_allocf
#ifndef LUAJIT_USE_SYSMALLOC
	 || f == memprof_allocf_lj
#endif
#ifdef LM_HAVE_BMI2
	 || f == memprof_allocf_pdep
#ifndef LUAJIT_USE_SYSMALLOC
	 || f == memprof_allocf_pdep_lj
#endif
#endif
	 ;
}

/* -- Start and stop ------------------------------------------------------ */

/* g's record, or NULL (under memprof_lock). */
static Memprof *memprof_find(global_State *g)
{
  Memprof *mp;
  for (mp = memprof_list; mp != NULL; mp = mp->next)
    if (mp->vm == g) return mp;
  return NULL;
}

/* g's record, made if it has none yet (under memprof_lock); NULL out of
** memory.  Not from the Lua heap: it is written inside the allocator. */
static Memprof *memprof_record_of(global_State *g)
{
  Memprof *mp = memprof_find(g);
  if (mp != NULL) return mp;
  mp = (Memprof *)calloc(1, sizeof(*mp));
  if (mp == NULL) return NULL;
  mp->vm = g;
  mp->next = memprof_list;
  memprof_list = mp;
  return mp;
}

int lj_memprof_running(global_State *g)
{
  Memprof *mp;
  int r;
  memprof_lock_take();
  mp = memprof_find(g);
  r = mp != NULL && mp->g != NULL;
  memprof_lock_give();
  return r;
}

int lj_memprof_error(global_State *g)
{
  Memprof *mp;
  int r = 0;
  memprof_lock_take();
  if ((mp = memprof_find(g)) != NULL)
    r = mp->g != NULL ? mp->err : mp->last_err;
  memprof_lock_give();
  return r;
}

/* Gives the VM its allocator back (a host that installed its own
** meanwhile keeps it): no more events. */
static void memprof_detach(Memprof *mp)
{
  global_State *g = mp->g;
  if (g->allocf == mp->wrapper && g->allocd == (void *)mp) {
    g->allocf = mp->allocf;
    g->allocd = mp->allocd;
  }
  tails_stop(g);
  mp->g = NULL;
  mp_fast_end(mp);
  if (census_running(mp)) census_end(mp, LJ_MEMPROF_CENSUS_PARTIAL);
}

/* The ring's bytes: its buffers, and a spare one for a failed stream (see
** mp_fail), never sent, never resident until then. */
static size_t memprof_ring_size(const Memprof *mp)
{
  return ((size_t)mp->opt.nbufs + 1) * MEMPROF_BUFSZ;
}

/* Unmaps the buffers and tells the writer how the stream ended.  Pages
** a writer lent to a pipe stay there, the pipe's, until read. */
static void memprof_release(Memprof *mp, int err)
{
  MemprofResult res;
  munmap(mp->ring, memprof_ring_size(mp));
  mp->ring = mp->buf = NULL;
  stacks_free(mp);
  res.events = mp->events;
  res.stream_bytes = mp->stream_bytes;
  res.err = err;
  if (mp->opt.on_stop) mp->opt.on_stop(mp->opt.ctx, &res);
}

/*
** A child forked while profiling holds a copy of each profile, writer
** and file descriptor included: its events would interleave with its
** parent's in one stream.  So in the child the profiles end at once,
** without writing a byte, and each writer hears of it through on_stop
** with ECHILD (the socket writer then starts a session of the child's
** own).  glibc runs this for fork() but not for posix_spawn() or vfork(),
** whose children share the parent's memory and only exec.  The list's
** lock, taken before the fork, is released in the parent and made anew
** in the child.
*/
static void memprof_forking(void)
{
  memprof_lock_take();
}

static void memprof_forked_parent(void)
{
  memprof_lock_give();
}

static void memprof_forked(void)
{
  Memprof *mp;
  for (mp = memprof_list; mp != NULL; mp = mp->next) {
    if (mp->g == NULL) continue;
    memprof_detach(mp);
    mp->last_err = 0;
    memprof_release(mp, ECHILD);
  }
  /* The lock is the forking thread's, which the child's thread is not
  ** (a recursive mutex knows its owner): made anew. */
  memprof_lock_init();
}

static int memprof_finish(Memprof *mp);

/*
** A program that exits without stopping its profiles (os.exit() without
** its close flag, exit() from C) would leave their last buffers unwritten
** and their streams without an end: ljmpd would call the sessions
** truncated.  The streams are ended at exit instead, for writers that say
** how (MemprofOptions.at_exit: a socket's bounds its wait for the
** reader); only the profilers' own state and writers are touched, not the
** Lua heaps.
*/
static void memprof_exiting(void)
{
  Memprof *mp;
  memprof_lock_take();
  for (mp = memprof_list; mp != NULL; mp = mp->next) {
    /* Only a writer that asks for it (not a host's, whose state may be
    ** gone by now), and only on the thread that started the profile:
    ** exit() on another would race with the VM's own thread inside the
    ** allocator. */
    if (mp->g == NULL || mp->opt.at_exit == NULL ||
	!pthread_equal(mp->owner, pthread_self()))
      continue;
    mp->opt.at_exit(mp->opt.ctx);
    memprof_finish(mp);
  }
  memprof_lock_give();
}

/* The process-wide handlers, once: at fork and at exit. */
static void memprof_handle_process(void)
{
  static int fork_handled, exit_handled;
  if (!fork_handled)
    fork_handled = pthread_atfork(memprof_forking, memprof_forked_parent,
				  memprof_forked) == 0;
  if (!exit_handled) exit_handled = atexit(memprof_exiting) == 0;
}

/* A stream's start on g's record mp, idle (under memprof_lock). */
static int memprof_start_on(Memprof *mp, lua_State *L,
			    const MemprofOptions *opt)
{
  MemprofResult res = {0, 0, 0};
  /* Mapped, not malloc's: pages lent to a pipe must never be handed to
  ** the program once the profile ends (see memprof_release). */
  mp->opt = *opt;
  if (mp->opt.nbufs == 0 || mp->opt.next_buf == NULL) mp->opt.nbufs = 1;
  mp->ring = (uint8_t *)mmap(NULL, memprof_ring_size(mp),
			     PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mp->ring == MAP_FAILED) {
    mp->ring = NULL;
    res.err = ENOMEM;
    if (opt->on_stop) opt->on_stop(opt->ctx, &res);
    return LJ_MEMPROF_ERRMEM;
  }
  mp->owner = pthread_self();
  mp->buf = mp->cur = mp->ring;
  mp->filling = 0;
  mp->err = 0;
  mp->moving = 0;
  mp->fast_left = mp->armed = 0;
  mp->events = mp->stream_bytes = 0;
  memset(&mp->census, 0, sizeof(mp->census));
  mp->stacks = opt->stacks > LM_STACK_MAX_DEPTH ? LM_STACK_MAX_DEPTH
						  : opt->stacks;
  mp->stack_sample = mp->stacks != 0 ? opt->stack_sample : 0;
  mp->st = NULL;
  stacks_arm(mp);
  dump_symtab(mp, G(L));
  mp_reserve(mp, MEMPROF_ITEM_MAX);
  mp_prologue(mp, "ljm");
  if (mp->stacks != 0) stacks_say_config(mp);
  mp_flush(mp);
  if (mp->err != 0) {
    int e = mp->err;
    memprof_release(mp, e);  /* Nothing was written: no events, no bytes. */
    errno = e;
    return LJ_MEMPROF_ERRIO;
  }
#if LJ_MEMPROF_JITSITES
  /* Compiled code's sites, read inside the allocator: none yet. */
  if (G2J(G(L))->ljmp_sitetab == NULL) G2J(G(L))->ljmp_sitetab = &jit_nosite;
#endif
  mp->allocf = lua_getallocf(L, &mp->allocd);
  mp->last_err = 0;
  mp->g = G(L);
  mp->wrapper = memprof_wrapper(mp->allocf);
  lua_setallocf(L, mp->wrapper, mp);
  if (mp->stacks != 0) tails_start(L);
  /* After the wrapper: "__name", if the census makes it, is streamed. */
  if (opt->census) census_begin(mp, L);
  return LJ_MEMPROF_OK;
}

int lj_memprof_start(lua_State *L, const MemprofOptions *opt)
{
  MemprofResult res = {0, 0, 0};
  Memprof *mp;
  int r;
  memprof_lock_take();
  memprof_handle_process();
  mp = memprof_record_of(G(L));
  if (mp == NULL || mp->g != NULL) {
    memprof_lock_give();
    res.err = mp == NULL ? ENOMEM : EBUSY;
    if (opt->on_stop) opt->on_stop(opt->ctx, &res);
    return mp == NULL ? LJ_MEMPROF_ERRMEM : LJ_MEMPROF_ERRRUN;
  }
  r = memprof_start_on(mp, L, opt);
  memprof_lock_give();
  return r;
}

/* Ends the stream: the epilogue, the last flush, the allocator back. */
static int memprof_finish(Memprof *mp)
{
  int e;
  memprof_detach(mp);
  mp_reserve(mp, MEMPROF_ITEM_MAX);
  mp_byte(mp, HDR_FINAL);
  mp_flush_as(mp, 1);  /* No buffer is filled after it. */
  e = mp->last_err = mp->err;
  memprof_release(mp, e);
  if (e != 0) {
    errno = e;
    return LJ_MEMPROF_ERRIO;
  }
  return LJ_MEMPROF_OK;
}

int lj_memprof_stop(lua_State *L)
{
  Memprof *mp;
  int r = LJ_MEMPROF_ERRRUN, e = 0;
  memprof_lock_take();
  mp = memprof_find(G(L));
  if (mp != NULL && mp->g != NULL) {
    r = memprof_finish(mp);
    e = errno;
    mp->last_err = 0;  /* Told to the caller now, not again. */
  } else if (mp != NULL && mp->last_err != 0) {
    /* A stream its writer ended is reported once, by the next stop. */
    e = mp->last_err;
    mp->last_err = 0;
    r = LJ_MEMPROF_ERRIO;
  }
  memprof_lock_give();
  if (r == LJ_MEMPROF_ERRIO) errno = e;
  return r;
}

/* The VM closes: its stream ends, and its record goes. */
void lj_memprof_close(global_State *g)
{
  Memprof **pp, *mp;
  memprof_lock_take();
  for (pp = &memprof_list; (mp = *pp) != NULL; pp = &mp->next) {
    if (mp->vm != g) continue;
    if (mp->g != NULL) memprof_finish(mp);
    *pp = mp->next;
    free(mp);
    break;
  }
  memprof_lock_give();
}
