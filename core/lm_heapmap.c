/* Live heap map: sharded Robin Hood table of live blocks. */
#include "lm_heapmap.h"

#include <string.h>

enum { SHARD_MIN_CAP = 16 };

static uint32_t dist_of(const struct lm_heap_slot *s)
{
    return s->locdist & 0xff;
}

static void set_dist(struct lm_heap_slot *s, uint32_t d)
{
    s->locdist = (s->locdist & ~0xffu) | d;
}

static uint32_t limit_of(uint32_t cap)
{
    return (uint32_t)((uint64_t)cap * 4 / 5);
}

void lm_heap_init(struct lm_heapmap *m, uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    m->seed = seed;
    for (unsigned int i = 0; i < LM_HEAP_SHARDS; i++)
        m->shard[i].salt = lm_mix64(seed + i) | 1;
}

void lm_heap_free(struct lm_heapmap *m)
{
    for (unsigned int i = 0; i < LM_HEAP_SHARDS; i++) {
        struct lm_heap_shard *s = &m->shard[i];
        lm_table_free(s->slots, (size_t)s->cap * sizeof(*s->slots));
        s->slots = NULL;
        s->cap = s->count = s->limit = 0;
    }
    m->count = 0;
}

/*
 * Robin Hood insertion of an address known to be absent: whoever is
 * further from home keeps the slot.  If a distance would overflow its
 * byte, returns -1 with the element still to place in *in.
 */
static int place(struct lm_heap_shard *s, uint32_t i, uint32_t d,
                 struct lm_heap_slot *in)
{
    for (;;) {
        struct lm_heap_slot *slot = &s->slots[i];
        if (slot->addr == 0) {
            set_dist(in, d);
            *slot = *in;
            s->count++;
            return 0;
        }
        if (dist_of(slot) < d) {
            struct lm_heap_slot out = *slot;
            set_dist(in, d);
            *slot = *in;
            *in = out;
            d = dist_of(&out);
        }
        if (++d > LM_HEAP_MAX_DIST)
            return -1;
        if (++i == s->cap)
            i = 0;
    }
}

/* Rebuilds a shard at cap slots, with extra (may be NULL) added. */
static int rebuild(struct lm_heapmap *m, struct lm_heap_shard *s, uint32_t cap,
                   const struct lm_heap_slot *extra)
{
    struct lm_heap_shard old = *s;

    for (;;) {
        s->slots = lm_table_alloc((size_t)cap * sizeof(*s->slots));
        if (s->slots == NULL) {
            *s = old;
            return -1;
        }
        s->cap = cap;
        s->count = 0;
        s->limit = limit_of(cap);
        int ok = 1;
        for (uint32_t i = 0; ok && i <= old.cap; i++) {
            struct lm_heap_slot in;
            if (i < old.cap)
                in = old.slots[i];
            else if (extra != NULL)
                in = *extra;
            else
                break;
            if (in.addr == 0)
                continue;
            uint32_t home = lm_heap_home(s, lm_heap_hash(m, in.addr));
            ok = place(s, home, 0, &in) == 0;
        }
        if (ok)
            break;
        /* Crafted collisions: spread the shard differently. */
        lm_table_free(s->slots, (size_t)cap * sizeof(*s->slots));
        s->salt = lm_mix64(s->salt + m->seed) | 1;
        m->reseeds++;
    }
    lm_table_free(old.slots, (size_t)old.cap * sizeof(*old.slots));
    return 0;
}

static uint32_t grown(uint32_t cap)
{
    return cap ? cap + cap / 2 : SHARD_MIN_CAP;
}

/* The slot holding addr, or NULL. */
static struct lm_heap_slot *find(const struct lm_heap_shard *s, uint32_t home,
                                 uint64_t addr)
{
    uint32_t i = home, d = 0;

    for (;;) {
        struct lm_heap_slot *slot = &s->slots[i];
        if (slot->addr == addr)
            return slot;
        /* Robin Hood order: past a closer-to-home slot it cannot be. */
        if (slot->addr == 0 || dist_of(slot) < d)
            return NULL;
        d++;
        if (++i == s->cap)
            i = 0;
    }
}

int lm_heap_put_hashed(struct lm_heapmap *m, uint64_t h, uint64_t addr,
                       struct lm_block blk, struct lm_block *old)
{
    struct lm_heap_shard *s = lm_heap_shard_of(m, h);
    struct lm_heap_slot in = {addr, blk.size, blk.loc << 8};
    uint32_t i = 0, d = 0;

    if (s->cap != 0) {
        /* One walk finds the block or the slot where it belongs. */
        for (i = lm_heap_home(s, h);; d++) {
            struct lm_heap_slot *slot = &s->slots[i];
            if (slot->addr == addr) {
                old->size = slot->size;
                old->loc = slot->locdist >> 8;
                slot->size = blk.size;
                slot->locdist = (blk.loc << 8) | dist_of(slot);
                return 1;
            }
            if (slot->addr == 0 || dist_of(slot) < d)
                break;
            if (++i == s->cap)
                i = 0;
        }
    }
    if (s->count >= s->limit) {
        if (rebuild(m, s, grown(s->cap), &in) != 0)
            return -1;
    } else if (place(s, i, d, &in) != 0) {
        /* `in` is now whichever element was left without a slot. */
        if (rebuild(m, s, s->cap, &in) != 0)
            return -1;
    }
    m->count++;
    return 0;
}

int lm_heap_take_hashed(struct lm_heapmap *m, uint64_t h, uint64_t addr,
                        struct lm_block *blk)
{
    struct lm_heap_shard *s = lm_heap_shard_of(m, h);
    struct lm_heap_slot *slot;

    if (addr == 0 || s->cap == 0)
        return 0;
    slot = find(s, lm_heap_home(s, h), addr);
    if (slot == NULL)
        return 0;
    blk->size = slot->size;
    blk->loc = slot->locdist >> 8;
    /* Backward shift: the rest of the run moves one slot closer to home. */
    uint32_t hole = (uint32_t)(slot - s->slots);
    for (;;) {
        uint32_t next = hole + 1 == s->cap ? 0 : hole + 1;
        struct lm_heap_slot *n = &s->slots[next];
        if (n->addr == 0 || dist_of(n) == 0)
            break;
        s->slots[hole] = *n;
        s->slots[hole].locdist--;
        hole = next;
    }
    s->slots[hole].addr = 0;
    s->count--;
    m->count--;
    return 1;
}

uint64_t lm_heap_memory(const struct lm_heapmap *m)
{
    uint64_t bytes = 0;

    for (unsigned int i = 0; i < LM_HEAP_SHARDS; i++)
        bytes += (uint64_t)m->shard[i].cap * sizeof(struct lm_heap_slot);
    return bytes;
}
