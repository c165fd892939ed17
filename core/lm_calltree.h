/* A site's callers as a tree: each path of callers with what it adds up to. */
#ifndef LM_CALLTREE_H
#define LM_CALLTREE_H

#include <stdint.h>

#include "lm_hindex.h"

/*
 * The report's view of a site's stacks (docs/report.md, "Stacks"): a
 * path from the site outwards, one node per caller, named as frames are
 * (lm_state_frame_name); stacks that name the same callers in the same
 * order share a path, as locations of the same name share a row.  Each
 * node sums what the stacks through it did.  Figures are doubles: exact
 * counts below 2^53, or estimates of a sampled stream.
 */
struct lm_ct_figures {
    double allocs, alloc_bytes; /* allocations and reallocations */
    double live_bytes, live_blocks;
};

struct lm_ct_node {
    char *name;
    uint64_t hash;           /* of its parent and name (see child_named) */
    uint32_t parent;         /* LM_NONE for the root */
    uint32_t child, sibling; /* first child, next sibling, or LM_NONE */
    uint32_t depth;          /* 0 for the root, the site */
    uint8_t estimated;       /* some figure is an estimate */
    struct lm_ct_figures f;
};

struct lm_calltree {
    struct lm_ct_node *v; /* v[0] is the root */
    uint32_t n, cap;
    /* Nodes by their parent and name: a site may have thousands of
     * callers (a line called from each line of a generated chunk). */
    struct lm_hindex index;
};

/* A tree of one node, the site, named site: 0, or -1 when out of
 * memory. */
int lm_calltree_init(struct lm_calltree *t, const char *site);
void lm_calltree_free(struct lm_calltree *t);

/*
 * Adds figures f along the path of n callers named names[0] (the
 * innermost) to names[n - 1], to each node from the root down: 0, or -1
 * when out of memory.
 */
int lm_calltree_add(struct lm_calltree *t, const char *const *names, uint32_t n,
                    const struct lm_ct_figures *f, int estimated);

/* Orders each node's children biggest first: by allocations, then
 * bytes allocated, then live bytes, then name.  0, or -1 when out of
 * memory (the order unchanged). */
int lm_calltree_sort(struct lm_calltree *t);

#endif
