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
};

int lm_groups_init(struct lm_groups *g);
void lm_groups_free(struct lm_groups *g);

/* Names the locations s made since the last update; -1 when out of
 * memory (g stays usable; the rest is named next time). */
int lm_groups_update(struct lm_groups *g, const struct lm_state *s);

/* Sums the counters of each group's locations into out (g->n entries). */
void lm_groups_sum(const struct lm_groups *g, const struct lm_state *s,
                   struct lm_counters *out);

#endif
