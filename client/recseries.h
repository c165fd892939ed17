/* A recording's live heap by site over the bytes it allocated: the stream
 * replayed through the core, sampled at regular steps of allocation. */
#ifndef LJMPCTL_RECSERIES_H
#define LJMPCTL_RECSERIES_H

#include <stddef.h>
#include <stdint.h>

#include "chart.h"
#include "lm_groups.h"
#include "lm_profile.h"

/* Samples kept at most: when full, every other one goes and the step
 * doubles, so that a recording of any size ends with half to all of them
 * at regular steps. */
#define RECSERIES_MAX_POINTS 400
/* The first step, in bytes allocated. */
#define RECSERIES_FIRST_STEP 1024
/* A site holding less than this fraction of the heap at a sample is
 * counted with the rest there (under a pixel of a chart 1024 pixels
 * high): a sample keeps at most this many sites, memory stays bounded. */
#define RECSERIES_SHARE 1024

/* The heap at one step. */
struct recseries_sample {
    uint64_t x;     /* bytes allocated so far */
    uint64_t total; /* live bytes */
    uint64_t k;     /* x is in step k (k steps allocated, and less than k+1) */
    size_t first;   /* its sites: entries[first, first + n) */
    uint32_t n;
};

/* A site's live bytes at a sample; the site is a group of locations of
 * one name. */
struct recseries_entry {
    uint32_t group;
    uint64_t bytes;
};

struct recseries {
    struct lm_profile p; /* on one thread: its decoder feeds this sink */
    struct lm_groups groups;
    uint64_t step, next; /* the step, and where the next sample is due */
    struct recseries_sample *samples;
    uint32_t nsamples;
    struct recseries_entry *entries;
    size_t nentries, entries_cap;
    uint64_t *sums; /* per group, while sampling */
    uint32_t sums_cap;
    uint64_t peak_bytes, peak_x; /* the heap at its highest, and when */
    int oom;
};

/* limits: the decoder's (NULL for the defaults); -1 out of memory. */
int recseries_init(struct recseries *r, const struct lm_limits *limits);
void recseries_free(struct recseries *r);

/* Feeds len bytes of the stream, as lm_decoder_feed does. */
enum lm_status recseries_feed(struct recseries *r, const void *buf, size_t len,
                              size_t *consumed);

/* After the last byte: how the stream ended (lm_decoder_finish, its
 * message in r->p.dec.errmsg), its end sampled. */
enum lm_status recseries_finish(struct recseries *r);

/*
 * The chart's data: the samples from 0 bytes allocated, and series of the
 * most sites (locations of one name summed) that held the most live bytes
 * at any sample, biggest first.  A site's bytes at a sample where it held
 * under 1/RECSERIES_SHARE of the heap count in the rest.  0, or -1 out of
 * memory (then also when sampling ran out of it: r->oom).
 */
int recseries_chart(const struct recseries *r, uint32_t most,
                    struct chart_data *out);

#endif
