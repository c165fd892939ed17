/* Diffs of a session's sites between two of its marks, its start, its
 * history's peak and now. */
#ifndef LJMPD_DIFF_H
#define LJMPD_DIFF_H

#include <stdint.h>

#include "ljmp_wire.h"
#include "lm_diff.h"

struct history;
struct lm_groups;
struct lm_state;
struct mark;
struct peer;
struct session;

/* One end of a diff. */
enum diff_end_kind {
    DIFF_END_START, /* every counter 0 */
    DIFF_END_NOW,   /* the state as it is (read under the session's lock) */
    DIFF_END_PEAK,  /* the history's peak: its tracked sites */
    DIFF_END_MARK,
};

struct diff_end {
    enum diff_end_kind kind;
    const struct mark *mark;   /* DIFF_END_MARK */
    const struct history *h;   /* DIFF_END_PEAK */
    const struct lm_state *st; /* DIFF_END_NOW */
};

/* Sums of each name group's locations at a diff's two ends. */
struct diff_sums {
    struct lm_diff_counts *from, *to; /* per group */
    uint32_t ngroups;
    uint32_t unnamed; /* locations of an end that g had not named */
};

/*
 * Sums from and to by g's name groups into d (arrays malloc'd here).
 * When either end is the peak, both are summed over the peak's sites
 * alone.  An end of kind NOW reads st: under the session's lock.  0, or
 * -1 out of memory.
 */
int diff_sum_ends(const struct lm_groups *g, const struct diff_end *from,
                  const struct diff_end *to, struct diff_sums *d);
void diff_sums_free(struct diff_sums *d);

/*
 * Offers the groups that changed between d's ends, as rows named from g,
 * to top, and sums every group with a counter above 0 on either end into
 * *total.  Returns how many changed.
 */
uint32_t diff_top(const struct lm_groups *g, const struct diff_sums *d,
                  struct lm_diff_top *top, struct lm_diff_row *total);

/* Answers a DiffRequest about s (control.c selected it for p). */
void diff_request(struct peer *p, uint64_t id, struct session *s,
                  const Ljmp__DiffRequest *r);

#endif
