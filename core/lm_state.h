/* Profile state: locations, live heap and overrides, from decoded records. */
#ifndef LM_STATE_H
#define LM_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "lm_decoder.h"
#include "lm_format.h"
#include "lm_heapmap.h"
#include "lm_hindex.h"
#include "lm_stacks.h"
#include "lm_symtab.h"

/* Per-location counters (X-macro: one list for the struct and the JSON):
 * the live ones, which the heap side changes, and the event ones, which
 * each event at the site adds to (kept apart: see struct lm_loc). */
#define LM_LIVE_COUNTERS(_)                                                    \
    _(live_bytes)                                                              \
    _(live_blocks)
#define LM_EVENT_COUNTERS(_)                                                   \
    _(alloc_events)                                                            \
    _(alloc_bytes)                                                             \
    _(realloc_events)                                                          \
    _(realloc_new_bytes)                                                       \
    _(realloc_old_bytes)                                                       \
    _(free_events)                                                             \
    _(free_bytes)
#define LM_COUNTERS(_) LM_LIVE_COUNTERS(_) LM_EVENT_COUNTERS(_)

struct lm_counters {
#define LM_COUNTER_FIELD(name) uint64_t name;
    LM_COUNTERS(LM_COUNTER_FIELD)
#undef LM_COUNTER_FIELD
};

/* Adds c's counters to to's: locations gathered by name, states merged. */
static inline void lm_counters_add(struct lm_counters *to,
                                   const struct lm_counters *c)
{
#define LM_ADD_COUNTER(name) to->name += c->name;
    LM_COUNTERS(LM_ADD_COUNTER)
#undef LM_ADD_COUNTER
}

/*
 * Overrides in progress, kept in the primary's location record: a
 * released block's owner record is in cache already (its live counters
 * change), so crediting the releasing site there costs no extra miss,
 * and a site new to the primary costs none either: its override record
 * is found or made only when the entry is evicted (or its 32-bit counts
 * would overflow), and readers fold the entries in.  Three entries, most
 * used first, share a cache line with the live counters.  tag = site << 2
 * | is_free << 1 | 1, 0 when unused.
 */
#define LM_OVR_PENDING 3

struct lm_ovr_pending {
    uint32_t tag;
    uint32_t count, allocated, freed;
};

/*
 * An entry pushed out of a primary's pending ones.  Its override record
 * is a look-up in a big index, and then in a big table, each a miss that
 * the next waits for: evicted entries are queued and folded a batch at a
 * time, the misses of one overlapping the others' (and what is left
 * when lm_state_apply or lm_state_apply_ops returns).
 */
#define LM_OVR_EVICTED 64

struct lm_ovr_evicted {
    uint32_t primary;
    struct lm_ovr_pending p;
};

/* A location's event counters, which every event at the site adds to. */
struct lm_event_counters {
#define LM_EVENT_FIELD(name) uint64_t name;
    LM_EVENT_COUNTERS(LM_EVENT_FIELD)
#undef LM_EVENT_FIELD
};

/*
 * A location: where events say they happened, keyed with the symbol epoch
 * that was current when it was first seen.  When a new epoch replaces that
 * symbol, the location is retired: it keeps its counters and name, and
 * later events at the same key open a new location.
 *
 * What an event reads and counts at its site: the event counters and the
 * key, two lines of one 128-byte pair (the pair a core's prefetcher
 * fetches together).  Its live counts and pending overrides, which the
 * heap side changes, are its struct lm_heap_side, in a table of their
 * own: with two threads (see lm_par.h), the thread that reads the stream
 * writes only location records and the worker only heap sides, so that
 * no line one of them writes shares a pair with a line of the other's
 * (but for a new location's heap side, zeroed by the reader before the
 * worker can name it): lines of one pair that two cores write slow both
 * down, which THREADS=2 bench/compare.sh measured against a single
 * 192-byte record.
 */
struct lm_loc {
    struct lm_event_counters ev;
    union { /* the key, as in struct lm_loc_ref */
        uint64_t addr;
        uint64_t traceno;
    };
    union {
        uint64_t line;
        uint64_t trace_addr;
    };
    uint32_t sym;  /* proto or trace epoch, C symbol, or LM_NONE */
    uint32_t next; /* next location of the same epoch */
    uint8_t source;
    uint8_t retired;
    /* A Lua location's trace in effect (struct lm_loc_ref), part of the
     * key: what a trace's compiled code allocated at a line is a location
     * of its own, named by its line (one row with the rest of the line's
     * in the default views) or by its trace (the by-trace views).  Bound
     * to the trace's epoch (trace_sym) as the line is to its prototype's,
     * and listed in it by trace_next. */
    uint32_t trace;
    uint32_t trace_sym;
    uint32_t trace_next;
    /* The call stack that reached the site (R3S; struct lm_stacks), 0 for
     * none, part of the key as the trace is: a site's events of each
     * stack are a location of their own, named by the site, so that the
     * views that gather locations by name show one row per line, and
     * live bytes, overrides and the rest come per stack for free. */
    uint32_t stack;
    /* Blocks made here by operations split off for a worker (see
     * lm_state_split), not yet in the heap side's live counts: counted
     * by the thread that reads the stream, on a line it reads anyway, so
     * that the worker's operation for a new block touches no location.
     * Folded into the live counts by lm_state_absorb. */
    uint64_t split_bytes;
    uint64_t split_blocks;
} __attribute__((aligned(128)));

_Static_assert(sizeof(struct lm_loc) == 128,
               "a location's event counters and key in one pair of lines");

/*
 * What the heap side changes of a location: the live counts and the
 * pending overrides, one line, so that a released block's owner costs
 * one line and a new block's site one.  Beside the location records, at
 * the same index.
 */
struct lm_heap_side {
    struct lm_ovr_pending pending[LM_OVR_PENDING];
#define LM_LIVE_FIELD(name) uint64_t name;
    LM_LIVE_COUNTERS(LM_LIVE_FIELD)
#undef LM_LIVE_FIELD
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct lm_heap_side) == 64, "a heap side in one line");

/* What a realloc or free site released of another site's blocks. */
struct lm_override {
    uint32_t site;
    uint32_t primary : 30; /* below LM_MAX_LOCATIONS */
    uint32_t kind : 2;     /* LM_EV_REALLOC or LM_EV_FREE; 32 bytes in all */
    uint64_t allocated, freed, count;
};

/* Whole-stream counters (X-macro). */
#define LM_TOTALS(_)                                                           \
    _(alloc_events)                                                            \
    _(realloc_events)                                                          \
    _(free_events)                                                             \
    _(symtab_events)                                                           \
    _(alloc_bytes)                                                             \
    _(freed_bytes)                                                             \
    _(live_bytes)                                                              \
    _(live_blocks)                                                             \
    _(peak_live_blocks)                                                        \
    _(unknown_frees)                                                           \
    _(failed_allocs)                                                           \
    _(overwritten_blocks)                                                      \
    _(lfunc_symbols)                                                           \
    _(cfunc_symbols)                                                           \
    _(trace_symbols)                                                           \
    _(census_duplicates)                                                       \
    _(census_preceding_frees)

struct lm_totals {
#define LM_TOTAL_FIELD(name) uint64_t name;
    LM_TOTALS(LM_TOTAL_FIELD)
#undef LM_TOTAL_FIELD
};

/* Adds t's totals to to's: a worker's part taken back, states merged. */
static inline void lm_totals_add(struct lm_totals *to,
                                 const struct lm_totals *t)
{
#define LM_ADD_TOTAL(name) to->name += t->name;
    LM_TOTALS(LM_ADD_TOTAL)
#undef LM_ADD_TOTAL
}

/* Alloc, realloc and free events: what a VM's trailer counts. */
static inline uint64_t lm_totals_events(const struct lm_totals *t)
{
    return t->alloc_events + t->realloc_events + t->free_events;
}

/*
 * The census of a heap that was there before the stream (docs/format.md,
 * "Census"): the VM announces its live blocks between two marker symbols.
 * A state only knows that it began and completed; a reader whose stream
 * ended while it runs calls it partial.  Its duplicates and the frees of
 * blocks from before it are in the totals (census_duplicates,
 * census_preceding_frees), which two threads' parts add up.
 */
enum lm_census_state {
    LM_CENSUS_NONE = 0, /* no census began */
    LM_CENSUS_RUNNING,  /* begun, not complete */
    LM_CENSUS_DONE,     /* complete */
};

/* A census duplicate a part found (see struct lm_census). */
struct lm_census_dup {
    uint32_t loc;
    uint32_t size;
};

struct lm_census {
    uint8_t state; /* enum lm_census_state */
    /* A marker was announced: addresses below the limit are names (also
     * when a recording from the middle lists the markers in its symbol
     * table, where they begin nothing). */
    uint8_t names;
    uint64_t begin_total;    /* the VM's heap bytes when it began */
    uint64_t complete_total; /* the VM's heap bytes when it completed */
    /* Where the markers were: stream offsets, and the alloc, realloc and
     * free events before each. */
    uint64_t begin_offset, complete_offset;
    uint64_t begin_events, complete_events;
    /* At completion: what the VM held beyond the blocks the state knows
     * (the VM internals block), or the excess the state knew of. */
    uint64_t remainder, over;
    uint64_t complete_blocks; /* live blocks then, the remainder's included */
    /* A duplicate is ignored, at its site too, whose event counters hold
     * no allocation for it.  A part (two threads) cannot change those:
     * it lists its duplicates here for lm_state_absorb. */
    struct lm_census_dup *dups;
    uint32_t ndups, dups_cap;
    uint32_t internals_loc; /* the internals block's location, or LM_NONE */
};

struct lm_state_limits {
    uint32_t max_locations; /* 0 for the default */
    /* Records are applied without the prefetch pipeline while the heap map
     * and locations take fewer bytes than this (they fit in the caches):
     * 0 for the default (1 MiB); tests force either path. */
    uint64_t direct_bytes;
};

#define LM_DEFAULT_DIRECT_BYTES (1u << 20)

#define LM_SITE_CACHE 16384 /* entries; a power of two */

#define LM_DEFAULT_MAX_LOCATIONS       (4u << 20)
#define LM_DEFAULT_MAX_STACK_LOCATIONS 65536u
#define LM_MAX_LOCATIONS               ((1u << 24) - 1) /* pending override tags: 24 bits */

struct lm_state {
    struct lm_symtab sym;
    struct lm_heapmap heap;

    struct lm_loc *locs;        /* a part has none */
    struct lm_heap_side *sides; /* beside locs */
    uint32_t nlocs, locs_cap, max_locs;
    uint8_t locs_lent;          /* a part's: the main state's heap sides */
    uint64_t direct_bytes;      /* from the limits; a reader may change it
                                 * between feeds (e.g. to share the caches) */
    struct lm_hindex loc_index; /* current locations by key */
    uint32_t last_loc;          /* one-entry cache of the location index */
    /* Current locations by the low bits of their hash: most events find
     * their site here without walking the index.  A hint, checked.  An
     * entry is a location + 1, 0 for none: a table of mapped zero pages
     * needs no filling, and a part (see lm_par.h), which never reads it,
     * never makes it resident. */
    uint32_t *site_cache; /* LM_SITE_CACHE entries */
    uint64_t last_hash;

    uint32_t *cfunc_locs; /* current C locations, renamed by new symbols */
    uint32_t ncfunc_locs, cfunc_locs_cap;
    int cfuncs_changed;

    struct lm_override *ovr;
    uint32_t novr, ovr_cap;
    struct lm_hindex ovr_index;
    struct lm_ovr_evicted evicted[LM_OVR_EVICTED];
    uint32_t nevicted;

    struct lm_totals totals;
    struct lm_census census;
    /* R3S: the configuration, the stacks, the VM's ids of them, and
     * what was folded at the bound.  Kept by the state that reads the
     * stream (a part of two threads has none).  The bound on locations
     * of a site and a stack, stacks.max_locs, is
     * LM_DEFAULT_MAX_STACK_LOCATIONS unless the reader sets it before
     * the first record: past it, an event's stack is dropped, and the
     * event counts at its site's location without one (stacks.folded). */
    struct lm_stacks stacks;
    uint8_t revision; /* enum lm_revision, once the events begin */
};

int lm_state_init(struct lm_state *s, const struct lm_state_limits *limits);
void lm_state_free(struct lm_state *s);

/* Applies records in stream order; an lm_sink_fn for the decoder. */
int lm_state_apply(void *state, const struct lm_record *recs, size_t n,
                   size_t *failed_at, char *errbuf, size_t errlen);

/*
 * -- Applying a stream on two threads (see lm_par.h).
 *
 * The state that reads the records (the "main" state) applies symbols,
 * resolves each event's location, counts the event there, and turns it
 * into heap operations, one per block it touches.  A "part" applies the
 * operations in order: blocks, live counts and overrides.  It keeps the
 * blocks and override records of its own, and lowers the live counts of
 * released blocks' owners and writes pending overrides into the main
 * state's location records, which it borrows: their heap lines (see
 * struct lm_loc), which the main state leaves alone (it counts new blocks
 * in split_bytes and split_blocks).  lm_state_absorb() then gives the
 * main state the rest, and folds those counts into the live ones.
 */
enum lm_op_kind {
    LM_OP_ALLOC,       /* a new block */
    LM_OP_FREE,        /* a block freed */
    LM_OP_REALLOC_OLD, /* a realloc's old block */
    LM_OP_REALLOC_NEW, /* a realloc's new block */
};

/* 16 bytes: the ring between the threads holds thousands of them. */
struct lm_op {
    /* The block's lm_heap_hash(), its key in a heap map; for the census's
     * completion (LM_OP_CENSUS_END), the VM's heap bytes then. */
    uint64_t hash;
    /* A new block's size; for LM_OP_REALLOC_OLD, the size of the block
     * that replaces it (a released block's own size is in the heap map);
     * unused for LM_OP_FREE. */
    uint32_t size;
    /* The event's location in the main state (24 bits), the census
     * flags, and the enum lm_op_kind in the top two bits: a word built
     * whole (bit-fields are stored by reading the word back and merging,
     * two stores for two fields). */
    uint32_t loc_kind;
};

#define LM_OP_KIND_SHIFT 30
#define LM_OP_LOC_MASK   ((1U << 24) - 1) /* LM_MAX_LOCATIONS fits */
/* The event came while a census ran: the heap side applies its rules. */
#define LM_OP_CENSUS (1U << 29)
/* Not an event: the census completed (an LM_OP_ALLOC at the internals
 * location, with the VM's heap bytes in hash). */
#define LM_OP_CENSUS_END (1U << 28)

static inline struct lm_op lm_op_make(uint64_t hash, uint32_t size,
                                      uint32_t loc, enum lm_op_kind kind)
{
    return (struct lm_op){hash, size, loc | (uint32_t)kind << LM_OP_KIND_SHIFT};
}

static inline uint32_t lm_op_loc(const struct lm_op *op)
{
    return op->loc_kind & LM_OP_LOC_MASK;
}

static inline enum lm_op_kind lm_op_kind(const struct lm_op *op)
{
    return (enum lm_op_kind)(op->loc_kind >> LM_OP_KIND_SHIFT);
}

/* Operations one record can make at most (a symbol makes one at most: the
 * census's completion). */
#define LM_OPS_PER_RECORD 2

/* Makes part (initialised) a part of s: the same heap hash. */
void lm_state_join(struct lm_state *part, const struct lm_state *s);

/*
 * Applies the symbols of n records to s, counts their events at their
 * sites (and failed allocations, address 0, in its totals) and turns
 * them into operations, in ops (room for n * LM_OPS_PER_RECORD; *nops of
 * them).  On an error (*failed_at, *err), the operations of the records
 * before it are out.
 */
int lm_state_split(struct lm_state *s, const struct lm_record *recs, size_t n,
                   struct lm_op *ops, size_t *nops, size_t *failed_at,
                   const char **err);

/* Room for n locations in s, so that the next ones do not move its
 * records (a part may be using them): 0, or -1 when out of memory. */
int lm_state_reserve_locs(struct lm_state *s, uint32_t n);

/* Lends part the main state's first nlocs heap sides. */
void lm_state_lend_sides(struct lm_state *part, struct lm_heap_side *sides,
                         uint32_t nlocs);

/* Applies operations in order to s (a part, or a state of its own). */
int lm_state_apply_ops(struct lm_state *s, const struct lm_op *ops, size_t n,
                       const char **err);

/* Gives s, which applied no operation, a part's blocks, overrides and
 * totals, and frees the part. */
void lm_state_absorb(struct lm_state *s, struct lm_state *part);

/* The counters of location loc (below s->nlocs). */
void lm_state_counters(const struct lm_state *s, uint32_t loc,
                       struct lm_counters *c);

/*
 * Formats the location's name as Tarantool's parser prints it (see
 * docs/format.md); returns snprintf's result.
 */
int lm_state_loc_name(const struct lm_state *s, uint32_t loc, char *buf,
                      size_t len);

/*
 * The location's name in the by-trace views: what a trace's compiled code
 * allocated at a Lua line is named by the trace, as a trace location is
 * ("TRACE [N] started at CHUNK:LINE"); any other location as
 * lm_state_loc_name names it.
 */
int lm_state_loc_trace_name(const struct lm_state *s, uint32_t loc, char *buf,
                            size_t len);

/* What a location names, in parts (lm_state_loc_parts). */
enum lm_part_kind {
    LM_PART_INTERNAL, /* the VM's own (GC, the compiler), or no site */
    LM_PART_LUA,      /* a line of a Lua function */
    LM_PART_CENSUS,   /* a census's name: text, no line */
    LM_PART_C,        /* a C function (name NULL: never announced) */
    LM_PART_TRACE,    /* a trace, without its line: its start's */
    LM_PART_UNNAMED,  /* a Lua line of a prototype never announced */
    LM_PART_MARKER,   /* a stack's marker: name only ("[truncated]") */
};

/*
 * A location's name in parts, for exports that keep a line apart from its
 * function; name points into the state.  Lua: name is the chunk (alias
 * nonzero for a chunk loaded from a string: function_alias_N), first_line
 * its function's, line the line; a trace: the same of its start, and
 * trace its number (for a Lua line, the trace in effect when compiled
 * code allocated there, or 0; builtin nonzero for a library function
 * LuaJIT built from bytecode: name is its own, first_line 0); C: name the
 * symbol's (NULL if none), addr the function's; census: name is the text;
 * unnamed: addr and line as in the stream.
 */
struct lm_loc_parts {
    enum lm_part_kind kind;
    const char *name;
    size_t name_len;
    uint32_t alias;
    int builtin;
    uint64_t first_line, line, addr, trace;
};

void lm_state_loc_parts(const struct lm_state *s, uint32_t loc,
                        struct lm_loc_parts *p);

/* A stack frame's name in parts, as lm_state_frame_name names it: a Lua
 * frame as a Lua location, a C frame by its symbol (name NULL without
 * one; addr the frame's), a marker by its name (NULL for one this reader
 * does not know, its value in line). */
void lm_state_frame_parts(const struct lm_state *s, const struct lm_sframe *f,
                          struct lm_loc_parts *p);

/* lm_state_loc_trace_name if by_trace, else lm_state_loc_name. */
static inline int lm_state_loc_name_by(const struct lm_state *s, uint32_t loc,
                                       int by_trace, char *buf, size_t len)
{
    return by_trace ? lm_state_loc_trace_name(s, loc, buf, len)
                    : lm_state_loc_name(s, loc, buf, len);
}

/*
 * The overrides with their pending counts folded in, for readers: a
 * malloc'd array of *n records (NULL when out of memory), at least
 * s->novr: pending counts of a pair with no record yet get one of their
 * own.
 */
struct lm_override *lm_state_overrides(const struct lm_state *s, uint32_t *n);

/* Whether a prototype announced now at address addr is a census's name
 * (docs/format.md, "Census"): no GC object lives below the limit, once a
 * census marker was announced (a stream without one, such as a test's,
 * may put prototypes anywhere). */
static inline int lm_census_addr(const struct lm_state *s, uint64_t addr)
{
    return s->census.names && addr != 0 && addr < LM_CENSUS_ADDR_LIMIT;
}

/*
 * A frame's name, as the report names it: a Lua frame `CHUNK:LINE` (as
 * a Lua location, aliases and all), a C frame its C symbol's name
 * (a builtin, below LM_BUILTIN_ADDR_LIMIT, only by the symbol at its
 * number), `CFUNC 0xADDR` without one, a marker `[truncated]`, `[tail
 * call]` or `[coroutine]`.  Returns snprintf's result.
 */
int lm_state_frame_name(const struct lm_state *s, const struct lm_sframe *f,
                        char *buf, size_t len);

/* What the live blocks of stacked locations weigh under sampling (see
 * lm_stacks_weight): per location (est[nlocs], zeroed by the caller),
 * bytes and blocks of a location with a stack.  On a state that holds
 * its blocks (settled, with two threads). */
void lm_state_stack_live(const struct lm_state *s, struct lm_stack_est *est);

/* Bytes of memory the state holds, tables included. */
uint64_t lm_state_memory(const struct lm_state *s);

#endif
