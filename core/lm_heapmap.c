/* Live heap map: sharded SwissTable-style groups of live blocks. */
#include "lm_heapmap.h"

#include <string.h>

enum { SHARD_MIN_CAP = 16 };

void lm_heap_count_overflow(struct lm_heap_shard *s, uint32_t home,
                            uint32_t last, int delta)
{
    uint32_t end = last / LM_HEAP_GROUP * LM_HEAP_GROUP;

    for (uint32_t i = home; i != end; i = lm_heap_next_group(s, i)) {
        uint8_t *o = lm_heap_over_of(s, i);
        if (*o != LM_HEAP_OVER_STUCK)
            *o = (uint8_t)(*o + delta);
    }
}

void lm_heap_init(struct lm_heapmap *m, uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    m->seed = seed;
}

static size_t ctrl_bytes(uint32_t cap)
{
    return (size_t)cap / LM_HEAP_GROUP * LM_HEAP_CTRL_STRIDE;
}

/*
 * A shard's control words and slots share one table (the
 * slots from a cache line boundary): one allocation, big enough to be
 * mapped pages once the shard holds a few thousand blocks.  Separate
 * control tables stayed small enough for malloc, and the ones a growing
 * heap left behind were holes it never gave back: 3.7 bytes of peak RSS
 * per live block in s20m.bin.
 */
static size_t slots_offset(uint32_t cap)
{
    return (ctrl_bytes(cap) + 63) & ~(size_t)63;
}

static size_t table_bytes(uint32_t cap)
{
    return slots_offset(cap) + (size_t)cap * sizeof(struct lm_heap_slot);
}

/* Frees a shard's table and leaves it empty. */
static void shard_release(struct lm_heap_shard *s)
{
    if (s->ctrl != NULL)
        lm_table_free(s->ctrl, table_bytes(s->cap));
    *s = (struct lm_heap_shard){0};
}

void lm_heap_free(struct lm_heapmap *m)
{
    for (unsigned int i = 0; i < LM_HEAP_SHARDS; i++)
        shard_release(&m->shard[i]);
    m->count = 0;
}

/* Places an absent block in the first group with room, counting it in
 * the full groups it passes; the shard has room (count < cap). */
static void insert_new(struct lm_heap_shard *s, uint64_t h, struct lm_block blk)
{
    uint32_t home = lm_heap_home(s, h), i = home;

    for (;;) {
        uint32_t free =
            lm_heap_match_empty(lm_heap_group(lm_heap_ctrl_group(s, i)));
        if (free != 0) {
            uint32_t j = i + lm_heap_first(free);
            lm_heap_count_overflow(s, home, j, +1);
            lm_heap_place(s, j, h, blk);
            return;
        }
        i = lm_heap_next_group(s, i);
    }
}

/* Rebuilds a shard with cap slots. */
static int rebuild(struct lm_heap_shard *s, uint32_t cap)
{
    struct lm_heap_shard old = *s;

    s->ctrl = lm_table_alloc(table_bytes(cap));
    if (s->ctrl == NULL) {
        *s = old;
        return -1;
    }
    s->slots = (struct lm_heap_slot *)(void *)(s->ctrl + slots_offset(cap));
    s->cap = cap;
    for (uint32_t i = 0; i < cap; i += LM_HEAP_GROUP) {
        memset(lm_heap_ctrl_group(s, i), LM_HEAP_EMPTY, LM_HEAP_GROUP);
        *lm_heap_over_of(s, i) = 0;
    }
    s->count = 0;
    s->limit = cap / 4 * 3;
    for (uint32_t i = 0; i < old.cap; i++)
        if (*lm_heap_ctrl_of(&old, i) < LM_HEAP_EMPTY)
            insert_new(s, old.slots[i].key,
                       (struct lm_block){old.slots[i].size, old.slots[i].loc});
    shard_release(&old);
    return 0;
}

/*
 * Makes room for one more block: grows by a quarter when 3/4 are live,
 * so that the load stays between 0.6 and 0.75 (19 to 28 bytes a block).
 */
static int make_room(struct lm_heap_shard *s)
{
    uint32_t cap = s->cap;

    if (s->count < s->limit)
        return 0;
    if (cap == 0)
        cap = SHARD_MIN_CAP;
    else
        cap =
            (cap + cap / 4 + LM_HEAP_GROUP - 1) / LM_HEAP_GROUP * LM_HEAP_GROUP;
    return rebuild(s, cap);
}

int lm_heap_insert_slow(struct lm_heapmap *m, struct lm_heap_shard *s,
                        uint64_t h, struct lm_block blk)
{
    if (make_room(s) != 0)
        return -1;
    insert_new(s, h, blk);
    m->count++;
    return 0;
}

uint64_t lm_heap_memory(const struct lm_heapmap *m)
{
    uint64_t bytes = 0;

    for (unsigned int i = 0; i < LM_HEAP_SHARDS; i++)
        if (m->shard[i].cap != 0)
            bytes += table_bytes(m->shard[i].cap);
    return bytes;
}
