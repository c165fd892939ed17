/*
** ljmp memory profiler: Lua call stacks of allocations (format R3S).
** New VM file of ljmp's luajit-patch (not part of LuaJIT), included by
** lj_memprof.c only, as LuaJIT's lj_asm_*.h are by lj_asm.c.
*/

/*
** A stream asked for stacks (MemprofOptions.stacks, the depth) writes,
** with each allocation and reallocation it samples, the id of the call
** chain that made it (docs/format.md, "Stacks (R3S)").  The chain is the
** allocating thread's frames, innermost first: a Lua function at its
** current line, a C function by its address, a builtin by its number
** (announced once as a C symbol named after it).  On compiled code the
** frames the trace runs, inlined calls included, come from the recorder
** (the chain of each instruction's line, lj_memprof.c's MemprofJitLine),
** and the frames below the trace from the stack.
**
** The profiler keeps a table of the stacks it has sent, so that a stack
** costs its frames once and an id after that.  The table is mapped pages,
** not the Lua heap (it is written inside the allocator), of a fixed size:
** when it is full, the stream says so (a reset) and the table starts
** again.  A stack names prototypes by address; a prototype announced at
** an address a stack in the table uses (the old one was freed) resets the
** table too, so that an id never outlives what its frames name.
**
** Sampling (stack_sample = M bytes): a Poisson process on allocated
** bytes, one point per M on average, as pprof's and tcmalloc's.  The
** distance to the next point counts down by each allocation's size, and
** an allocation that reaches it carries a stack.  With stacks off the
** distance is too far to reach, so the fast path for traces pays one
** subtraction; with every allocation sampled it is 0, and every
** allocation takes the general path.
*/

#include <math.h>

#define STACKS_SLOTS (1u << 16)  /* hash slots: ids, 0 empty */
#define STACKS_MAX (STACKS_SLOTS / 2)  /* stacks before a reset */
#define STACKS_WORDS (1u << 19)  /* frame words (two per frame) */
#define STACKS_PROTO_BITS (1u << 16)  /* prototypes stacks name, hashed */
#define STACKS_FAR INT64_MAX  /* the next sample, with stacks off */

/* A frame as the stream has it: tag (value << 2 | kind), address.  Lines,
** not bytecode positions: a line's calls at several positions (a
** recursive function's two calls in one expression) would make stacks
** without number. */
typedef struct StackFrame {
  uint64_t tag, addr;
} StackFrame;

typedef struct StackEntry {
  uint32_t hash;
  uint32_t n;  /* frames */
  uint32_t off;  /* the first frame's in words */
} StackEntry;

/* Lines of return addresses (a caller's call), looked up lately: a stack
** walk met the same calls over and over, and a line costs six loads
** from its prototype.  The cache is emptied when a prototype is
** announced: a new prototype may take a freed one's memory.  An entry is
** 32 bytes, that the walk finds it from the pc with a shift and a mask. */
#define LINE_CACHE 1024

typedef struct LineEntry {
  const BCIns *pc;  /* NULL: empty */
  StackFrame frame;  /* the caller's: its prototype at the call's line */
  uint64_t mix;  /* frame_mix() of it */
} LineEntry;

typedef struct MemStacks {
  LineEntry lines[LINE_CACHE];
  int lines_used;  /* some entry is filled */
  uint32_t slot[STACKS_SLOTS];
  StackEntry entry[STACKS_MAX + 1];  /* by id, from 1 */
  uint32_t nentry;
  uint32_t nwords;
  uint64_t builtins[256 / 64];  /* builtins announced, by number */
  uint64_t protos[STACKS_PROTO_BITS / 64];
  uint64_t words[STACKS_WORDS];
} MemStacks;

/* -- Sampling ------------------------------------------------------------ */

static uint64_t stacks_random(Memprof *mp)
{
  /* xorshift64*: the samples need no more than an even spread. */
  uint64_t x = mp->prng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  mp->prng = x;
  return x * 0x2545f4914f6cdd1dull;
}

/* An exponential draw of mean stack_sample, at least 1. */
static int64_t stacks_gap(Memprof *mp)
{
  double u = ((double)(stacks_random(mp) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  double gap = -log(u) * (double)mp->stack_sample;
  return gap < 1.0 ? 1 : gap > 4e18 ? (int64_t)4e18 : (int64_t)gap;
}

/* Whether an allocation of nsize bytes carries a stack.  counted: the
** trace's fast path has already taken nsize off the distance. */
static LJ_AINLINE int stacks_wanted(Memprof *mp, size_t nsize, int counted)
{
  if (mp->stacks == 0) return 0;
  if (mp->stack_sample == 0) {
    mp->sample_left = 0;
    return 1;
  }
  if (!counted) mp->sample_left -= (int64_t)nsize;
  if (mp->sample_left > 0) return 0;
  do mp->sample_left += stacks_gap(mp); while (mp->sample_left <= 0);
  return 1;
}

static void stacks_arm(Memprof *mp)
{
  mp->sample_due = 0;
  mp->prng = mp_clock_ns() ^ ((uint64_t)(uintptr_t)mp << 16) ^ 0x9e3779b97f4a7c15ull;
  if (mp->prng == 0) mp->prng = 1;
  if (mp->stacks == 0)
    mp->sample_left = STACKS_FAR;
  else if (mp->stack_sample == 0)
    mp->sample_left = 0;
  else
    mp->sample_left = stacks_gap(mp);
}

/* -- Tail calls --------------------------------------------------------- */

/*
** A tail call leaves no frame of the function that made it: the callee
** takes its frame.  So that a stack can say one was there ([tail call]
** below the callee), the interpreter tracks them while a stream takes
** stacks (x64 in GC64 mode, LJMP_TAILS; see lj_dispatch.h): BC_CALLT
** notes the base and function its callee gets; the callee's entry marks
** its base in a table, with its frame's link and function, and any other
** entry at that base unmarks it.  A frame is marked when the table's
** mark is its own: same base, link and function.  Calls inlined on a
** trace are marked from the recorder's frames (jit_caller_line).
*/
typedef struct LjmpTailEntry {
  uint64_t base;  /* with bit 0 set; 0: none */
  uint64_t link, func;
  uint64_t spare;
} LjmpTailEntry;

typedef struct LjmpTails {
  uint64_t call_base, call_func;  /* the tail call being made */
  uint64_t pad[LJMP_TAILS_HEAD / 8 - 2];
  LjmpTailEntry e[LJMP_TAILS_MASK + 1];
} LjmpTails;

LJ_STATIC_ASSERT(offsetof(LjmpTails, e) == LJMP_TAILS_HEAD);
LJ_STATIC_ASSERT(sizeof(LjmpTailEntry) == 32);

#ifdef LJMP_TAILS
/* Whether the function of the frame at f (its link's slot) was entered by
** a tail call. */
static LJ_AINLINE int tail_entered(const LjmpTails *t, cTValue *f)
{
  uintptr_t base = (uintptr_t)(f + 1);
  const LjmpTailEntry *e = &t->e[(base >> 4) & LJMP_TAILS_MASK];
  if (LJ_LIKELY(e->base != (base | 1))) return 0;
  return e->link == f->u64 && e->func == f[-1].u64;
}

/* The entry of a function at base, made by a call hook (lj_dispatch_call):
** lj_vm_ljmp_entry's work, in C. */
void LJ_FASTCALL lj_ljmp_tail_entry(global_State *g, cTValue *base)
{
  LjmpTails *t = mref(g->ljmp_tails, LjmpTails);
  LjmpTailEntry *e = &t->e[((uintptr_t)base >> 4) & LJMP_TAILS_MASK];
  uint64_t func = base[-2].u64, mark = (uintptr_t)base | 1;
  if (t->call_func == func && t->call_base == (uintptr_t)base) {
    t->call_func = 0;
    e->base = mark;
    e->link = base[-1].u64;
    e->func = func;
  } else if (e->base == mark) {
    e->base = 0;
  }
}

/* A tail call ins about to run in L's current frame, under instruction
** hooks (lj_dispatch_ins): lj_vm_ljmp_callt's work, in C. */
void LJ_FASTCALL lj_ljmp_tail_call(lua_State *L, BCIns ins)
{
  LjmpTails *t = mref(G(L)->ljmp_tails, LjmpTails);
  cTValue *base = L->base;
  uint64_t link = base[-1].u64, callee = (uintptr_t)base;
  if ((link & FRAME_TYPE) != FRAME_LUA && ((link - FRAME_VARG) & FRAME_TYPEP) == 0)
    callee -= link - FRAME_VARG;  /* A vararg frame's original base. */
  t->call_base = callee;
  t->call_func = base[bc_a(ins)].u64;
}

/* Tracks tail calls for L's streams from now.  The traces compiled so far
** were recorded without: they are flushed (as jit.flush() does), and
** compiled again with what they inline marked. */
static void tails_start(lua_State *L)
{
  global_State *g = G(L);
  void *p;
  if (mref(g->ljmp_tails, void) != NULL) return;
  p = mmap(NULL, sizeof(LjmpTails), PROT_READ | PROT_WRITE,
	   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return;  /* Stacks without their tail calls. */
  setmref(g->ljmp_tails, p);
  lj_dispatch_update(g);
#if LJ_HASJIT
  lj_trace_flushall(L);
#endif
}

static void tails_stop(global_State *g)
{
  void *p = mref(g->ljmp_tails, void);
  if (p == NULL) return;
  setmref(g->ljmp_tails, NULL);
  lj_dispatch_update(g);  /* Nothing reads the table after this. */
  munmap(p, sizeof(LjmpTails));
}

static const LjmpTails *tails_of(lua_State *L)
{
  return mref(G(L)->ljmp_tails, const LjmpTails);
}
#else
#define tail_entered(t, f) ((void)(t), (void)(f), 0)
#define tails_start(L) ((void)(L))
#define tails_stop(g) ((void)(g))
#define tails_of(L) ((void)(L), (const LjmpTails *)NULL)
#endif

/* -- Walking the stack --------------------------------------------------- */

typedef struct StackWalk {
  lua_State *L;
  cTValue *frame, *next, *bot;
  cTValue *at;  /* The frame of the function walk_next() found last. */
  MemStacks *st;  /* its line cache, or NULL */
  const LjmpTails *tails;  /* tail calls tracked, or NULL */
} StackWalk;

/* Walks L's frames from frame down; next is the frame above it (NULL for
** the innermost: its line comes from the C frame, as LuaJIT's own
** tracebacks take it). */
static void walk_init(StackWalk *w, lua_State *L, cTValue *frame,
		      cTValue *next)
{
  w->L = L;
  w->frame = frame;
  w->next = next;
  w->bot = tvref(L->stack) + LJ_FR2;
  w->at = NULL;
  w->st = NULL;
  w->tails = tails_of(L);
}

static LJ_AINLINE cTValue *walk_below(cTValue *f)
{
  return frame_islua(f) ? frame_prevl(f) : frame_prevd(f);
}

/* The line of bytecode position pos (not the end) of pt: lj_debug_line's
** look-up, inlined, as every frame of a stack takes it. */
static LJ_AINLINE BCLine pos_line(const GCproto *pt, BCPos pos)
{
  const void *info = proto_lineinfo(pt);
  if (pos >= pt->sizebc || info == NULL) return lj_debug_line((GCproto *)pt, pos);
  if (pos == 0) return pt->firstline;
  if (pt->numline < 256) return pt->firstline + ((const uint8_t *)info)[pos - 1];
  if (pt->numline < 65536)
    return pt->firstline + ((const uint16_t *)info)[pos - 1];
  return pt->firstline + (BCLine)((const uint32_t *)info)[pos - 1];
}

/* A frame's part of its stack's hash (see build_put()): the multiplication
** is here, once per frame met, not once per frame of every stack. */
static LJ_AINLINE uint64_t frame_mix(uint64_t tag, uint64_t addr)
{
  uint64_t x = (tag * 0x9e3779b97f4a7c15ull) ^ addr;
  x ^= x >> 29;
  return x * 0xbf58476d1ce4e5b9ull;
}

/* Fills e with the frame of Lua function fn, whose call returns to pc. */
static LJ_NOINLINE void line_fill(MemStacks *st, LineEntry *e, GCfunc *fn,
				  const BCIns *pc)
{
  GCproto *pt = funcproto(fn);
  BCLine line = pos_line(pt, proto_bcpos(pt, pc) - 1);
  st->lines_used = 1;
  e->pc = pc;
  e->frame.tag = (uint64_t)(line < 0 ? 0 : line) << 2 | LM_FRAME_LUA;
  e->frame.addr = (uintptr_t)pt;
  e->mix = frame_mix(e->frame.tag, e->frame.addr);
}

/* The cached frame of Lua function fn, whose call returns to pc. */
static LJ_AINLINE const LineEntry *call_frame(MemStacks *st, GCfunc *fn,
					      const BCIns *pc)
{
  /* pc >> 2, the instruction's number, picks the entry. */
  LineEntry *e = (LineEntry *)((char *)st->lines +
			       (((uintptr_t)pc << 3) &
				((LINE_CACHE - 1) * sizeof(LineEntry))));
  if (LJ_UNLIKELY(e->pc != pc)) line_fill(st, e, fn, pc);
  return e;
}

/* The line of fn's call that returns to pc. */
static LJ_AINLINE BCLine call_line(StackWalk *w, GCfunc *fn, const BCIns *pc)
{
  GCproto *pt;
  if (w->st != NULL) return (BCLine)(call_frame(w->st, fn, pc)->frame.tag >> 2);
  pt = funcproto(fn);
  return pos_line(pt, proto_bcpos(pt, pc) - 1);
}

/* The next function on the stack, as lj_debug_frame() counts them (a
** vararg function's frame once, no dummy frames), its frame in w->at and,
** unless line is NULL, the line it runs (-1 if none); 0 at the bottom. */
static LJ_AINLINE int walk_next(StackWalk *w, GCfunc **fn, BCLine *line)
{
  while (w->frame > w->bot) {
    cTValue *f = w->frame, *next = w->next;
    GCobj *o = frame_gc(f);
    w->next = f;
    w->frame = walk_below(f);
    if (frame_isvarg(f) && w->frame > w->bot) {
      /* The vararg function's original frame, below: the same call. */
      w->next = w->frame;
      w->frame = walk_below(w->frame);
    }
    if (o == obj2gco(w->L) || o->gch.gct != ~LJ_TFUNC) continue;
    w->at = f;
    *fn = &o->fn;
    if (line != NULL) {
      if (!isluafunc(*fn)) {
	*line = -1;
      } else if (next != NULL && frame_islua(next)) {  /* the common case */
	*line = call_line(w, *fn, frame_pc(next));
      } else {
	BCPos pos = lj_debug_framepos(w->L, *fn, next);
	*line = pos == ~(BCPos)0 ? -1 : lj_debug_line(funcproto(*fn), pos);
      }
    }
    return 1;
  }
  return 0;
}

/* Passes the next function, without its line. */
static LJ_AINLINE void walk_skip(StackWalk *w)
{
  GCfunc *fn;
  walk_next(w, &fn, NULL);
}

/* -- Collecting a stack -------------------------------------------------- */

#define TAIL_TAG ((uint64_t)LM_MARK_TAILCALL << 2 | LM_FRAME_MARKER)

typedef struct StackBuild {
  StackFrame f[LM_STACK_MAX_DEPTH + 1];
  uint64_t hash;  /* of the frames so far, not mixed to the end */
  uint32_t n, depth;
  uint32_t builtin[LM_STACK_MAX_DEPTH];  /* builtins used, to announce */
  uint32_t nbuiltin;
} StackBuild;

/* A stack's hash with one more frame, of frame_mix() mix: the rotation
** keeps the frames' order. */
static LJ_AINLINE uint64_t hash_step(uint64_t hash, uint64_t mix)
{
  return ((hash << 7) | (hash >> 57)) ^ mix;
}

/* Appends a frame, whose frame_mix() is mix, to b and its hash. */
static LJ_AINLINE void build_put(StackBuild *b, uint64_t tag, uint64_t addr,
				 uint64_t mix)
{
  StackFrame *f = &b->f[b->n++];
  f->tag = tag;
  f->addr = addr;
  b->hash = hash_step(b->hash, mix);
}

static LJ_AINLINE void build_frame(StackBuild *b, uint64_t tag, uint64_t addr)
{
  build_put(b, tag, addr, frame_mix(tag, addr));
}

static LJ_AINLINE void build_lua(StackBuild *b, const GCproto *pt,
				 BCLine line)
{
  build_frame(b, (uint64_t)(line < 0 ? 0 : line) << 2 | LM_FRAME_LUA,
	      (uintptr_t)pt);
}

static void build_builtin(StackBuild *b, uint32_t ffid)
{
  build_frame(b, LM_FRAME_C, ffid);
  b->builtin[b->nbuiltin++] = ffid;
}

static LJ_AINLINE void build_func(StackBuild *b, GCfunc *fn, BCLine line)
{
  if (isluafunc(fn))
    build_lua(b, funcproto(fn), line);
  else if (isffunc(fn))
    build_builtin(b, fn->c.ffid);
  else
    build_frame(b, LM_FRAME_C, (uintptr_t)fn->c.f);
}

static void build_marker(StackBuild *b, uint32_t marker)
{
  build_frame(b, (uint64_t)marker << 2 | LM_FRAME_MARKER, 0);
}

static int build_full(const StackBuild *b)
{
  return b->n >= b->depth;
}

/* The frames of w's walk, while they are the common kind: a Lua function
** whose call of the frame above came from its bytecode, so that what the
** stack says of it is its return address's, cached.  A deep stack is
** mostly such frames; walk_next() checks each kind of frame, and this
** loop the one it can meet. */
static void build_lua_run(StackBuild *b, StackWalk *w)
{
  cTValue *f = w->frame, *next = w->next, *bot = w->bot;
  MemStacks *st = w->st;
  uint32_t n = b->n, depth = b->depth;
  uint64_t hash = b->hash;  /* in registers: b->f's stores may alias b's */
  const LjmpTails *tails = w->tails;
  ptrdiff_t call;  /* next's link: if Lua's, the pc of f's call of it */
  if (st == NULL || next == NULL) return;
  call = frame_ftsz(next);
  /* Each frame's link is read once, before the frame is stored, which
  ** the compiler must assume may change it; it is the call of the frame
  ** below. */
  while ((call & FRAME_TYPE) == FRAME_LUA && n < depth && f > bot) {
    const LineEntry *e = call_frame(st, frame_func(f), (const BCIns *)call);
    ptrdiff_t link = frame_ftsz(f);
    cTValue *entry = f, *below;
    if ((link & FRAME_TYPE) == FRAME_LUA) {
      below = frame_prevl(f);
    } else {
      below = frame_prevd(f);
      if ((link & FRAME_TYPEP) == FRAME_VARG && below > bot) {
	/* The vararg function's original frame: as walk_next(). */
	entry = below;
	link = frame_ftsz(entry);
	below = walk_below(entry);
      }
    }
    b->f[n++] = e->frame;
    hash = hash_step(hash, e->mix);
    if (LJ_UNLIKELY(tails != NULL && tail_entered(tails, entry)) &&
	n < depth) {  /* as build_walk() */
      b->f[n].tag = TAIL_TAG;
      b->f[n++].addr = 0;
      hash = hash_step(hash, frame_mix(TAIL_TAG, 0));
    }
    next = entry;
    call = link;
    f = below;
  }
  w->frame = f;
  w->next = next;
  b->n = n;
  b->hash = hash;
}

/* The frames of w's walk, after those in b already, to the depth; a
** marker says what is left out (truncated), or that the bottom was a
** coroutine's. */
static void build_walk(StackBuild *b, StackWalk *w)
{
  GCfunc *fn;
  BCLine line;
  for (;;) {
    build_lua_run(b, w);
    if (!walk_next(w, &fn, &line)) break;
    if (build_full(b)) {
      build_marker(b, LM_MARK_TRUNCATED);
      return;
    }
    build_func(b, fn, line);
    /* w->next: the frame the function was entered at. */
    if (w->tails != NULL && tail_entered(w->tails, w->next) && !build_full(b))
      build_marker(b, LM_MARK_TAILCALL);
  }
  if (w->L != mainthread(G(w->L))) build_marker(b, LM_MARK_COROUTINE);
}

/* -- The table of stacks sent -------------------------------------------- */

/* b's hash, mixed to the end: each frame's part was mixed as it came
** (frame_mix()), so one multiplication spreads the rotations' sum. */
static LJ_AINLINE uint32_t stacks_hash(const StackBuild *b)
{
  uint64_t a = (b->hash ^ b->n) * 0x9e3779b97f4a7c15ull;
  return (uint32_t)(a >> 32) | 1;  /* never 0 */
}

static uint32_t proto_bit(uintptr_t pt)
{
  return (uint32_t)(((uint64_t)pt * 0x9e3779b97f4a7c15ull) >> 48);
}

static MemStacks *stacks_table(Memprof *mp)
{
  if (mp->st == NULL) {
    void *p = mmap(NULL, sizeof(MemStacks), PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    mp->st = (MemStacks *)p;  /* Zero-filled: empty. */
  }
  return mp->st;
}

static void stacks_free(Memprof *mp)
{
  if (mp->st != NULL) munmap(mp->st, sizeof(MemStacks));
  mp->st = NULL;
}

/* Forgets every stack sent, and tells the stream. */
static void stacks_reset(Memprof *mp)
{
  MemStacks *st = mp->st;
  if (st == NULL || st->nentry == 0) return;
  memset(st->slot, 0, sizeof(st->slot));
  memset(st->protos, 0, sizeof(st->protos));
  st->nentry = st->nwords = 0;
  mp_reserve(mp, MEMPROF_ITEM_MAX);
  mp_byte(mp, EV_HEADER(EV_SYMTAB, LM_SRC_STACK));
  mp_byte(mp, LM_STACK_RESET);
}

/* A prototype was announced: if a stack sent may name an old one at its
** address, the table starts again (see above). */
static void stacks_new_proto(Memprof *mp, const GCproto *pt)
{
  MemStacks *st = mp->st;
  uint32_t bit = proto_bit((uintptr_t)pt);
  if (st != NULL && st->lines_used) {
    memset(st->lines, 0, sizeof(st->lines));
    st->lines_used = 0;
  }
  if (st != NULL && (st->protos[bit / 64] >> (bit % 64) & 1)) stacks_reset(mp);
}

/* The builtin's name, e.g. "string.rep" (lj_ffdef.h's, with the library
** said as Lua says it). */
static const char *const builtin_names[] = {
  "[Lua]", "[C]",
#define FFDEF(name) #name,
#include "lj_ffdef.h"
#undef FFDEF
};

static size_t builtin_name(uint32_t ffid, char *out, size_t len)
{
  static const char *const libs[] = {
    "io_method_", "file:", "buffer_method_", "buffer:", "jit_util_",
    "jit.util.", "coroutine_", "coroutine.", "math_", "math.", "bit_",
    "bit.", "string_", "string.", "table_", "table.", "io_", "io.", "os_",
    "os.", "debug_", "debug.", "jit_", "jit.", "ffi_", "ffi.", "buffer_",
    "buffer.", NULL
  };
  const char *name = ffid < sizeof(builtin_names) / sizeof(builtin_names[0])
		     ? builtin_names[ffid] : "[builtin]";
  int i;
  for (i = 0; libs[i] != NULL; i += 2) {
    size_t k = strlen(libs[i]);
    if (strncmp(name, libs[i], k) == 0) {
      int n = snprintf(out, len, "%s%s", libs[i + 1], name + k);
      return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
    }
  }
  return (size_t)snprintf(out, len, "%s", name);
}

/* The C symbols of builtins b uses, once per stream. */
static void stacks_say_builtins(Memprof *mp, MemStacks *st,
				const StackBuild *b)
{
  uint32_t i;
  for (i = 0; i < b->nbuiltin; i++) {
    uint32_t ffid = b->builtin[i] & 255;
    char name[64];
    size_t len;
    if (st->builtins[ffid / 64] >> (ffid % 64) & 1) continue;
    st->builtins[ffid / 64] |= 1ull << (ffid % 64);
    len = builtin_name(ffid, name, sizeof(name));
    mp_reserve(mp, MEMPROF_ITEM_MAX + sizeof(name));
    mp_byte(mp, EV_HEADER(EV_SYMTAB, SRC_CFUNC));
    mp_uleb(mp, ffid);
    mp_string(mp, name, len);
  }
}

/* Writes the definition of stack id. */
static void stacks_say(Memprof *mp, uint32_t id, const StackFrame *f,
		       uint32_t n)
{
  uint32_t i;
  mp_reserve(mp, 32 + (size_t)n * 20);
  mp_byte(mp, EV_HEADER(EV_SYMTAB, LM_SRC_STACK));
  mp_byte(mp, LM_STACK_DEF);
  mp_uleb(mp, id);
  mp_uleb(mp, n);
  for (i = 0; i < n; i++) {
    mp_uleb(mp, f[i].tag);
    if ((f[i].tag & LM_FRAME_KIND_MASK) != LM_FRAME_MARKER)
      mp_uleb(mp, f[i].addr);
  }
}

/* The id of b's stack: found, or made and announced; 0 if there is no
** table. */
static uint32_t stacks_id(Memprof *mp, const StackBuild *b)
{
  MemStacks *st = stacks_table(mp);
  uint32_t h, k, id, i;
  if (st == NULL) return 0;
  h = stacks_hash(b);
  for (k = h & (STACKS_SLOTS - 1); (id = st->slot[k]) != 0;
       k = (k + 1) & (STACKS_SLOTS - 1)) {
    const StackEntry *e = &st->entry[id];
    if (e->hash == h && e->n == b->n &&
	memcmp(&st->words[e->off], b->f, b->n * sizeof(StackFrame)) == 0)
      return id;
  }
  if (st->nentry >= STACKS_MAX ||
      st->nwords + 2 * b->n > STACKS_WORDS) {
    stacks_reset(mp);
    for (k = h & (STACKS_SLOTS - 1); st->slot[k] != 0;
	 k = (k + 1) & (STACKS_SLOTS - 1)) ;
  }
  id = ++st->nentry;
  st->entry[id].hash = h;
  st->entry[id].n = b->n;
  st->entry[id].off = st->nwords;
  memcpy(&st->words[st->nwords], b->f, b->n * sizeof(StackFrame));
  st->nwords += 2 * b->n;
  st->slot[k] = id;
  for (i = 0; i < b->n; i++)
    if ((b->f[i].tag & LM_FRAME_KIND_MASK) == LM_FRAME_LUA) {
      uint32_t bit = proto_bit((uintptr_t)b->f[i].addr);
      st->protos[bit / 64] |= 1ull << (bit % 64);
    }
  stacks_say_builtins(mp, st, b);
  stacks_say(mp, id, b->f, b->n);
  return id;
}

/* The configuration, first in the event part. */
static void stacks_say_config(Memprof *mp)
{
  mp_reserve(mp, MEMPROF_ITEM_MAX);
  mp_byte(mp, EV_HEADER(EV_SYMTAB, LM_SRC_STACK));
  mp_byte(mp, LM_STACK_CONFIG);
  mp_uleb(mp, mp->stacks);
  mp_uleb(mp, mp->stack_sample);
}
