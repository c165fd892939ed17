/* Epoch-versioned symbol table: prototypes, traces, C symbols, aliases. */
#ifndef LM_SYMTAB_H
#define LM_SYMTAB_H

#include <stddef.h>
#include <stdint.h>

#include "lm_hindex.h"

/*
 * Every announcement of a prototype address or a trace number opens a new
 * epoch: a new record, which becomes the current one for that key.  Records
 * are never removed, so a location that refers to an old epoch keeps its
 * name.  An address that events use before any announcement gets a
 * placeholder epoch (unnamed), so that the announcement that may follow
 * retires it like any other.  Locations hang off their epoch in a list
 * (locs), so that retiring an epoch can find them.
 */

struct lm_proto {
    uint64_t addr;
    uint64_t firstline;
    uint32_t chunk; /* string id, LM_NONE for a placeholder */
    uint32_t locs;  /* first location of this epoch */
    /* A census's name, not a prototype (docs/format.md, "Census"): its
     * chunk name is printed alone.  Fixed when announced, as a
     * location's name is when it is made. */
    uint8_t census;
    /* A stand-in's trace (docs/format.md, "Trace context"): what events
     * at this epoch count, that trace's compiled code allocated at the
     * lines of the prototype whose name it has; 0 for a prototype. */
    uint32_t trace;
};

/* Whether p is a library function LuaJIT built from bytecode
 * (table.remove, math.rad): its first line is ~0, its lines stripped; it
 * is named as LuaJIT's tracebacks name it, "[builtin:rad]", without a
 * line.  The VM writes that first line, a 32-bit ~0, sign-extended; a
 * writer that widens it without the sign gives 2^32-1. */
static inline int lm_proto_builtin(const struct lm_proto *p)
{
    return !p->census &&
           (p->firstline == UINT64_MAX || p->firstline == UINT32_MAX);
}

struct lm_trace {
    uint64_t traceno;
    uint64_t trace_addr; /* R2, R3-seed */
    uint64_t start_addr, start_line;
    uint32_t start_proto; /* announced proto epoch current when the trace
                           * was (or, in the start dump, when the dump
                           * was) read; LM_NONE if none was */
    uint32_t known;       /* 0 for a placeholder */
    uint32_t locs;
    /* First Lua location this epoch's compiled code allocated at (see
     * struct lm_loc, trace): listed apart, as they hang off their
     * prototype's epoch too. */
    uint32_t ctx_locs;
};

struct lm_cfunc {
    uint64_t addr;
    uint32_t name; /* string id */
};

struct lm_string {
    uint32_t off, len;
    uint32_t alias; /* function_alias_N, or 0 */
};

struct lm_symtab {
    /* Interned strings. */
    char *chars;
    size_t chars_len, chars_cap;
    struct lm_string *strs;
    uint32_t nstrs, strs_cap;
    struct lm_hindex str_index;
    /* Chunk names shown as aliases, in order of first appearance. */
    uint32_t *aliases;
    uint32_t naliases, aliases_cap;

    struct lm_proto *protos;
    uint32_t nprotos, protos_cap;
    struct lm_hindex proto_index; /* addr -> current epoch */

    struct lm_trace *traces;
    uint32_t ntraces, traces_cap;
    struct lm_hindex trace_index; /* traceno -> current epoch */

    /* C symbols: records in arrival order, ids sorted by address. */
    struct lm_cfunc *cfuncs;
    uint32_t *cfunc_sorted;
    uint32_t ncfuncs, cfuncs_cap;
    uint32_t sorted_cap;
    uint32_t nsorted; /* entries of cfunc_sorted in use */
    uint32_t nmerged; /* records already merged into cfunc_sorted */
};

int lm_symtab_init(struct lm_symtab *t);
void lm_symtab_free(struct lm_symtab *t);

/* Interns a string; LM_NONE when out of memory. */
uint32_t lm_symtab_intern(struct lm_symtab *t, const char *s, size_t len);

static inline const char *lm_symtab_str(const struct lm_symtab *t, uint32_t id,
                                        size_t *len)
{
    *len = t->strs[id].len;
    return t->chars + t->strs[id].off;
}

/*
 * Current epoch of a prototype address or trace number, creating a
 * placeholder if there is none; LM_NONE when out of memory.
 */
uint32_t lm_symtab_proto_current(struct lm_symtab *t, uint64_t addr);
/* The current epoch of a prototype address if a symbol announced it, else
 * LM_NONE (no placeholder made). */
uint32_t lm_symtab_proto_announced(const struct lm_symtab *t, uint64_t addr);
uint32_t lm_symtab_trace_current(struct lm_symtab *t, uint64_t traceno);

/*
 * Announcements.  Each returns the epoch that stopped being current
 * (LM_NONE if none) through *retired, so the caller can retire the
 * locations that hang off it; -1 when out of memory.  A prototype's chunk
 * name holding a newline gets an alias, unless it is a census's name
 * (census: see struct lm_proto), which is never source text.  A stand-in
 * is announced as a prototype, with the trace it stands for.
 */
int lm_symtab_add_proto(struct lm_symtab *t, uint64_t addr, const char *chunk,
                        size_t len, uint64_t firstline, int census,
                        uint32_t trace, uint32_t *retired);
int lm_symtab_add_trace(struct lm_symtab *t, uint64_t traceno,
                        uint64_t trace_addr, uint64_t start_addr,
                        uint64_t start_line, uint32_t *retired);
int lm_symtab_add_cfunc(struct lm_symtab *t, uint64_t addr, const char *name,
                        size_t len);

/*
 * Once the start dump is read: links traces to start prototypes that the
 * dump listed after them (it goes newest first).
 */
void lm_symtab_resolve_trace_starts(struct lm_symtab *t);

/* The C symbol at or below addr (the one that names it), or LM_NONE. */
uint32_t lm_symtab_cfunc_floor(struct lm_symtab *t, uint64_t addr);

#endif
