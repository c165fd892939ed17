/* The diff of two recordings: the state at the end of each, read with the
 * core, its sites matched by name, as the wire's Diff message. */
#ifndef LJMPCTL_FILEDIFF_H
#define LJMPCTL_FILEDIFF_H

#include <stdint.h>

#include "ljmp_wire.h"
#include "lm_diff.h"
#include "lm_groups.h"

struct filediff_opts {
    int key;             /* enum lm_diff_key */
    uint32_t limit;      /* sites shown at most */
    uint64_t max_string; /* the decoder's, 0 for its default */
    int threads;         /* to read each file on, 0 for the CPUs' */
};

/* One recording's sites at its end: names in g, counters summed. */
struct filediff_end {
    struct lm_groups g;
    struct lm_diff_site *sites;
    size_t n;
};

struct filediff {
    Ljmp__Diff msg; /* what is printed: its parts below, names in the ends' */
    Ljmp__DiffEnd from, to;
    Ljmp__DiffSite *site_v, **sites, total;
    struct filediff_end old_end, new_end;
    struct lm_diff_row *rows;
};

/*
 * Reads both recordings and fills d->msg: their changed sites ranked by
 * o->key, at most o->limit, and the total of every site.  An exit status:
 * EXIT_OK, or EXIT_TRUNCATED when a recording ended early (d->msg still
 * filled, of what it holds; said on stderr), else one whose reason was
 * said.  d is to free in every case.
 */
int filediff_run(const char *old_path, const char *new_path,
                 const struct filediff_opts *o, struct filediff *d);
void filediff_free(struct filediff *d);

#endif
