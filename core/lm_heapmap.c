/* Live heap map: sharded SwissTable-style groups of live blocks. */
#include "lm_heapmap.h"

#include <string.h>

enum {
    CTRL_EMPTY = 0x80,
    SHARD_MIN_CAP = 16,
    OVER_STUCK = 255, /* an overflow count too high to keep exactly */
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

/* 0x80 in every empty byte (the only ones with the high bit set). */
static inline uint64_t match_empty(uint64_t g)
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

static inline uint32_t next_group(const struct lm_heap_shard *s, uint32_t i)
{
    i += LM_HEAP_GROUP;
    return i == s->cap ? 0 : i;
}

/* The overflow count of the group that starts at slot i. */
static inline uint8_t *over_of(const struct lm_heap_shard *s, uint32_t i)
{
    return &s->over[i / LM_HEAP_GROUP];
}

/* A block homed at home went past the groups from home up to (not
 * including) the group of slot last, or came back from them. */
static void count_overflow(struct lm_heap_shard *s, uint32_t home,
                           uint32_t last, int delta)
{
    uint32_t end = last / LM_HEAP_GROUP * LM_HEAP_GROUP;

    for (uint32_t i = home; i != end; i = next_group(s, i)) {
        uint8_t *o = over_of(s, i);
        if (*o != OVER_STUCK)
            *o = (uint8_t)(*o + delta);
    }
}

void lm_heap_init(struct lm_heapmap *m, uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    m->seed = seed;
    for (unsigned int i = 0; i < LM_HEAP_SHARDS; i++)
        m->shard[i].salt = lm_mix64(seed + i) | 1;
}

/* The control bytes and the overflow counts share one table. */
static size_t ctrl_bytes(uint32_t cap)
{
    return (size_t)cap + cap / LM_HEAP_GROUP;
}

static void shard_release(struct lm_heap_shard *s)
{
    lm_table_free(s->ctrl, ctrl_bytes(s->cap));
    lm_table_free(s->slots, (size_t)s->cap * sizeof(*s->slots));
    s->ctrl = s->over = NULL;
    s->slots = NULL;
}

void lm_heap_free(struct lm_heapmap *m)
{
    for (unsigned int i = 0; i < LM_HEAP_SHARDS; i++) {
        struct lm_heap_shard *s = &m->shard[i];
        shard_release(s);
        s->cap = s->count = s->limit = 0;
    }
    m->count = 0;
}

/*
 * The probe: index of addr's slot, or UINT32_MAX; with free_at, also the
 * first empty slot of the home group, where a new block would go
 * (UINT32_MAX if the group is full), so that a put probes once, not
 * twice.  Inlined with free_at constant, so a plain look-up pays nothing
 * for it.
 */
static inline __attribute__((always_inline)) uint32_t
probe(const struct lm_heap_shard *s, uint32_t home, uint8_t tag, uint64_t addr,
      uint32_t *free_at)
{
    uint32_t i = home;

    if (free_at != NULL) {
        uint64_t free = match_empty(group_at(s->ctrl + i));
        *free_at = free != 0 ? i + first_byte(free) : UINT32_MAX;
    }
    for (uint32_t probed = 0; probed < s->cap; probed += LM_HEAP_GROUP) {
        uint64_t g = group_at(s->ctrl + i);
        for (uint64_t m = match_tag(g, tag); m != 0; m &= m - 1) {
            uint32_t j = i + first_byte(m);
            if (s->slots[j].addr == addr)
                return j;
        }
        if (*over_of(s, i) == 0)
            break;
        i = next_group(s, i);
    }
    return UINT32_MAX;
}

/* Fills slot j with a block whose hash is h. */
static inline void place(struct lm_heap_shard *s, uint32_t j, uint64_t h,
                         const struct lm_heap_slot *in)
{
    s->ctrl[j] = tag_of(h);
    s->slots[j] = *in;
    s->count++;
}

/* Places an absent block in the first group with room, counting it in
 * the full groups it passes; the shard has room (count < cap). */
static void insert_new(struct lm_heap_shard *s, uint64_t h,
                       const struct lm_heap_slot *in)
{
    uint32_t home = lm_heap_home(s, h), i = home;

    for (;;) {
        uint64_t free = match_empty(group_at(s->ctrl + i));
        if (free != 0) {
            uint32_t j = i + first_byte(free);
            count_overflow(s, home, j, +1);
            place(s, j, h, in);
            return;
        }
        i = next_group(s, i);
    }
}

/* Rebuilds a shard with cap slots. */
static int rebuild(struct lm_heapmap *m, struct lm_heap_shard *s, uint32_t cap)
{
    struct lm_heap_shard old = *s;

    s->ctrl = lm_table_alloc(ctrl_bytes(cap));
    s->slots = lm_table_alloc((size_t)cap * sizeof(*s->slots));
    if (s->ctrl == NULL || s->slots == NULL) {
        lm_table_free(s->ctrl, ctrl_bytes(cap));
        lm_table_free(s->slots, (size_t)cap * sizeof(*s->slots));
        *s = old;
        return -1;
    }
    memset(s->ctrl, CTRL_EMPTY, cap);
    s->over = s->ctrl + cap; /* zeroed */
    s->cap = cap;
    s->count = 0;
    s->limit = cap / 4 * 3;
    for (uint32_t i = 0; i < old.cap; i++)
        if (old.ctrl[i] < CTRL_EMPTY)
            insert_new(s, lm_heap_hash(m, old.slots[i].addr), &old.slots[i]);
    shard_release(&old);
    return 0;
}

/*
 * Makes room for one more block: grows by a quarter when 3/4 are live,
 * so that the load stays between 0.6 and 0.75 (19 to 28 bytes a block).
 */
static int make_room(struct lm_heapmap *m, struct lm_heap_shard *s)
{
    uint32_t cap = s->cap;

    if (s->count < s->limit)
        return 0;
    if (cap == 0)
        cap = SHARD_MIN_CAP;
    else
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
        uint32_t j = probe(s, lm_heap_home(s, h), tag_of(h), addr, &free_at);
        if (j != UINT32_MAX) {
            old->size = s->slots[j].size;
            old->loc = s->slots[j].loc;
            s->slots[j] = in;
            return 1;
        }
    }
    if (free_at != UINT32_MAX && s->count < s->limit) {
        place(s, free_at, h, &in); /* the home group had room */
    } else {
        /* The rare path: the shard grows first, or the block overflows. */
        if (make_room(m, s) != 0)
            return -1;
        insert_new(s, h, &in);
    }
    m->count++;
    return 0;
}

int lm_heap_peek_hashed(const struct lm_heapmap *m, uint64_t h, uint64_t addr,
                        struct lm_block *blk, uint32_t *where)
{
    const struct lm_heap_shard *s = &m->shard[h >> (64 - LM_HEAP_SHARD_BITS)];
    uint32_t j;

    if (s->cap == 0 ||
        (j = probe(s, lm_heap_home(s, h), tag_of(h), addr, NULL)) == UINT32_MAX)
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
    uint32_t home = lm_heap_home(s, h);
    /* Addresses are unique: a full slot holding addr is the block's. */
    if (j >= s->cap || s->ctrl[j] >= CTRL_EMPTY || s->slots[j].addr != addr)
        j = probe(s, home, tag_of(h), addr, NULL);
    if (j == UINT32_MAX)
        return 0;
    blk->size = s->slots[j].size;
    blk->loc = s->slots[j].loc;
    s->ctrl[j] = CTRL_EMPTY;
    if (j - home >= LM_HEAP_GROUP) /* it had overflowed its home group */
        count_overflow(s, home, j, -1);
    s->count--;
    m->count--;
    return 1;
}

uint64_t lm_heap_memory(const struct lm_heapmap *m)
{
    uint64_t bytes = 0;

    for (unsigned int i = 0; i < LM_HEAP_SHARDS; i++)
        bytes += ctrl_bytes(m->shard[i].cap) +
                 (uint64_t)m->shard[i].cap * sizeof(struct lm_heap_slot);
    return bytes;
}
