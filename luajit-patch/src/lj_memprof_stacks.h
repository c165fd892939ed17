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

/*
** The last stack walked, kept for the next walk.  A frame below the lowest
** base a frame was made at since then (g->ljmp_low, kept by the VM where
** x64 tracks tail calls: lj_dispatch.h) is the frame the last walk met,
** with the same function and link; so is every frame below it.  A walk
** that reaches such a frame takes the rest of its stack from here,
** instead of reading the frames and their lines again: a deep program's
** stacks differ from one allocation to the next in a few frames at the
** top.
**
** So that a stack can move up and down by a few frames and still be
** joined, a walk takes KEPT_EXTRA frames past the depth, and keeps every
** tail call's marker; the stack sent is cut to the depth from what is
** kept, as a walk to the depth would have cut it.  The stack is kept at
** the end of the arrays, so that a walk that joins it rewrites its top
** only; the entries of one that is whole (not cut, ending at KEPT_MAX)
** have the hash of themselves and the entries below them, which does not
** depend on what is above.
*/
#define KEPT_EXTRA 16
#define KEPT_CAP (LM_STACK_MAX_DEPTH + KEPT_EXTRA)  /* frames kept at most */
#define BUILD_MAX (KEPT_CAP + 2)  /* a walk's entries: a tail, a cut */
#define KEPT_MAX (2 * BUILD_MAX)  /* room to join higher up */
#define AT_NONE ((cTValue *)~(uintptr_t)0)  /* an entry of no frame */

typedef struct StackKept {
  const lua_State *L;  /* whose stack it is; NULL: none */
  uint32_t top, end;  /* its entries: [top, end) */
  uint32_t id;  /* the id of the stack last sent from it, 0 if none */
  uint8_t coroutine;  /* ends with the coroutine marker */
  uint8_t cut;  /* ends with the truncation marker: frames are left out */
  StackFrame f[KEPT_MAX];
  uint64_t mix[KEPT_MAX];  /* each entry's frame_mix() */
  cTValue *at[KEPT_MAX + 1];  /* each entry's frame (slot of its link) or
			       ** AT_NONE; at[end] is NULL */
  uint64_t hash[KEPT_MAX + 1];  /* if whole, of the entries from each on */
} StackKept;

typedef struct MemStacks {
  StackKept kept;
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
  if (base < mref(g->ljmp_low, TValue)) setmref(g->ljmp_low, base);
  if (t->call_func == func && t->call_base == (uintptr_t)base) {
    /* The mark of another base goes: that frame's stack changes. */
    TValue *other = (TValue *)(uintptr_t)(e->base & ~(uint64_t)1);
    if (other != NULL && other < mref(g->ljmp_low, TValue))
      setmref(g->ljmp_low, other);
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
static void tails_stop(global_State *g);

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
  /* Traces that cannot be flushed now (a finalizer starts the stream)
  ** would make frames unnoted (see StackKept): no tracking then, as
  ** without the table. */
  if (lj_trace_flushall(L)) tails_stop(g);
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

static const LjmpTails *tails_of(const lua_State *L)
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

/* A marker's frame tag (its address is 0). */
#define MARKER_TAG(marker) ((uint64_t)(marker) << 2 | LM_FRAME_MARKER)
#define TAIL_TAG MARKER_TAG(LM_MARK_TAILCALL)

typedef struct StackBuild {
  StackFrame f[BUILD_MAX];
  uint64_t mix[BUILD_MAX];  /* each entry's frame_mix() */
  cTValue *at[BUILD_MAX];  /* each entry's frame, or AT_NONE */
  uint32_t n;
  uint32_t cap;  /* a frame is taken if fewer entries than this */
  uint32_t tailcap;  /* and a tail call's marker */
  uint32_t depth;  /* of the stacks sent */
  uint32_t builtin[BUILD_MAX];  /* builtins met, to announce */
  uint32_t nbuiltin;
  uint32_t coroutine, truncated;  /* ends with that marker */
  uintptr_t join;  /* a frame below this is the kept one; 0: none is */
  uint32_t joined;  /* the kept entry the walk took the rest from, + 1 */
} StackBuild;

/* Appends an entry, whose frame_mix() is mix, to b. */
static LJ_AINLINE void build_put(StackBuild *b, uint64_t tag, uint64_t addr,
				 uint64_t mix)
{
  StackFrame *f = &b->f[b->n];
  f->tag = tag;
  f->addr = addr;
  b->mix[b->n] = mix;
  b->at[b->n++] = AT_NONE;
}

/* Whether the walk, whose last entry is frame f's, takes the rest of its
** stack from the kept one: if f is there, with room above it for b's
** entries, and, if the kept stack is cut, enough of it for the depth.
** -1: no frame further down will be either. */
static LJ_NOINLINE int build_join(StackBuild *b, const StackKept *k,
				  cTValue *f)
{
  uint32_t i = k->top;
  while (k->at[i] > f) i++;  /* to f, or past it: at[end] is NULL */
  if (k->at[i] != f) return 0;  /* maybe further down */
  if (b->n > i + 1 ||
      (k->cut && b->n + (k->end - 1 - i) <= b->depth))
    return -1;
  b->joined = i + 1;
  return 1;
}

/* Whether the walk ends at f's entry, the last: it joins the kept stack
** (then b->joined), or it may not join further down (then b->join is
** 0). */
static LJ_AINLINE int build_joins(StackBuild *b, const MemStacks *st,
				  cTValue *f)
{
  int r;
  if (LJ_LIKELY((uintptr_t)f >= b->join)) return 0;
  r = build_join(b, &st->kept, f);
  if (r < 0) b->join = 0;
  return r > 0;
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
  build_frame(b, MARKER_TAG(marker), 0);
}

static int build_full(const StackBuild *b)
{
  return b->n >= b->cap;
}

/* Whether a tail call's marker is taken. */
static int build_tail_fits(const StackBuild *b)
{
  return b->n < b->tailcap;
}

static void build_truncated(StackBuild *b)
{
  build_marker(b, LM_MARK_TRUNCATED);
  b->truncated = 1;
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
  uint32_t n = b->n, cap = b->cap, tailcap = b->tailcap;
  uintptr_t join = b->join;  /* in registers: b->f's stores may alias b's */
  const LjmpTails *tails = w->tails;
  ptrdiff_t call;  /* next's link: if Lua's, the pc of f's call of it */
  if (st == NULL || next == NULL) return;
  call = frame_ftsz(next);
  /* Each frame's link is read once, before the frame is stored, which
  ** the compiler must assume may change it; it is the call of the frame
  ** below. */
  while ((call & FRAME_TYPE) == FRAME_LUA && n < cap && f > bot) {
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
    b->f[n] = e->frame;
    b->mix[n] = e->mix;
    b->at[n++] = f;
    if (LJ_UNLIKELY((uintptr_t)f < join)) {
      b->n = n;
      if (build_joins(b, st, f)) return;
      join = b->join;
    }
    if (LJ_UNLIKELY(tails != NULL && tail_entered(tails, entry)) &&
	n < tailcap) {  /* as build_walk() */
      b->f[n].tag = TAIL_TAG;
      b->f[n].addr = 0;
      b->mix[n] = frame_mix(TAIL_TAG, 0);
      b->at[n++] = AT_NONE;
    }
    next = entry;
    call = link;
    f = below;
  }
  w->frame = f;
  w->next = next;
  b->n = n;
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
    if (b->joined) return;
    if (!walk_next(w, &fn, &line)) break;
    if (build_full(b)) {
      build_truncated(b);
      return;
    }
    build_func(b, fn, line);
    b->at[b->n - 1] = w->at;
    if (w->st != NULL && build_joins(b, w->st, w->at)) return;
    /* w->next: the frame the function was entered at. */
    if (w->tails != NULL && tail_entered(w->tails, w->next) &&
	build_tail_fits(b))
      build_marker(b, LM_MARK_TAILCALL);
  }
  if (w->L != mainthread(G(w->L))) {  /* at the bottom: always taken */
    build_marker(b, LM_MARK_COROUTINE);
    b->coroutine = 1;
  }
}

/* -- The table of stacks sent -------------------------------------------- */

/* The hash of the entries below entry i of the kept stack (below) with
** entry i's, of frame_mix() mix: rotated by its distance to the end, that
** keeps the entries' order and does not change when entries above it do
** (see StackKept). */
static LJ_AINLINE uint64_t hash_above(uint64_t below, uint64_t mix, uint32_t i)
{
  uint32_t r = (7 * (KEPT_MAX - 1 - i)) & 63;
  return below ^ ((mix << r) | (mix >> ((64 - r) & 63)));
}

/* A stack's hash with one more entry, of frame_mix() mix, from the top:
** the same as hash_above() gives the entries from the bottom. */
static LJ_AINLINE uint64_t hash_step(uint64_t hash, uint64_t mix)
{
  return ((hash << 7) | (hash >> 57)) ^ mix;
}

/* A stack's slot hash, from the hash of its n entries: each entry's part
** was mixed as it came (frame_mix()), so one multiplication spreads the
** rotations' sum. */
static LJ_AINLINE uint32_t stacks_hash(uint64_t hash, uint32_t n)
{
  uint64_t a = (hash ^ n) * 0x9e3779b97f4a7c15ull;
  return (uint32_t)(a >> 32) | 1;  /* never 0 */
}

static LJ_AINLINE int is_marker(const StackFrame *f)
{
  return (f->tag & LM_FRAME_KIND_MASK) == LM_FRAME_MARKER;
}

static void kept_marker(StackKept *k, uint32_t i, uint32_t marker)
{
  k->f[i].tag = MARKER_TAG(marker);
  k->f[i].addr = 0;
  k->mix[i] = frame_mix(k->f[i].tag, 0);
  k->at[i] = AT_NONE;
}

/* Cuts a kept stack longer than cap frames (and their markers) after
** its first cap entries, and the marker of a tail call that follows. */
static void kept_cut(StackKept *k, uint32_t cap)
{
  uint32_t p = k->top + cap;
  if (p < k->end && k->f[p].tag == TAIL_TAG) p++;
  if (p >= k->end || is_marker(&k->f[p])) return;  /* no frame after */
  kept_marker(k, p, LM_MARK_TRUNCATED);
  k->end = p + 1;
  k->at[k->end] = NULL;
  k->cut = 1;
  k->coroutine = 0;
}

/* Makes b's stack, of thread L, the kept one: b's entries above the one it
** joined at (all of them if none), the kept ones below.  Whether its
** entries are those kept before. */
static int kept_take(StackKept *k, const StackBuild *b, const lua_State *L)
{
  uint32_t end = b->joined ? b->joined : KEPT_MAX;
  uint32_t m = b->n, top = end - m, i;
  int same = b->joined != 0 && top == k->top;
  for (i = 0; same && i < m; i++)
    same = k->f[top + i].tag == b->f[i].tag &&
	   k->f[top + i].addr == b->f[i].addr;
  if (same) {  /* the same entries, maybe of other frames */
    for (i = 0; i < m; i++) k->at[top + i] = b->at[i];
    return 1;
  }
  /* Bottom up, with each entry's hash (of no use if the stack is cut). */
  {
    uint64_t h = k->hash[end];
    for (i = m; i-- > 0; ) {
      k->f[top + i] = b->f[i];
      k->mix[top + i] = b->mix[i];
      k->at[top + i] = b->at[i];
      k->hash[top + i] = h = hash_above(h, b->mix[i], top + i);
    }
  }
  if (!b->joined) {
    k->end = KEPT_MAX;
    k->at[KEPT_MAX] = NULL;
    k->coroutine = (uint8_t)b->coroutine;
    k->cut = (uint8_t)b->truncated;
  }
  k->top = top;
  k->L = L;
  k->id = 0;
  if (k->end - top > b->cap + 2) kept_cut(k, b->cap);
  return 0;
}

/* Whether a frame is at entry i of the kept stack or below it: its
** entries there are a frame or a tail call's marker and its frame. */
static int kept_frame_from(const StackKept *k, uint32_t i)
{
  if (i < k->end && k->f[i].tag == TAIL_TAG) i++;
  return i < k->end && !is_marker(&k->f[i]);
}

/* The stack to send, of the kept one cut to depth as a walk to the depth
** would cut it: its n entries (in out if cut) and their hash. */
static const StackFrame *kept_stack(const StackKept *k, uint32_t depth,
				    StackFrame *out, uint32_t *n,
				    uint64_t *hash)
{
  uint32_t len = k->end - k->top, i, marker = 0;
  uint64_t h = 0;
  if (!k->cut && len - k->coroutine <= depth) {
    *n = len;
    *hash = k->hash[k->top];
    return &k->f[k->top];
  }
  /* The first depth entries, then the truncation marker if a frame is left
  ** out, or else the coroutine's. */
  if (k->cut || kept_frame_from(k, k->top + depth))
    marker = LM_MARK_TRUNCATED;
  else if (k->coroutine)
    marker = LM_MARK_COROUTINE;
  for (i = 0; i < depth; i++) {
    out[i] = k->f[k->top + i];
    h = hash_step(h, k->mix[k->top + i]);
  }
  if (marker != 0) {
    out[i].tag = MARKER_TAG(marker);
    out[i].addr = 0;
    h = hash_step(h, frame_mix(out[i].tag, 0));
    i++;
  }
  *n = i;
  *hash = h;
  return out;
}

/* The bound under which a frame of L is the kept stack's (b->join): a
** frame's link is a slot below its base. */
static uintptr_t kept_bound(const MemStacks *st, global_State *g,
			    const lua_State *L)
{
  uintptr_t low = (uintptr_t)mref(g->ljmp_low, TValue);
  if (st->kept.L != L || tails_of(L) == NULL ||
      low < sizeof(TValue))
    return 0;
  return low - sizeof(TValue);
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
  st->kept.id = 0;
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
    if (!is_marker(&f[i]))
      mp_uleb(mp, f[i].addr);
  }
}

/* The id of the stack f of n entries, of hash (the kept stack's):
** found, or made and announced (its builtins are already). */
static uint32_t stacks_id(Memprof *mp, MemStacks *st, const StackFrame *f,
			  uint32_t n, uint64_t hash)
{
  uint32_t h = stacks_hash(hash, n), k, id, i;
  for (k = h & (STACKS_SLOTS - 1); (id = st->slot[k]) != 0;
       k = (k + 1) & (STACKS_SLOTS - 1)) {
    const StackEntry *e = &st->entry[id];
    if (e->hash == h && e->n == n &&
	memcmp(&st->words[e->off], f, n * sizeof(StackFrame)) == 0)
      return id;
  }
  if (st->nentry >= STACKS_MAX ||
      st->nwords + 2 * n > STACKS_WORDS) {
    stacks_reset(mp);
    for (k = h & (STACKS_SLOTS - 1); st->slot[k] != 0;
	 k = (k + 1) & (STACKS_SLOTS - 1)) ;
  }
  id = ++st->nentry;
  st->entry[id].hash = h;
  st->entry[id].n = n;
  st->entry[id].off = st->nwords;
  memcpy(&st->words[st->nwords], f, n * sizeof(StackFrame));
  st->nwords += 2 * n;
  st->slot[k] = id;
  for (i = 0; i < n; i++)
    if ((f[i].tag & LM_FRAME_KIND_MASK) == LM_FRAME_LUA) {
      uint32_t bit = proto_bit((uintptr_t)f[i].addr);
      st->protos[bit / 64] |= 1ull << (bit % 64);
    }
  stacks_say(mp, id, f, n);
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
