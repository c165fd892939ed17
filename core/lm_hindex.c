/* An index of ids by hash (open addressing, linear probing). */
#include "lm_hindex.h"

#include <string.h>

#include "lm_table.h"

enum { MIN_CAP = 16 };

static int alloc_slots(struct lm_hindex *x, uint32_t cap)
{
    x->slots = lm_table_alloc((size_t)cap * sizeof(*x->slots));
    if (x->slots == NULL)
        return -1;
    memset(x->slots, 0xff, (size_t)cap * sizeof(*x->slots));
    x->mask = cap - 1;
    return 0;
}

int lm_hindex_init(struct lm_hindex *x)
{
    x->count = 0;
    return alloc_slots(x, MIN_CAP);
}

void lm_hindex_free(struct lm_hindex *x)
{
    if (x->slots != NULL)
        lm_table_free(x->slots, ((size_t)x->mask + 1) * sizeof(*x->slots));
    x->slots = NULL;
    x->mask = x->count = 0;
}

static void put(struct lm_hindex *x, uint64_t hash, uint32_t id)
{
    uint32_t i = (uint32_t)hash & x->mask;

    while (x->slots[i].id != LM_NONE)
        i = (i + 1) & x->mask;
    x->slots[i].hash = (uint32_t)hash;
    x->slots[i].id = id;
}

static int grow(struct lm_hindex *x)
{
    struct lm_hindex old = *x;
    uint32_t cap = (old.mask + 1) * 2;

    if (cap == 0 || alloc_slots(x, cap) != 0) {
        *x = old;
        return -1;
    }
    for (uint32_t i = 0; i <= old.mask; i++)
        if (old.slots[i].id != LM_NONE)
            put(x, old.slots[i].hash, old.slots[i].id);
    lm_table_free(old.slots, ((size_t)old.mask + 1) * sizeof(*old.slots));
    return 0;
}

int lm_hindex_insert(struct lm_hindex *x, uint64_t hash, uint32_t id)
{
    if ((uint64_t)(x->count + 1) * 4 > ((uint64_t)x->mask + 1) * 3 &&
        grow(x) != 0)
        return -1;
    put(x, hash, id);
    x->count++;
    return 0;
}

int lm_hindex_remove(struct lm_hindex *x, uint64_t hash, uint32_t id)
{
    uint32_t i = (uint32_t)hash & x->mask;

    while (x->slots[i].id != id || x->slots[i].hash != (uint32_t)hash) {
        if (x->slots[i].id == LM_NONE)
            return -1;
        i = (i + 1) & x->mask;
    }
    /* Backward shift: pull later members of the run into the hole. */
    uint32_t hole = i, j = i;
    for (;;) {
        j = (j + 1) & x->mask;
        if (x->slots[j].id == LM_NONE)
            break;
        uint32_t home = x->slots[j].hash & x->mask;
        if (((j - home) & x->mask) < ((j - hole) & x->mask))
            continue;
        x->slots[hole] = x->slots[j];
        hole = j;
    }
    x->slots[hole].id = LM_NONE;
    x->count--;
    return 0;
}
