/* Locations gathered by the name they print as, kept up to date. */
/* One row per source line (or trace, or C function) in live views. */
#ifndef LM_GROUPS_H
#define LM_GROUPS_H

#include <stdint.h>

#include "lm_hindex.h"
#include "lm_state.h"

struct lm_group {
    char *name;
    uint32_t nlocs; /* locations named so (0: none now) */
};

/*
 * Group ids are stable for the state's life: a name keeps its group.  A
 * location's name is fixed when the location is made (it is bound to a
 * symbol epoch; a new symbol makes new locations, see lm_state.h), so
 * only new locations are named at each update.
 */
struct lm_groups {
    uint32_t *group_of; /* per location */
    uint32_t nlocs, of_cap;
    struct lm_group *v;
    uint32_t n, cap;
    struct lm_hindex index; /* name hash -> group */
    uint64_t name_bytes;    /* the names' copies */
    /* The most lm_groups_memory may reach by new names (0: no bound): a
     * location's name may be a chunk's of a megabyte, so a view's copies
     * of names may outgrow the state they name. */
    uint64_t max_bytes;
    /* Names as the by-trace views do (lm_state_loc_trace_name); set
     * before the first update. */
    int by_trace;
};

int lm_groups_init(struct lm_groups *g);
void lm_groups_free(struct lm_groups *g);

/* Names the locations s made since the last update; -1 when out of
 * memory, 1 when a name would take g past max_bytes (either way g stays
 * usable, the rest left unnamed until the next update). */
int lm_groups_update(struct lm_groups *g, const struct lm_state *s);

/* Bytes g holds: names, per-location ids, groups and their index. */
uint64_t lm_groups_memory(const struct lm_groups *g);

/* Sums the counters of each group's locations into out (g->n entries). */
void lm_groups_sum(const struct lm_groups *g, const struct lm_state *s,
                   struct lm_counters *out);

#endif
