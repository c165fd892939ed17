/* A site's callers as a tree: each path of callers with what it adds up to. */
#include "lm_calltree.h"

#include <stdlib.h>
#include <string.h>

#include "lm_array.h"
#include "lm_hindex.h"

/* A new node, child of parent (LM_NONE for the root): its index, or
 * LM_NONE when out of memory. */
static uint32_t new_node(struct lm_calltree *t, uint32_t parent,
                         const char *name)
{
    char *copy = strdup(name);

    if (copy == NULL || LM_RESERVE(t->v, t->cap, t->n) != 0) {
        free(copy);
        return LM_NONE;
    }
    struct lm_ct_node *n = &t->v[t->n];
    memset(n, 0, sizeof(*n));
    n->name = copy;
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
    return new_node(t, LM_NONE, site) == LM_NONE ? -1 : 0;
}

void lm_calltree_free(struct lm_calltree *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        free(t->v[i].name);
    free(t->v);
    memset(t, 0, sizeof(*t));
}

/* The child of parent named name, made if new; LM_NONE when out of
 * memory.  Siblings are few (the callers of one frame): a walk. */
static uint32_t child_named(struct lm_calltree *t, uint32_t parent,
                            const char *name)
{
    for (uint32_t c = t->v[parent].child; c != LM_NONE; c = t->v[c].sibling)
        if (strcmp(t->v[c].name, name) == 0)
            return c;
    return new_node(t, parent, name);
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

int lm_calltree_add(struct lm_calltree *t, const char *const *names,
                    uint32_t n, const struct lm_ct_figures *f, int estimated)
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

/* Sorts the list of siblings from first (insertion into a sorted list:
 * a frame's callers are few). */
static uint32_t sort_siblings(struct lm_calltree *t, uint32_t first)
{
    uint32_t sorted = LM_NONE;

    while (first != LM_NONE) {
        uint32_t c = first, *at = &sorted;
        first = t->v[c].sibling;
        while (*at != LM_NONE && cmp_nodes(&t->v[*at], &t->v[c]) <= 0)
            at = &t->v[*at].sibling;
        t->v[c].sibling = *at;
        *at = c;
    }
    return sorted;
}

void lm_calltree_sort(struct lm_calltree *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        t->v[i].child = sort_siblings(t, t->v[i].child);
}
