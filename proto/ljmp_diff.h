/* A diff's row (core/lm_diff.h) as the control wire's DiffSite, for ljmpd
 * and for ljmpctl's diff of two recordings alike. */
#ifndef LJMP_DIFF_H
#define LJMP_DIFF_H

#include "ljmp_wire.h"
#include "lm_diff.h"

/* Fills m (initialised) from r: to's counters minus from's.  The name is
 * the caller's to set (it may cut it). */
static inline void ljmp_diff_site_fill(Ljmp__DiffSite *m,
                                       const struct lm_diff_row *r)
{
#define LJMP_DIFF_PUT(field, counter)                                          \
    m->has_##field = 1;                                                        \
    m->field = lm_diff_delta(r->from.counter, r->to.counter);
    LJMP_DIFF_PUT(live_bytes, live_bytes)
    LJMP_DIFF_PUT(live_blocks, live_blocks)
    LJMP_DIFF_PUT(alloc_events, allocs)
    LJMP_DIFF_PUT(alloc_bytes, alloc_bytes)
    LJMP_DIFF_PUT(free_events, frees)
#undef LJMP_DIFF_PUT
    m->has_sites = m->has_live_bytes_from = m->has_live_bytes_to = 1;
    m->sites = r->sites;
    m->live_bytes_from = r->from.live_bytes;
    m->live_bytes_to = r->to.live_bytes;
}

#endif
