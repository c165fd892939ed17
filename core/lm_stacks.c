/* Call stacks of R3S streams: interned by content, and the VM's ids. */
#include "lm_stacks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lm_array.h"
#include "lm_format.h"
#include "lm_hash.h"
#include "lm_table.h"

int lm_stacks_init(struct lm_stacks *k, uint32_t max_locs)
{
    memset(k, 0, sizeof(*k));
    k->max_locs = max_locs;
    return 0;
}

void lm_stacks_free(struct lm_stacks *k)
{
    free(k->v);
    free(k->frames);
    free(k->ids);
    lm_hindex_free(&k->index);
    lm_hindex_free(&k->id_index);
    if (k->est != NULL)
        lm_table_free(k->est, k->est_room);
    memset(k, 0, sizeof(*k));
}

/* The tables a stream without stacks never needs, made at its first
 * definition: a state of R3 costs what it did. */
static int make_tables(struct lm_stacks *k)
{
    if (k->v != NULL)
        return 0;
    if (lm_hindex_init(&k->index) != 0 || lm_hindex_init(&k->id_index) != 0 ||
        LM_RESERVE(k->v, k->cap, 0) != 0)
        return -1;
    k->v[0] = (struct lm_stack){0, 0, 0}; /* none */
    k->n = 1;
    return 0;
}

static uint64_t frames_hash(const struct lm_sframe *f, uint32_t n)
{
    uint64_t h = 0x6a09e667f3bcc908ULL ^ n;

    for (uint32_t i = 0; i < n; i++) {
        h = lm_hash_combine(h, f[i].addr ^ (uint64_t)f[i].kind << 62);
        h = lm_hash_combine(h, f[i].value ^ (uint64_t)f[i].sym << 32);
    }
    return h;
}

static int same_frames(const struct lm_sframe *a, const struct lm_sframe *b,
                       uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (a[i].kind != b[i].kind || a[i].sym != b[i].sym ||
            a[i].addr != b[i].addr || a[i].value != b[i].value)
            return 0;
    return 1;
}

/* The interned stack of these frames, or 0. */
static uint32_t find_stack(const struct lm_stacks *k, const struct lm_sframe *f,
                           uint32_t n, uint64_t h)
{
    uint32_t id, slot;

    LM_HINDEX_FOREACH(&k->index, h, id, slot)
    {
        const struct lm_stack *s = &k->v[id];
        if (s->hash == h && s->nframes == n &&
            same_frames(k->frames + s->first, f, n))
            return id;
    }
    return 0;
}

/* Room for n more frames: 0, or -1 when out of memory or past 2^32. */
static int reserve_frames(struct lm_stacks *k, uint32_t n)
{
    if (n == 0)
        return 0;
    if ((uint64_t)k->nframes + n > UINT32_MAX - 1)
        return -1;
    return LM_RESERVE(k->frames, k->frames_cap, k->nframes + n - 1);
}

uint32_t lm_stacks_intern(struct lm_stacks *k, const struct lm_sframe *f,
                          uint32_t n)
{
    uint64_t h = frames_hash(f, n);
    uint32_t id;

    if (make_tables(k) != 0)
        return LM_NONE;
    if ((id = find_stack(k, f, n, h)) != 0)
        return id;
    /* Every stack is used by a location of its own: no more stacks than
     * such locations may be. */
    if (k->n - 1 >= k->max_locs)
        return 0;
    if (reserve_frames(k, n) != 0 || LM_RESERVE(k->v, k->cap, k->n) != 0)
        return LM_NONE;
    id = k->n;
    if (lm_hindex_insert(&k->index, h, id) != 0)
        return LM_NONE;
    k->v[id] = (struct lm_stack){h, k->nframes, n};
    if (n > 0)
        memcpy(k->frames + k->nframes, f, n * sizeof(*f));
    k->nframes += n;
    k->n++;
    return id;
}

static uint64_t id_hash(uint32_t id)
{
    return lm_mix64(id);
}

/* The slot of the VM's id in ids, or LM_NONE. */
static uint32_t find_id(const struct lm_stacks *k, uint32_t id)
{
    uint32_t i, slot;

    if (k->v == NULL)
        return LM_NONE;
    LM_HINDEX_FOREACH(&k->id_index, id_hash(id), i, slot)
    {
        if (k->ids[i].id == id)
            return i;
    }
    return LM_NONE;
}

int lm_stacks_define(struct lm_stacks *k, uint32_t id, uint32_t stack)
{
    uint32_t i;

    if (make_tables(k) != 0)
        return -1;
    k->defs++;
    /* A VM defines an id once per reset; another definition replaces it. */
    if ((i = find_id(k, id)) != LM_NONE) {
        k->ids[i].stack = stack;
        return 0;
    }
    if (LM_RESERVE(k->ids, k->ids_cap, k->nids) != 0 ||
        lm_hindex_insert(&k->id_index, id_hash(id), k->nids) != 0)
        return -1;
    k->ids[k->nids++] = (struct lm_stack_id){id, stack};
    return 0;
}

uint32_t lm_stacks_lookup(const struct lm_stacks *k, uint32_t id)
{
    uint32_t i = find_id(k, id);

    return i == LM_NONE ? LM_NONE : k->ids[i].stack;
}

void lm_stacks_reset(struct lm_stacks *k)
{
    k->resets++;
    if (k->v == NULL)
        return;
    /* The index keeps its size: the VM's table fills again. */
    memset(k->id_index.slots, 0xff,
           ((size_t)k->id_index.mask + 1) * sizeof(*k->id_index.slots));
    k->id_index.count = 0;
    k->nids = 0;
}

double lm_stacks_weight(const struct lm_stacks *k, uint64_t size)
{
    if (k->sample_bytes == 0 || size == 0)
        return 1.0;
    /* -expm1(-x) is 1 - exp(-x), without the loss of 1 - exp(-x) for
     * blocks much smaller than the mean. */
    return 1.0 / -expm1(-(double)size / (double)k->sample_bytes);
}

struct lm_stack_est *lm_stacks_est(struct lm_stacks *k, uint32_t loc)
{
    size_t need = ((size_t)loc + 1) * sizeof(*k->est);

    if (need > k->est_room) {
        size_t want = k->est_room ? k->est_room * 2 : 64 * sizeof(*k->est);
        while (want < need)
            want *= 2;
        struct lm_stack_est *p =
            lm_table_grow(k->est, &k->est_room, k->est_room, want);
        if (p == NULL)
            return NULL;
        k->est = p;
    }
    return &k->est[loc];
}

uint64_t lm_stacks_memory(const struct lm_stacks *k)
{
    if (k->v == NULL)
        return 0;
    return (uint64_t)k->cap * sizeof(*k->v) +
           (uint64_t)k->frames_cap * sizeof(*k->frames) +
           (uint64_t)k->ids_cap * sizeof(*k->ids) +
           ((uint64_t)k->index.mask + 1 + k->id_index.mask + 1) *
               sizeof(struct lm_hindex_slot) +
           k->est_room;
}
