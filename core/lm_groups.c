/* Name groups of a state's locations, updated as locations arrive. */
#include "lm_groups.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_array.h"
#include "lm_hash.h"

int lm_groups_init(struct lm_groups *g)
{
    memset(g, 0, sizeof(*g));
    return lm_hindex_init(&g->index);
}

void lm_groups_free(struct lm_groups *g)
{
    for (uint32_t i = 0; i < g->n; i++)
        free(g->v[i].name);
    free(g->v);
    free(g->group_of);
    lm_hindex_free(&g->index);
    memset(g, 0, sizeof(*g));
}

/* group_named's answer when a new name would pass g->max_bytes. */
#define GROUPS_FULL (LM_NONE - 1)

/* The group named name (len bytes), made if new; LM_NONE on OOM. */
static uint32_t group_named(struct lm_groups *g, const char *name, size_t len)
{
    uint64_t h = lm_hash_bytes(name, len);
    uint32_t id, slot;

    LM_HINDEX_FOREACH(&g->index, h, id, slot)
    {
        if (strcmp(g->v[id].name, name) == 0)
            return id;
    }
    if (g->max_bytes != 0 && lm_groups_memory(g) + len + 1 > g->max_bytes)
        return GROUPS_FULL;
    if (LM_RESERVE(g->v, g->cap, g->n) != 0)
        return LM_NONE;
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return LM_NONE;
    memcpy(copy, name, len + 1);
    if (lm_hindex_insert(&g->index, h, g->n) != 0) {
        free(copy);
        return LM_NONE;
    }
    g->v[g->n] = (struct lm_group){copy, 0};
    g->name_bytes += len + 1;
    return g->n++;
}

/* The group of location id, by its name; LM_NONE on OOM. */
static uint32_t group_of_loc(struct lm_groups *g, const struct lm_state *s,
                             uint32_t id)
{
    char buf[512], *long_name = NULL;
    int n = lm_state_loc_name_by(s, id, g->by_trace, buf, sizeof(buf));

    if (n < 0)
        return LM_NONE;
    if ((size_t)n >= sizeof(buf)) {
        if ((long_name = malloc((size_t)n + 1)) == NULL)
            return LM_NONE;
        lm_state_loc_name_by(s, id, g->by_trace, long_name, (size_t)n + 1);
    }
    uint32_t gid = group_named(g, long_name ? long_name : buf, (size_t)n);
    free(long_name);
    return gid;
}

int lm_groups_update(struct lm_groups *g, const struct lm_state *s)
{
    /* Many locations may appear between two updates. */
    if (s->nlocs > 0 && LM_RESERVE(g->group_of, g->of_cap, s->nlocs - 1) != 0)
        return -1;
    for (uint32_t id = g->nlocs; id < s->nlocs; id++) {
        uint32_t gid = group_of_loc(g, s, id);
        if (gid == LM_NONE || gid == GROUPS_FULL)
            return gid == LM_NONE ? -1 : 1;
        g->group_of[id] = gid;
        g->v[gid].nlocs++;
        g->nlocs = id + 1;
    }
    return 0;
}

uint64_t lm_groups_memory(const struct lm_groups *g)
{
    return g->name_bytes + (uint64_t)g->of_cap * sizeof(*g->group_of) +
           (uint64_t)g->cap * sizeof(*g->v) +
           ((uint64_t)g->index.mask + 1) * sizeof(struct lm_hindex_slot);
}

void lm_groups_sum(const struct lm_groups *g, const struct lm_state *s,
                   struct lm_counters *out)
{
    memset(out, 0, (size_t)g->n * sizeof(*out));
    for (uint32_t id = 0; id < g->nlocs && id < s->nlocs; id++) {
        struct lm_counters *o = &out[g->group_of[id]];
        struct lm_counters c;
        lm_state_counters(s, id, &c);
        lm_counters_add(o, &c);
    }
}
