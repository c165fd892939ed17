/* Diffs of per-site counters between two moments: rows, matching, ranking. */
#ifndef LM_DIFF_H
#define LM_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "lm_state.h"

/* What a diff compares of a site at one end (X-macro: the fields in the
 * order marks store them). */
#define LM_DIFF_COUNTS(_)                                                      \
    _(live_bytes)                                                              \
    _(live_blocks)                                                             \
    _(allocs)      /* alloc and realloc events */                              \
    _(alloc_bytes) /* bytes of allocs and of reallocs' new blocks */           \
    _(frees)       /* free events at the site */

struct lm_diff_counts {
#define LM_DIFF_FIELD(name) uint64_t name;
    LM_DIFF_COUNTS(LM_DIFF_FIELD)
#undef LM_DIFF_FIELD
};

#define LM_DIFF_NCOUNTS 5

/* A location's counters as a diff compares them. */
void lm_diff_counts_of(const struct lm_counters *c, struct lm_diff_counts *out);

/* Location loc of s (below s->nlocs) as a diff compares it. */
void lm_diff_counts_at(const struct lm_state *s, uint32_t loc,
                       struct lm_diff_counts *out);

static inline void lm_diff_counts_add(struct lm_diff_counts *to,
                                      const struct lm_diff_counts *c)
{
#define LM_DIFF_ADD(name) to->name += c->name;
    LM_DIFF_COUNTS(LM_DIFF_ADD)
#undef LM_DIFF_ADD
}

static inline int lm_diff_counts_zero(const struct lm_diff_counts *c)
{
    return (c->live_bytes | c->live_blocks | c->allocs | c->alloc_bytes |
            c->frees) == 0;
}

/* to - from, as a signed count (saturated at INT64_MIN and INT64_MAX). */
int64_t lm_diff_delta(uint64_t from, uint64_t to);

/* One site (the locations of one name) at both ends. */
struct lm_diff_row {
    const char *name;
    uint32_t sites; /* locations summed (on the end that has more) */
    struct lm_diff_counts from, to;
};

/* Whether the row changed at all between its ends. */
int lm_diff_changed(const struct lm_diff_row *r);

/* What rows are ranked by, biggest first (ties by name). */
enum lm_diff_key {
    LM_DIFF_GROWTH,      /* live bytes gained (a loss ranks last) */
    LM_DIFF_CHANGE,      /* live bytes gained or lost, by size */
    LM_DIFF_BLOCKS,      /* live blocks gained */
    LM_DIFF_ALLOCS,      /* alloc and realloc events between */
    LM_DIFF_ALLOC_BYTES, /* bytes allocated between */
};

/*
 * Moves the first min(n, most) rows by key, biggest first, to the front
 * of rows (the rest after them in no order); returns how many.  Costs n
 * log most, so that a diff of a million sites that shows twenty does not
 * sort them all.
 */
size_t lm_diff_rank(struct lm_diff_row *rows, size_t n, enum lm_diff_key key,
                    size_t most);

/*
 * The best rows by a key of those offered one at a time, for a caller
 * that makes its rows as it goes (a session's name groups): a heap of at
 * most `most` of them in v (room for most), so that no array of every
 * row is made.  Zeroed but for v, most and key before the first offer.
 */
struct lm_diff_top {
    struct lm_diff_row *v;
    size_t n, most;
    enum lm_diff_key key;
};

void lm_diff_top_offer(struct lm_diff_top *t, const struct lm_diff_row *r);
/* Sorts the rows kept, biggest first; returns how many (t->n). */
size_t lm_diff_top_finish(struct lm_diff_top *t);

/* The rows summed into *total (name NULL; sites summed). */
void lm_diff_total(const struct lm_diff_row *rows, size_t n,
                   struct lm_diff_row *total);

/* A named site at one end, to be matched by name with the other's. */
struct lm_diff_site {
    const char *name;
    uint32_t sites;
    struct lm_diff_counts c;
};

/*
 * Matches the sites of two ends by name into rows (out: room for na + nb),
 * a site on one end only with zeros on the other; a and b are sorted by
 * name here.  Names are borrowed, not copied.  Returns how many rows.
 */
size_t lm_diff_match(struct lm_diff_site *a, size_t na, struct lm_diff_site *b,
                     size_t nb, struct lm_diff_row *out);

#endif
