/* A chart's series from a session's history: its biggest sites' live bytes
 * over the frames of a window, the locations of one name summed. */
#ifndef LJMPD_SERIES_H
#define LJMPD_SERIES_H

#include <stdint.h>

#include "history.h"

/*
 * The distinct locations of h's frames [from, nframes) as the sites of
 * one frame u (sorted by loc, counters zero), so that they can be named
 * and grouped as a frame's are.  u->sites is malloc'd (the caller frees
 * it); 0, or -1 out of memory.
 */
int series_union(const struct history *h, uint32_t from,
                 struct history_frame *u);

/* The chosen sites' live bytes at each frame. */
struct series_set {
    uint32_t nframes; /* frames [from, h->nframes) */
    uint32_t n;       /* series, the biggest first */
    uint32_t *member; /* per series: the index in u of one of its locations */
    uint32_t *sites;  /* per series: its locations in u */
    uint64_t *bytes;  /* series i at frame j: bytes[i * nframes + j] */
};

/*
 * At most most series of the groups of u's sites (group[i] is site i's,
 * below ngroups) that held the most live bytes at any of h's frames from
 * `from` on, biggest first (ties by group).  A group's bytes at a frame
 * are its tracked locations' there; one not tracked there counts 0.
 * Costs the frames' sites times a search in u.  0, or -1 out of memory.
 */
int series_build(const struct history *h, uint32_t from,
                 const struct history_frame *u, const uint32_t *group,
                 uint32_t ngroups, uint32_t most, struct series_set *out);

void series_set_free(struct series_set *s);

#endif
