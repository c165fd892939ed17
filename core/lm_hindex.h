/* An index of ids by hash, for keys that their owners keep and compare. */
/* The one open-addressing map behind the symtab, string interning,
 * locations and overrides. */
#ifndef LM_HINDEX_H
#define LM_HINDEX_H

#include <stdint.h>

/*
 * The index stores (hash, id) pairs; the owner keeps the keys in its own
 * records and compares them when the hashes match, so one structure serves
 * every key type.  Power-of-two capacity, linear probing, load <= 3/4,
 * backward-shift deletion.  A slot keeps the hash's low 32 bits: they
 * place it (the capacity's bits) and filter matches with the rest, and a
 * slot is 8 bytes: a big index (a stream's overrides) takes half the
 * cache that one of whole 64-bit hashes would.
 */

#define LM_NONE UINT32_MAX

struct lm_hindex_slot {
    uint32_t hash; /* the low bits of the key's hash */
    uint32_t id;   /* LM_NONE when empty */
};

struct lm_hindex {
    struct lm_hindex_slot *slots;
    uint32_t mask, count;
};

int lm_hindex_init(struct lm_hindex *x);
void lm_hindex_free(struct lm_hindex *x);
int lm_hindex_insert(struct lm_hindex *x, uint64_t hash, uint32_t id);
/* Removes the pair (hash, id); returns 0 if it was there. */
int lm_hindex_remove(struct lm_hindex *x, uint64_t hash, uint32_t id);

/* Iteration over the ids stored under one hash: slot is the cursor. */
static inline uint32_t lm_hindex_first(const struct lm_hindex *x, uint64_t hash,
                                       uint32_t *slot)
{
    uint32_t i = (uint32_t)hash & x->mask;

    while (x->slots[i].id != LM_NONE) {
        if (x->slots[i].hash == (uint32_t)hash) {
            *slot = i;
            return x->slots[i].id;
        }
        i = (i + 1) & x->mask;
    }
    return LM_NONE;
}

static inline uint32_t lm_hindex_next(const struct lm_hindex *x, uint64_t hash,
                                      uint32_t *slot)
{
    uint32_t i = (*slot + 1) & x->mask;

    while (x->slots[i].id != LM_NONE) {
        if (x->slots[i].hash == (uint32_t)hash) {
            *slot = i;
            return x->slots[i].id;
        }
        i = (i + 1) & x->mask;
    }
    return LM_NONE;
}

#define LM_HINDEX_FOREACH(x, hash, id, slot)                                   \
    for ((id) = lm_hindex_first((x), (hash), &(slot)); (id) != LM_NONE;        \
         (id) = lm_hindex_next((x), (hash), &(slot)))

#endif
