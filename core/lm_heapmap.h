/* Live heap map: block address -> (size, allocation site), compact. */
#ifndef LM_HEAPMAP_H
#define LM_HEAPMAP_H

#include <stdint.h>

#include "lm_hash.h"

/*
 * Open addressing in groups of 8 slots, after Abseil's SwissTable: a
 * control byte per slot (empty, or 7 bits of the hash) lets one 64-bit
 * word test a whole group, so a look-up touches one control word and,
 * nearly always, one slot.  Slots are 16 bytes (address, size, location),
 * 17 bytes with the control byte.  Groups are probed linearly.
 *
 * Each group also counts the blocks that hash to it but live in a later
 * group, because it was full when they came (after folly's F14): a
 * look-up stops at the first group whose count is zero, so a block that
 * is not there -- every new allocation -- is nearly always known absent
 * after one group, and a deletion just empties its slot and lowers the
 * counts along its probe.  No deleted marks, so no purges.  A count that
 * reaches 255 stays there until the shard is rebuilt (exact, only slower).
 *
 * The map is split into shards by the top bits of the hash; a shard grows
 * by a quarter when 3/4 of it is live, so memory stays between 19 and 28
 * bytes per live block and a resize never holds more than one shard's two
 * tables at once (no RSS spike when the heap doubles).  Address 0 is never
 * stored: a failed allocation (address 0) makes no block.
 */

#define LM_HEAP_MAX_SIZE   UINT32_MAX
#define LM_HEAP_SHARD_BITS 6
#define LM_HEAP_SHARDS     (1U << LM_HEAP_SHARD_BITS)
#define LM_HEAP_GROUP      8

struct lm_heap_slot {
    uint64_t addr;
    uint32_t size;
    uint32_t loc;
};

struct lm_heap_shard {
    uint8_t *ctrl;              /* cap control bytes */
    uint8_t *over;              /* per group: blocks that overflowed it */
    struct lm_heap_slot *slots; /* cap slots */
    uint32_t cap;               /* a multiple of LM_HEAP_GROUP */
    uint32_t count, limit;
    uint64_t salt; /* odd; spreads the groups of this shard */
};

struct lm_heapmap {
    struct lm_heap_shard shard[LM_HEAP_SHARDS];
    uint64_t seed;
    uint64_t count;
};

/* A block as stored: its size and allocation site. */
struct lm_block {
    uint32_t size;
    uint32_t loc;
};

static inline uint64_t lm_heap_hash(const struct lm_heapmap *m, uint64_t addr)
{
    return lm_mix64(addr ^ m->seed);
}

static inline struct lm_heap_shard *lm_heap_shard_of(struct lm_heapmap *m,
                                                     uint64_t h)
{
    return &m->shard[h >> (64 - LM_HEAP_SHARD_BITS)];
}

/* The first slot of the group where the probe for hash h starts. */
static inline uint32_t lm_heap_home(const struct lm_heap_shard *s, uint64_t h)
{
    uint64_t groups = s->cap / LM_HEAP_GROUP;
    return (uint32_t)((((h * s->salt) >> 32) * groups) >> 32) * LM_HEAP_GROUP;
}

/*
 * Brings the block's control group and the slots of its home group (two
 * cache lines of a page-aligned table) towards the cache ahead of its
 * use: nearly every look-up and insertion ends in the home group, so the
 * slot's miss overlaps the control word's instead of following it.
 * Always inlined: GCC deems a function whose only effect is a prefetch
 * "const" and deletes calls to it.
 */
static inline __attribute__((always_inline)) void
lm_heap_prefetch(struct lm_heapmap *m, uint64_t h)
{
    const struct lm_heap_shard *s = lm_heap_shard_of(m, h);

    if (s->cap != 0) {
        uint32_t i = lm_heap_home(s, h);
        const char *slots = (const char *)&s->slots[i];
        __builtin_prefetch(s->ctrl + i);
        __builtin_prefetch(slots);
        __builtin_prefetch(slots + LM_HEAP_GROUP * sizeof(*s->slots) - 1);
    }
}

/* seed varies the hash; any value works. */
void lm_heap_init(struct lm_heapmap *m, uint64_t seed);
void lm_heap_free(struct lm_heapmap *m);

/*
 * Stores a block at addr (non-zero), whose hash is h = lm_heap_hash(m,
 * addr).  Returns 1 if a block was already recorded there (returned in
 * *old, replaced), 0 if not, -1 when out of memory.
 */
int lm_heap_put_hashed(struct lm_heapmap *m, uint64_t h, uint64_t addr,
                       struct lm_block blk, struct lm_block *old);

/*
 * Removes a block: 1 and the block in *blk if it was there, else 0.  hint
 * is the slot where lm_heap_peek_hashed() saw it (checked, so it may be
 * stale), or UINT32_MAX.
 */
int lm_heap_take_hashed(struct lm_heapmap *m, uint64_t h, uint64_t addr,
                        uint32_t hint, struct lm_block *blk);

/* Looks a block up without removing it: 1, *blk and its slot in *where if
 * it is there. */
int lm_heap_peek_hashed(const struct lm_heapmap *m, uint64_t h, uint64_t addr,
                        struct lm_block *blk, uint32_t *where);

/* The same, hashing addr here. */
static inline int lm_heap_put(struct lm_heapmap *m, uint64_t addr,
                              struct lm_block blk, struct lm_block *old)
{
    return lm_heap_put_hashed(m, lm_heap_hash(m, addr), addr, blk, old);
}

static inline int lm_heap_take(struct lm_heapmap *m, uint64_t addr,
                               struct lm_block *blk)
{
    return lm_heap_take_hashed(m, lm_heap_hash(m, addr), addr, UINT32_MAX, blk);
}

/* Bytes held by the map's tables. */
uint64_t lm_heap_memory(const struct lm_heapmap *m);

#endif
