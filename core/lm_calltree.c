/* A site's callers as a tree: each path of callers with what it adds up to. */
#define _GNU_SOURCE /* qsort_r */
#include "lm_calltree.h"

#include <stdlib.h>
#include <string.h>

#include "lm_array.h"
#include "lm_hash.h"

/* A new node, child of parent (LM_NONE for the root), whose hash is h:
 * its index, or LM_NONE when out of memory. */
static uint32_t new_node(struct lm_calltree *t, uint32_t parent,
                         const char *name, uint64_t h)
{
    char *copy = strdup(name);

    if (copy == NULL || LM_RESERVE(t->v, t->cap, t->n) != 0 ||
        lm_hindex_insert(&t->index, h, t->n) != 0) {
        free(copy);
        return LM_NONE;
    }
    struct lm_ct_node *n = &t->v[t->n];
    memset(n, 0, sizeof(*n));
    n->name = copy;
    n->hash = h;
    n->parent = parent;
    n->child = n->sibling = LM_NONE;
    if (parent != LM_NONE) {
        n->depth = t->v[parent].depth + 1;
        n->sibling = t->v[parent].child;
        t->v[parent].child = t->n;
    }
    return t->n++;
}

int lm_calltree_init(struct lm_calltree *t, const char *site)
{
    memset(t, 0, sizeof(*t));
    if (lm_hindex_init(&t->index) != 0)
        return -1;
    if (new_node(t, LM_NONE, site, 0) == LM_NONE) {
        lm_calltree_free(t);
        return -1;
    }
    return 0;
}

void lm_calltree_free(struct lm_calltree *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        free(t->v[i].name);
    free(t->v);
    lm_hindex_free(&t->index);
    memset(t, 0, sizeof(*t));
}

/* The child of parent named name, made if new; LM_NONE when out of
 * memory. */
static uint32_t child_named(struct lm_calltree *t, uint32_t parent,
                            const char *name)
{
    uint64_t h = lm_hash_combine(lm_hash_bytes(name, strlen(name)), parent);
    uint32_t c, slot;

    LM_HINDEX_FOREACH(&t->index, h, c, slot)
    {
        const struct lm_ct_node *n = &t->v[c];
        if (n->hash == h && n->parent == parent && strcmp(n->name, name) == 0)
            return c;
    }
    return new_node(t, parent, name, h);
}

static void add_figures(struct lm_ct_node *n, const struct lm_ct_figures *f,
                        int estimated)
{
    n->f.allocs += f->allocs;
    n->f.alloc_bytes += f->alloc_bytes;
    n->f.live_bytes += f->live_bytes;
    n->f.live_blocks += f->live_blocks;
    n->estimated |= (uint8_t)(estimated != 0);
}

int lm_calltree_add(struct lm_calltree *t, const char *const *names, uint32_t n,
                    const struct lm_ct_figures *f, int estimated)
{
    uint32_t at = 0;

    add_figures(&t->v[0], f, estimated);
    for (uint32_t i = 0; i < n; i++) {
        if ((at = child_named(t, at, names[i])) == LM_NONE)
            return -1;
        add_figures(&t->v[at], f, estimated);
    }
    return 0;
}

/* Biggest first (see lm_calltree_sort): negative when a goes first. */
static int cmp_nodes(const struct lm_ct_node *a, const struct lm_ct_node *b)
{
    if (a->f.allocs != b->f.allocs)
        return a->f.allocs > b->f.allocs ? -1 : 1;
    if (a->f.alloc_bytes != b->f.alloc_bytes)
        return a->f.alloc_bytes > b->f.alloc_bytes ? -1 : 1;
    if (a->f.live_bytes != b->f.live_bytes)
        return a->f.live_bytes > b->f.live_bytes ? -1 : 1;
    return strcmp(a->name, b->name);
}

static int cmp_ids(const void *a, const void *b, void *tree)
{
    const struct lm_calltree *t = tree;

    return cmp_nodes(&t->v[*(const uint32_t *)a], &t->v[*(const uint32_t *)b]);
}

/* Sorts each node's list of children: the lists gathered in one array,
 * each sorted there and linked again. */
int lm_calltree_sort(struct lm_calltree *t)
{
    uint32_t *ids = malloc(((size_t)t->n + 1) * sizeof(*ids));

    if (ids == NULL)
        return -1;
    for (uint32_t i = 0; i < t->n; i++) {
        uint32_t n = 0;
        for (uint32_t c = t->v[i].child; c != LM_NONE; c = t->v[c].sibling)
            ids[n++] = c;
        qsort_r(ids, n, sizeof(*ids), cmp_ids, t);
        t->v[i].child = n ? ids[0] : LM_NONE;
        for (uint32_t k = 0; k < n; k++)
            t->v[ids[k]].sibling = k + 1 < n ? ids[k + 1] : LM_NONE;
    }
    free(ids);
    return 0;
}
