/* Call stacks of R3S streams: interned by content, and the VM's ids. */
#ifndef LM_STACKS_H
#define LM_STACKS_H

#include <stddef.h>
#include <stdint.h>

#include "lm_hindex.h"

/*
 * A VM defines a stack by an id of its own, and may reset its ids and
 * define the same stack again under another (docs/format.md, "Stacks
 * (R3S)").  The state keys locations by stacks of its own instead: a
 * stack interned by its frames, each bound to the symbols current when it
 * was defined (a Lua frame to its prototype's epoch, a C frame to the C
 * symbol that named it), so that a stack defined twice is one stack, and
 * a prototype announced anew makes stacks of its own.  Stack 0 is none.
 */

/* A frame bound to its symbols: what a stack is made of. */
struct lm_sframe {
    uint64_t addr;  /* Lua: the prototype; C: the function (a builtin's
                     * number below LM_BUILTIN_ADDR_LIMIT); marker: 0 */
    uint64_t value; /* Lua: the line; marker: LM_MARK_*; C: 0 */
    uint32_t sym;   /* Lua: the prototype's epoch; C: the C symbol that
                     * names it, or LM_NONE; marker: LM_NONE */
    uint8_t kind;   /* LM_FRAME_* */
};

struct lm_stack {
    uint64_t hash;
    uint32_t first; /* its frames, innermost first: frames[first...] */
    uint32_t nframes;
};

/* A stacked location's estimate under sampling: each sampled event
 * weighed by the inverse of its chance to be sampled. */
struct lm_stack_est {
    double events, bytes;
};

/* A VM's id and the stack it names now. */
struct lm_stack_id {
    uint32_t id;
    uint32_t stack; /* 0: past the bound, its events fold (see lm_state.h) */
};

struct lm_stacks {
    /* The configuration (LM_REC_STACK_CONFIG): the deepest stack the VM
     * writes and its sampling's mean (0: every event has a stack). */
    uint8_t configured;
    uint32_t depth;
    uint64_t sample_bytes;

    struct lm_stack *v; /* v[0] stands for none */
    uint32_t n, cap;
    struct lm_sframe *frames;
    uint32_t nframes, frames_cap;
    struct lm_hindex index; /* stacks by content */

    struct lm_stack_id *ids; /* since the last reset */
    uint32_t nids, ids_cap;
    struct lm_hindex id_index; /* ids by their hash */

    /* Locations of a site and a stack, and their bound (the state's):
     * what the stacks cost is bounded by it. */
    uint32_t nlocs, max_locs;
    uint64_t folded; /* events whose stack was dropped at the bound */
    uint64_t defs, resets;

    /* Per location, with sampling only (see lm_stacks_est). */
    struct lm_stack_est *est;
    size_t est_room;
};

int lm_stacks_init(struct lm_stacks *k, uint32_t max_locs);
void lm_stacks_free(struct lm_stacks *k);

/*
 * The stack of these frames, interned if new: its number (from 1), 0
 * when the bound of max_locs stacks is reached (no location could take
 * a new one), or LM_NONE when out of memory.
 */
uint32_t lm_stacks_intern(struct lm_stacks *k, const struct lm_sframe *f,
                          uint32_t n);

/* The VM's id names stack (0 for one past the bound) from now on: 0,
 * or -1 when out of memory. */
int lm_stacks_define(struct lm_stacks *k, uint32_t id, uint32_t stack);

/* The stack the VM's id names, or LM_NONE when it is not defined since
 * the last reset. */
uint32_t lm_stacks_lookup(const struct lm_stacks *k, uint32_t id);

/* The VM reset its ids: every one is forgotten (the stacks stay). */
void lm_stacks_reset(struct lm_stacks *k);

static inline const struct lm_sframe *
lm_stacks_frames(const struct lm_stacks *k, uint32_t stack, uint32_t *n)
{
    *n = k->v[stack].nframes;
    return k->frames + k->v[stack].first;
}

/* The weight of a sampled event of size bytes: 1 / p(size), with p(s) =
 * 1 - exp(-s / M) the chance that an event of s bytes carries a stack
 * when the VM samples every M bytes on average; 1 without sampling, and
 * for an event of no bytes (it holds no byte to be chosen). */
double lm_stacks_weight(const struct lm_stacks *k, uint64_t size);

/* The estimate of location loc, made (zero) if new; NULL when out of
 * memory. */
struct lm_stack_est *lm_stacks_est(struct lm_stacks *k, uint32_t loc);

/* Bytes the stacks hold. */
uint64_t lm_stacks_memory(const struct lm_stacks *k);

#endif
