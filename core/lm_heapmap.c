/* Live heap map: sharded SwissTable-style groups of live blocks. */
#include "lm_heapmap.h"

#include <string.h>

enum {
    CTRL_EMPTY = 0x80,
    CTRL_DELETED = 0xfe,
    SHARD_MIN_CAP = 16,
};

#define LSBS 0x0101010101010101ULL
#define MSBS 0x8080808080808080ULL

/* A group's 8 control bytes, byte k in bits 8k..8k+7. */
static inline uint64_t group_at(const uint8_t *ctrl)
{
    uint64_t g;

    memcpy(&g, ctrl, sizeof(g));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    g = __builtin_bswap64(g);
#endif
    return g;
}

/* 0x80 in every byte equal to tag (tags are below 0x80). */
static inline uint64_t match_tag(uint64_t g, uint8_t tag)
{
    uint64_t x = g ^ (LSBS * tag);
    return ~(((x & ~MSBS) + ~MSBS) | x | ~MSBS);
}

/* 0x80 in every empty byte: high bit set, next bit clear. */
static inline uint64_t match_empty(uint64_t g)
{
    return g & ~(g << 1) & MSBS;
}

/* 0x80 in every empty or deleted byte. */
static inline uint64_t match_free(uint64_t g)
{
    return g & MSBS;
}

static inline uint32_t first_byte(uint64_t mask)
{
    return (uint32_t)__builtin_ctzll(mask) >> 3;
}

/* Seven bits of the hash for the control byte (not the shard's bits). */
static inline uint8_t tag_of(uint64_t h)
{
    return (uint8_t)((h >> 50) & 0x7f);
}

static uint32_t next_group(const struct lm_heap_shard *s, uint32_t i)
{
    i += LM_HEAP_GROUP;
    return i == s->cap ? 0 : i;
}

void lm_heap_init(struct lm_heapmap *m, uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    m->seed = seed;
    for (unsigned int i = 0; i < LM_HEAP_SHARDS; i++)
        m->shard[i].salt = lm_mix64(seed + i) | 1;
}

static void shard_release(struct lm_heap_shard *s)
{
    lm_table_free(s->ctrl, s->cap);
    lm_table_free(s->slots, (size_t)s->cap * sizeof(*s->slots));
    s->ctrl = NULL;
    s->slots = NULL;
}

void lm_heap_free(struct lm_heapmap *m)
{
    for (unsigned int i = 0; i < LM_HEAP_SHARDS; i++) {
        struct lm_heap_shard *s = &m->shard[i];
        shard_release(s);
        s->cap = s->count = s->deleted = s->limit = 0;
    }
    m->count = 0;
}

/*
 * The probe: index of addr's slot, or UINT32_MAX; with free_at, also the
 * first free (empty or deleted) slot it passed, where insert_new would put
 * the block (UINT32_MAX if none), so that a put probes once, not twice.
 * Inlined with free_at constant, so a plain look-up pays nothing for it.
 */
static inline __attribute__((always_inline)) uint32_t
probe(const struct lm_heap_shard *s, uint64_t h, uint64_t addr,
      uint32_t *free_at)
{
    uint32_t i = lm_heap_home(s, h);
    uint8_t tag = tag_of(h);

    if (free_at != NULL)
        *free_at = UINT32_MAX;
    for (uint32_t probed = 0; probed < s->cap; probed += LM_HEAP_GROUP) {
        uint64_t g = group_at(s->ctrl + i);
        for (uint64_t m = match_tag(g, tag); m != 0; m &= m - 1) {
            uint32_t j = i + first_byte(m);
            if (s->slots[j].addr == addr)
                return j;
        }
        uint64_t free = free_at != NULL ? match_free(g) : 0;
        if (free != 0 && *free_at == UINT32_MAX)
            *free_at = i + first_byte(free);
        if (match_empty(g) != 0)
            break;
        i = next_group(s, i);
    }
    return UINT32_MAX;
}

static uint32_t find(const struct lm_heap_shard *s, uint64_t h, uint64_t addr)
{
    return probe(s, h, addr, NULL);
}

static uint32_t find_or_free(const struct lm_heap_shard *s, uint64_t h,
                             uint64_t addr, uint32_t *free_at)
{
    return probe(s, h, addr, free_at);
}

/* Places an absent block; the shard has a free slot (count < limit). */
static void insert_new(struct lm_heap_shard *s, uint64_t h,
                       const struct lm_heap_slot *in)
{
    uint32_t i = lm_heap_home(s, h);

    for (;;) {
        uint64_t free = match_free(group_at(s->ctrl + i));
        if (free != 0) {
            uint32_t j = i + first_byte(free);
            if (s->ctrl[j] == CTRL_DELETED)
                s->deleted--;
            s->ctrl[j] = tag_of(h);
            s->slots[j] = *in;
            s->count++;
            return;
        }
        i = next_group(s, i);
    }
}

/* Rebuilds a shard with cap slots, dropping deleted marks. */
static int rebuild(struct lm_heapmap *m, struct lm_heap_shard *s, uint32_t cap)
{
    struct lm_heap_shard old = *s;

    s->ctrl = lm_table_alloc(cap);
    s->slots = lm_table_alloc((size_t)cap * sizeof(*s->slots));
    if (s->ctrl == NULL || s->slots == NULL) {
        lm_table_free(s->ctrl, cap);
        lm_table_free(s->slots, (size_t)cap * sizeof(*s->slots));
        *s = old;
        return -1;
    }
    memset(s->ctrl, CTRL_EMPTY, cap);
    s->cap = cap;
    s->count = s->deleted = 0;
    s->limit = cap / 8 * 7;
    for (uint32_t i = 0; i < old.cap; i++)
        if (old.ctrl[i] < CTRL_EMPTY)
            insert_new(s, lm_heap_hash(m, old.slots[i].addr), &old.slots[i]);
    shard_release(&old);
    return 0;
}

/* Makes room for one more block: grow, or purge deleted marks. */
static int make_room(struct lm_heapmap *m, struct lm_heap_shard *s)
{
    uint32_t cap = s->cap;

    if (s->count + s->deleted < s->limit)
        return 0;
    /*
     * Grow by a quarter when 3/4 are live, so that the load stays between
     * 0.6 and 0.875 (19 to 28 bytes a block); below that, deleted marks
     * are what fills the shard, and a rebuild at the same size purges
     * them, at most once per cap/8 operations.
     */
    if (cap == 0)
        cap = SHARD_MIN_CAP;
    else if (s->count >= cap / 4 * 3)
        cap =
            (cap + cap / 4 + LM_HEAP_GROUP - 1) / LM_HEAP_GROUP * LM_HEAP_GROUP;
    return rebuild(m, s, cap);
}

int lm_heap_put_hashed(struct lm_heapmap *m, uint64_t h, uint64_t addr,
                       struct lm_block blk, struct lm_block *old)
{
    struct lm_heap_shard *s = lm_heap_shard_of(m, h);
    struct lm_heap_slot in = {addr, blk.size, blk.loc};

    uint32_t free_at = UINT32_MAX;

    if (s->cap != 0) {
        uint32_t j = find_or_free(s, h, addr, &free_at);
        if (j != UINT32_MAX) {
            old->size = s->slots[j].size;
            old->loc = s->slots[j].loc;
            s->slots[j] = in;
            return 1;
        }
    }
    if (free_at == UINT32_MAX || s->count + s->deleted >= s->limit) {
        /* The rare path: the shard is rebuilt first. */
        if (make_room(m, s) != 0)
            return -1;
        insert_new(s, h, &in);
    } else {
        if (s->ctrl[free_at] == CTRL_DELETED)
            s->deleted--;
        s->ctrl[free_at] = tag_of(h);
        s->slots[free_at] = in;
        s->count++;
    }
    m->count++;
    return 0;
}

int lm_heap_peek_hashed(const struct lm_heapmap *m, uint64_t h, uint64_t addr,
                        struct lm_block *blk, uint32_t *where)
{
    const struct lm_heap_shard *s = &m->shard[h >> (64 - LM_HEAP_SHARD_BITS)];
    uint32_t j;

    if (s->cap == 0 || (j = find(s, h, addr)) == UINT32_MAX)
        return 0;
    blk->size = s->slots[j].size;
    blk->loc = s->slots[j].loc;
    *where = j;
    return 1;
}

int lm_heap_take_hashed(struct lm_heapmap *m, uint64_t h, uint64_t addr,
                        uint32_t hint, struct lm_block *blk)
{
    struct lm_heap_shard *s = lm_heap_shard_of(m, h);
    uint32_t j = hint;

    if (s->cap == 0)
        return 0;
    /* Addresses are unique: a full slot holding addr is the block's. */
    if (j >= s->cap || s->ctrl[j] >= CTRL_EMPTY || s->slots[j].addr != addr)
        j = find(s, h, addr);
    if (j == UINT32_MAX)
        return 0;
    blk->size = s->slots[j].size;
    blk->loc = s->slots[j].loc;
    /*
     * A group with an empty slot has never been full since the shard was
     * built, so no probe ever went past it: the slot can become empty.
     * Otherwise it must stay a "deleted" mark that probes walk through.
     */
    uint32_t group = j / LM_HEAP_GROUP * LM_HEAP_GROUP;
    if (match_empty(group_at(s->ctrl + group)) != 0) {
        s->ctrl[j] = CTRL_EMPTY;
    } else {
        s->ctrl[j] = CTRL_DELETED;
        s->deleted++;
    }
    s->count--;
    m->count--;
    return 1;
}

uint64_t lm_heap_memory(const struct lm_heapmap *m)
{
    uint64_t bytes = 0;

    for (unsigned int i = 0; i < LM_HEAP_SHARDS; i++)
        bytes += (uint64_t)m->shard[i].cap * (1 + sizeof(struct lm_heap_slot));
    return bytes;
}
